//! What a device was shown of a streaming answer survives the gateway going down: killed with
//! SIGKILL (no text reaches a device before it is in the store), or stopped gracefully (the
//! answer is then cut off as after a crash, not marked stopped). The next start closes the turn
//! as `cut_off` with at least the text the device had.

mod common;

use common::binary::{serve, Running};
use common::*;
use iris_client::{Client, ConnectOptions};
use iris_protocol::{Role, ServerFrame, TurnEnd};

/// The demo agent's `bench` turn: this many chunks, this many microseconds apart (4 s).
const PROMPT: &str = "bench 400 10000";

/// The gateway as a process of its own, so that it can be killed with SIGKILL.
async fn spawn(dir: &std::path::Path) -> Running {
    let data = dir.to_str().expect("utf-8 path");
    let agent = demo_agent();
    let args = [
        "--listen",
        "127.0.0.1:0",
        "--token",
        TOKEN,
        "--data-dir",
        data,
    ];
    Running::start(serve(&[&args[..], &["--agent", &agent]].concat())).await
}

/// Sends the prompt and reads until the device was shown `chunks` chunks of the answer; returns
/// the text it was shown last.
async fn shown_after(client: &mut Client, chunks: usize) -> String {
    send(client, default_lane(), PROMPT, false).await;
    let mut shown = String::new();
    while shown.split_whitespace().count() < chunks {
        let event = client.next_event().await.expect("the answer streams");
        if let ServerFrame::MessageUpdate(u) = &event.body {
            shown = u.text.clone();
        }
    }
    shown
}

/// The answer in history after the restart, and the system notes.
async fn after_restart(client: &mut Client) -> (iris_protocol::Message, Vec<String>) {
    let history = lane_history(client, default_lane()).await;
    let answer = history
        .iter()
        .find(|m| m.role == Role::Assistant)
        .cloned()
        .expect("the answer is in history");
    let notes = history
        .iter()
        .filter(|m| m.role == Role::System)
        .map(|m| m.text.clone())
        .collect();
    (answer, notes)
}

#[tokio::test]
async fn a_killed_gateway_keeps_every_text_a_device_was_shown() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut gw = spawn(dir.path()).await;
    let (mut phone, _) = Client::connect(ConnectOptions::new(gw.url.clone(), TOKEN, "phone"))
        .await
        .expect("connect");
    // A few chunks in, well before the first one-second checkpoint of earlier versions.
    let shown = shown_after(&mut phone, 5).await;
    gw.child.start_kill().expect("kill -9");
    gw.child.wait().await.expect("killed");
    drop(phone);

    let gw = spawn(dir.path()).await;
    let (mut phone, _) = Client::connect(ConnectOptions::new(gw.url.clone(), TOKEN, "phone"))
        .await
        .expect("reconnect");
    let (answer, notes) = after_restart(&mut phone).await;
    assert_eq!(answer.ended, Some(TurnEnd::CutOff), "{answer:?}");
    assert!(
        answer.text.starts_with(&shown),
        "the stored answer holds what the device was shown\nshown:  {shown:?}\nstored: {:?}",
        answer.text
    );
    assert!(
        notes.iter().any(|n| n.contains("cut off")),
        "a note says the answer was cut off: {notes:?}"
    );
}

#[tokio::test]
async fn a_graceful_stop_cuts_the_running_answer_off_instead_of_stopping_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let demo = |c: &mut iris_gateway::Config| c.agent_command = Some(demo_agent());
    let gw = TestGateway::start_in(dir.path(), demo).await;
    let (mut phone, _) = gw.connect("phone").await;
    let shown = shown_after(&mut phone, 5).await;
    gw.stop().await;
    drop(phone);

    let gw = TestGateway::start_in(dir.path(), demo).await;
    let (mut phone, _) = gw.connect("phone").await;
    let (answer, notes) = after_restart(&mut phone).await;
    assert_eq!(
        answer.ended,
        Some(TurnEnd::CutOff),
        "not stopped: nobody stopped it"
    );
    assert!(
        answer.text.starts_with(&shown),
        "shown: {shown:?}\nstored: {:?}",
        answer.text
    );
    assert!(
        notes.iter().any(|n| n.contains("cut off")),
        "a note says the answer was cut off: {notes:?}"
    );
    gw.stop().await;
}
