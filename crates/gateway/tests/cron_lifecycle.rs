//! The life of scheduled prompts through the real server and the demo agent, with a manual clock:
//! catch-up after a restart (or not), pause/resume, removal, a deleted channel, a run stopped
//! while messages wait for it, and a failed run.
//!
//! The scheduler reads an injected clock that moves only when a test advances it; after each
//! advance the test waits until the scheduler has looked at the jobs at the new time
//! (`cron.settled`), so every job due by then has been handed to its lane. A lane runs what it
//! is handed in order, so a `/cron list` sent afterwards is answered after any run that became
//! due: a reply without a run before it proves that nothing ran.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use common::schedule::*;
use common::*;
use iris_client::Event;
use iris_gateway::cron::ManualClock;
use iris_protocol::{
    BusyReason, ChannelCreate, ClientFrame, Empty, Header, MessageSend, Role, ServerFrame,
};

/// Starts a gateway on `dir` with the manual clock, adds a job that runs every 30 minutes, lets
/// it run once and stops the gateway. Returns the outbox head it left.
async fn first_life(dir: &Path, clock: &Arc<ManualClock>) -> u64 {
    let gw = TestGateway::start_in(dir, tweak(clock, true)).await;
    let (mut a, _) = gw.connect("a").await;
    command(&mut a, lane(), "/cron add every 30m Check the mail").await;
    advance(&gw, clock, 30 * MINUTE).await;
    assert_eq!(answer_text(&cron_run(&mut a).await), "Echo: Check the mail");
    a.close().await.ok();
    let head = gw.shared.hub.head();
    gw.stop().await;
    head
}

