//! Nothing waits without bound between the agent's output and the store: an agent that writes
//! 50 MiB of text as fast as it can, deaf to cancel, while every commit of the store is slowed
//! (the store's fault hook, as a disk with slow fsyncs), leaves the gateway's memory bounded,
//! and every device still gets the answer cut at the bound of a turn.

#[path = "common/binary.rs"]
mod binary;

use std::time::Duration;

use binary::{serve, Running, BIN};
use iris_client::{Client, ConnectOptions};
use iris_protocol::{ClientFrame, Header, MessageSend, ServerFrame, TurnEnd, MAX_TURN_TEXT};
const TOKEN: &str = "flood-memory-token-0123";
/// The peak resident size the gateway must stay under.
const MAX_RSS_KIB: u64 = 64 * 1024;

/// A field of `/proc/<pid>/status` in KiB.
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// Reads a device's frames until the answer's `message.stop`; returns it.
async fn final_answer(client: &mut Client) -> iris_protocol::MessageStop {
    loop {
        let event = client
            .next_event_timeout(Duration::from_secs(600))
            .await
            .expect("the answer ends");
        if let ServerFrame::MessageStop(stop) = event.body {
            return stop;
        }
    }
}

#[tokio::test]
async fn fifty_mebibytes_from_a_deaf_agent_on_a_slow_store_keep_the_gateway_small() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("iris.toml");
    // The agent has all the time it needs: the gateway reads all it writes.
    std::fs::write(
        &config,
        "[agent]\ncancel_grace_secs = 600\nturn_idle_timeout_secs = 600\n",
    )
    .expect("config");
    let data = dir.path().join("data");
    let agent = format!("'{BIN}' demo-agent");
    let mut cmd = serve(&[
        "--listen",
        "127.0.0.1:0",
        "--token",
        TOKEN,
        "--data-dir",
        data.to_str().expect("utf-8 path"),
        "--config",
        config.to_str().expect("utf-8 path"),
        "--agent",
        &agent,
    ]);
    cmd.env("IRIS_LOG", "error")
        .env(iris_store::COMMIT_DELAY_VAR, "20");
    let Running {
        mut child,
        pid,
        url,
        ..
    } = Running::start(cmd).await;
    let pid = pid as u32;

    let connect =
        |device: &'static str| Client::connect(ConnectOptions::new(url.clone(), TOKEN, device));
    let (mut phone, _) = connect("phone").await.expect("phone");
    let (mut laptop, _) = connect("laptop").await.expect("laptop");
    let send = ClientFrame::MessageSend(MessageSend {
        text: "deluge".into(),
        ..Default::default()
    });
    phone
        .request(Header::lane("default", None), send)
        .await
        .expect("sent");

    for (name, client) in [("phone", &mut phone), ("laptop", &mut laptop)] {
        let stop = final_answer(client).await;
        let len = stop.final_text.len();
        assert!(
            len <= MAX_TURN_TEXT && len > MAX_TURN_TEXT / 2,
            "{name}: the answer is cut at the bound of a turn, got {len} bytes"
        );
        assert!(stop.final_text.starts_with("deluge deluge"), "{name}");
        assert_eq!(stop.ended, Some(TurnEnd::AgentFailed), "{name}");
    }
    let peak = status_kib(pid, "VmHWM:");
    println!(
        "gateway peak RSS after 50 MiB from the agent: {} MiB",
        peak / 1024
    );
    assert!(
        peak < MAX_RSS_KIB,
        "the gateway's peak RSS was {peak} KiB, over {MAX_RSS_KIB} KiB"
    );
    child.start_kill().expect("kill");
    let _ = child.wait().await;
}
