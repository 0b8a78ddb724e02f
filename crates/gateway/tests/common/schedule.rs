//! Scheduled prompts as a device sees them, with a manual clock (the `cron*.rs` tests): a gateway
//! whose scheduler reads the clock, advancing it until the scheduler has looked, `/cron` replies
//! and the frames of a run.

use std::sync::Arc;
use std::time::Duration;

use iris_client::{Client, Event};
use iris_gateway::cron::ManualClock;
use iris_gateway::Config;
use iris_protocol::{BusyReason, ClientFrame, Header, MessageSend, Role, ServerFrame};

use super::{demo_agent, types, TestGateway};

/// Monday 2030-06-03 06:00:00 UTC, 08:00 in Berlin (summer time, UTC+2).
pub const MON_0800_BERLIN: i64 = 1_906_696_800_000;
pub const MINUTE: Duration = Duration::from_secs(60);
pub const WAIT: Duration = Duration::from_secs(20);

pub fn clock() -> Arc<ManualClock> {
    ManualClock::new(MON_0800_BERLIN)
}

pub fn tweak(clock: &Arc<ManualClock>, catch_up: bool) -> impl FnOnce(&mut Config) {
    let clock = clock.clone();
    move |c: &mut Config| {
        c.agent_command = Some(demo_agent());
        c.cron.clock = clock.clock();
        c.cron.timezone = "Europe/Berlin".parse().expect("zone");
        c.cron.catch_up = catch_up;
    }
}

pub async fn start(clock: &Arc<ManualClock>) -> TestGateway {
    TestGateway::start_with(tweak(clock, true)).await
}

pub fn lane() -> Header {
    Header::lane("default", None)
}

/// Moves the clock and waits until the scheduler has handed every job due by then to its lane.
pub async fn advance(gw: &TestGateway, clock: &ManualClock, by: Duration) {
    clock.advance(by);
    let now = gw.cron.now_ms();
    tokio::time::timeout(WAIT, gw.cron.settled(now))
        .await
        .expect("the scheduler looked at the jobs");
}

/// Sends a message in a lane; returns the next system message's text and the events before it.
pub async fn command(c: &mut Client, lane: Header, text: &str) -> (String, Vec<Event>) {
    let frame = ClientFrame::MessageSend(MessageSend {
        text: text.into(),
        ..Default::default()
    });
    c.request(lane, frame).await.expect("message.send answered");
    system_reply(c).await
}

pub async fn system_reply(c: &mut Client) -> (String, Vec<Event>) {
    let mut before = Vec::new();
    loop {
        let e = c.next_event_timeout(WAIT).await.expect("a system reply");
        if let ServerFrame::Message(m) = &e.body {
            if m.role == Role::System {
                return (m.text.clone(), before);
            }
        }
        before.push(e);
    }
}

/// `/cron list`, asserting that no run happened before the reply.
pub async fn list_quiet(c: &mut Client, lane: Header, what: &str) -> String {
    let (text, before) = command(c, lane, "/cron list").await;
    assert!(
        !before.iter().any(|e| e.frame_type() == "agent.busy"),
        "{what}: nothing may run, got {:?}",
        types(&before)
    );
    text
}

/// Waits for a scheduled run's `agent.busy {reason:"cron"}` and returns it and every frame up to
/// the lane's `agent.idle`.
pub async fn cron_run(c: &mut Client) -> Vec<Event> {
    let busy = c
        .wait_for_timeout(
            |e| matches!(&e.body, ServerFrame::AgentBusy(b) if b.reason == BusyReason::Cron),
            WAIT,
        )
        .await
        .expect("a scheduled run starts");
    let mut out = vec![busy];
    loop {
        let e = c.next_event_timeout(WAIT).await.expect("the run's frames");
        let idle = e.frame_type() == "agent.idle";
        out.push(e);
        if idle {
            return out;
        }
    }
}

/// The `cron` message and the notification of a delivered run.
pub fn delivered(run: &[Event]) -> (iris_protocol::Message, iris_protocol::Notification) {
    assert_eq!(
        types(run),
        ["agent.busy", "message", "notification", "agent.idle"],
        "{run:?}"
    );
    let message = match &run[1].body {
        ServerFrame::Message(m) => m.clone(),
        other => panic!("{other:?}"),
    };
    let note = match &run[2].body {
        ServerFrame::Notification(n) => n.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(message.role, Role::Cron);
    assert_eq!(note.kind, "cron");
    (message, note)
}

pub fn answer_text(run: &[Event]) -> String {
    delivered(run).0.text
}
