//! Several agents behind one gateway: each channel talks to its own named agent, a thread to its
//! channel's; `channel.set_agent` and `/agent` switch it; one agent crashing leaves the others'
//! chats answering; catalogs, `/status` and `/metrics` are per agent; gateway secrets never reach
//! an agent. Both agents are the demo agent under two names (`alpha`, `beta`), told apart by
//! their catalogs (`DEMO_EXTRA_COMMAND`) and their environment.

mod common;

use common::*;
use iris_client::{Client, Event};
use iris_gateway::config::{AgentTimeouts, NamedAgent, Secret};
use iris_protocol::{
    ChannelCreate, ChannelSetAgent, ClientFrame, Empty, ErrorCode, Header, ServerFrame,
};

fn named(name: &str, extra_command: &str) -> NamedAgent {
    NamedAgent {
        name: name.into(),
        command: demo_agent(),
        cwd: None,
        env: vec![
            ("DEMO_EXTRA_COMMAND".into(), Secret::from(extra_command)),
            ("DEMO_WHO".into(), Secret::from(name)),
        ],
        timeouts: AgentTimeouts::default(),
        spare_session: None,
    }
}

/// A gateway with the agents `alpha` (the default) and `beta`, and no `--agent`.
async fn two_agents() -> TestGateway {
    TestGateway::start_with(|c| {
        c.agent_command = None;
        c.agents = vec![named("alpha", "alphaonly"), named("beta", "betaonly")];
        c.default_agent = Some("alpha".into());
    })
    .await
}

async fn create(
    client: &mut Client,
    req: ChannelCreate,
) -> Result<Event, iris_client::ClientError> {
    client
        .request(Header::default(), ClientFrame::ChannelCreate(req))
        .await
}

async fn new_channel(client: &mut Client, name: &str, agent: Option<&str>) -> String {
    let created = create(
        client,
        ChannelCreate {
            name: name.into(),
            agent: agent.map(str::to_owned),
            ..Default::default()
        },
    )
    .await
    .expect("channel.create answered");
    created.json()["payload"]["chat_id"]
        .as_str()
        .expect("a chat_id")
        .to_owned()
}

fn error_code(result: Result<Event, iris_client::ClientError>) -> ErrorCode {
    match result {
        Err(iris_client::ClientError::Server { code, .. }) => code,
        other => panic!("expected an error frame, got {other:?}"),
    }
}

/// Every frame up to the `agent.idle` of this chat.
async fn idle_in(client: &mut Client, chat: &str) -> Vec<Event> {
    until(client, |e| {
        e.frame_type() == "agent.idle" && e.header.chat_id.as_deref() == Some(chat)
    })
    .await
}

/// Sends a message to a channel and returns the system messages and answer of its turn.
async fn ask(client: &mut Client, chat: &str, text: &str) -> Vec<Event> {
    send(client, Header::lane(chat, None), text, false).await;
    idle_in(client, chat).await
}

/// `(agent, model)` of each runtime the events carry (answers and system messages).
fn runtimes(events: &[Event]) -> Vec<(Option<String>, Option<String>)> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            ServerFrame::Message(m) => m.runtime.clone(),
            ServerFrame::MessageStop(s) => s.runtime.clone(),
            _ => None,
        })
        .map(|r| (r.agent, r.model))
        .collect()
}

fn in_chat<'a>(events: &'a [Event], chat: &str) -> Vec<&'a Event> {
    events
        .iter()
        .filter(|e| e.header.chat_id.as_deref() == Some(chat))
        .collect()
}

