//! Taking a turn back, through the real server and the demo agent (which forks sessions, and
//! whose `recall` keyword names the earlier turns its session holds): regenerate the newest
//! answer (`message.retry {rewind:true}`) and edit the message it answers (`message.send
//! {edit_of}`). The agent's session goes back to before that message; the answers replaced stay
//! in the transcript, marked `replaced`, on every device and after a reload.

mod common;

use common::prompt_log::{prompts_run, recording_agent};
use common::*;
use iris_client::{Client, ClientError, Event};
use iris_protocol::{
    ClientFrame, ErrorCode, MessageRetry, MessageSend, MessageState, Role, ServerFrame,
};

fn no_spare(c: &mut iris_gateway::Config) {
    c.agent_command = Some(demo_agent());
    c.spare_session = false;
}

/// Whether the turn's answer says it can be taken back.
fn rewindable(events: &[Event]) -> bool {
    events.iter().any(|e| match &e.body {
        ServerFrame::MessageStop(s) => s.runtime.as_ref().is_some_and(|r| r.rewind),
        ServerFrame::Message(m) if m.role == Role::Assistant => {
            m.runtime.as_ref().is_some_and(|r| r.rewind)
        }
        _ => false,
    })
}

/// The answer's message id.
fn answer_id(events: &[Event]) -> String {
    events
        .iter()
        .find_map(|e| match &e.body {
            ServerFrame::MessageStop(s) => Some(s.message_id.clone()),
            ServerFrame::Message(m) if m.role == Role::Assistant => Some(m.message_id.clone()),
            _ => None,
        })
        .expect("an answer")
}

async fn regenerate(client: &mut Client, message_id: &str) -> Result<Event, ClientError> {
    let frame = ClientFrame::MessageRetry(MessageRetry {
        message_id: message_id.into(),
        rewind: true,
        ..Default::default()
    });
    client.request(default_lane(), frame).await
}

async fn edit(
    client: &mut Client,
    edit_of: &str,
    text: &str,
    client_id: Option<&str>,
) -> Result<Event, ClientError> {
    let frame = ClientFrame::MessageSend(MessageSend {
        text: text.into(),
        edit_of: Some(edit_of.into()),
        client_id: client_id.map(str::to_owned),
        ..Default::default()
    });
    client.request(default_lane(), frame).await
}

