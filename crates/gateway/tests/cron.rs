//! Scheduled prompts through the real server and the demo agent, with a manual clock: `/cron`
//! replies, each schedule form firing when due (and not before), the frames of a run on two
//! devices, silent answers, a busy lane, catch-up after a restart, pause/resume, removal and a
//! deleted channel.
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
use std::time::Duration;

use common::*;
use iris_client::{Client, Event};
use iris_gateway::cron::ManualClock;
use iris_gateway::Config;
use iris_protocol::{
    BusyReason, ChannelCreate, ClientFrame, Empty, Header, HistoryRequest, MessageSend, Role,
    ServerFrame,
};

/// Monday 2030-06-03 06:00:00 UTC, 08:00 in Berlin (summer time, UTC+2).
const MON_0800_BERLIN: i64 = 1_906_696_800_000;
const MINUTE: Duration = Duration::from_secs(60);
const WAIT: Duration = Duration::from_secs(20);

fn clock() -> Arc<ManualClock> {
    ManualClock::new(MON_0800_BERLIN)
}

fn tweak(clock: &Arc<ManualClock>, catch_up: bool) -> impl FnOnce(&mut Config) {
    let clock = clock.clone();
    move |c: &mut Config| {
        c.agent_command = Some(demo_agent());
        c.cron.clock = clock.clock();
        c.cron.timezone = "Europe/Berlin".parse().expect("zone");
        c.cron.catch_up = catch_up;
    }
}

async fn start(clock: &Arc<ManualClock>) -> TestGateway {
    TestGateway::start_with(tweak(clock, true)).await
}

fn lane() -> Header {
    Header::lane("default", None)
}

/// Moves the clock and waits until the scheduler has handed every job due by then to its lane.
async fn advance(gw: &TestGateway, clock: &ManualClock, by: Duration) {
    clock.advance(by);
    let now = gw.cron.now_ms();
    tokio::time::timeout(WAIT, gw.cron.settled(now))
        .await
        .expect("the scheduler looked at the jobs");
}

/// Sends a message in a lane; returns the next system message's text and the events before it.
async fn command(c: &mut Client, lane: Header, text: &str) -> (String, Vec<Event>) {
    let frame = ClientFrame::MessageSend(MessageSend {
        text: text.into(),
        ..Default::default()
    });
    c.request(lane, frame).await.expect("message.send answered");
    system_reply(c).await
}