#[tokio::test]
async fn channels_choose_their_agent_and_the_directory_says_which() {
    let gw = two_agents().await;
    let (mut a, ack) = gw.connect("phone").await;
    let default = ack.channels.iter().find(|c| c.is_default).unwrap();
    assert_eq!(default.agent.as_deref(), Some("alpha"));
    assert_eq!(
        ack.server_caps.agents,
        ["alpha", "beta", "demo"],
        "hello.ack names the agents (the built-in demo among them), the default first"
    );

    let created = create(
        &mut a,
        ChannelCreate {
            name: "Code".into(),
            agent: Some("beta".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(created.json()["payload"]["agent"], "beta");
    let code = created.json()["payload"]["chat_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let plain = new_channel(&mut a, "Plain", None).await;

    // A thread has its channel's agent.
    let thread = create(
        &mut a,
        ChannelCreate {
            name: "Side".into(),
            parent_chat_id: Some(code.clone()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(thread.json()["payload"]["agent"], "beta");

    // Bad agents are clear errors, and create nothing.
    let unknown = ChannelCreate {
        name: "Nope".into(),
        agent: Some("gamma".into()),
        ..Default::default()
    };
    assert_eq!(
        error_code(create(&mut a, unknown).await),
        ErrorCode::NotFound
    );
    let thread_with_agent = ChannelCreate {
        name: "Nope".into(),
        parent_chat_id: Some(code.clone()),
        agent: Some("alpha".into()),
        ..Default::default()
    };
    assert_eq!(
        error_code(create(&mut a, thread_with_agent).await),
        ErrorCode::BadRequest
    );

    // A second device sees the same directory.
    let (_b, ack) = gw.connect("laptop").await;
    let agent_of = |id: &str| {
        ack.channels
            .iter()
            .find(|c| c.chat_id == id)
            .and_then(|c| c.agent.clone())
    };
    assert_eq!(agent_of(&code).as_deref(), Some("beta"));
    assert_eq!(agent_of(&plain).as_deref(), Some("alpha"));
    assert_eq!(
        ack.channels.len(),
        4,
        "nothing was made of the refused requests"
    );

    // Each channel's chats are answered by its own agent.
    let beta_status = lane_command(&mut a, &code, "/status").await;
    assert!(beta_status.contains("Agent: beta"), "{beta_status}");
    let alpha_status = lane_command(&mut a, "default", "/status").await;
    assert!(alpha_status.contains("Agent: alpha"), "{alpha_status}");
    assert!(
        alpha_status.contains("alpha (default,") && alpha_status.contains("beta ("),
        "/status lists every agent: {alpha_status}"
    );
    let who = final_text(&ask(&mut a, &code, "environment").await);
    assert!(who.contains("DEMO_WHO=beta"), "{who}");
    gw.stop().await;
}

#[tokio::test]
async fn gateway_secrets_never_reach_an_agent() {
    // Set before the gateway starts its agents; no other test of this binary reads them.
    std::env::set_var("IRIS_TOKEN", "a-token-that-must-stay-home");
    std::env::set_var("IRIS_FCM_CREDENTIALS", "/secret/path.json");
    let gw = two_agents().await;
    let (mut a, _) = gw.connect("phone").await;
    let seen = final_text(&ask(&mut a, "default", "environment").await);
    assert_eq!(
        seen, "Environment: DEMO_EXTRA_COMMAND=alphaonly DEMO_WHO=alpha",
        "only the agent's own variables, no IRIS_* one"
    );
    gw.stop().await;
}

#[tokio::test]
async fn one_agent_crashing_mid_turn_leaves_the_other_answering() {
    let gw = two_agents().await;
    let (mut a, _) = gw.connect("phone").await;
    let code = new_channel(&mut a, "Code", Some("beta")).await;
    // Both agents are up.
    ask(&mut a, "default", "hello").await;
    ask(&mut a, &code, "hello").await;

    // alpha streams a slow answer while beta crashes mid-turn.
    send(&mut a, Header::lane("default", None), "slow please", false).await;
    send(&mut a, Header::lane(&code, None), "crash now", false).await;
    let mut events = Vec::new();
    let mut idle = std::collections::HashSet::new();
    while idle.len() < 2 {
        let batch = until(&mut a, |e| e.frame_type() == "agent.idle").await;
        if let Some(chat) = batch.last().and_then(|e| e.header.chat_id.clone()) {
            idle.insert(chat);
        }
        events.extend(batch);
    }
    let alpha = in_chat(&events, "default");
    let alpha_answer = alpha.iter().find_map(|e| match &e.body {
        ServerFrame::MessageStop(s) => Some(s.final_text.clone()),
        _ => None,
    });
    let alpha_answer = alpha_answer.expect("alpha's turn completed");
    assert!(alpha_answer.contains("Echo: slow please"), "{alpha_answer}");
    let beta: Vec<Event> = in_chat(&events, &code).into_iter().cloned().collect();
    let beta_notes = system_texts(&beta).join("\n");
    assert!(
        beta_notes.to_lowercase().contains("agent"),
        "the crash is told in beta's chat: {beta_notes}"
    );

    // The next message restarts beta only; alpha's process was never touched.
    let again = final_text(&ask(&mut a, &code, "hello again").await);
    assert_eq!(again, "Echo: hello again");
    let reports = gw.agents.reports();
    let restarts = |name: &str| reports.iter().find(|r| r.name == name).unwrap().restarts;
    assert_eq!(restarts("alpha"), 0);
    assert_eq!(restarts("beta"), 1);

    let (_, body) = gateway_get(&gw, "/metrics").await;
    assert!(
        body.contains("iris_agent_restarts_total{agent=\"alpha\"} 0"),
        "{body}"
    );
    assert!(
        body.contains("iris_agent_restarts_total{agent=\"beta\"} 1"),
        "{body}"
    );
    assert!(body.contains("iris_agent_up{agent=\"alpha\"} 1"), "{body}");
    gw.stop().await;
}

async fn set_agent(
    client: &mut Client,
    chat: &str,
    agent: &str,
) -> Result<Event, iris_client::ClientError> {
    let frame = ClientFrame::ChannelSetAgent(ChannelSetAgent {
        agent: agent.into(),
    });
    client.request(Header::lane(chat, None), frame).await
}

#[tokio::test]
async fn switching_a_channel_s_agent_starts_fresh_sessions_and_keeps_the_history() {
    let gw = two_agents().await;
    let (mut a, _) = gw.connect("phone").await;
    let (mut b, _) = gw.connect("laptop").await;
    let events = ask(&mut a, "default", "remember me").await;
    assert_eq!(final_text(&events), "Echo: remember me");
    // The answer names the agent that gave it, for a client's model chip.
    assert_eq!(
        runtimes(&events),
        [(Some("alpha".to_owned()), Some("echo".to_owned()))]
    );

    // `/agent` offers the agents, the channel's own marked.
    send(&mut a, default_lane(), "/agent", false).await;
    let events = until(&mut a, |e| e.frame_type() == "picker.choice").await;
    let picker = match &events.last().unwrap().body {
        ServerFrame::PickerChoice(p) => p.clone(),
        other => panic!("{other:?}"),
    };
    let offered: Vec<(&str, bool)> = picker
        .choices
        .iter()
        .map(|c| (c.value.as_str(), c.is_current))
        .collect();
    assert_eq!(offered, [("alpha", true), ("beta", false), ("demo", false)]);
    assert_eq!(
        error_code(select(&mut a, &picker.picker_id, "gamma").await),
        ErrorCode::BadRequest
    );
    select(&mut a, &picker.picker_id, "beta").await.unwrap();
    let events = until(&mut b, |e| e.frame_type() == "channel.list").await;
    let notes = system_texts(&events).join("\n");
    assert!(notes.contains("now talks to beta"), "{notes}");
    // The note names the new agent and no model: not known before its session's first answer.
    assert_eq!(
        runtimes(&events).last(),
        Some(&(Some("beta".to_owned()), None))
    );
    match &events.last().unwrap().body {
        ServerFrame::ChannelList(l) => {
            let default = l.channels.iter().find(|c| c.chat_id == "default").unwrap();
            assert_eq!(default.agent.as_deref(), Some("beta"));
        }
        other => panic!("{other:?}"),
    }
    until(&mut a, |e| e.frame_type() == "channel.list").await;
    let status = lane_command(&mut a, "default", "/status").await;
    assert!(status.contains("Agent: beta"), "{status}");

    // The history stays.
    let history = a
        .request(
            default_lane(),
            ClientFrame::History(iris_protocol::HistoryRequest {
                limit: Some(50),
                ..Default::default()
            }),
        )
        .await
        .unwrap();
    assert!(history.raw.contains("Echo: remember me"));

    // The request does the same, and says what is wrong.
    let back = set_agent(&mut a, "default", "alpha").await.unwrap();
    assert_eq!(back.frame_type(), "channel.list");
    let who = final_text(&ask(&mut a, "default", "environment").await);
    assert!(who.contains("DEMO_WHO=alpha"), "{who}");
    assert_eq!(
        error_code(set_agent(&mut a, "default", "gamma").await),
        ErrorCode::NotFound
    );
    assert_eq!(
        error_code(set_agent(&mut a, "c_missing", "beta").await),
        ErrorCode::NotFound
    );
    let thread = create_channel(&mut a, "Side", Some("default")).await;
    assert_eq!(
        error_code(set_agent(&mut a, &thread, "beta").await),
        ErrorCode::BadRequest
    );
    let same = set_agent(&mut a, "default", "alpha").await.unwrap();
    assert_eq!(
        same.frame_type(),
        "channel.list",
        "no change is still an answer"
    );
    gw.stop().await;
}

#[tokio::test]
async fn the_catalog_is_the_named_lane_s_agent_s() {
    let gw = two_agents().await;
    let (mut a, _) = gw.connect("phone").await;
    let code = new_channel(&mut a, "Code", Some("beta")).await;
    // Agents advertise their commands once they run.
    ask(&mut a, "default", "hello").await;
    ask(&mut a, &code, "hello").await;
    let names = |e: &Event| -> Vec<String> {
        match &e.body {
            ServerFrame::CommandsCatalog(c) => c.commands.iter().map(|c| c.name.clone()).collect(),
            other => panic!("{other:?}"),
        }
    };
    let catalog = || ClientFrame::CommandsCatalog(Empty {});
    let beta = a
        .request(Header::lane(&code, None), catalog())
        .await
        .unwrap();
    assert!(names(&beta).contains(&"/betaonly".to_owned()));
    assert!(!names(&beta).contains(&"/alphaonly".to_owned()));
    assert!(names(&beta).contains(&"/agent".to_owned()));
    let default = a.request(Header::default(), catalog()).await.unwrap();
    assert!(names(&default).contains(&"/alphaonly".to_owned()));
    assert!(!names(&default).contains(&"/betaonly".to_owned()));
    let missing = a.request(Header::lane("c_missing", None), catalog()).await;
    assert_eq!(error_code(missing), ErrorCode::NotFound);
    gw.stop().await;
}

#[tokio::test]
async fn the_agent_flag_alone_is_one_agent_named_after_its_program_and_demo_stays() {
    let gw = TestGateway::start_demo().await;
    assert_eq!(gw.agents.default_agent(), "demo");
    assert_eq!(gw.agents.names(), ["demo"]);
    let (_a, ack) = gw.connect("phone").await;
    assert_eq!(ack.channels[0].agent.as_deref(), Some("demo"));
    gw.stop().await;

    let gw = TestGateway::start_with(|c| {
        c.agent_command = None;
        c.agents = vec![named("alpha", "x")];
    })
    .await;
    assert_eq!(
        gw.agents.default_agent(),
        "alpha",
        "one named agent is the default"
    );
    assert_eq!(gw.agents.names(), ["alpha", "demo"]);
    gw.stop().await;
}

#[tokio::test]
async fn a_switch_lets_the_running_turn_finish_and_runs_waiting_messages_on_the_new_agent() {
    let gw = two_agents().await;
    let (mut a, _) = gw.connect("phone").await;
    send(&mut a, default_lane(), "slow please", false).await;
    send(&mut a, default_lane(), "/agent beta", false).await;
    send(&mut a, default_lane(), "environment", false).await;
    let first = idle_in(&mut a, "default").await;
    assert!(
        final_text(&first).contains("Echo: slow please"),
        "the turn finished on alpha"
    );
    let second = idle_in(&mut a, "default").await;
    let notes = system_texts(&second).join("\n");
    assert!(notes.contains("now talks to beta"), "{notes}");
    let who = final_text(&second);
    assert!(
        who.contains("DEMO_WHO=beta"),
        "the waiting message ran on beta: {who}"
    );
    gw.stop().await;
}
