//! History carries the whole turn: an answer keeps its steps (commentary beats, tool calls, the
//! plan, picker outcomes) in order, for a device that never watched it stream, after a restart
//! and after the outbox was pruned; and a picker answered on one device is closed on every one.

mod common;

use std::time::Duration;

use common::*;
use iris_client::{Client, Event};
use iris_protocol::{
    AgentSteer, ClientFrame, Header, HistoryRequest, Message, PickerOutcome, Role, ServerFrame,
    Step,
};

async fn history(client: &mut Client, lane: Header) -> Vec<Message> {
    let reply = client
        .request(lane, ClientFrame::History(HistoryRequest::default()))
        .await
        .unwrap();
    match reply.body {
        ServerFrame::History(h) => h.messages,
        other => panic!("{other:?}"),
    }
}

/// A step as a line a user would read off its card.
fn card(step: &Step) -> String {
    match step {
        Step::Commentary { text } => format!("commentary: {}", text.trim()),
        Step::Plan { text } => format!("plan: {}", text.replace('\n', " | ")),
        Step::Tool(t) => format!(
            "tool {} {}: {} ok={:?}",
            t.index,
            t.name,
            t.preview.as_deref().unwrap_or(""),
            t.ok
        ),
        Step::Picker(p) => format!(
            "{} {:?} {:?} by {:?}",
            p.picker, p.outcome, p.value, p.by_device
        ),
    }
}

const EXPECTED: [&str; 6] = [
    "plan: Plan: | ☑ Read the request | ◐ Write the answer | ☐ Suggest next steps",
    "commentary: Let me run a command.",
    "tool 0 terminal: echo hello ok=Some(true)",
    "commentary: The command printed: hello.",
    "tool 1 terminal: rm -rf ./demo-scratch ok=Some(true)",
    "approval Some(Answered) Some(\"allow_once\") by Some(\"phone\")",
];

/// The lane as a fresh device reads it: (role, steering, text, steps as cards).
async fn transcript(gw: &TestGateway, device: &str) -> Vec<(Role, bool, String, Vec<String>)> {
    let (mut fresh, _) = gw.connect(device).await;
    history(&mut fresh, default_lane())
        .await
        .into_iter()
        .map(|m| {
            let steps = m.steps.iter().map(card).collect();
            (m.role, m.steering, m.text, steps)
        })
        .collect()
}

fn check(lines: &[(Role, bool, String, Vec<String>)]) {
    let texts: Vec<_> = lines.iter().map(|l| (l.0, l.1, l.2.as_str())).collect();
    let asked = lines
        .iter()
        .position(|l| l.0 == Role::User && l.2 == "plan tool approve slow")
        .unwrap_or_else(|| panic!("{texts:?}"));
    let answer = &lines[asked + 1];
    assert_eq!(answer.0, Role::Assistant, "{texts:?}");
    assert_eq!(answer.3, EXPECTED, "the answer's steps");
    assert!(answer.2.starts_with("Permission granted: allow_once."));
    let steering = &lines[asked + 2];
    assert_eq!((steering.0, steering.1), (Role::User, true), "{texts:?}");
    assert_eq!(steering.2, "focus on errors");
    let next = &lines[asked + 3];
    assert_eq!(
        (next.0, next.2.as_str()),
        (Role::Assistant, "Echo: focus on errors")
    );
    assert!(next.3.is_empty(), "{:?}", next.3);
}