async fn system_reply(c: &mut Client) -> (String, Vec<Event>) {
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
async fn list_quiet(c: &mut Client, lane: Header, what: &str) -> String {
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
async fn cron_run(c: &mut Client) -> Vec<Event> {
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
fn delivered(run: &[Event]) -> (iris_protocol::Message, iris_protocol::Notification) {
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

fn answer_text(run: &[Event]) -> String {
    delivered(run).0.text
}

#[tokio::test]
async fn a_cron_expression_runs_at_its_minute_and_reaches_every_device() {
    let clock = clock();
    let gw = start(&clock).await;
    let (mut a, _) = gw.connect("a").await;
    let (mut b, _) = gw.connect("b").await;

    // The command is in the catalog, with its arguments.
    let catalog = a
        .request(Header::default(), ClientFrame::CommandsCatalog(Empty {}))
        .await
        .unwrap();
    match &catalog.body {
        ServerFrame::CommandsCatalog(c) => {
            let cron = c
                .commands
                .iter()
                .find(|c| c.name == "/cron")
                .expect("/cron in the catalog");
            assert!(
                cron.args_hint.contains("add <schedule> <prompt>"),
                "{cron:?}"
            );
        }
        other => panic!("{other:?}"),
    }

    // A conversation first, so that the lane has a session the job must not touch.
    let hello = ClientFrame::MessageSend(MessageSend {
        text: "hello".into(),
        ..Default::default()
    });
    a.request(lane(), hello).await.unwrap();
    a.wait_for_timeout(|e| e.frame_type() == "agent.idle", WAIT)
        .await
        .unwrap();
    let (status, _) = command(&mut a, lane(), "/status").await;
    let session = status
        .lines()
        .find(|l| l.starts_with("Session:"))
        .expect("session line")
        .to_owned();

    let (reply, _) = command(&mut a, lane(), "/cron add \"0 9 * * 1-5\" Morning report").await;
    assert_eq!(
        reply,
        "Scheduled job 1 “Morning report”: 0 9 * * 1-5 (Europe/Berlin). Next run: Mon 2030-06-03 09:00 CEST (in 1h)."
    );
    // Device b sees the reply too.
    b.wait_for_timeout(
        |e| matches!(&e.body, ServerFrame::Message(m) if m.role == Role::System && m.text == reply),
        WAIT,
    )
    .await
    .expect("the reply reaches every device");

    advance(&gw, &clock, 59 * MINUTE).await;
    let list = list_quiet(&mut a, lane(), "one minute early").await;
    assert!(
        list.contains("next: Mon 2030-06-03 09:00 CEST (in 1m)"),
        "{list}"
    );
    assert!(list.contains("last: never ran · runs: 0"), "{list}");

    advance(&gw, &clock, MINUTE).await;
    let run_a = cron_run(&mut a).await;
    let run_b = cron_run(&mut b).await;
    for run in [&run_a, &run_b] {
        let (message, note) = delivered(run);
        assert_eq!(message.text, "Echo: Morning report");
        assert!(
            message.runtime.is_some(),
            "a cron message carries the runtime footer"
        );
        assert_eq!(
            (note.title.as_str(), note.body.as_deref()),
            ("Morning report", Some("Echo: Morning report"))
        );
        assert_eq!(run[1].header.chat_id.as_deref(), Some("default"));
        assert!(
            run.iter().all(|e| e.cursor.is_some()),
            "every frame of a run is durable"
        );
    }
    assert_eq!(
        delivered(&run_a).0.message_id,
        delivered(&run_b).0.message_id
    );

    // The run stays in history as a cron message, and the lane's own session is untouched.
    let history = a
        .request(lane(), ClientFrame::History(HistoryRequest::default()))
        .await
        .unwrap();
    match &history.body {
        ServerFrame::History(h) => {
            let last = h.messages.last().expect("messages");
            assert_eq!(
                (last.role, last.text.as_str()),
                (Role::Cron, "Echo: Morning report")
            );
        }
        other => panic!("{other:?}"),
    }
    let (status, _) = command(&mut a, lane(), "/status").await;
    assert!(
        status.contains(&session),
        "the lane keeps its session: {status}"
    );

    let list = list_quiet(&mut a, lane(), "after the run").await;
    assert!(list.contains("next: Tue 2030-06-04 09:00 CEST"), "{list}");
    assert!(
        list.contains("last: ok at Mon 2030-06-03 09:00 CEST · runs: 1"),
        "{list}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn an_interval_runs_on_its_grid() {
    let clock = clock();
    let gw = start(&clock).await;
    let (mut a, _) = gw.connect("a").await;
    let (reply, _) = command(&mut a, lane(), "/cron add every 30m Check the build").await;
    assert!(
        reply.starts_with(
            "Scheduled job 1 “Check the build”: every 30m. Next run: Mon 2030-06-03 08:30 CEST"
        ),
        "{reply}"
    );

    advance(&gw, &clock, 29 * MINUTE).await;
    list_quiet(&mut a, lane(), "before the first tick").await;
    advance(&gw, &clock, MINUTE).await;
    assert_eq!(
        answer_text(&cron_run(&mut a).await),
        "Echo: Check the build"
    );
    advance(&gw, &clock, 30 * MINUTE).await;
    assert_eq!(
        answer_text(&cron_run(&mut a).await),
        "Echo: Check the build"
    );
    let list = list_quiet(&mut a, lane(), "between ticks").await;
    assert!(
        list.contains("next: Mon 2030-06-03 09:30 CEST (in 30m)"),
        "{list}"
    );
    assert!(list.contains("runs: 2"), "{list}");
    gw.stop().await;
}

#[tokio::test]
async fn a_delay_runs_once() {
    let clock = clock();
    let gw = start(&clock).await;
    let (mut a, _) = gw.connect("a").await;
    let (reply, _) = command(&mut a, lane(), "/cron add in 20m Take the tea out").await;
    assert!(
        reply.contains("once at Mon 2030-06-03 08:20 CEST"),
        "{reply}"
    );

    advance(&gw, &clock, 19 * MINUTE).await;
    list_quiet(&mut a, lane(), "before the time").await;
    advance(&gw, &clock, MINUTE).await;
    assert_eq!(
        answer_text(&cron_run(&mut a).await),
        "Echo: Take the tea out"
    );
    advance(&gw, &clock, 24 * 60 * MINUTE).await;
    let list = list_quiet(&mut a, lane(), "a day later").await;
    assert!(list.contains("next: none (done)"), "{list}");
    assert!(list.contains("runs: 1"), "{list}");
    gw.stop().await;
}

#[tokio::test]
async fn an_iso_time_runs_once_at_that_time_in_the_configured_zone() {
    let clock = clock();
    let gw = start(&clock).await;
    let (mut a, _) = gw.connect("a").await;
    let (reply, _) = command(&mut a, lane(), "/cron add 2030-06-03T08:30 Call the bank").await;
    assert!(
        reply.contains("once at Mon 2030-06-03 08:30 CEST"),
        "{reply}"
    );
    let (reply, _) = command(
        &mut a,
        lane(),
        "/cron add 2030-06-03T07:00:00Z Explicit offset",
    )
    .await;
    assert!(
        reply.contains("once at Mon 2030-06-03 09:00 CEST"),
        "an explicit offset wins over the zone: {reply}"
    );
    let (reply, _) = command(&mut a, lane(), "/cron add 2030-06-03T07:00 Too late").await;
    assert!(reply.contains("is in the past"), "{reply}");

    advance(&gw, &clock, 29 * MINUTE).await;
    list_quiet(&mut a, lane(), "a minute early").await;
    advance(&gw, &clock, MINUTE).await;
    assert_eq!(answer_text(&cron_run(&mut a).await), "Echo: Call the bank");
    advance(&gw, &clock, 30 * MINUTE).await;
    assert_eq!(
        answer_text(&cron_run(&mut a).await),
        "Echo: Explicit offset"
    );
    gw.stop().await;
}

#[tokio::test]
async fn bad_schedules_get_a_message_naming_the_accepted_forms() {
    let clock = clock();
    let gw = start(&clock).await;
    let (mut a, _) = gw.connect("a").await;
    for bad in [
        "/cron add 0 9 * * Morning report",
        "/cron add every banana Report",
        "/cron add \"0 9 * *\" Report",
        "/cron add every 10s Too often",
        "/cron add 2030-02-30T09:00 No such day",
    ] {
        let (reply, _) = command(&mut a, lane(), bad).await;
        assert!(reply.contains("Accepted schedules:"), "{bad}: {reply}");
        for form in [
            "5-field cron expression",
            "every 30m",
            "in 20m",
            "ISO-8601 time",
        ] {
            assert!(
                reply.contains(form),
                "{bad}: the reply names {form:?}: {reply}"
            );
        }
    }
    let (reply, _) = command(&mut a, lane(), "/cron add every 2h").await;
    assert!(reply.contains("What should the job ask"), "{reply}");
    let (reply, _) = command(&mut a, lane(), "/cron").await;
    assert!(reply.contains("/cron add <schedule> <prompt>"), "{reply}");
    let list = list_quiet(&mut a, lane(), "no jobs").await;
    assert!(
        list.starts_with("No scheduled jobs in this chat."),
        "{list}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_silent_answer_is_recorded_but_not_delivered() {
    let clock = clock();
    let gw = start(&clock).await;
    let (mut a, _) = gw.connect("a").await;
    command(&mut a, lane(), "/cron add every 1h silent check for news").await;
    advance(&gw, &clock, 60 * MINUTE).await;
    let run = cron_run(&mut a).await;
    assert_eq!(
        types(&run),
        ["agent.busy", "agent.idle"],
        "a silent run shows only busy and idle: {run:?}"
    );
    let list = list_quiet(&mut a, lane(), "after the silent run").await;
    assert!(
        list.contains("last: silent at Mon 2030-06-03 09:00 CEST · runs: 1"),
        "{list}"
    );
    let history = a
        .request(lane(), ClientFrame::History(HistoryRequest::default()))
        .await
        .unwrap();
    match &history.body {
        ServerFrame::History(h) => assert!(
            h.messages.iter().all(|m| m.role != Role::Cron),
            "{:?}",
            h.messages
        ),
        other => panic!("{other:?}"),
    }
    gw.stop().await;
}

#[tokio::test]
async fn a_due_job_waits_for_the_running_turn() {
    let clock = clock();
    let gw = start(&clock).await;
    let (mut a, _) = gw.connect("a").await;
    command(&mut a, lane(), "/cron add in 5m Summarise the day").await;
    // A turn that runs until it is stopped.
    let frame = ClientFrame::MessageSend(MessageSend {
        text: "hang".into(),
        ..Default::default()
    });
    a.request(lane(), frame).await.unwrap();
    a.wait_for_timeout(
        |e| matches!(&e.body, ServerFrame::AgentBusy(b) if b.reason == BusyReason::Processing),
        WAIT,
    )
    .await
    .unwrap();

    advance(&gw, &clock, 5 * MINUTE).await;
    // `/cron` answers during a turn; the job is handed over and waits.
    let list = list_quiet(&mut a, lane(), "behind a running turn").await;
    assert!(
        list.contains("next: running now (or waiting for the chat's current turn)"),
        "{list}"
    );
    let (status, _) = command(&mut a, lane(), "/status").await;
    assert!(status.contains("Queued messages: 1"), "{status}");

    a.request(lane(), ClientFrame::AgentStop(Empty {}))
        .await
        .expect("stop answered");
    a.wait_for_timeout(|e| e.frame_type() == "agent.idle", WAIT)
        .await
        .unwrap();
    assert!(
        !a.take_seen()
            .iter()
            .any(|e| matches!(&e.body, ServerFrame::AgentBusy(b) if b.reason == BusyReason::Cron)),
        "the job starts only after the turn ended"
    );
    let run = cron_run(&mut a).await;
    assert_eq!(answer_text(&run), "Echo: Summarise the day");
    gw.stop().await;
}

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
