//! Exactly once from the person to the agent: a `client_id` makes `message.send` idempotent on
//! any connection and across restarts, every user message carries its receipt (`message.state`,
//! and `state` in history), and the messages waiting when the gateway went down run after it
//! starts again, in order, once.

mod common;

use std::path::Path;
use std::time::Duration;

use common::prompt_log::{prompts_run, recording_agent};
use common::*;
use iris_client::{Client, ClientError, Event};
use iris_protocol::{
    ClientFrame, ErrorCode, Message, MessageSend, MessageState, Role, ServerFrame,
};

fn send_frame(text: &str, client_id: Option<&str>) -> ClientFrame {
    ClientFrame::MessageSend(MessageSend {
        text: text.into(),
        client_id: client_id.map(Into::into),
        ..Default::default()
    })
}

async fn send_with_id(client: &mut Client, text: &str, client_id: &str) -> Event {
    client
        .request(default_lane(), send_frame(text, Some(client_id)))
        .await
        .expect("message.send answered")
}

fn refused(result: Result<Event, ClientError>) -> (ErrorCode, String) {
    match result {
        Err(ClientError::Server { code, message, .. }) => (code, message),
        other => panic!("expected an error, got {other:?}"),
    }
}

/// The user messages of the default lane's history with their states.
async fn user_states(client: &mut Client) -> Vec<(String, Option<MessageState>, Option<String>)> {
    lane_history(client, default_lane())
        .await
        .into_iter()
        .filter(|m| m.role == Role::User)
        .map(|m| (m.text, m.state, m.client_id))
        .collect()
}

fn answers(history: &[Message]) -> Vec<String> {
    history
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .map(|m| m.text.clone())
        .collect()
}

#[tokio::test]
async fn the_same_client_id_is_taken_once_on_any_connection_and_after_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("prompts.log");
    let agent = recording_agent(&log);
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let gw = TestGateway::start_in(&data, |c| c.agent_command = Some(agent.clone())).await;
    let (mut phone, _) = gw.connect("phone").await;

    let echo = send_with_id(&mut phone, "hello once", "c-1").await;
    let ServerFrame::Message(first) = &echo.body else {
        panic!("expected the echo, got {:?}", echo.body);
    };
    assert_eq!(first.client_id.as_deref(), Some("c-1"));
    // The lane was idle: the message runs at once, and its echo says so.
    assert_eq!(first.state, Some(MessageState::Running));
    let first_cursor = echo.cursor.expect("the echo's cursor is known");
    let turn = until_idle(&mut phone).await;
    let states: Vec<MessageState> = turn
        .iter()
        .filter_map(|e| match &e.body {
            ServerFrame::MessageState(s) if s.message_id == first.message_id => Some(s.state),
            _ => None,
        })
        .collect();
    assert_eq!(states, [MessageState::Answered]);

    // The same id again, on this connection and on the device's next one: the first message,
    // and nothing runs.
    for round in 0..2 {
        if round == 1 {
            phone = gw.connect("phone").await.0;
        }
        let again = send_with_id(&mut phone, "hello once", "c-1").await;
        let ServerFrame::Ack(ack) = &again.body else {
            panic!("expected ack, got {:?}", again.body);
        };
        assert!(ack.duplicate);
        assert_eq!(ack.message_id.as_deref(), Some(first.message_id.as_str()));
        assert_eq!(ack.cursor, Some(first_cursor));
        let message = ack.message.as_ref().expect("the first message");
        assert_eq!(message.state, Some(MessageState::Answered));
        assert!(!again.is_durable(), "a duplicate's answer is not counted");
    }
    // Other content under the same id changes nothing.
    let (code, text) = refused(
        phone
            .request(default_lane(), send_frame("other words", Some("c-1")))
            .await,
    );
    assert_eq!(code, ErrorCode::BadRequest);
    assert!(text.contains("client_id"), "{text}");
    let long = "x".repeat(65);
    let (code, _) = refused(
        phone
            .request(default_lane(), send_frame("hi", Some(&long)))
            .await,
    );
    assert_eq!(code, ErrorCode::BadRequest);
    // Another device may use the same id for its own message.
    let (mut laptop, _) = gw.connect("laptop").await;
    let echo = send_with_id(&mut laptop, "hello from the laptop", "c-1").await;
    assert_eq!(echo.frame_type(), "message");
    until_idle(&mut laptop).await;
    gw.stop().await;

    // After a restart the id is still taken.
    let gw = TestGateway::start_in(&data, |c| c.agent_command = Some(agent.clone())).await;
    let (mut phone, _) = gw.connect("phone").await;
    let again = send_with_id(&mut phone, "hello once", "c-1").await;
    assert_eq!(again.frame_type(), "ack");
    // Without a client_id the same text is simply a new message.
    send(&mut phone, default_lane(), "hello once", false).await;
    until_idle(&mut phone).await;

    let users = user_states(&mut phone).await;
    assert_eq!(
        users,
        [
            (
                "hello once".into(),
                Some(MessageState::Answered),
                Some("c-1".into())
            ),
            (
                "hello from the laptop".into(),
                Some(MessageState::Answered),
                Some("c-1".into())
            ),
            ("hello once".into(), Some(MessageState::Answered), None),
        ]
    );
    assert_eq!(
        prompts_run(&log),
        ["hello once", "hello from the laptop", "hello once"]
    );
    // A sync from the start replays the echo with its client_id and the receipts.
    let replay = phone.sync(0).await.unwrap();
    let echoed = replay.frames.iter().find_map(|e| match &e.body {
        ServerFrame::Message(m) if m.message_id == first.message_id => Some(m.client_id.clone()),
        _ => None,
    });
    assert_eq!(echoed, Some(Some("c-1".into())));
    gw.stop().await;
}

