//! Memory held per connection is bounded in bytes: devices that ask for a full `sync` of large
//! messages and never read hold at most a replay page each (1 MiB, not 1000 rows whatever their
//! size), are dropped once a write has blocked for `limits.write_timeout_secs`, and resume by
//! `sync` afterwards; a history page holds at most 2 MiB of text. The gateway runs as its own process, so its peak resident memory
//! (`VmHWM`) is its own.

mod common;

use std::time::Duration;

use common::tcp::{hello_frame, server_addr, text_frame, upgrade};
use iris_client::{Client, ConnectOptions};
use iris_protocol::{ClientFrame, Header, HistoryRequest, MessageSend, ServerFrame};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};
const SECRET: &str = "slow-readers-token-0123456789";
const MESSAGES: usize = 600;
const MESSAGE_BYTES: usize = 60 * 1024;
const SLOW_READERS: usize = 24;

async fn serve(dir: &std::path::Path) -> common::binary::Running {
    let config = dir.join("iris.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:0\"\ndata_dir = \"{}\"\n[agent]\ncommand = \"none\"\n\
             [limits]\nsends_per_minute = 1000000\nwrite_timeout_secs = 2\n",
            dir.join("data").display()
        ),
    )
    .expect("config");
    let mut cmd = common::binary::serve(&["--config", config.to_str().expect("utf-8 path")]);
    // The configuration says the agent (none) and the limits; the token comes from outside.
    cmd.env_remove("IRIS_AGENT").env("IRIS_TOKEN", SECRET);
    common::binary::Running::start(cmd).await
}

/// A field of `/proc/<pid>/status` in KiB.
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in {status}"))
}

/// A socket that says `hello`, asks for everything since cursor 0, and never reads.
async fn slow_reader(url: &str, i: usize) -> TcpStream {
    let server = server_addr(url);
    let socket = TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("rcvbuf");
    let mut tcp = socket.connect(server).await.expect("connect");
    upgrade(&mut tcp, server).await;
    tcp.write_all(&hello_frame(SECRET, &format!("slow-{i}")))
        .await
        .expect("hello");
    let sync = r#"{"v":1,"type":"sync","id":2,"payload":{"cursor":0}}"#;
    tcp.write_all(&text_frame(sync.as_bytes()))
        .await
        .expect("sync");
    tcp
}

/// Open connections, from `/healthz`.
async fn connections(url: &str) -> u64 {
    let (status, body) = common::tcp::http_get(server_addr(url), "/healthz").await;
    assert_eq!(status, 200, "{body}");
    let n = body
        .split("\"connections\":")
        .nth(1)
        .and_then(|rest| rest.split([',', '}']).next())
        .and_then(|n| n.parse().ok());
    n.unwrap_or_else(|| panic!("{body}"))
}

#[tokio::test]
async fn slow_readers_hold_at_most_a_page_each_and_are_dropped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut gw = serve(dir.path()).await;
    let (pid, url) = (gw.pid as u32, gw.url.clone());
    let (mut writer, _) = Client::connect(ConnectOptions::new(url.clone(), SECRET, "writer"))
        .await
        .expect("connect");
    let text = "x".repeat(MESSAGE_BYTES);
    for _ in 0..MESSAGES {
        let send = ClientFrame::MessageSend(MessageSend {
            text: text.clone(),
            ..Default::default()
        });
        writer
            .request(Header::lane("default", None), send)
            .await
            .expect("stored");
    }
    // A history page is bounded in bytes as well: 200 such messages would be 12 MiB.
    let page = ClientFrame::History(HistoryRequest {
        before_message_id: None,
        limit: Some(200),
    });
    let reply = writer
        .request(Header::lane("default", None), page)
        .await
        .expect("history");
    let ServerFrame::History(history) = reply.body else {
        panic!("{}", reply.raw)
    };
    let bytes: usize = history.messages.iter().map(|m| m.text.len()).sum();
    assert!(
        history.has_more && history.messages.len() < 200,
        "{}",
        history.messages.len()
    );
    assert!(bytes <= 2 * 1024 * 1024, "{bytes} bytes in one page");
    writer.close().await.expect("close");
    let before = status_kib(pid, "VmRSS:");

    let mut slow = Vec::new();
    for i in 0..SLOW_READERS {
        slow.push(slow_reader(&url, i).await);
    }
    // The gateway drops every one of them once a write has blocked for 2 s.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while connections(&url).await > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "slow readers never dropped"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let peak = status_kib(pid, "VmHWM:");
    let stored_mib = (MESSAGES * MESSAGE_BYTES) >> 20;
    eprintln!(
        "{SLOW_READERS} slow readers of {stored_mib} MiB each: RSS before {} MiB, peak {} MiB",
        before >> 10,
        peak >> 10
    );
    // Each reader asked for the whole ~35 MiB; holding it would take over 800 MiB. Bounded, they
    // hold a page and a write buffer each.
    assert!(
        peak < before + 256 * 1024,
        "peak RSS {} MiB (before the readers: {} MiB)",
        peak >> 10,
        before >> 10
    );
    drop(slow);

    // A dropped device resumes by sync and gets everything.
    let (mut again, _) = Client::connect(ConnectOptions::new(url.clone(), SECRET, "slow-0"))
        .await
        .expect("reconnect");
    let replayed = again.sync(0).await.expect("sync");
    let messages = replayed
        .frames
        .iter()
        .filter(|e| e.frame_type() == "message")
        .count();
    assert_eq!(messages, MESSAGES);
    let _ = gw.child.start_kill();
}
