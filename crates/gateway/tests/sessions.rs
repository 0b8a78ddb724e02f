//! What the gateway does with the ACP session features an agent advertises, through the real
//! server and the demo agent: `session/close` when a lane is reset, deleted, moved to another
//! agent or a scheduled run ends; `session/resume` instead of `session/load`; a `usage_update`'s
//! cost as `runtime.cost`; updates and capabilities of a newer ACP version ignored. The demo
//! agent's `sessions` keyword says how many sessions it holds open. The spare session is off
//! here, and so are the checkpoints a lane forks to take a turn back, so that the counts are exact;
//! `tests/spare_session.rs` and `tests/rewind.rs` cover them.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use iris_gateway::config::{AgentTimeouts, NamedAgent, Secret};
use iris_gateway::cron::ManualClock;
use iris_protocol::{BusyReason, ChannelSetAgent, ClientFrame, Empty, Header, ServerFrame};

const WAIT: Duration = Duration::from_secs(20);

fn demo(name: &str, env: &[(&str, &str)]) -> NamedAgent {
    NamedAgent {
        name: name.into(),
        command: demo_agent(),
        cwd: None,
        env: [("DEMO_FORK", "0")]
            .iter()
            .chain(env)
            .map(|(k, v)| ((*k).to_owned(), Secret::from(*v)))
            .collect(),
        timeouts: AgentTimeouts::default(),
        spare_session: Some(false),
    }
}

/// The demo agent, without a spare session or checkpoints.
fn demo_without_spare(c: &mut iris_gateway::Config) {
    c.agent_command = None;
    c.agents = vec![demo("demo", &[])];
    c.default_agent = Some("demo".into());
    c.spare_session = false;
}

#[tokio::test]
async fn a_reset_or_deleted_lane_closes_its_agent_session() {
    let gw = TestGateway::start_with(demo_without_spare).await;
    let (mut a, _) = gw.connect("phone").await;
    assert!(demo_sessions(&mut a, "default")
        .await
        .starts_with("Open sessions: 1,"));

    assert_eq!(
        lane_command(&mut a, "default", "/new").await,
        "Started a new session."
    );
    let status = lane_command(&mut a, "default", "/status").await;
    assert!(
        status.contains("Agent sessions: 1 open"),
        "/status lists the agent's sessions (session/list): {status}"
    );
    assert!(
        demo_sessions(&mut a, "default")
            .await
            .starts_with("Open sessions: 1,"),
        "/new closed the old session"
    );

    let side = create_channel(&mut a, "Side", None).await;
    assert!(demo_sessions(&mut a, &side)
        .await
        .starts_with("Open sessions: 2,"));
    a.request(
        Header::lane(&side, None),
        ClientFrame::ChannelDelete(Empty {}),
    )
    .await
    .expect("channel.delete answered");
    assert!(
        demo_sessions(&mut a, "default")
            .await
            .starts_with("Open sessions: 1,"),
        "the deleted channel's session was closed"
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_channel_moved_to_another_agent_closes_its_session_there() {
    let gw = TestGateway::start_with(|c| {
        c.agent_command = None;
        c.agents = vec![demo("alpha", &[]), demo("beta", &[])];
        c.default_agent = Some("alpha".into());
    })
    .await;
    let (mut a, _) = gw.connect("phone").await;
    let other = create_channel(&mut a, "Other", None).await;
    demo_sessions(&mut a, "default").await;
    assert!(demo_sessions(&mut a, &other)
        .await
        .starts_with("Open sessions: 2,"));
    let frame = ClientFrame::ChannelSetAgent(ChannelSetAgent {
        agent: "beta".into(),
    });
    a.request(Header::lane("default", None), frame)
        .await
        .unwrap();
    assert!(
        demo_sessions(&mut a, &other)
            .await
            .starts_with("Open sessions: 1,"),
        "alpha closed the session of the channel that left it"
    );
    assert!(demo_sessions(&mut a, "default")
        .await
        .starts_with("Open sessions: 1,"));
    gw.stop().await;
}

#[tokio::test]
async fn a_scheduled_run_closes_its_session() {
    let clock = ManualClock::new(1_906_696_800_000);
    let gw = TestGateway::start_with({
        let clock: Arc<ManualClock> = clock.clone();
        move |c| {
            demo_without_spare(c);
            c.cron.clock = clock.clock();
        }
    })
    .await;
    let (mut a, _) = gw.connect("phone").await;
    assert!(demo_sessions(&mut a, "default")
        .await
        .starts_with("Open sessions: 1,"));
    let reply = lane_command(&mut a, "default", "/cron add in 5m Look around").await;
    assert!(reply.starts_with("Scheduled job 1"), "{reply}");
    clock.advance(Duration::from_secs(300));
    let now = gw.cron.now_ms();
    tokio::time::timeout(WAIT, gw.cron.settled(now))
        .await
        .expect("the scheduler looked at the jobs");
    a.wait_for_timeout(
        |e| matches!(&e.body, ServerFrame::AgentBusy(b) if b.reason == BusyReason::Cron),
        WAIT,
    )
    .await
    .expect("the run starts");
    until_idle(&mut a).await;
    assert!(
        demo_sessions(&mut a, "default")
            .await
            .starts_with("Open sessions: 1,"),
        "the run's own session is closed when it ends"
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_restored_session_is_resumed_where_the_agent_offers_it_and_loaded_elsewhere() {
    for (env, expected) in [
        (vec![("DEMO_RESUME", "1")], "resumed: 1, loaded: 0"),
        (vec![], "resumed: 0, loaded: 1"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let agent = demo("demo2", &env);
        let configure = |c: &mut iris_gateway::Config| {
            c.agent_command = None;
            c.agents = vec![agent.clone()];
        };
        let gw = TestGateway::start_in(dir.path(), configure).await;
        let (mut a, _) = gw.connect("phone").await;
        assert!(demo_sessions(&mut a, "default")
            .await
            .ends_with("resumed: 0, loaded: 0"));
        gw.stop().await;

        let gw = TestGateway::start_in(dir.path(), configure).await;
        let (mut a, _) = gw.connect("phone").await;
        let seen = demo_sessions(&mut a, "default").await;
        assert!(seen.ends_with(expected), "{env:?}: {seen}");
        gw.stop().await;
    }
}

#[tokio::test]
async fn updates_and_capabilities_of_a_newer_acp_version_do_not_break_a_turn() {
    let gw = TestGateway::start_with(demo_without_spare).await;
    let (mut a, _) = gw.connect("phone").await;
    let events = turn(&mut a, default_lane(), "future please").await;
    assert_eq!(final_text(&events), "Future-proof. Echo: future please");
    assert!(system_texts(&events).is_empty(), "no error: {events:?}");
    gw.stop().await;
}

#[tokio::test]
async fn a_reported_cost_becomes_the_runtime_cost() {
    let gw = TestGateway::start_with(demo_without_spare).await;
    let (mut a, _) = gw.connect("phone").await;
    let events = turn(&mut a, default_lane(), "what does this cost").await;
    let runtime = events
        .iter()
        .find_map(|e| match &e.body {
            ServerFrame::MessageStop(s) => s.runtime.clone(),
            _ => None,
        })
        .expect("a runtime footer");
    assert_eq!(runtime.cost, Some(0.0125));
    let plain = turn(&mut a, default_lane(), "hello").await;
    let runtime = plain.iter().find_map(|e| match &e.body {
        ServerFrame::MessageStop(s) => s.runtime.clone(),
        _ => None,
    });
    assert_eq!(
        runtime.and_then(|r| r.cost),
        None,
        "no cost reported, none shown"
    );
    gw.stop().await;
}