#[tokio::test]
async fn runs_missed_while_down_run_once_at_startup() {
    let clock = clock();
    let dir = tempfile::tempdir().unwrap();
    let head = first_life(dir.path(), &clock).await;
    // Two hours pass while the gateway is down: four ticks are missed.
    clock.advance(120 * MINUTE);
    let gw = TestGateway::start_in(dir.path(), tweak(&clock, true)).await;
    let (mut a, _) = gw.connect("a").await;
    // The catch-up may run before, while or after the device connects: what it missed comes with
    // sync, the rest live; together they are each frame once, by cursor.
    let replay = a.sync(head).await.expect("sync");
    let mut frames: BTreeMap<u64, Event> = replay
        .frames
        .into_iter()
        .filter_map(|e| Some((e.cursor?, e)))
        .collect();
    // Frames that arrived live before the sync finished wait in the client's buffer.
    while let Some(e) = a.try_next_event() {
        if let Some(cursor) = e.cursor {
            frames.insert(cursor, e);
        }
    }
    while !frames.values().any(|e| e.frame_type() == "agent.idle") {
        let e = a.next_event_timeout(WAIT).await.expect("the catch-up run");
        if let Some(cursor) = e.cursor {
            frames.insert(cursor, e);
        }
    }
    let frames: Vec<Event> = frames.into_values().collect();
    let runs = frames
        .iter()
        .filter(|e| matches!(&e.body, ServerFrame::AgentBusy(b) if b.reason == BusyReason::Cron))
        .count();
    assert_eq!(runs, 1, "{:?}", types(&frames));
    let answers: Vec<&str> = frames
        .iter()
        .filter_map(|e| match &e.body {
            ServerFrame::Message(m) if m.role == Role::Cron => Some(m.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(answers, ["Echo: Check the mail"]);

    let list = list_quiet(&mut a, lane(), "after the catch-up").await;
    assert!(
        list.contains("runs: 2"),
        "one run before the restart, one catch-up: {list}"
    );
    assert!(
        list.contains("next: Mon 2030-06-03 11:00 CEST (in 30m)"),
        "the grid continues from now: {list}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn without_catch_up_missed_runs_are_skipped() {
    let clock = clock();
    let dir = tempfile::tempdir().unwrap();
    first_life(dir.path(), &clock).await;
    clock.advance(120 * MINUTE);
    let gw = TestGateway::start_in(dir.path(), tweak(&clock, false)).await;
    let now = gw.cron.now_ms();
    tokio::time::timeout(WAIT, gw.cron.settled(now))
        .await
        .unwrap();
    let (mut a, _) = gw.connect("a").await;
    let list = list_quiet(&mut a, lane(), "missed while down").await;
    assert!(
        list.contains("last: missed at Mon 2030-06-03 10:30 CEST · runs: 1"),
        "{list}"
    );
    assert!(list.contains("next: Mon 2030-06-03 11:00 CEST"), "{list}");
    // It runs again on its next tick.
    advance(&gw, &clock, 30 * MINUTE).await;
    assert_eq!(answer_text(&cron_run(&mut a).await), "Echo: Check the mail");
    gw.stop().await;
}

#[tokio::test]
async fn a_paused_job_does_not_run_until_resumed() {
    let clock = clock();
    let gw = start(&clock).await;
    let (mut a, _) = gw.connect("a").await;
    command(&mut a, lane(), "/cron add every 30m Water the roses").await;
    let (reply, _) = command(&mut a, lane(), "/cron pause 1").await;
    assert_eq!(
        reply,
        "Paused job 1 “Water the roses”. /cron resume 1 starts it again."
    );
    let (reply, _) = command(&mut a, lane(), "/cron pause 1").await;
    assert_eq!(reply, "Job 1 is already paused.");

    advance(&gw, &clock, 90 * MINUTE).await;
    let list = list_quiet(&mut a, lane(), "while paused").await;
    assert!(list.contains("next: paused"), "{list}");
    assert!(list.contains("runs: 0"), "{list}");

    let (reply, _) = command(&mut a, lane(), "/cron resume #1").await;
    assert_eq!(
        reply,
        "Resumed job 1 “Water the roses”. Next run: Mon 2030-06-03 10:00 CEST (in 30m)."
    );
    advance(&gw, &clock, 29 * MINUTE).await;
    list_quiet(&mut a, lane(), "resumed, not yet due").await;
    advance(&gw, &clock, MINUTE).await;
    assert_eq!(
        answer_text(&cron_run(&mut a).await),
        "Echo: Water the roses"
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_removed_job_never_runs() {
    let clock = clock();
    let gw = start(&clock).await;
    let (mut a, _) = gw.connect("a").await;
    command(&mut a, lane(), "/cron add in 10m Forgotten").await;
    let (reply, _) = command(&mut a, lane(), "/cron remove 1").await;
    assert_eq!(reply, "Removed job 1 “Forgotten”.");
    let (reply, _) = command(&mut a, lane(), "/cron remove 1").await;
    assert_eq!(reply, "No scheduled job 1. /cron list shows the jobs.");
    let (reply, _) = command(&mut a, lane(), "/cron remove").await;
    assert!(reply.starts_with("Usage: /cron remove <id>"), "{reply}");

    advance(&gw, &clock, 60 * MINUTE).await;
    let list = list_quiet(&mut a, lane(), "after removal").await;
    assert!(
        list.starts_with("No scheduled jobs in this chat."),
        "{list}"
    );
    assert!(gw.shared.store.list_cron_jobs().await.unwrap().is_empty());
    gw.stop().await;
}

#[tokio::test]
async fn deleting_a_channel_removes_its_jobs() {
    let clock = clock();
    let gw = start(&clock).await;
    let (mut a, _) = gw.connect("a").await;
    let created = a
        .request(
            Header::default(),
            ClientFrame::ChannelCreate(ChannelCreate {
                name: "Reports".into(),
                ..Default::default()
            }),
        )
        .await
        .unwrap();
    let chat = match &created.body {
        ServerFrame::ChannelCreated(c) => c.chat_id.clone(),
        other => panic!("{other:?}"),
    };
    let reports = Header::lane(chat.clone(), None);
    let (reply, _) = command(
        &mut a,
        reports.clone(),
        "/cron add every 30m Weekly numbers",
    )
    .await;
    assert!(reply.starts_with("Scheduled job 1"), "{reply}");
    let (reply, _) = command(&mut a, lane(), "/cron add every 1h Stay here").await;
    assert!(reply.starts_with("Scheduled job 2"), "{reply}");
    let all = list_quiet(&mut a, lane(), "two jobs").await;
    assert!(
        all.contains("“Stay here”") && !all.contains("Weekly numbers"),
        "list shows this chat's jobs: {all}"
    );
    let (all, _) = command(&mut a, lane(), "/cron list all").await;
    assert!(all.contains("“Weekly numbers” in Reports"), "{all}");

    a.request(
        Header::lane(chat.clone(), None),
        ClientFrame::ChannelDelete(Empty {}),
    )
    .await
    .expect("deleted");
    let jobs = gw.shared.store.list_cron_jobs().await.unwrap();
    assert_eq!(
        jobs.iter().map(|j| j.name.as_str()).collect::<Vec<_>>(),
        ["Stay here"]
    );

    // At 09:00 only the remaining job runs, in its own chat.
    advance(&gw, &clock, 60 * MINUTE).await;
    let run = cron_run(&mut a).await;
    assert_eq!(answer_text(&run), "Echo: Stay here");
    assert_eq!(run[1].header.chat_id.as_deref(), Some("default"));
    let (all, before) = command(&mut a, lane(), "/cron list all").await;
    assert!(
        !before.iter().any(|e| e.frame_type() == "agent.busy"),
        "{:?}",
        types(&before)
    );
    assert!(
        !all.contains("Weekly numbers") && all.contains("Stay here"),
        "{all}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_run_can_be_stopped_and_messages_sent_meanwhile_wait_for_it() {
    let clock = clock();
    let gw = start(&clock).await;
    let (mut a, _) = gw.connect("a").await;
    // The demo agent answers a prompt containing "hang" only when cancelled.
    command(&mut a, lane(), "/cron add in 10m hang on").await;
    advance(&gw, &clock, 10 * MINUTE).await;
    a.wait_for_timeout(
        |e| matches!(&e.body, ServerFrame::AgentBusy(b) if b.reason == BusyReason::Cron),
        WAIT,
    )
    .await
    .expect("the run starts");
    let frame = ClientFrame::MessageSend(MessageSend {
        text: "hello meanwhile".into(),
        ..Default::default()
    });
    a.request(lane(), frame).await.unwrap();
    let (list, _) = command(&mut a, lane(), "/cron list").await;
    assert!(list.contains("next: running now"), "{list}");

    a.request(lane(), ClientFrame::AgentStop(Empty {}))
        .await
        .expect("a running job can be stopped");
    a.wait_for_timeout(|e| e.frame_type() == "agent.idle", WAIT)
        .await
        .unwrap();
    let during: Vec<Event> = a.take_seen();
    assert!(
        !during
            .iter()
            .any(|e| matches!(&e.body, ServerFrame::Message(m) if m.role == Role::Cron)),
        "a stopped run delivers nothing: {:?}",
        types(&during)
    );
    // The message sent during the run is the next turn.
    let busy = a
        .wait_for_timeout(|e| e.frame_type() == "agent.busy", WAIT)
        .await
        .unwrap();
    assert!(matches!(&busy.body, ServerFrame::AgentBusy(b) if b.reason == BusyReason::Processing));
    let stop = a
        .wait_for_timeout(|e| e.frame_type() == "message.stop", WAIT)
        .await
        .unwrap();
    assert!(
        matches!(&stop.body, ServerFrame::MessageStop(s) if s.final_text == "Echo: hello meanwhile"),
        "{stop:?}"
    );
    a.wait_for_timeout(|e| e.frame_type() == "agent.idle", WAIT)
        .await
        .unwrap();
    let list = list_quiet(&mut a, lane(), "after the stop").await;
    assert!(
        list.contains("last: cancelled at Mon 2030-06-03 08:10 CEST · runs: 1"),
        "{list}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_failed_run_is_reported_with_a_notification() {
    let clock = clock();
    let gw = start(&clock).await;
    let (mut a, _) = gw.connect("a").await;
    // The demo agent process exits on a prompt containing "crash".
    command(&mut a, lane(), "/cron add every 1h crash test").await;
    advance(&gw, &clock, 60 * MINUTE).await;
    let run = cron_run(&mut a).await;
    assert_eq!(
        types(&run),
        ["agent.busy", "message", "notification", "agent.idle"],
        "{run:?}"
    );
    match (&run[1].body, &run[2].body) {
        (ServerFrame::Message(m), ServerFrame::Notification(n)) => {
            assert_eq!(m.role, Role::System);
            assert!(
                m.text.starts_with(
                    "Scheduled job 1 “crash test” failed: the agent stopped unexpectedly"
                ),
                "{}",
                m.text
            );
            assert_eq!((n.kind.as_str(), n.title.as_str()), ("cron", "crash test"));
        }
        other => panic!("{other:?}"),
    }
    let list = list_quiet(&mut a, lane(), "after the failure").await;
    assert!(
        list.contains("last: error at Mon 2030-06-03 09:00 CEST · runs: 1"),
        "{list}"
    );
    assert!(list.contains("next: Mon 2030-06-03 10:00 CEST"), "{list}");
    // The lane keeps working: the agent restarts for the next message.
    let frame = ClientFrame::MessageSend(MessageSend {
        text: "still there?".into(),
        ..Default::default()
    });
    a.request(lane(), frame).await.unwrap();
    let stop = a
        .wait_for_timeout(|e| e.frame_type() == "message.stop", WAIT)
        .await
        .unwrap();
    assert!(
        matches!(&stop.body, ServerFrame::MessageStop(s) if s.final_text == "Echo: still there?"),
        "{stop:?}"
    );
    gw.stop().await;
}