/// Sends `slow` (a turn of about a second) and two messages that wait behind it.
async fn busy_lane_with_two_waiting(phone: &mut Client) -> String {
    let slow = send_with_id(phone, "slow", "s-1").await;
    // Its first text: the agent has taken the prompt (and recorded it).
    until(phone, |e| e.frame_type() == "message.update").await;
    for (text, id) in [("first waiting", "w-1"), ("second waiting", "w-2")] {
        let echo = send_with_id(phone, text, id).await;
        let ServerFrame::Message(m) = &echo.body else {
            panic!("expected the echo");
        };
        assert_eq!(m.state, Some(MessageState::Queued));
    }
    message_id(&slow)
}

/// After the restart: both waiting messages are answered in order, the interrupted one is not
/// run again, and a note says what happened.
async fn waiting_messages_ran_once(gw: &TestGateway, log: &Path, slow_end: MessageState) {
    let (mut phone, _) = gw.connect("phone").await;
    let mut answered = 0;
    let mut history = Vec::new();
    for _ in 0..200 {
        history = lane_history(&mut phone, default_lane()).await;
        answered = history
            .iter()
            .filter(|m| m.role == Role::User && m.state == Some(MessageState::Answered))
            .count();
        if answered == 2 {
            break;
        }
        phone
            .wait_for_timeout(
                |e| e.frame_type() == "agent.idle",
                Duration::from_millis(200),
            )
            .await
            .ok();
    }
    assert_eq!(answered, 2, "history: {history:?}");
    let users: Vec<(String, Option<MessageState>)> = history
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| (m.text.clone(), m.state))
        .collect();
    assert_eq!(
        users,
        [
            ("slow".into(), Some(slow_end)),
            ("first waiting".into(), Some(MessageState::Answered)),
            ("second waiting".into(), Some(MessageState::Answered)),
        ]
    );
    assert_eq!(answers(&history).len(), 3, "{history:?}");
    assert_eq!(
        prompts_run(log),
        ["slow", "first waiting", "second waiting"],
        "every prompt ran once"
    );
    let notes: Vec<&str> = history
        .iter()
        .filter(|m| m.role == Role::System)
        .map(|m| m.text.as_str())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("“first waiting”, “second waiting”")),
        "{notes:?}"
    );
}

#[tokio::test]
async fn messages_waiting_at_a_graceful_stop_run_after_the_restart_in_order_once() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("prompts.log");
    let agent = recording_agent(&log);
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let gw = TestGateway::start_in(&data, |c| c.agent_command = Some(agent.clone())).await;
    let (mut phone, _) = gw.connect("phone").await;
    busy_lane_with_two_waiting(&mut phone).await;
    gw.stop().await;
    let gw = TestGateway::start_in(&data, |c| c.agent_command = Some(agent.clone())).await;
    // A graceful stop ends the running answer as the lane closes it.
    let (mut peek, _) = gw.connect("peek").await;
    let slow_end = user_states(&mut peek).await[0].1.expect("a state");
    assert!(
        matches!(slow_end, MessageState::Stopped | MessageState::Interrupted),
        "{slow_end:?}"
    );
    waiting_messages_ran_once(&gw, &log, slow_end).await;
    gw.stop().await;
}

