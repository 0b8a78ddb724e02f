//! Scheduled prompts through the real server and the demo agent, with a manual clock: `/cron`
//! replies, each schedule form firing when due (and not before), the frames of a run on two
//! devices, silent answers and a busy lane. Restarts, pause/resume, removal, deleted channels,
//! stopped and failed runs are in `cron_lifecycle.rs`.
//!
//! The scheduler reads an injected clock that moves only when a test advances it; after each
//! advance the test waits until the scheduler has looked at the jobs at the new time
//! (`cron.settled`), so every job due by then has been handed to its lane. A lane runs what it
//! is handed in order, so a `/cron list` sent afterwards is answered after any run that became
//! due: a reply without a run before it proves that nothing ran.

mod common;

use common::schedule::*;
use common::*;
use iris_protocol::{
    BusyReason, ClientFrame, Empty, Header, HistoryRequest, MessageSend, Role, ServerFrame,
};

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
