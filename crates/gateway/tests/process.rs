//! The real `iris-gateway` binary as a child process: its startup output, the token file, the
//! config file with flags and environment on top, refusing bad configuration, a graceful SIGTERM,
//! and no lost frame when it is killed with SIGKILL in the middle of traffic.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use iris_client::{Client, ClientError, ConnectOptions, Event};
use iris_protocol::{
    ClientFrame, ErrorCode, GatewayState, Header, HistoryRequest, MessageSend, RequestId,
    ServerFrame,
};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

const BIN: &str = env!("CARGO_BIN_EXE_iris-gateway");
/// Upper bound for the binary to start, stop or refuse to start.
const PATIENCE: Duration = Duration::from_secs(15);
const TOKEN: &str = "process-test-token-0123";

/// `iris-gateway serve` with these arguments, isolated from the caller's `IRIS_*` environment.
/// No agent runs (`IRIS_AGENT=none`): these tests are about the process, and a `hermes` on PATH
/// must never be started by them.
fn serve(args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.arg("serve").args(args);
    for var in [
        "IRIS_LISTEN",
        "IRIS_DATA_DIR",
        "IRIS_TOKEN",
        "IRIS_CONFIG",
        "IRIS_LOG",
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

/// A running gateway process.
struct Running {
    child: Child,
    pid: i32,
    /// `ws://…/ws`.
    url: String,
    /// `host:port`.
    addr: String,
    /// What it printed on stdout at startup.
    banner: Vec<String>,
    /// Everything it wrote to stderr so far.
    stderr: Arc<Mutex<String>>,
    /// Copies stderr until the process closes it.
    stderr_task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Spawns the command and reads stdout until the startup banner is complete.
    async fn start(mut cmd: Command) -> Running {
        let mut child = cmd.spawn().expect("spawn iris-gateway");
        let pid = child.id().expect("pid") as i32;
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err_lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let sink = stderr.clone();
        let stderr_task = tokio::spawn(async move {
            while let Ok(Some(line)) = err_lines.next_line().await {
                let mut all = sink.lock().expect("stderr lock");
                all.push_str(&line);
                all.push('\n');
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
            .and_then(|u| u.strip_suffix("/ws"))
            .unwrap_or_else(|| panic!("not a ws://…/ws URL: {url}"))
            .to_owned();
        Running {
            child,
            pid,
            url,
            addr,
            banner,
            stderr,
            stderr_task,
        }
    }

    /// The banner line starting with `label` (after indentation), without the label.
    fn line(&self, label: &str) -> Option<String> {
        self.banner
            .iter()
            .find_map(|l| l.trim().strip_prefix(label).map(|v| v.trim().to_owned()))
    }

    fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on the pid of a child this test spawned and has not reaped yet.
        let rc = unsafe { libc::kill(self.pid, signal) };
        assert_eq!(rc, 0, "kill({}, {signal}) failed", self.pid);
    }

    async fn wait(&mut self) -> ExitStatus {
        tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .expect("the process exits in time")
            .expect("wait")
    }

    /// SIGTERM, then asserts a clean exit; returns everything it wrote to stderr.
    async fn stop(mut self) -> String {
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

    fn options(&self, token: &str, device: &str) -> ConnectOptions {
        ConnectOptions::new(self.url.clone(), token, device)
    }
}

/// Runs a command that must refuse to start; returns its output.
async fn refused(mut cmd: Command) -> Output {
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
fn one_line_reason(output: &Output) -> String {
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
async fn http_get(addr: &str, path: &str) -> (u16, String) {
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
async fn connect(gw: &Running, token: &str, device: &str) -> Client {
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

fn write_config(dir: &Path, text: &str) -> String {
    let path = dir.join("iris.toml");
    std::fs::write(&path, text).expect("write config");
    path.to_str().expect("utf-8 path").to_owned()
}

#[tokio::test]
async fn startup_names_the_url_and_data_dir_and_health_answers() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let data_arg = data.to_str().expect("utf-8");
    let args = [
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        data_arg,
        "--token",
        TOKEN,
    ];
    let gw = Running::start(serve(&args)).await;
    assert!(
        gw.url.starts_with("ws://127.0.0.1:") && gw.url.ends_with("/ws"),
        "{}",
        gw.url
    );
    assert_eq!(
        gw.line("Data dir:").as_deref(),
        Some(data_arg),
        "{:?}",
        gw.banner
    );
    assert!(
        !gw.banner.iter().any(|l| l.contains(TOKEN)),
        "a configured token is never printed: {:?}",
        gw.banner
    );
    assert!(
        data.join("iris.db").exists(),
        "the database lives in the data dir"
    );

    let (status, body) = http_get(&gw.addr, "/healthz").await;
    assert_eq!(status, 200, "{body}");
    let health: serde_json::Value = serde_json::from_str(&body).expect("health is JSON");
    assert_eq!(health["status"], "ok", "{body}");
    let (status, _) = http_get(&gw.addr, "/nope").await;
    assert_eq!(status, 404);

    let mut client = connect(&gw, TOKEN, "phone").await;
    let echo = client
        .request(
            Header::lane("default", None),
            ClientFrame::MessageSend(MessageSend {
                text: "a secret note about tulips".into(),
                ..Default::default()
            }),
        )
        .await
        .expect("echo");
    assert!(matches!(echo.body, ServerFrame::Message(_)), "{}", echo.raw);
    let stderr = gw.stop().await;
    assert!(!stderr.contains(TOKEN), "the log never shows the token");
    assert!(
        stderr.contains("device connected"),
        "the log says what happened: {stderr}"
    );
    assert!(
        !stderr.contains("tulips"),
        "the log never shows message text: {stderr}"
    );
}

#[tokio::test]
async fn a_generated_token_is_printed_once_kept_private_and_reused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().to_str().expect("utf-8").to_owned();
    let args = ["--listen", "127.0.0.1:0", "--data-dir", data.as_str()];

    let gw = Running::start(serve(&args)).await;
    let token = gw
        .line("Token:")
        .unwrap_or_else(|| panic!("no token line: {:?}", gw.banner));
    assert!(
        token.len() >= 32 && token.chars().all(|c| c.is_ascii_alphanumeric()),
        "token {token:?}"
    );
    assert_eq!(
        gw.banner.iter().filter(|l| l.contains(&token)).count(),
        1,
        "printed once: {:?}",
        gw.banner
    );
    let file = tmp.path().join("token");
    assert_eq!(
        std::fs::read_to_string(&file).expect("token file").trim(),
        token
    );
    let mode = std::fs::metadata(&file)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600, "the token file is private, mode {mode:o}");
    let client = connect(&gw, &token, "phone").await;
    client.close().await.expect("close");
    let stderr = gw.stop().await;
    assert!(!stderr.contains(&token), "the log never shows the token");

    let gw = Running::start(serve(&args)).await;
    assert!(
        !gw.banner.iter().any(|l| l.contains(&token)),
        "not printed again: {:?}",
        gw.banner
    );
    let client = connect(&gw, &token, "phone").await;
    client.close().await.expect("close");
    let err = Client::connect(gw.options("some-other-token", "phone"))
        .await
        .expect_err("wrong token");
    assert!(
        matches!(
            err,
            ClientError::Server {
                code: ErrorCode::Auth,
                ..
            }
        ),
        "{err}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn config_file_with_environment_and_flags_on_top() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let file_dir = tmp.path().join("from-file");
    let flag_dir = tmp.path().join("from-flag");
    let config = write_config(
        tmp.path(),
        &format!(
            "listen = \"127.0.0.1:0\"\ndata_dir = \"{}\"\ntoken = \"file-token-11111111\"\n",
            file_dir.display()
        ),
    );
    let refused_token = |gw: &Running, token: &'static str| {
        let opts = gw.options(token, "phone");
        async move {
            let err = Client::connect(opts).await.expect_err("token refused");
            assert!(
                matches!(
                    err,
                    ClientError::Server {
                        code: ErrorCode::Auth,
                        ..
                    }
                ),
                "{token}: {err}"
            );
        }
    };

    // The file alone: its listen address, data dir and token.
    let gw = Running::start(serve(&["--config", &config])).await;
    assert!(
        !gw.addr.ends_with(":8765"),
        "listen comes from the file: {}",
        gw.addr
    );
    assert_eq!(gw.line("Data dir:").as_deref(), file_dir.to_str());
    assert!(file_dir.join("iris.db").exists());
    connect(&gw, "file-token-11111111", "phone")
        .await
        .close()
        .await
        .expect("close");
    gw.stop().await;

    // IRIS_TOKEN and --data-dir override the file.
    let mut cmd = serve(&[
        "--config",
        &config,
        "--data-dir",
        flag_dir.to_str().expect("utf-8"),
    ]);
    cmd.env("IRIS_TOKEN", "env-token-22222222");
    let gw = Running::start(cmd).await;
    assert_eq!(gw.line("Data dir:").as_deref(), flag_dir.to_str());
    assert!(flag_dir.join("iris.db").exists());
    connect(&gw, "env-token-22222222", "phone")
        .await
        .close()
        .await
        .expect("close");
    refused_token(&gw, "file-token-11111111").await;
    gw.stop().await;

    // IRIS_CONFIG names the file; --token beats IRIS_TOKEN.
    let mut cmd = serve(&["--token", "flag-token-33333333"]);
    cmd.env("IRIS_CONFIG", &config)
        .env("IRIS_TOKEN", "env-token-22222222");
    let gw = Running::start(cmd).await;
    assert_eq!(gw.line("Data dir:").as_deref(), file_dir.to_str());
    connect(&gw, "flag-token-33333333", "phone")
        .await
        .close()
        .await
        .expect("close");
    refused_token(&gw, "env-token-22222222").await;
    gw.stop().await;
}

#[tokio::test]
async fn an_unknown_config_key_is_refused_in_one_line() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let config = write_config(tmp.path(), "listen = \"127.0.0.1:0\"\nbogus_key = 1\n");
    let data = tmp.path().join("data");
    let output = refused(serve(&[
        "--config",
        &config,
        "--data-dir",
        data.to_str().expect("utf-8"),
    ]))
    .await;
    let reason = one_line_reason(&output);
    assert!(
        reason.contains("bogus_key"),
        "the reason names the key: {reason}"
    );
    assert!(
        !data.exists(),
        "nothing is created before the configuration is valid"
    );
}

#[tokio::test]
async fn a_bad_listen_address_is_refused_in_one_line() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().to_str().expect("utf-8");
    for listen in ["nonsense", "127.0.0.1", "127.0.0.1:99999"] {
        let output = refused(serve(&["--listen", listen, "--data-dir", data])).await;
        let reason = one_line_reason(&output);
        assert!(
            reason.contains("listen") && reason.contains(listen),
            "{listen}: {reason}"
        );
    }
}

#[tokio::test]
async fn an_address_in_use_is_refused_in_one_line() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let data = tmp.path().to_str().expect("utf-8");
    let output = refused(serve(&["--listen", &addr, "--data-dir", data])).await;
    let reason = one_line_reason(&output);
    assert!(
        reason.contains(&addr) && reason.contains("in use"),
        "{reason}"
    );
}

#[tokio::test]
async fn a_data_dir_that_cannot_be_created_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = tmp.path().join("plain-file");
    std::fs::write(&file, "not a directory").expect("write");
    let data = file.join("data");
    let output = refused(serve(&[
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        data.to_str().expect("utf-8"),
    ]))
    .await;
    let reason = one_line_reason(&output);
    assert!(reason.contains("data dir"), "{reason}");
}

#[tokio::test]
async fn sigterm_tells_devices_it_is_restarting_and_exits_cleanly() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().to_str().expect("utf-8");
    let mut gw = Running::start(serve(&[
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        data,
        "--token",
        TOKEN,
    ]))
    .await;
    let mut a = connect(&gw, TOKEN, "phone").await;
    let mut b = connect(&gw, TOKEN, "laptop").await;
    gw.signal(libc::SIGTERM);
    for client in [&mut a, &mut b] {
        let status = client
            .wait_for(|e| matches!(&e.body, ServerFrame::Status(s) if s.state == GatewayState::Restarting))
            .await
            .expect("status restarting before the close");
        assert_eq!(status.header.id, None);
        let close = client.closed().await.expect("the socket closes");
        assert_eq!(close.map(|c| c.0), Some(1001), "closed as going away");
    }
    let status = gw.wait().await;
    assert_eq!(status.code(), Some(0), "a graceful stop exits 0");
}

/// What a durable frame is, to compare a frame received live with its replay.
fn identity(event: &Event) -> String {
    match &event.body {
        ServerFrame::Message(m) => format!("message {}", m.message_id),
        other => iris_protocol::FrameBody::frame_type(other).to_owned(),
    }
}

/// Takes every frame a client still has, until its connection is gone.
async fn drain(client: &mut Client) -> Vec<Event> {
    let mut events = Vec::new();
    loop {
        match client.next_event_timeout(PATIENCE).await {
            Ok(event) => events.push(event),
            Err(ClientError::Closed(_) | ClientError::Ws(_)) => return events,
            Err(e) => panic!(
                "{}: the connection should end after the kill: {e}",
                client.device_id()
            ),
        }
    }
}

/// Durable frames by cursor, asserting each cursor at most once.
fn by_cursor(events: &[Event], what: &str) -> BTreeMap<u64, String> {
    let mut map = BTreeMap::new();
    for e in events.iter().filter(|e| e.is_durable()) {
        let cursor = e
            .cursor
            .unwrap_or_else(|| panic!("{what}: a durable frame without cursor: {}", e.raw));
        assert!(
            map.insert(cursor, identity(e)).is_none(),
            "{what}: cursor {cursor} received twice"
        );
    }
    map
}

fn assert_strictly_increasing(frames: &[Event], what: &str) {
    let cursors: Vec<u64> = frames
        .iter()
        .map(|e| e.cursor.expect("replayed frames carry a cursor"))
        .collect();
    assert!(
        cursors.windows(2).all(|w| w[0] < w[1]),
        "{what}: replayed cursors not strictly increasing: {cursors:?}"
    );
}

/// Sends up to 300 messages with `window` requests in flight until the connection dies. Returns
/// the client, every frame it received, and the ids of its echoed messages in order.
async fn write_until_gone(
    mut client: Client,
    prefix: &'static str,
    window: u64,
    progress: Option<tokio::sync::watch::Sender<u64>>,
) -> (Client, Vec<Event>, Vec<String>) {
    const FIRST_ID: u64 = 1000;
    let (mut sent, mut echoed) = (0u64, Vec::new());
    let mut events = Vec::new();
    loop {
        while sent < 300 && sent - (echoed.len() as u64) < window {
            let header = Header {
                id: Some(RequestId::from(FIRST_ID + sent)),
                ..Header::lane("default", None)
            };
            let text = format!("{prefix} traffic {sent}");
            if client
                .send(
                    header,
                    ClientFrame::MessageSend(MessageSend {
                        text,
                        ..Default::default()
                    }),
                )
                .await
                .is_err()
            {
                // Frames read before the failure are still buffered in the client.
                events.extend(drain(&mut client).await);
                return (client, events, echoed);
            }
            sent += 1;
        }
        if echoed.len() as u64 == sent {
            // Everything was sent and echoed; wait for the end of the connection.
            events.extend(drain(&mut client).await);
            return (client, events, echoed);
        }
        match client.next_event_timeout(PATIENCE).await {
            Ok(event) => {
                if let Some(id) = event.id() {
                    assert_eq!(
                        id,
                        FIRST_ID + echoed.len() as u64,
                        "echoes arrive in request order: {}",
                        event.raw
                    );
                    let ServerFrame::Message(m) = &event.body else {
                        panic!("send answered by {}", event.raw)
                    };
                    echoed.push(m.message_id.clone());
                    if let Some(p) = &progress {
                        p.send_replace(echoed.len() as u64);
                    }
                }
                events.push(event);
            }
            Err(ClientError::Closed(_) | ClientError::Ws(_)) => return (client, events, echoed),
            Err(e) => panic!("{}: {e}", client.device_id()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_traffic_loses_no_frame() {
    let seed: u64 = match std::env::var("IRIS_KILL_SEED") {
        Ok(s) => s.parse().expect("IRIS_KILL_SEED is a number"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_nanos() as u64,
    };
    let kill_after = 1 + seed % 150;
    let window = 1 + (seed / 150) % 8;
    println!(
        "kill seed {seed}: SIGKILL after {kill_after} echoes to phone-a, {window} sends in flight per writer \
         (rerun with IRIS_KILL_SEED={seed})"
    );

    let tmp = tempfile::tempdir().expect("tempdir");
    let config = write_config(
        tmp.path(),
        &format!(
            "listen = \"127.0.0.1:0\"\ndata_dir = \"{}\"\ntoken = \"{TOKEN}\"\n[limits]\nsends_per_minute = 1000000\n",
            tmp.path().join("data").display()
        ),
    );
    let mut gw = Running::start(serve(&["--config", &config])).await;
    let devices = ["phone-a", "phone-b", "tablet-c"];
    let mut clients = Vec::new();
    for device in devices {
        let (mut client, ack) = Client::connect(gw.options(TOKEN, device))
            .await
            .expect("connect");
        let replay = client.sync(ack.sync_cursor).await.expect("initial sync");
        assert!(
            replay.frames.is_empty(),
            "a new data dir has an empty outbox"
        );
        clients.push(client);
    }
    let mut c = clients.pop().expect("tablet-c");
    let b = clients.pop().expect("phone-b");
    let a = clients.pop().expect("phone-a");

    // Devices A and B write until the gateway dies under them; C only listens.
    let (progress, mut a_echoed) = tokio::sync::watch::channel(0u64);
    let writer_a = tokio::spawn(write_until_gone(a, "a", window, Some(progress)));
    let writer_b = tokio::spawn(write_until_gone(b, "b", window, None));
    tokio::time::timeout(PATIENCE, a_echoed.wait_for(|n| *n >= kill_after))
        .await
        .expect("enough echoes in time")
        .expect("the writer is running");
    gw.signal(libc::SIGKILL);
    let status = gw.wait().await;
    assert!(!status.success(), "killed: {status:?}");

    let c_events = drain(&mut c).await;
    let mut written = Vec::new();
    let mut received = Vec::new();
    for writer in [writer_a, writer_b] {
        let (client, events, echoed) = tokio::time::timeout(PATIENCE, writer)
            .await
            .expect("writer ends")
            .expect("writer");
        received.push((client, events));
        written.push(echoed);
    }
    received.push((c, c_events));
    println!(
        "echoed before the kill: {} to phone-a, {} to phone-b",
        written[0].len(),
        written[1].len()
    );
    assert!(written[0].len() as u64 >= kill_after);
    let mut before = Vec::new();
    for (client, events) in &received {
        let device = client.device_id();
        let got = by_cursor(events, &format!("{device} before the kill"));
        let logged: BTreeSet<u64> = client.durable_log().iter().map(|(c, _)| *c).collect();
        assert_eq!(
            logged,
            got.keys().copied().collect(),
            "{device}: the durable log matches the frames taken"
        );
        before.push(got);
    }
    drop(received);

    // Restart on the same data dir; every device catches up from its own watermark.
    let gw = Running::start(serve(&["--config", &config])).await;
    let (mut fresh, _) = Client::connect(gw.options(TOKEN, "fresh-device"))
        .await
        .expect("connect");
    let everything = fresh.sync(0).await.expect("replay from 0");
    assert_strictly_increasing(&everything.frames, "replay from 0");
    let outbox = by_cursor(&everything.frames, "replay from 0");
    let ids: Vec<&String> = outbox
        .values()
        .filter(|i| i.starts_with("message "))
        .collect();
    assert_eq!(
        ids.len(),
        ids.iter().collect::<HashSet<_>>().len(),
        "message ids are unique in the replay"
    );
    for (device, received) in devices.iter().zip(&before) {
        for (cursor, what) in received {
            assert_eq!(
                outbox.get(cursor),
                Some(what),
                "{device} got frame {cursor} before the kill; it is not replayable"
            );
        }
    }
    for (device, received) in devices.iter().zip(&before) {
        let (mut client, ack) = Client::connect(gw.options(TOKEN, device))
            .await
            .expect("reconnect");
        let replay = client
            .sync(ack.sync_cursor)
            .await
            .expect("sync after restart");
        assert_strictly_increasing(&replay.frames, &format!("{device} after restart"));
        let replayed = by_cursor(&replay.frames, &format!("{device} after restart"));
        println!(
            "{device}: watermark {}, {} frames replayed after the restart",
            ack.sync_cursor,
            replayed.len()
        );
        for (cursor, what) in &replayed {
            assert!(
                *cursor > ack.sync_cursor,
                "{device}: replayed {cursor} at or below its watermark"
            );
            assert_eq!(
                outbox.get(cursor),
                Some(what),
                "{device}: replay of {cursor} differs from the outbox"
            );
        }
        for (cursor, what) in &outbox {
            let has = received.get(cursor).or_else(|| replayed.get(cursor));
            assert_eq!(
                has,
                Some(what),
                "{device} (watermark {}) never gets frame {cursor}",
                ack.sync_cursor
            );
        }
        client.close().await.expect("close");
    }

    // Every message A or B saw echoed is in history, in the order it was sent.
    let mut history = Vec::new();
    let mut before_id = None;
    loop {
        let req = HistoryRequest {
            before_message_id: before_id.clone(),
            limit: Some(200),
        };
        let page = fresh
            .request(Header::lane("default", None), ClientFrame::History(req))
            .await
            .expect("history");
        let ServerFrame::History(page) = page.body else {
            panic!("{}", page.raw)
        };
        let mut ids: Vec<String> = page.messages.into_iter().map(|m| m.message_id).collect();
        ids.append(&mut history);
        history = ids;
        if !page.has_more {
            break;
        }
        before_id = page.oldest_message_id;
    }
    let position: std::collections::HashMap<&String, usize> =
        history.iter().enumerate().map(|(i, id)| (id, i)).collect();
    for (device, echoed) in devices.iter().zip(&written) {
        let at: Vec<usize> = echoed
            .iter()
            .map(|id| {
                *position
                    .get(id)
                    .unwrap_or_else(|| panic!("{device}: echoed message {id} is not in history"))
            })
            .collect();
        assert!(
            at.windows(2).all(|w| w[0] < w[1]),
            "{device}: its messages keep their order in history"
        );
    }
    assert!(
        history.len() <= 600,
        "{} messages in history",
        history.len()
    );
    fresh.close().await.expect("close");
    gw.stop().await;
}