/// The gateway binary with a recording demo agent, on `dir`, with `env` set.
async fn spawn_gateway(dir: &Path, log: &Path, env: &[(&str, &str)]) -> binary::Running {
    let agent = recording_agent(log);
    let data = dir.to_str().expect("utf-8 path");
    let args = [
        "--listen",
        "127.0.0.1:0",
        "--token",
        TOKEN,
        "--data-dir",
        data,
    ];
    let mut cmd = binary::serve(&[&args[..], &["--agent", &agent]].concat());
    cmd.envs(env.iter().copied()).env("IRIS_LOG", "error");
    binary::Running::start(cmd).await
}

#[tokio::test]
async fn messages_waiting_at_a_kill_run_after_the_restart_in_order_once() {
    let tmp = tempfile::tempdir().unwrap();
    // Beside the data dir, not in its parent: the confined agent creates no file there.
    let logs = tmp.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let log = logs.join("prompts.log");
    let data = tmp.path().join("data");
    let binary::Running { mut child, url, .. } = spawn_gateway(&data, &log, &[]).await;
    let opts = iris_client::ConnectOptions::new(url, TOKEN, "phone");
    let (mut phone, _) = Client::connect(opts).await.expect("connect");
    let slow = busy_lane_with_two_waiting(&mut phone).await;
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    drop(phone);

    let gw = TestGateway::start_in(&data, |c| c.agent_command = Some(recording_agent(&log))).await;
    let (mut peek, _) = gw.connect("peek").await;
    let history = lane_history(&mut peek, default_lane()).await;
    let cut = history
        .iter()
        .find(|m| m.role == Role::Assistant && m.reply_to.as_deref() == Some(slow.as_str()))
        .expect("the interrupted answer");
    assert_eq!(cut.ended, Some(iris_protocol::TurnEnd::CutOff));
    waiting_messages_ran_once(&gw, &log, MessageState::Interrupted).await;
    gw.stop().await;
}

