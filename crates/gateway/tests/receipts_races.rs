//! Races around the gateway's queue of user messages: a `message.send` arriving while the gateway
//! stops is refused (`internal`) and runs once after the restart, and sends on one lane from
//! several connections at once reach the lane in the order they are stored.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::prompt_log::{prompts_run, recording_agent};
use common::*;
use iris_client::{Client, ClientError};
use iris_protocol::{ClientFrame, ErrorCode, MessageSend, MessageState, Role};

fn send_frame(text: &str, client_id: &str) -> ClientFrame {
    ClientFrame::MessageSend(MessageSend {
        text: text.into(),
        client_id: Some(client_id.into()),
        ..Default::default()
    })
}

/// The default lane's user messages, oldest first: text and state.
async fn users(client: &mut Client) -> Vec<(String, Option<MessageState>)> {
    let request = ClientFrame::History(iris_protocol::HistoryRequest {
        before_message_id: None,
        limit: Some(200),
    });
    let reply = client
        .request(default_lane(), request)
        .await
        .expect("history");
    let iris_protocol::ServerFrame::History(history) = reply.body else {
        panic!("expected history, got {:?}", reply.body);
    };
    history
        .messages
        .into_iter()
        .filter(|m| m.role == Role::User)
        .map(|m| (m.text, m.state))
        .collect()
}

#[tokio::test]
async fn a_message_sent_while_the_gateway_stops_is_refused_and_runs_once_after_the_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let logs = tmp.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let log = logs.join("prompts.log");
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let agent = recording_agent(&log);
    let gw = TestGateway::start_in(&data, |c| c.agent_command = Some(agent.clone())).await;
    let (mut phone, _) = gw.connect("phone").await;
    // The gateway begins to stop: its lanes close, the connection is still open.
    gw.agents.shutdown().await;
    let refused = phone
        .request(default_lane(), send_frame("hello", "h-1"))
        .await;
    match refused {
        Err(ClientError::Server { code, message, .. }) => {
            assert_eq!(code, ErrorCode::Internal, "{message}");
        }
        other => panic!("a stopping gateway takes no new work, got {other:?}"),
    }
    drop(phone);
    gw.stop().await;

    let gw = TestGateway::start_in(&data, |c| c.agent_command = Some(agent.clone())).await;
    let (mut phone, _) = gw.connect("phone").await;
    // Sent again under the same id, it is taken now and runs.
    let echo = phone
        .request(default_lane(), send_frame("hello", "h-1"))
        .await
        .expect("taken after the restart");
    assert_eq!(echo.frame_type(), "message", "{:?}", echo.body);
    until_idle(&mut phone).await;
    assert_eq!(
        users(&mut phone).await,
        [("hello".into(), Some(MessageState::Answered))]
    );
    assert_eq!(prompts_run(&log), ["hello"], "it ran once");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sends_on_one_lane_from_several_connections_run_in_the_order_they_are_stored() {
    const DEVICES: usize = 3;
    const EACH: usize = 9;
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("prompts.log");
    let agent = recording_agent(&log);
    let gw = TestGateway::start_with(|c| c.agent_command = Some(agent.clone())).await;
    let (mut phone, _) = gw.connect("phone").await;
    // A turn runs, so that every message below waits in the lane's queue.
    phone
        .request(default_lane(), send_frame("slow", "s-0"))
        .await
        .expect("sent");
    let start = Arc::new(tokio::sync::Barrier::new(DEVICES));
    let mut senders = Vec::new();
    for d in 0..DEVICES {
        let (mut client, _) = gw.connect(&format!("device-{d}")).await;
        let start = start.clone();
        senders.push(tokio::spawn(async move {
            start.wait().await;
            for i in 0..EACH {
                let text = format!("from {d} number {i}");
                let echo = client
                    .request(default_lane(), send_frame(&text, &format!("{d}-{i}")))
                    .await
                    .expect("queued");
                assert_eq!(echo.frame_type(), "message");
            }
            client
        }));
    }
    for sender in senders {
        sender.await.unwrap();
    }
    // Every message is answered, each turn ending with agent.idle.
    let total = DEVICES * EACH + 1;
    let mut stored = Vec::new();
    for _ in 0..300 {
        stored = users(&mut phone).await;
        if stored
            .iter()
            .filter(|(_, s)| *s == Some(MessageState::Answered))
            .count()
            == total
        {
            break;
        }
        let _ = phone
            .wait_for_timeout(
                |e| e.frame_type() == "agent.idle",
                Duration::from_millis(200),
            )
            .await;
    }
    let order: Vec<String> = stored.iter().map(|(t, _)| t.clone()).collect();
    assert!(
        stored
            .iter()
            .all(|(_, s)| *s == Some(MessageState::Answered)),
        "{stored:?}"
    );
    assert_eq!(
        prompts_run(&log),
        order,
        "the lane ran them in the order they were stored"
    );
    gw.stop().await;
}
