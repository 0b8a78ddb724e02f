//! A real agent from npm behind a scripted fake model API, both in a fresh loopback-only network
//! namespace: what `claude.rs` and `codex.rs` share. An [`AgentSpec`] says what differs (the
//! adapter's program and where it is installed, the fake API script and its port, the adapter's
//! environment and the files its home holds); [`AgentEnv`] makes the private home, working
//! directory and request log, and the launcher the gateway runs as the agent's command.
//!
//! The launcher enters a new network namespace, brings up `lo`, starts the fake API, waits until
//! it listens, then `exec`s the adapter with a scrubbed environment (`env -i`): only `PATH`,
//! `HOME` in the temp dir, `LANG`, `TERM` and the spec's variables.
//!
//! Standalone (std, libc, serde_json, tempfile); included by `claude.rs` and `codex.rs`, next to
//! `sandbox.rs`.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tempfile::TempDir;

use super::sandbox::{
    is_root, namespace_support, shell_quote, unavailable, wait_until_ready, SYSTEM_PATH,
};

/// What one agent needs that another does not.
pub struct AgentSpec {
    /// The adapter's program in `node_modules/.bin`: `claude-agent-acp`.
    pub bin: &'static str,
    /// The npm package and version, for the message when it is missing.
    pub package: &'static str,
    /// The variable naming a directory it is installed in: `IRIS_CLAUDE_ACP`.
    pub env_var: &'static str,
    /// Its folder under `tests/` (the adapter in `adapter/`, the fake API script next to it).
    pub dir: &'static str,
    /// The fake API script in that folder.
    pub fake_api: &'static str,
    /// The fake API's port; every spawn has its own namespace, so it is always free.
    pub port: u16,
    /// The adapter's environment beyond `PATH`, `HOME`, `LANG` and `TERM`, as `NAME=value`
    /// words; `{home}` stands for the home directory.
    pub env: &'static [&'static str],
    /// Files written below the home directory: (path, contents).
    pub home_files: &'static [(&'static str, &'static str)],
}

/// One adapter installation plus a private HOME, working directory and request log.
pub struct AgentEnv {
    /// Root of everything this environment writes; removed on drop.
    pub root: TempDir,
    /// The adapter's program.
    pub program: PathBuf,
    /// A directory to use as the agent's cwd.
    pub work: PathBuf,
    log: PathBuf,
    launcher: PathBuf,
    fake_stderr: PathBuf,
}

impl AgentEnv {
    /// Prepares an environment; panics, saying what is missing, without the adapter.
    pub fn new(spec: &AgentSpec) -> AgentEnv {
        let Some(program) = find_adapter(spec) else {
            unavailable(&format!(
                "{} not found; set {} to a directory with `npm install {}`, or install it into \
                 crates/gateway/tests/{}/adapter",
                spec.bin, spec.env_var, spec.package, spec.dir
            ));
        };
        if let Err(why) = namespace_support() {
            unavailable(&format!("cannot create a network namespace: {why}"));
        }
        let root = tempfile::Builder::new()
            .prefix(&format!("iris-{}-", spec.dir))
            .tempdir()
            .expect("temp dir for the agent");
        let base = root.path().to_path_buf();
        let work = base.join("work");
        fs::create_dir_all(&work).expect("work dir");
        for (path, contents) in spec.home_files {
            let path = base.join("home").join(path);
            fs::create_dir_all(path.parent().expect("a file in a folder")).expect("home dir");
            fs::write(path, contents).expect("a file of the agent's home");
        }
        fs::create_dir_all(base.join("home")).expect("home dir");
        let env = AgentEnv {
            program,
            work,
            log: base.join("api-requests.jsonl"),
            launcher: base.join("launch.sh"),
            fake_stderr: base.join("fake-api.stderr"),
            root,
        };
        env.write_launchers(spec);
        env
    }

    /// The agent's command line.
    pub fn command_line(&self) -> String {
        format!("sh {}", shell_quote(&self.launcher.to_string_lossy()))
    }

    /// Every request the fake API received, one JSON object each.
    pub fn requests(&self) -> Vec<Value> {
        fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// The fake API's stderr, for failure messages.
    pub fn fake_api_stderr(&self) -> String {
        fs::read_to_string(&self.fake_stderr).unwrap_or_default()
    }

    fn write_launchers(&self, spec: &AgentSpec) {
        let base = self.root.path();
        let inner = base.join("inner.sh");
        let ready = base.join("fake-api.ready");
        let q = |p: &Path| shell_quote(&p.to_string_lossy());
        let home = q(&base.join("home"));
        let fake = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests")
            .join(spec.dir)
            .join(spec.fake_api);
        let env: Vec<String> = spec
            .env
            .iter()
            .map(|word| word.replace("{home}", &home))
            .collect();
        let inner_script = format!(
            r#"#!/bin/sh
# Inside a fresh network namespace: loopback only.
set -e
PATH={system_path}
export PATH
ip link set lo up
rm -f {ready}
python3 {fake} --port {port} --log {log} --ready-file {ready} --parent-pid $$ \
    </dev/null >/dev/null 2>>{fake_stderr} &
{wait}
cd {work}
exec env -i PATH={system_path} HOME={home} LANG=C.UTF-8 TERM=dumb \
    {env} \
    {program}
"#,
            system_path = SYSTEM_PATH,
            wait = wait_until_ready(&q(&ready), "fake API"),
            ready = q(&ready),
            fake = q(&fake),
            port = spec.port,
            log = q(&self.log),
            fake_stderr = q(&self.fake_stderr),
            work = q(&self.work),
            env = env.join(" "),
            program = q(&self.program),
        );
        fs::write(&inner, inner_script).expect("write inner launcher");
        let unshare = if is_root() {
            "unshare -n"
        } else {
            "unshare -r -n"
        };
        let outer = format!(
            "#!/bin/sh\nPATH={SYSTEM_PATH}:$PATH\nexport PATH\nexec {unshare} sh {}\n",
            q(&inner)
        );
        fs::write(&self.launcher, outer).expect("write launcher");
    }
}

/// The adapter in `$<env_var>`, else in `tests/<dir>/adapter`.
fn find_adapter(spec: &AgentSpec) -> Option<PathBuf> {
    let in_dir = |dir: PathBuf| dir.join("node_modules/.bin").join(spec.bin);
    if let Some(dir) = std::env::var_os(spec.env_var).filter(|v| !v.is_empty()) {
        let program = in_dir(PathBuf::from(dir));
        assert!(
            program.exists(),
            "{} has no {}",
            spec.env_var,
            program.display()
        );
        return Some(program);
    }
    let installed = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(spec.dir)
        .join("adapter");
    let local = in_dir(installed);
    local
        .exists()
        .then(|| local.canonicalize().unwrap_or(local))
}