/// The prompts the agent ran once `log` holds `text` (the agent took it).
async fn once_the_agent_took(log: &Path, text: &str) -> Vec<String> {
    for _ in 0..3000 {
        let run = prompts_run(log);
        if run.iter().any(|p| p == text) {
            return run;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the agent never got {text:?}: {:?}", prompts_run(log));
}

#[tokio::test]
async fn a_waiting_message_leaves_the_queue_before_the_agent_gets_it() {
    // Every commit takes 100 ms, as on a slow disk: the window between handing a waiting
    // message to the agent and storing that its turn began is wide open, if there is one.
    let tmp = tempfile::tempdir().unwrap();
    let logs = tmp.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let log = logs.join("prompts.log");
    let data = tmp.path().join("data");
    let slow_disk = [(iris_store::COMMIT_DELAY_VAR, "100")];
    let binary::Running { mut child, url, .. } = spawn_gateway(&data, &log, &slow_disk).await;
    let opts = iris_client::ConnectOptions::new(url, TOKEN, "phone");
    let (mut phone, _) = Client::connect(opts).await.expect("connect");
    send_with_id(&mut phone, "slow", "s-1").await;
    let echo = send_with_id(&mut phone, "waiting", "w-1").await;
    let waiting = message_id(&echo);
    // Killed the moment the agent has the waiting prompt.
    let before = once_the_agent_took(&log, "waiting").await;
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    drop(phone);
    assert_eq!(before, ["slow", "waiting"]);

    let gw = TestGateway::start_in(&data, |c| c.agent_command = Some(recording_agent(&log))).await;
    let (mut peek, _) = gw.connect("peek").await;
    let state = user_states(&mut peek)
        .await
        .into_iter()
        .find(|(_, _, id)| id.as_deref() == Some("w-1"))
        .and_then(|(_, state, _)| state);
    assert_eq!(
        state,
        Some(MessageState::Interrupted),
        "{waiting}: the agent had it, so it is not handed over again"
    );
    // A message sent now runs: had the waiting one been handed over again, it would run first.
    send_with_id(&mut peek, "after", "a-1").await;
    once_the_agent_took(&log, "after").await;
    assert_eq!(
        prompts_run(&log),
        ["slow", "waiting", "after"],
        "each ran once"
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_device_joining_mid_answer_learns_the_running_turn_and_gets_its_updates() {
    let gw = TestGateway::start_demo().await;
    let (mut phone, ack) = gw.connect("phone").await;
    assert!(ack.running.is_empty(), "{:?}", ack.running);
    let question = send_with_id(&mut phone, "slow", "q-1").await;
    let started = until(&mut phone, |e| e.frame_type() == "message.start").await;
    let Some(ServerFrame::MessageStart(start)) = started.last().map(|e| &e.body) else {
        panic!("expected message.start");
    };
    assert_eq!(
        start.reply_to.as_deref(),
        Some(message_id(&question).as_str())
    );

    let (mut laptop, ack) = gw.connect("laptop").await;
    let [running] = ack.running.as_slice() else {
        panic!("one running turn expected: {:?}", ack.running);
    };
    assert_eq!(running.chat_id, "default");
    assert_eq!(
        running.message_id.as_deref(),
        Some(start.message_id.as_str())
    );
    assert_eq!(
        running.reply_to.as_deref(),
        Some(message_id(&question).as_str())
    );
    // Updates of that bubble reach the newcomer, whose cursor is past its message.start.
    let updates = until(
        &mut laptop,
        |e| matches!(&e.body, ServerFrame::MessageUpdate(u) if u.message_id == start.message_id),
    )
    .await;
    assert!(!updates.is_empty());
    until_idle(&mut laptop).await;
    let (_, ack) = gw.connect("tablet").await;
    assert!(ack.running.is_empty(), "{:?}", ack.running);
}

#[tokio::test]
async fn a_retry_and_a_steer_under_a_client_id_run_once() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("prompts.log");
    let agent = recording_agent(&log);
    let gw = TestGateway::start_with(|c| c.agent_command = Some(agent.clone())).await;
    let (mut phone, _) = gw.connect("phone").await;
    let echo = send_with_id(&mut phone, "hello", "m-1").await;
    until_idle(&mut phone).await;
    let retry = |cid: &str| {
        ClientFrame::MessageRetry(iris_protocol::MessageRetry {
            message_id: message_id(&echo),
            client_id: Some(cid.into()),
            ..Default::default()
        })
    };
    let first = phone.request(default_lane(), retry("r-1")).await.unwrap();
    assert_eq!(first.frame_type(), "ack");
    let turn = until_idle(&mut phone).await;
    let states: Vec<MessageState> = turn
        .iter()
        .filter_map(|e| match &e.body {
            ServerFrame::MessageState(s) => Some(s.state),
            _ => None,
        })
        .collect();
    assert_eq!(
        states,
        [
            MessageState::Queued,
            MessageState::Running,
            MessageState::Answered
        ]
    );
    let again = phone.request(default_lane(), retry("r-1")).await.unwrap();
    let ServerFrame::Ack(ack) = &again.body else {
        panic!("expected ack");
    };
    assert!(ack.duplicate);
    assert_eq!(ack.message_id, Some(message_id(&echo)));

    // A steer: the demo agent has no steer command, so the turn stops and the text runs next.
    send_with_id(&mut phone, "slow", "m-2").await;
    until(&mut phone, |e| e.frame_type() == "message.start").await;
    let steer = ClientFrame::AgentSteer(iris_protocol::AgentSteer {
        text: "focus".into(),
        client_id: Some("st-1".into()),
    });
    let acked = phone.request(default_lane(), steer.clone()).await.unwrap();
    assert!(matches!(&acked.body, ServerFrame::Ack(a) if !a.duplicate));
    let again = phone.request(default_lane(), steer).await.unwrap();
    assert!(matches!(&again.body, ServerFrame::Ack(a) if a.duplicate));
    until(
        &mut phone,
        |e| matches!(&e.body, ServerFrame::MessageStop(s) if s.final_text.contains("focus")),
    )
    .await;
    until_idle(&mut phone).await;
    assert_eq!(prompts_run(&log), ["hello", "hello", "slow", "focus"]);
}