fn refused_with(result: Result<Event, ClientError>) -> ErrorCode {
    match result {
        Err(ClientError::Server { code, .. }) => code,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_regenerated_answer_comes_from_the_session_as_it_was_before_and_the_old_one_stays() {
    let gw = TestGateway::start_with(no_spare).await;
    let (mut phone, _) = gw.connect("phone").await;
    let (mut laptop, _) = gw.connect("laptop").await;
    let first = turn(&mut phone, default_lane(), "alpha").await;
    assert!(rewindable(&first), "the first turn can be taken back");
    let echo = send(&mut phone, default_lane(), "recall beta", false).await;
    let asked = message_id(&echo);
    let second = until_idle(&mut phone).await;
    assert_eq!(final_text(&second), "Recall: 1 earlier turns: alpha");
    assert!(rewindable(&second));
    let old = answer_id(&second);

    regenerate(&mut phone, &asked)
        .await
        .expect("regenerate ack");
    let again = until_idle(&mut phone).await;
    assert_eq!(
        final_text(&again),
        "Recall: 1 earlier turns: alpha",
        "the agent's session no longer holds the first try"
    );
    assert_eq!(replaced(&again), [old.as_str()]);
    assert_ne!(answer_id(&again), old);
    let seen = until(&mut laptop, |e| {
        replaced(std::slice::from_ref(e)) == [old.clone()]
    })
    .await;
    assert!(!seen.is_empty(), "the other device is told too");

    // The checkpoint serves any number of tries.
    let newer = answer_id(&again);
    regenerate(&mut phone, &asked)
        .await
        .expect("second regenerate");
    let third = until_idle(&mut phone).await;
    assert_eq!(final_text(&third), "Recall: 1 earlier turns: alpha");
    assert_eq!(replaced(&third), [newer.as_str()]);

    // A later turn sees the branch the conversation took.
    let later = turn(&mut phone, default_lane(), "recall gamma").await;
    assert_eq!(
        final_text(&later),
        "Recall: 2 earlier turns: alpha / recall beta"
    );

    // After a reload the replaced answers are still there, marked.
    let history = lane_history(&mut laptop, default_lane()).await;
    for id in [&old, &newer] {
        let m = history.iter().find(|m| &m.message_id == id).expect("kept");
        assert_eq!(m.state, Some(MessageState::Replaced), "{id}");
    }
    gw.stop().await;
}

#[tokio::test]
async fn an_edit_replaces_the_message_and_its_answer_and_the_agent_sees_only_the_edit() {
    let gw = TestGateway::start_with(no_spare).await;
    let (mut phone, _) = gw.connect("phone").await;
    turn(&mut phone, default_lane(), "alpha").await;
    let echo = send(&mut phone, default_lane(), "recall typo", false).await;
    let typo = message_id(&echo);
    let answered = until_idle(&mut phone).await;
    let old = answer_id(&answered);

    let sent = edit(&mut phone, &typo, "recall fixed", Some("e-1"))
        .await
        .expect("edit echo");
    let ServerFrame::Message(m) = &sent.body else {
        panic!("expected the edited message's echo, got {:?}", sent.body);
    };
    assert_eq!(m.text, "recall fixed");
    let turn_events = until_idle(&mut phone).await;
    assert_eq!(final_text(&turn_events), "Recall: 1 earlier turns: alpha");
    let mut gone = replaced(&turn_events);
    gone.sort();
    let mut expected = vec![old, typo.clone()];
    expected.sort();
    assert_eq!(gone, expected, "the edited message and its answer");

    // The same edit again under its client_id runs nothing.
    let dup = edit(&mut phone, &typo, "recall fixed", Some("e-1"))
        .await
        .expect("duplicate ack");
    assert_eq!(dup.frame_type(), "ack");
    let next = turn(&mut phone, default_lane(), "recall after").await;
    assert_eq!(
        final_text(&next),
        "Recall: 2 earlier turns: alpha / recall fixed"
    );
    gw.stop().await;
}

#[tokio::test]
async fn the_first_answer_of_a_chat_can_be_regenerated_in_a_new_session() {
    let gw = TestGateway::start_with(no_spare).await;
    let (mut phone, _) = gw.connect("phone").await;
    let echo = send(&mut phone, default_lane(), "recall first", false).await;
    let first = until_idle(&mut phone).await;
    assert_eq!(final_text(&first), "Recall: 0 earlier turns");
    regenerate(&mut phone, &message_id(&echo))
        .await
        .expect("ack");
    let again = until_idle(&mut phone).await;
    assert_eq!(final_text(&again), "Recall: 0 earlier turns");
    assert_eq!(replaced(&again), [answer_id(&first)]);
    gw.stop().await;
}

#[tokio::test]
async fn only_the_newest_turn_can_be_taken_back_and_bad_requests_change_nothing() {
    let gw = TestGateway::start_with(no_spare).await;
    let (mut phone, _) = gw.connect("phone").await;
    let one = message_id(&send(&mut phone, default_lane(), "one", false).await);
    let first = until_idle(&mut phone).await;
    turn(&mut phone, default_lane(), "two").await;

    assert_eq!(
        refused_with(regenerate(&mut phone, &one).await),
        ErrorCode::BadRequest,
        "an older turn"
    );
    assert_eq!(
        refused_with(edit(&mut phone, &one, "uno", None).await),
        ErrorCode::BadRequest
    );
    assert_eq!(
        refused_with(edit(&mut phone, "m_nope", "x", None).await),
        ErrorCode::NotFound
    );
    assert_eq!(
        refused_with(edit(&mut phone, &answer_id(&first), "x", None).await),
        ErrorCode::BadRequest,
        "an answer is not a user message"
    );
    assert_eq!(
        refused_with(edit(&mut phone, &one, "/status", None).await),
        ErrorCode::BadRequest,
        "a command cannot be an edit"
    );
    // While a turn runs, nothing can be taken back.
    let slow = message_id(&send(&mut phone, default_lane(), "linger", false).await);
    until(&mut phone, |e| e.frame_type() == "message.start").await;
    assert_eq!(
        refused_with(regenerate(&mut phone, &slow).await),
        ErrorCode::BadRequest
    );
    phone
        .request(default_lane(), ClientFrame::AgentStop(Default::default()))
        .await
        .expect("stop");
    until_idle(&mut phone).await;

    // Nothing of that was stored: the agent's session holds the turns that ran, once each.
    let recall = turn(&mut phone, default_lane(), "recall").await;
    assert_eq!(
        final_text(&recall),
        "Recall: 3 earlier turns: one / two / linger"
    );
    let history = lane_history(&mut phone, default_lane()).await;
    assert!(history
        .iter()
        .all(|m| m.state != Some(MessageState::Replaced)));
    assert!(history.iter().all(|m| m.text != "uno" && m.text != "x"));
    gw.stop().await;
}

#[tokio::test]
async fn an_agent_that_cannot_fork_regenerates_with_the_conversation_carried_over() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("prompts.log");
    let agent = recording_agent(&log).replacen("env ", "env DEMO_FORK=0 ", 1);
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let gw = TestGateway::start_in(&data, |c| {
        c.agent_command = Some(agent.clone());
        c.spare_session = false;
    })
    .await;
    let (mut phone, _) = gw.connect("phone").await;
    turn(&mut phone, default_lane(), "alpha").await;
    let echo = send(&mut phone, default_lane(), "recall beta", false).await;
    let second = until_idle(&mut phone).await;
    assert_eq!(final_text(&second), "Recall: 1 earlier turns: alpha");
    assert!(rewindable(&second), "offered without a fork");
    let old = answer_id(&second);

    regenerate(&mut phone, &message_id(&echo))
        .await
        .expect("regenerate ack");
    let again = until_idle(&mut phone).await;
    assert_eq!(
        final_text(&again),
        "Recall: 0 earlier turns",
        "a new session, without the try taken back"
    );
    assert_eq!(replaced(&again), [old.as_str()]);
    // It was given the conversation before the message as text, then the message.
    let prompts = prompts_run(&log);
    assert_eq!(prompts.len(), 3, "{prompts:?}");
    let replayed = &prompts[2];
    assert!(
        replayed.contains("User: alpha\n\nAssistant: Echo: alpha"),
        "{replayed}"
    );
    assert!(replayed.ends_with("recall beta"), "{replayed}");
    assert!(
        !replayed.contains("Recall: 1"),
        "the replaced answer is left out"
    );

    // A later turn continues in that session.
    let later = turn(&mut phone, default_lane(), "recall gamma").await;
    assert!(final_text(&later).starts_with("Recall: 1 earlier turns: "));
    gw.stop().await;
}

#[tokio::test]
async fn checkpoints_do_not_pile_up() {
    let gw = TestGateway::start_with(no_spare).await;
    let (mut phone, _) = gw.connect("phone").await;
    for i in 0..4 {
        let echo = send(&mut phone, default_lane(), &format!("turn {i}"), false).await;
        until_idle(&mut phone).await;
        regenerate(&mut phone, &message_id(&echo))
            .await
            .expect("ack");
        until_idle(&mut phone).await;
    }
    // The chat's session and the checkpoint before the running turn.
    let sessions = demo_sessions(&mut phone, "default").await;
    assert!(sessions.starts_with("Open sessions: 2,"), "{sessions}");
    gw.stop().await;
}

/// Whether the answer `id` in a history page says it can be taken back.
fn offers_rewind(history: &[iris_protocol::Message], id: &str) -> bool {
    let m = history
        .iter()
        .find(|m| m.message_id == id)
        .expect("in the page");
    m.runtime.as_ref().is_some_and(|r| r.rewind)
}

#[tokio::test]
async fn a_history_page_offers_to_take_back_the_newest_turn_only_and_none_after_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gw = TestGateway::start_in(dir.path(), no_spare).await;
    let (mut phone, _) = gw.connect("phone").await;
    let older = answer_id(&turn(&mut phone, default_lane(), "one").await);
    let newest = answer_id(&turn(&mut phone, default_lane(), "two").await);
    let history = lane_history(&mut phone, default_lane()).await;
    assert!(!offers_rewind(&history, &older), "an older turn");
    assert!(offers_rewind(&history, &newest), "the newest turn");
    drop(phone);
    gw.stop().await;

    // The checkpoints were in the gateway's memory: after a restart nothing can be taken back,
    // and a page no longer offers it.
    let gw = TestGateway::start_in(dir.path(), no_spare).await;
    let (mut phone, _) = gw.connect("phone").await;
    let history = lane_history(&mut phone, default_lane()).await;
    assert!(!offers_rewind(&history, &newest));
    let asked = history
        .iter()
        .find(|m| m.message_id == newest)
        .and_then(|m| m.reply_to.clone())
        .expect("the answer names its message");
    assert_eq!(
        refused_with(regenerate(&mut phone, &asked).await),
        ErrorCode::BadRequest
    );
    gw.stop().await;
}
