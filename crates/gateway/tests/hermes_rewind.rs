//! Regenerate and edit against the real Hermes agent (hermes-agent 0.19.0 over ACP; its LLM a
//! scripted fake in a loopback-only network namespace). Hermes cannot close sessions, so the
//! gateway never forks it for a checkpoint: a take-back opens a new session whose first prompt
//! carries the conversation before the message as text. The model is asked again with that
//! conversation, never with the try taken back, and the answers replaced stay in the
//! transcript, marked, for every device.
//!
//! Ignored where no Hermes venv or network namespaces exist (the build script looks); never
//! under CI.

mod common;
#[path = "common/hermes.rs"]
mod hermes;

use std::time::Duration;

use common::*;
use hermes::HermesEnv;
use iris_client::{Client, Event};
use iris_protocol::{ClientFrame, MessageRetry, MessageSend, MessageState, ServerFrame};
use serde_json::{json, Value};

/// One gateway, one Hermes, four turns: well inside a minute.
const TEST_BUDGET: Duration = Duration::from_secs(90);

/// The user texts of a request to the model, in order.
fn user_texts(request: &Value) -> Vec<String> {
    let text = |content: &Value| match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    };
    request["body"]["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["role"] == "user")
                .map(|m| text(&m["content"]))
                .collect()
        })
        .unwrap_or_default()
}

/// The user texts of the model's newest turn request.
fn last_turn_users(env: &HermesEnv) -> Vec<String> {
    let requests = env.turn_requests();
    user_texts(requests.last().expect("the model was asked"))
}

fn answer(events: &[Event]) -> (String, String, bool) {
    events
        .iter()
        .find_map(|e| match &e.body {
            ServerFrame::MessageStop(s) => Some((
                s.message_id.clone(),
                s.final_text.clone(),
                s.runtime.as_ref().is_some_and(|r| r.rewind),
            )),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no message.stop in {:?}", types(events)))
}

async fn request(client: &mut Client, frame: ClientFrame) {
    client.request(default_lane(), frame).await.expect("taken");
}

#[tokio::test]
#[cfg_attr(
    lacks_hermes_venv,
    ignore = "needs a Hermes venv: IRIS_HERMES_VENV, or .venv in the checkout (README, Connecting Hermes)"
)]
#[cfg_attr(
    lacks_hermes_netns,
    ignore = "needs network namespaces: unshare (util-linux) and ip (iproute2)"
)]
async fn hermes_regenerates_and_edits_from_before_the_message() {
    let env = HermesEnv::new(&json!([]));
    let (command, cwd) = (env.command_line(), env.work.clone());
    let body = async {
        let gw = TestGateway::start_with(move |c| {
            c.agent_command = Some(command);
            c.agent_cwd = Some(cwd);
        })
        .await;
        let (mut phone, _) = gw.connect("phone").await;
        let (mut laptop, _) = gw.connect("laptop").await;
        turn(
            &mut phone,
            default_lane(),
            "remember: the door code is 4711",
        )
        .await;
        let echo = send(&mut phone, default_lane(), "what is the door code?", false).await;
        let asked = message_id(&echo);
        let (first, text, rewind) = answer(&until_idle(&mut phone).await);
        assert_eq!(text, "OK: what is the door code?");
        assert!(rewind, "the answer can be taken back");

        // Regenerate: the model sees the first turn and the question once, not the first try.
        let retry = MessageRetry {
            message_id: asked.clone(),
            rewind: true,
            ..Default::default()
        };
        request(&mut phone, ClientFrame::MessageRetry(retry)).await;
        let events = until_idle(&mut phone).await;
        let (second, text, _) = answer(&events);
        assert!(text.ends_with("what is the door code?"), "{text}");
        assert_eq!(replaced(&events), [first.as_str()]);
        let users = last_turn_users(&env);
        assert_eq!(users.len(), 1, "a new session: {users:?}");
        assert!(
            users[0].contains("User: remember: the door code is 4711\n\nAssistant: OK: remember")
                && users[0].ends_with("\n\nwhat is the door code?"),
            "the regenerated turn starts from before the question: {users:?}"
        );
        assert!(!users[0].contains("Assistant: OK: what is"), "{users:?}");

        // Edit: the model sees the edit in place of the question, and nothing of it.
        let edit = MessageSend {
            text: "what was the code again?".into(),
            edit_of: Some(asked.clone()),
            ..Default::default()
        };
        request(&mut phone, ClientFrame::MessageSend(edit)).await;
        let events = until_idle(&mut phone).await;
        let (_, text, _) = answer(&events);
        assert!(text.ends_with("what was the code again?"), "{text}");
        let mut marked = replaced(&events);
        marked.sort();
        let mut expected = vec![second.clone(), asked.clone()];
        expected.sort();
        assert_eq!(marked, expected);
        let users = last_turn_users(&env);
        assert_eq!(users.len(), 1, "{users:?}");
        assert!(
            users[0].contains("User: remember: the door code is 4711")
                && users[0].ends_with("\n\nwhat was the code again?")
                && !users[0].contains("what is the door code?"),
            "{users:?}"
        );

        // The next turn continues the branch that stands.
        turn(&mut phone, default_lane(), "thanks").await;
        let users = last_turn_users(&env);
        assert_eq!(users.len(), 2, "{users:?}");
        assert!(users[0].ends_with("what was the code again?"));
        assert_eq!(users[1], "thanks");

        // Another device's history keeps the replaced messages, marked.
        let history = lane_history(&mut laptop, default_lane()).await;
        for id in [&first, &second, &asked] {
            let m = history.iter().find(|m| &m.message_id == id).expect("kept");
            assert_eq!(m.state, Some(MessageState::Replaced), "{id}");
        }
        gw.stop().await;
    };
    if tokio::time::timeout(TEST_BUDGET, body).await.is_err() {
        panic!(
            "test exceeded its time budget\n--- Hermes logs ---\n{}",
            env.hermes_logs()
        );
    }
}
