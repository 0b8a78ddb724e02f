//! Many new chats answering their first message at once: every message gets its answer, or a
//! turn that cannot answer says why on every device. Through the real server and the demo agent
//! streaming 200 chunks as fast as it can in 50 chats at once, 10 rounds of new chats on one
//! gateway (each chat's first turn takes the spare session or opens one, and forks its session
//! for the checkpoint while the other chats stream).

mod common;

use std::time::Duration;

use common::*;
use iris_client::{Client, Event};
use iris_protocol::{Header, LaneRef, MessageState, Role, ServerFrame};

/// Chats answering at once in a round.
const LANES: usize = 50;
/// Rounds, each on new chats.
const ROUNDS: usize = 10;
/// The prompt: 200 chunks, no pause between them.
const PROMPT: &str = "bench 200";
/// The chunks in each answer.
const CHUNKS: usize = 200;
/// The longest a round may take before the test says which chats never answered.
const ROUND_LIMIT: Duration = Duration::from_secs(120);

/// What a device saw of its own chat's first turn.
#[derive(Debug, Default)]
struct Outcome {
    #[allow(dead_code)] // shown by the failure message
    chat: String,
    answer: Option<String>,
    state: Option<MessageState>,
    notes: Vec<String>,
    idle: bool,
}

/// A device makes a chat, shows only it, sends the chat's first message and reads until the
/// chat is idle again; returns what it saw there.
async fn first_turn(mut device: Client, name: String) -> Outcome {
    let chat = create_channel(&mut device, &name, None).await;
    let focus = vec![LaneRef {
        chat_id: chat.clone(),
        thread_id: None,
    }];
    device.focus(focus).await.expect("focus.set");
    let echo = send(&mut device, Header::lane(&chat, None), PROMPT, false).await;
    let sent = message_id(&echo);
    let mut out = Outcome {
        chat: chat.clone(),
        ..Outcome::default()
    };
    while !out.idle {
        let event: Event = match device.next_event_timeout(ROUND_LIMIT).await {
            Ok(e) => e,
            Err(_) => break,
        };
        if event.header.chat_id.as_deref() != Some(chat.as_str()) {
            continue;
        }
        match event.body {
            ServerFrame::MessageStop(s) => out.answer = Some(s.final_text),
            ServerFrame::Message(m) if m.role == Role::System => out.notes.push(m.text),
            ServerFrame::MessageState(s) if s.message_id == sent => out.state = Some(s.state),
            ServerFrame::AgentIdle(_) => out.idle = true,
            _ => {}
        }
    }
    // Closed before the next round connects, within the connections one address may hold.
    let _ = device.close().await;
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_new_chats_streaming_at_once_all_answer_round_after_round() {
    let gw = TestGateway::start_demo().await;
    let (mut maker, _) = gw.connect("maker").await;
    // The agent is running and its spare session open before the first round, as on a gateway
    // that has served a while.
    turn(&mut maker, default_lane(), "hello").await;
    for round in 0..ROUNDS {
        let mut devices = Vec::with_capacity(LANES);
        for i in 0..LANES {
            let mut opts = gw.options(&format!("r{round}-dev{i}"));
            opts.focus = Some(Vec::new());
            let (mut device, _) = Client::connect(opts).await.expect("connect");
            device.next_event().await.expect("status online");
            devices.push(device);
        }
        // Every device makes its chat and sends in it at once.
        let tasks: Vec<_> = devices
            .into_iter()
            .enumerate()
            .map(|(i, d)| tokio::spawn(first_turn(d, format!("r{round} chat {i}"))))
            .collect();
        let mut unanswered = Vec::new();
        for task in tasks {
            let out = task.await.expect("device task");
            // Every chunk the agent streamed is in the answer: 200 send times.
            let answered = out.state == Some(MessageState::Answered)
                && out
                    .answer
                    .as_deref()
                    .is_some_and(|a| a.split_whitespace().count() == CHUNKS);
            if !answered {
                unanswered.push(out);
            }
        }
        assert!(
            unanswered.is_empty(),
            "round {round}: {} of {LANES} first messages not answered: {unanswered:#?}",
            unanswered.len()
        );
    }
    gw.stop().await;
}
