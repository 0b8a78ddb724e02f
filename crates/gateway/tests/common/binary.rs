//! The real `iris-gateway` binary as a child process, for the tests of the process itself
//! (`process.rs`, `process_kill.rs`): spawned isolated from the caller's `IRIS_*` environment,
//! its startup banner read, signals, refusals, a raw HTTP GET.
//!
//! The one way the tests start the binary as a process: [`serve`] (isolated from the caller's
//! environment) and [`Running::start`] (waits for the banner, keeps reading the output). It is
//! `common::binary`, and standalone (no `common` module) with
//! `#[path = "common/binary.rs"] mod binary;`.
#![allow(dead_code)]

use std::path::Path;
use std::process::{ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use iris_client::{Client, ConnectOptions};
use iris_protocol::ServerFrame;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

pub const BIN: &str = env!("CARGO_BIN_EXE_iris-gateway");
/// Upper bound for the binary to start, stop or refuse to start.
pub const PATIENCE: Duration = Duration::from_secs(15);
pub const TOKEN: &str = "process-test-token-0123";

/// `iris-gateway serve` with these arguments, isolated from the caller's `IRIS_*` environment.
/// No agent runs (`IRIS_AGENT=none`): these tests are about the process, and a `hermes` on PATH
/// must never be started by them. A test whose configuration file names the agent removes it
/// again (`cmd.env_remove("IRIS_AGENT")`).
pub fn serve(args: &[&str]) -> Command {
    serve_through(&[], args)
}

/// [`serve`] run by `wrapper`, a program and its arguments that run the binary in turn (as
/// `setpriv --reuid=nobody …`); empty for the binary itself.
pub fn serve_through(wrapper: &[&str], args: &[&str]) -> Command {
    let mut cmd = match wrapper.split_first() {
        Some((program, rest)) => {
            let mut c = Command::new(program);
            c.args(rest).arg(BIN);
            c
        }
        None => Command::new(BIN),
    };
    cmd.arg("serve").args(args);
    for var in [
        "IRIS_LISTEN",
        "IRIS_DATA_DIR",
        "IRIS_TOKEN",
        "IRIS_CONFIG",
        "IRIS_LOG",
        "IRIS_LOG_FORMAT",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("IRIS_AGENT", "none");
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// The gateway binary with `args` (a subcommand other than `serve`, which is
/// [`serve`]), without the caller's IRIS_TOKEN and IRIS_CONFIG.
pub fn cli_command(args: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new(BIN);
    cmd.args(args)
        .env_remove("IRIS_TOKEN")
        .env_remove("IRIS_CONFIG");
    cmd
}

/// Runs [`cli_command`]: success, stdout, stderr.
pub fn run_cli(args: &[&str]) -> (bool, String, String) {
    let out = cli_command(args).output().expect("run the binary");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A running gateway process.
pub struct Running {
    pub child: Child,
    pub pid: i32,
    /// `ws://…/ws` (`wss://` with TLS).
    pub url: String,
    /// `host:port`.
    pub addr: String,
    /// What it printed on stdout at startup.
    pub banner: Vec<String>,
    /// Everything it wrote to stderr so far.
    pub stderr: Arc<Mutex<String>>,
    /// Copies stderr until the process closes it.
    pub stderr_task: tokio::task::JoinHandle<()>,
    /// Woken at every line written to stderr.
    pub stderr_line: Arc<tokio::sync::Notify>,
}

impl Running {
    /// Spawns the command and reads stdout until the startup banner is complete.
    pub async fn start(mut cmd: Command) -> Running {
        let mut child = cmd.spawn().expect("spawn iris-gateway");
        let pid = child.id().expect("pid") as i32;
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err_lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let sink = stderr.clone();
        let stderr_line = Arc::new(tokio::sync::Notify::new());
        let line_written = stderr_line.clone();
        let stderr_task = tokio::spawn(async move {
            while let Ok(Some(line)) = err_lines.next_line().await {
                let mut all = sink.lock().expect("stderr lock");
                all.push_str(&line);
                all.push('\n');
                line_written.notify_waiters();
            }
        });
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut banner = Vec::new();
        let read = tokio::time::timeout(PATIENCE, async {
            while let Some(line) = lines.next_line().await.expect("read stdout") {
                let last = line.starts_with("Pair a device");
                banner.push(line);
                if last {
                    return true;
                }
            }
            false
        })
        .await;
        if read != Ok(true) {
            let _ = child.start_kill();
            panic!(
                "no complete startup banner: {banner:?}\nstderr:\n{}",
                stderr.lock().expect("lock")
            );
        }
        // Keep draining stdout so the process never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let url = banner
            .iter()
            .find_map(|l| {
                l.trim()
                    .strip_prefix("WebSocket:")
                    .map(|u| u.trim().to_owned())
            })
            .unwrap_or_else(|| panic!("no WebSocket line in {banner:?}"));
        let addr = url
            .strip_prefix("ws://")
            .or_else(|| url.strip_prefix("wss://"))
            .and_then(|u| u.strip_suffix("/ws"))
            .unwrap_or_else(|| panic!("not a ws(s)://…/ws URL: {url}"))
            .to_owned();
        Running {
            child,
            pid,
            url,
            addr,
            banner,
            stderr,
            stderr_task,
            stderr_line,
        }
    }

    /// Waits (at most `patience`) until stderr holds `needle`; false when it did not come.
    pub async fn stderr_until(&self, needle: &str, patience: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            let line = self.stderr_line.notified();
            tokio::pin!(line);
            // Registered before looking, so a line written in between still wakes it.
            line.as_mut().enable();
            if self.stderr.lock().expect("lock").contains(needle) {
                return true;
            }
            if tokio::time::timeout_at(deadline, line).await.is_err() {
                return false;
            }
        }
    }

    /// The banner line starting with `label` (after indentation), without the label.
    pub fn line(&self, label: &str) -> Option<String> {
        self.banner
            .iter()
            .find_map(|l| l.trim().strip_prefix(label).map(|v| v.trim().to_owned()))
    }

    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on the pid of a child this test spawned and has not reaped yet.
        let rc = unsafe { libc::kill(self.pid, signal) };
        assert_eq!(rc, 0, "kill({}, {signal}) failed", self.pid);
    }

    pub async fn wait(&mut self) -> ExitStatus {
        tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .expect("the process exits in time")
            .expect("wait")
    }

    /// SIGTERM, then asserts a clean exit; returns everything it wrote to stderr.
    pub async fn stop(mut self) -> String {
        self.signal(libc::SIGTERM);
        let status = self.wait().await;
        tokio::time::timeout(PATIENCE, &mut self.stderr_task)
            .await
            .expect("stderr closes")
            .expect("stderr task");
        let stderr = self.stderr.lock().expect("lock").clone();
        assert!(
            status.success(),
            "exit after SIGTERM: {status:?}\nstderr:\n{stderr}"
        );
        stderr
    }

    pub fn options(&self, token: &str, device: &str) -> ConnectOptions {
        ConnectOptions::new(self.url.clone(), token, device)
    }
}

/// Runs a command that must refuse to start; returns its output.
pub async fn refused(mut cmd: Command) -> Output {
    let output = tokio::time::timeout(PATIENCE, cmd.output())
        .await
        .expect("exits in time")
        .expect("run");
    assert!(
        !output.status.success(),
        "expected a failure exit, got {:?}",
        output.status
    );
    assert!(
        !String::from_utf8_lossy(&output.stdout).contains("is running"),
        "it never reports running"
    );
    output
}

/// The stderr of a refused start: exactly one line, which is returned.
pub fn one_line_reason(output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr)
        .trim_end()
        .to_owned();
    assert_eq!(
        stderr.lines().count(),
        1,
        "a one-line reason on stderr, got:\n{stderr}"
    );
    stderr
}

/// A raw HTTP/1.1 GET; returns the status code and the body.
pub async fn http_get(addr: &str, path: &str) -> (u16, String) {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        stream
            .write_all(request.as_bytes())
            .await
            .expect("write request");
        let mut response = Vec::new();
        stream
            .read_to_end(&mut response)
            .await
            .expect("read response");
        String::from_utf8(response).expect("utf-8 response")
    };
    let response = tokio::time::timeout(PATIENCE, exchange)
        .await
        .expect("HTTP answer in time");
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status code");
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// Connects and consumes `status online`.
pub async fn connect(gw: &Running, token: &str, device: &str) -> Client {
    let (mut client, _) = Client::connect(gw.options(token, device))
        .await
        .expect("connect");
    let status = client.next_event().await.expect("status");
    assert!(
        matches!(status.body, ServerFrame::Status(_)),
        "{}",
        status.raw
    );
    client
}

pub fn write_config(dir: &Path, text: &str) -> String {
    let path = dir.join("iris.toml");
    std::fs::write(&path, text).expect("write config");
    path.to_str().expect("utf-8 path").to_owned()
}