fn closed_of(events: &[Event]) -> Vec<iris_protocol::PickerClosed> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            ServerFrame::PickerClosed(c) => Some(c.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn history_carries_every_step_and_the_steering_after_restart_and_pruning() {
    let dir = tempfile::tempdir().unwrap();
    let demo = |c: &mut iris_gateway::Config| c.agent_command = Some(demo_agent());
    let gw = TestGateway::start_in(dir.path(), demo).await;
    let (mut phone, _) = gw.connect("phone").await;
    let (mut laptop, _) = gw.connect("laptop").await;

    send(&mut phone, default_lane(), "plan tool approve slow", false).await;
    let asked = until(&mut laptop, |e| e.frame_type() == "picker.approval").await;
    let picker_id = match &asked.last().unwrap().body {
        ServerFrame::PickerApproval(p) => p.picker_id.clone(),
        other => panic!("{other:?}"),
    };
    select(&mut phone, &picker_id, "allow_once").await.unwrap();
    // The laptop, which offered the same approval, learns that the phone answered it.
    let seen = until(&mut laptop, |e| e.frame_type() == "picker.closed").await;
    let closed = closed_of(&seen);
    assert_eq!(closed[0].picker_id, picker_id);
    assert_eq!(closed[0].outcome, PickerOutcome::Answered);
    assert_eq!(closed[0].value.as_deref(), Some("allow_once"));
    assert_eq!(closed[0].by_device.as_deref(), Some("phone"));
    assert!(
        seen.last().unwrap().cursor.is_some(),
        "picker.closed is durable"
    );
    // The slow part of the answer streams; the user steers.
    phone
        .wait_for(|e| matches!(&e.body, ServerFrame::MessageUpdate(u) if u.text.contains("Permission granted")))
        .await
        .unwrap();
    let steer = ClientFrame::AgentSteer(AgentSteer {
        text: "focus on errors".into(),
        ..Default::default()
    });
    phone.request(default_lane(), steer).await.unwrap();
    let first = until_idle(&mut phone).await;
    let second = until_idle(&mut phone).await;
    assert_eq!(final_text(&second), "Echo: focus on errors");
    // The live message.stop carries the same steps as history will.
    let live: Vec<String> = first
        .iter()
        .find_map(|e| match &e.body {
            ServerFrame::MessageStop(s) => Some(s.steps.iter().map(card).collect()),
            _ => None,
        })
        .expect("message.stop");
    assert_eq!(live, EXPECTED);

    check(&transcript(&gw, "fresh").await);
    gw.stop().await;

    let gw = TestGateway::start_in(dir.path(), demo).await;
    check(&transcript(&gw, "after-restart").await);
    let pruned = gw.shared.store.prune_outbox(i64::MAX).await.unwrap();
    assert!(pruned > 0);
    check(&transcript(&gw, "after-pruning").await);
    gw.stop().await;
}

#[tokio::test]
async fn expired_and_cancelled_pickers_are_closed_everywhere_and_kept_as_steps() {
    let gw = TestGateway::start_with(|c| {
        c.agent_command = Some(demo_agent());
        c.approval_timeout = Duration::from_millis(300);
    })
    .await;
    let (mut a, _) = gw.connect("a").await;
    let (mut b, _) = gw.connect("b").await;
    let frames = turn(&mut a, default_lane(), "permission please").await;
    let closed = closed_of(&frames);
    assert_eq!(closed.len(), 1, "{:?}", types(&frames));
    assert_eq!(closed[0].outcome, PickerOutcome::Expired);
    assert_eq!(
        (closed[0].value.clone(), closed[0].by_device.clone()),
        (None, None)
    );
    let on_b = until_idle(&mut b).await;
    assert_eq!(closed_of(&on_b), closed);
    assert_eq!(
        last_steps(&mut b).await,
        [Some("approval Some(Expired) None by None".to_owned())]
    );
    gw.stop().await;

    // A stopped turn cancels its open question. Under the usual approval timeout, so that the
    // question cannot expire before the stop arrives, however slow the machine.
    let gw = TestGateway::start_demo().await;
    let (mut a, _) = gw.connect("a").await;
    let (mut b, _) = gw.connect("b").await;
    send(&mut a, default_lane(), "clarify the colour", false).await;
    a.wait_for(|e| e.frame_type() == "picker.clarify")
        .await
        .unwrap();
    a.request(
        default_lane(),
        ClientFrame::AgentStop(iris_protocol::Empty {}),
    )
    .await
    .unwrap();
    let frames = until_idle(&mut a).await;
    let closed = closed_of(&frames);
    assert_eq!(closed.len(), 1, "{:?}", types(&frames));
    assert_eq!(closed[0].outcome, PickerOutcome::Cancelled);
    let on_b = until_idle(&mut b).await;
    assert_eq!(closed_of(&on_b), closed);
    assert_eq!(
        last_steps(&mut b).await,
        [Some("clarify Some(Cancelled) None by None".to_owned())]
    );
    gw.stop().await;
}

/// The last step of each answer in the default lane's history.
async fn last_steps(client: &mut Client) -> Vec<Option<String>> {
    history(client, default_lane())
        .await
        .into_iter()
        .filter(|m| m.role == Role::Assistant)
        .map(|m| m.steps.last().map(card))
        .collect()
}

async fn retry(client: &mut Client, id: &str) -> Result<Event, iris_client::ClientError> {
    let frame = ClientFrame::MessageRetry(iris_protocol::MessageRetry {
        message_id: id.into(),
        ..Default::default()
    });
    client.request(default_lane(), frame).await
}

fn code_of(result: Result<Event, iris_client::ClientError>) -> iris_protocol::ErrorCode {
    match result {
        Err(iris_client::ClientError::Server { code, .. }) => code,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn retry_runs_a_stopped_prompt_again_and_refuses_what_it_cannot_run() {
    use iris_protocol::{Empty, ErrorCode, TurnEnd};
    let gw = TestGateway::start_demo().await;
    let (mut a, _) = gw.connect("a").await;
    let echo = send(&mut a, default_lane(), "slow story", false).await;
    let asked = message_id(&echo);
    a.wait_for(|e| e.frame_type() == "message.update")
        .await
        .unwrap();
    // While the turn runs, a retry is refused rather than queued.
    assert_eq!(code_of(retry(&mut a, &asked).await), ErrorCode::RateLimited);
    a.request(default_lane(), ClientFrame::AgentStop(Empty {}))
        .await
        .unwrap();
    let stopped = until_idle(&mut a).await;
    let stopped_id = stopped
        .iter()
        .find_map(|e| match &e.body {
            ServerFrame::MessageStop(s) => Some(s.message_id.clone()),
            _ => None,
        })
        .unwrap();

    let ack = retry(&mut a, &asked).await.unwrap();
    assert_eq!(ack.frame_type(), "ack");
    let again = until_idle(&mut a).await;
    assert!(
        final_text(&again).ends_with("Echo: slow story"),
        "{}",
        final_text(&again)
    );

    let messages = history(&mut a, default_lane()).await;
    let lines: Vec<_> = messages
        .iter()
        .map(|m| (m.role, m.text.as_str(), m.ended))
        .collect();
    assert_eq!(
        messages.iter().filter(|m| m.role == Role::User).count(),
        1,
        "{lines:?}"
    );
    let at = messages
        .iter()
        .position(|m| m.message_id == stopped_id)
        .unwrap();
    assert_eq!(messages[at].ended, Some(TurnEnd::Stopped));
    let last = messages.last().unwrap();
    assert_eq!(
        (last.role, last.ended),
        (Role::Assistant, Some(TurnEnd::Completed))
    );
    assert!(last.text.ends_with("Echo: slow story"));
    assert_eq!(
        last.reply_to.as_deref(),
        Some(asked.as_str()),
        "the answer names its prompt"
    );
    assert_eq!(messages[at].reply_to.as_deref(), Some(asked.as_str()));

    assert_eq!(code_of(retry(&mut a, "m_nope").await), ErrorCode::NotFound);
    assert_eq!(
        code_of(retry(&mut a, &stopped_id).await),
        ErrorCode::BadRequest
    );
    let help = send(&mut a, default_lane(), "/help", false).await;
    until(
        &mut a,
        |e| matches!(&e.body, ServerFrame::Message(m) if m.role == Role::System),
    )
    .await;
    assert_eq!(
        code_of(retry(&mut a, &message_id(&help)).await),
        ErrorCode::BadRequest
    );
    // A message of another lane is unknown in this one.
    let other = create_channel(&mut a, "other", None).await;
    let elsewhere = send(&mut a, Header::lane(&other, None), "hello there", false).await;
    assert_eq!(
        code_of(retry(&mut a, &message_id(&elsewhere)).await),
        ErrorCode::NotFound
    );
    gw.stop().await;
}

/// An agent that dies after a plan, commentary and a tool call but before a word of answer: the
/// stored answer still carries those steps, marked `agent_failed`, live and in history.
#[tokio::test]
async fn a_turn_that_dies_before_its_first_text_keeps_its_steps() {
    let gw = TestGateway::start_demo().await;
    let (mut a, _) = gw.connect("phone").await;
    let frames = turn(&mut a, default_lane(), "plan collapse").await;
    // The bubble opened for the commentary closes as the answer (a `message` had none opened).
    let (id, steps, ended) = frames
        .iter()
        .find_map(|e| match &e.body {
            ServerFrame::MessageStop(s) => Some((s.message_id.clone(), s.steps.clone(), s.ended)),
            ServerFrame::Message(m) if m.role == Role::Assistant => {
                Some((m.message_id.clone(), m.steps.clone(), m.ended))
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("a final answer: {:?}", types(&frames)));
    let expected = [
        "plan: Plan: | ☑ Read the request | ◐ Write the answer | ☐ Suggest next steps",
        "commentary: Building first.",
        "tool 0 terminal: make build ok=Some(false)",
    ];
    assert_eq!(steps.iter().map(card).collect::<Vec<_>>(), expected);
    assert_eq!(ended, Some(iris_protocol::TurnEnd::AgentFailed));

    let (mut fresh, _) = gw.connect("fresh").await;
    let stored = history(&mut fresh, default_lane()).await;
    let answer = stored
        .iter()
        .find(|m| m.message_id == id)
        .unwrap_or_else(|| panic!("the answer in history: {stored:?}"));
    assert_eq!(answer.steps.iter().map(card).collect::<Vec<_>>(), expected);
    assert_eq!(answer.ended, Some(iris_protocol::TurnEnd::AgentFailed));
    gw.stop().await;
}
