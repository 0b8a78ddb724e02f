//! The processes of the `hermes` scenario: the loopback-only network namespace the whole
//! scenario runs in, the scripted fake model (the Hermes tests' `fake_llm.py`), a private
//! `HERMES_HOME` per server, and the CPU time and resident memory of a process and its children.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};

use crate::gateway::status_kib;

/// Set in the environment of the copy of this program that runs inside the namespace.
const NETNS_ENV: &str = "IRIS_BENCH_NETNS";
/// A PATH that finds `unshare` and `ip` wherever the distribution keeps them.
const SYSTEM_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// The fake model the Hermes tests use, next to this crate in the source tree.
const FAKE_LLM: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../gateway/tests/hermes/fake_llm.py"
);
const WORKSPACE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
/// How long a Python process may take to start and listen on a loaded machine.
pub const START_TIMEOUT: Duration = Duration::from_secs(120);

/// Whether this process already runs in the scenario's network namespace.
pub fn in_namespace() -> bool {
    std::env::var_os(NETNS_ENV).is_some()
}

/// Runs this same command line again in a new network namespace whose only interface is
/// loopback (`unshare -n`, or `unshare -r -n` without root), so nothing Hermes does can leave
/// the machine; returns its exit status.
pub fn rerun_in_namespace() -> anyhow::Result<std::process::ExitStatus> {
    let exe = std::env::current_exe()?;
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let mut cmd = std::process::Command::new("unshare");
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        cmd.arg("-r");
    }
    let path = format!(
        "{SYSTEM_PATH}:{}",
        std::env::var("PATH").unwrap_or_default()
    );
    cmd.args(["-n", "sh", "-c", "ip link set lo up && exec \"$0\" \"$@\""])
        .arg(exe)
        .args(args)
        .env(NETNS_ENV, "1")
        .env("PATH", path);
    cmd.status()
        .context("unshare (util-linux) is needed for the loopback-only network namespace")
}

/// The venv Hermes runs from: `--venv`, else `$IRIS_HERMES_VENV`, else `<workspace>/.venv`.
pub fn find_venv(explicit: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let venv = explicit
        .or_else(|| std::env::var_os("IRIS_HERMES_VENV").map(PathBuf::from))
        .unwrap_or_else(|| Path::new(WORKSPACE).join(".venv"));
    if !venv.join("bin/hermes").is_file() || !venv.join("bin/python3").exists() {
        bail!(
            "no Hermes in {}: `python3 -m venv V && V/bin/pip install 'hermes-agent[acp]==0.19.0'`, \
             then --venv V or IRIS_HERMES_VENV=V",
            venv.display()
        );
    }
    Ok(venv)
}

/// The fake model, listening on a loopback port of its own.
pub struct FakeModel {
    _child: Child,
    /// Its port.
    pub port: u16,
}

impl FakeModel {
    /// Starts `fake_llm.py` with `python` (standard library only), answering from `script`
    /// (written into `dir`).
    pub async fn start(
        python: &Path,
        dir: &Path,
        script: &serde_json::Value,
    ) -> anyhow::Result<FakeModel> {
        if !Path::new(FAKE_LLM).is_file() {
            bail!("{FAKE_LLM} not found (run the benchmark from its source tree)");
        }
        let script_path = dir.join("script.json");
        std::fs::write(&script_path, serde_json::to_vec(script)?)?;
        let mut child = Command::new(python)
            .arg(FAKE_LLM)
            .args(["--port", "0", "--script"])
            .arg(&script_path)
            .arg("--log")
            .arg(dir.join("requests.jsonl"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("start the fake model")?;
        let stderr = child.stderr.take().context("piped stderr")?;
        // It says where it listens on stderr, then logs every request there.
        let line = first_line_with(stderr, "listening on ").await?;
        let port = line
            .rsplit(':')
            .next()
            .and_then(|p| p.trim().parse().ok())
            .ok_or_else(|| anyhow!("fake model: no port in {line:?}"))?;
        Ok(FakeModel {
            _child: child,
            port,
        })
    }
}

/// Reads `from` until a line containing `marker` (within [`START_TIMEOUT`]), returns that line,
/// and keeps draining the rest so the writer never blocks on a full pipe.
pub async fn first_line_with<R>(from: R, marker: &str) -> anyhow::Result<String>
where
    R: AsyncRead + Unpin + Send + 'static,
{
    let mut lines = BufReader::new(from).lines();
    let found = tokio::time::timeout(START_TIMEOUT, async {
        while let Some(line) = lines.next_line().await? {
            if line.contains(marker) {
                return Ok(line);
            }
        }
        Err(anyhow!("the process ended before printing {marker:?}"))
    })
    .await
    .with_context(|| format!("no {marker:?} within {START_TIMEOUT:?}"))??;
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(found)
}

/// A private home for one Hermes: `HOME`, `HERMES_HOME` with the offline config pointing at
/// the fake model, and a working directory.
pub struct HermesHome {
    pub home: PathBuf,
    pub hermes_home: PathBuf,
    pub work: PathBuf,
}

impl HermesHome {
    pub fn new(root: &Path, model_port: u16) -> anyhow::Result<HermesHome> {
        let home = HermesHome {
            home: root.join("home"),
            hermes_home: root.join("hermes-home"),
            work: root.join("work"),
        };
        for dir in [&home.home, &home.hermes_home, &home.work] {
            std::fs::create_dir_all(dir)?;
        }
        // Everything that would reach a public host is off; the model is the fake one.
        let config = format!(
            "model: {{provider: custom, base_url: \"http://127.0.0.1:{model_port}/v1\", \
             default: fake-model, context_length: 65536}}\n\
             model_catalog: {{enabled: false}}\n\
             security: {{tirith_enabled: false}}\n\
             approvals: {{mode: manual}}\n\
             skills: {{creation_nudge_interval: 0}}\n\
             memory: {{nudge_interval: 0}}\n"
        );
        std::fs::write(home.hermes_home.join("config.yaml"), config)?;
        Ok(home)
    }

    /// The scrubbed environment Hermes runs with (no proxies, keys or settings of the caller).
    pub fn env(&self, venv: &Path) -> Vec<(String, String)> {
        vec![
            (
                "PATH".into(),
                format!("{}:{SYSTEM_PATH}", venv.join("bin").display()),
            ),
            ("HOME".into(), self.home.display().to_string()),
            ("HERMES_HOME".into(), self.hermes_home.display().to_string()),
            ("LANG".into(), "C.UTF-8".into()),
            ("LC_ALL".into(), "C.UTF-8".into()),
            ("TERM".into(), "dumb".into()),
        ]
    }
}

/// A server process of the scenario, in a process group of its own (Hermes starts helpers).
pub struct Server {
    child: Child,
    /// Its process id.
    pub pid: u32,
    /// When it was spawned.
    pub spawned: Instant,
}

impl Server {
    /// Spawns `cmd` (stdout piped for the caller, stderr to `log`).
    pub fn spawn(
        mut cmd: Command,
        log: &Path,
    ) -> anyhow::Result<(Server, tokio::process::ChildStdout)> {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log)?)
            .process_group(0)
            .kill_on_drop(true);
        let spawned = Instant::now();
        let mut child = cmd.spawn()?;
        let pid = child
            .id()
            .ok_or_else(|| anyhow!("the server exited at once"))?;
        let stdout = child.stdout.take().context("piped stdout")?;
        Ok((
            Server {
                child,
                pid,
                spawned,
            },
            stdout,
        ))
    }

