//! A turn that ends without the answer the user waits for says so: every device gets an answer
//! marked with how the turn ended (which Iris Web offers Retry on), a system note that says
//! what failed, and the message's receipt; the gateway logs it at WARN with the lane, the agent
//! and the cause. Through the real server (as a child process, for its log) and the demo agent.

#[path = "common/binary.rs"]
mod binary;

use binary::*;
use iris_client::{Client, Event};
use iris_protocol::{
    ClientFrame, Empty, Header, MessageSend, MessageState, Role, ServerFrame, TurnEnd,
};

/// Sends `text` to the default chat and returns its id.
async fn send(phone: &mut Client, text: &str) -> String {
    let frame = ClientFrame::MessageSend(MessageSend {
        text: text.into(),
        ..Default::default()
    });
    let echo = phone
        .request(Header::lane("default", None), frame)
        .await
        .expect("message.send answered");
    match echo.body {
        ServerFrame::Message(m) => m.message_id,
        other => panic!("expected the message, got {other:?}"),
    }
}

/// Every frame up to the lane's `agent.idle`.
async fn until_idle(device: &mut Client) -> Vec<Event> {
    let mut seen = Vec::new();
    loop {
        let e = device.next_event().await.expect("a frame");
        let idle = e.frame_type() == "agent.idle";
        seen.push(e);
        if idle {
            return seen;
        }
    }
}

/// What a device saw of a turn: the answer to `prompt` (its text and how it ended), the
/// system notes, and the prompt's last receipt.
fn outcome(
    events: &[Event],
    prompt: &str,
) -> (Option<(String, TurnEnd)>, Vec<String>, MessageState) {
    let mut answer = None;
    let mut notes = Vec::new();
    let mut state = None;
    for e in events {
        match &e.body {
            ServerFrame::Message(m) if m.role == Role::System => notes.push(m.text.clone()),
            ServerFrame::Message(m) if m.reply_to.as_deref() == Some(prompt) => {
                answer = Some((
                    m.text.clone(),
                    m.ended.expect("an answer says how it ended"),
                ))
            }
            ServerFrame::MessageStop(s) => {
                answer = Some((s.final_text.clone(), s.ended.expect("ended")));
            }
            ServerFrame::MessageState(s) if s.message_id == prompt => state = Some(s.state),
            _ => {}
        }
    }
    (answer, notes, state.expect("the message's receipt"))
}

#[tokio::test]
async fn an_agent_that_ends_its_turn_saying_nothing_fails_it_visibly_on_every_device() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = serve(&["--listen", "127.0.0.1:0", "--agent", "demo"]);
    cmd.arg("--data-dir")
        .arg(dir.path())
        .env("IRIS_TOKEN", TOKEN)
        .env("IRIS_LOG", "info");
    let gw = Running::start(cmd).await;
    let (mut phone, _) = Client::connect(gw.options(TOKEN, "phone")).await.unwrap();
    let (mut laptop, _) = Client::connect(gw.options(TOKEN, "laptop")).await.unwrap();

    // `bench 0`: the demo agent streams no chunk and ends its turn.
    let prompt = send(&mut phone, "bench 0").await;
    for device in [&mut phone, &mut laptop] {
        let events = until_idle(device).await;
        let (answer, notes, state) = outcome(&events, &prompt);
        assert_eq!(
            answer,
            Some((String::new(), TurnEnd::AgentFailed)),
            "an empty answer marked failed, where Retry is offered: {events:?}"
        );
        assert_eq!(notes, ["The agent ended its turn without an answer."]);
        assert_eq!(state, MessageState::Failed);
    }

    // Stopped before any text: the answer says Stopped, and so does the receipt.
    let prompt = send(&mut phone, "hang").await;
    phone
        .wait_for(|e| e.frame_type() == "read.receipt")
        .await
        .unwrap();
    phone
        .request(
            Header::lane("default", None),
            ClientFrame::AgentStop(Empty {}),
        )
        .await
        .expect("agent.stop answered");
    for device in [&mut phone, &mut laptop] {
        let events = until_idle(device).await;
        let (answer, notes, state) = outcome(&events, &prompt);
        assert_eq!(
            answer,
            Some((String::new(), TurnEnd::Stopped)),
            "{events:?}"
        );
        assert!(notes.is_empty(), "a stop is the user's own: {notes:?}");
        assert_eq!(state, MessageState::Stopped);
    }
    drop((phone, laptop));
    let log = gw.stop().await;
    let warning = log
        .lines()
        .find(|l| l.contains("a turn ended without an answer"))
        .unwrap_or_else(|| panic!("the failure is logged:\n{log}"));
    assert!(warning.contains("WARN"), "{warning}");
    assert!(warning.contains("default"), "names the lane: {warning}");
    assert!(warning.contains("agent=demo"), "names the agent: {warning}");
    assert!(
        warning.contains("without an answer"),
        "says the cause: {warning}"
    );
    assert_eq!(
        log.matches("a turn ended without an answer").count(),
        1,
        "a stop is not a failure:\n{log}"
    );
}