    /// Asks the server's process group to stop (SIGTERM), and kills it after 10 s.
    pub async fn stop(mut self) {
        let group = -(self.pid as libc::pid_t);
        // SAFETY: signals the process group this struct started (its leader not yet reaped).
        unsafe {
            libc::kill(group, libc::SIGTERM);
        }
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            // SAFETY: as above.
            unsafe {
                libc::kill(group, libc::SIGKILL);
            }
            let _ = self.child.wait().await;
        }
    }
}

/// Every descendant of `pid` (children, their children, …), from `/proc`.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(p) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
                continue;
            };
            if let Some(ppid) = stat_fields(p).and_then(|f| f.get(1)?.parse().ok()) {
                parents.push((p, ppid));
            }
        }
    }
    let mut found = Vec::new();
    let mut frontier = vec![pid];
    while let Some(parent) = frontier.pop() {
        for (p, _) in parents.iter().filter(|(_, pp)| *pp == parent) {
            found.push(*p);
            frontier.push(*p);
        }
    }
    found
}

/// The fields of `/proc/<pid>/stat` after the command name (field 3, the state, first).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// CPU time (user + system) of the processes, in milliseconds (exited ones count no more).
pub fn cpu_ms(pids: &[u32]) -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let total: u64 = pids
        .iter()
        .filter_map(|p| {
            let f = stat_fields(*p)?;
            // utime and stime are fields 14 and 15 of the stat line; 3 is the first here.
            Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
        })
        .sum();
    total as f64 * 1000.0 / ticks
}

/// Resident memory of the processes, in MiB.
pub fn rss_mib(pids: &[u32]) -> f64 {
    pids.iter()
        .filter_map(|p| status_kib(*p, "VmRSS").ok())
        .sum::<u64>() as f64
        / 1024.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hermes::wire;
    use crate::unix_nanos;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// The fake model writes each stamped chunk with its write time, which every figure of the
    /// scenario rests on.
    #[tokio::test]
    async fn the_fake_model_stamps_each_chunk_with_its_write_time() {
        let dir = tempfile::tempdir().unwrap();
        let script = serde_json::json!([
            {"match": "stamp me", "reply": {"chunks": wire::stamped_chunks(3), "delay": 0.01}}
        ]);
        let model = FakeModel::start(Path::new("python3"), dir.path(), &script)
            .await
            .expect("python3 runs the fake model");
        let body = serde_json::json!({
            "model": "fake-model",
            "stream": true,
            "messages": [{"role": "user", "content": "stamp me"}],
        })
        .to_string();
        let before = unix_nanos();
        let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", model.port))
            .await
            .unwrap();
        let request = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        conn.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        // The stream ends by closing the connection.
        tokio::time::timeout(Duration::from_secs(30), conn.read_to_string(&mut answer))
            .await
            .expect("the stream ended")
            .unwrap();
        let after = unix_nanos();
        let mut text = String::new();
        for data in answer.lines().filter_map(|l| l.strip_prefix("data: ")) {
            if let Ok(chunk) = serde_json::from_str::<serde_json::Value>(data) {
                text.push_str(
                    chunk["choices"][0]["delta"]["content"]
                        .as_str()
                        .unwrap_or(""),
                );
            }
        }
        let stamps: Vec<u64> = wire::stamps(&text).collect();
        assert_eq!(stamps.len(), 3, "{text:?}");
        assert!(
            stamps.windows(2).all(|w| w[1] >= w[0] + 5_000_000),
            "{stamps:?}"
        );
        assert!(stamps[0] >= before && stamps[2] <= after, "{stamps:?}");
    }
}
