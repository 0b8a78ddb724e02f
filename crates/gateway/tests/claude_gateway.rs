//! Claude Code (Zed's ACP adapter) as a second real agent behind the gateway, next to the demo
//! agent, against a scripted fake Messages API in a loopback-only network namespace (see
//! `common/claude.rs`). Skipped with a message when the adapter is not installed; never under CI.

#[path = "common/claude.rs"]
mod claude;
mod common;

use common::*;
use iris_client::Event;
use iris_gateway::config::{AgentTimeouts, NamedAgent};
use iris_protocol::{ChannelCreate, ClientFrame, Empty, Header, ServerFrame};

fn stop_text(events: &[Event], chat: &str) -> Option<String> {
    events.iter().find_map(|e| match &e.body {
        ServerFrame::MessageStop(s) if e.header.chat_id.as_deref() == Some(chat) => {
            Some(s.final_text.clone())
        }
        _ => None,
    })
}

fn catalog_names(e: &Event) -> Vec<String> {
    match &e.body {
        ServerFrame::CommandsCatalog(c) => c.commands.iter().map(|c| c.name.clone()).collect(),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn claude_code_and_the_demo_answer_side_by_side_with_their_own_catalogs_and_models() {
    let Some(env) = claude::ClaudeEnv::new() else {
        return;
    };
    let gw = TestGateway::start_with(|c| {
        c.agent_command = None;
        c.default_agent = Some("demo".into());
        c.agents = vec![NamedAgent {
            name: "claude".into(),
            command: env.command_line(),
            cwd: Some(env.work.clone()),
            env: Vec::new(),
            timeouts: AgentTimeouts::default(),
        }];
    })
    .await;
    let (mut a, _) = gw.connect("phone").await;
    let created = a
        .request(
            Header::default(),
            ClientFrame::ChannelCreate(ChannelCreate {
                name: "Code".into(),
                agent: Some("claude".into()),
                ..Default::default()
            }),
        )
        .await
        .unwrap();
    let code = created.json()["payload"]["chat_id"]
        .as_str()
        .unwrap()
        .to_owned();

    // Both stream at once: the demo slowly, Claude Code from the fake API.
    send(&mut a, Header::lane("default", None), "slow please", false).await;
    send(&mut a, Header::lane(&code, None), "hello claude", false).await;
    let mut events = Vec::new();
    let mut idle = std::collections::HashSet::new();
    while idle.len() < 2 {
        let Ok(e) = a.next_event_timeout(FRAME_WAIT).await else {
            panic!(
                "the turns did not end: {:?}\nrequests: {:?}\nfake API: {}",
                events
                    .iter()
                    .map(|e: &Event| e.raw.clone())
                    .collect::<Vec<_>>(),
                env.requests(),
                env.fake_api_stderr()
            );
        };
        if e.frame_type() == "agent.idle" {
            idle.insert(e.header.chat_id.clone().unwrap_or_default());
        }
        events.push(e);
    }
    let claude = stop_text(&events, &code).unwrap_or_else(|| {
        panic!(
            "no answer from Claude Code: {:?}\nfake API: {}",
            system_texts(&events),
            env.fake_api_stderr()
        )
    });
    assert_eq!(claude, "Claude heard: hello claude");
    assert!(stop_text(&events, "default")
        .unwrap()
        .contains("Echo: slow please"));
    let streamed = env.requests().iter().any(|r| {
        r["path"]
            .as_str()
            .is_some_and(|p| p.starts_with("/v1/messages"))
            && r["body"]["stream"] == true
    });
    assert!(streamed, "Claude Code streamed from the fake API");

    // Each chat's catalog and model picker are its agent's.
    let catalog = || ClientFrame::CommandsCatalog(Empty {});
    let code_catalog = catalog_names(
        &a.request(Header::lane(&code, None), catalog())
            .await
            .unwrap(),
    );
    let demo_catalog = catalog_names(&a.request(Header::default(), catalog()).await.unwrap());
    assert!(
        demo_catalog.contains(&"/tools".to_owned()),
        "{demo_catalog:?}"
    );
    assert!(
        !code_catalog.contains(&"/tools".to_owned()),
        "{code_catalog:?}"
    );
    assert!(
        code_catalog.len() > crate_commands(),
        "Claude Code's commands: {code_catalog:?}"
    );

    send(&mut a, Header::lane(&code, None), "/model", false).await;
    let events = until(&mut a, |e| e.frame_type() == "picker.model").await;
    let picker = events.last().unwrap().json();
    let ids: Vec<String> = picker["payload"]["providers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["models"].as_array().unwrap().iter())
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(ids.contains(&"opus".to_owned()), "{ids:?}");
    assert!(!ids.iter().any(|id| id.starts_with("demo:")), "{ids:?}");
    gw.stop().await;
}

/// How many commands the gateway itself lists.
fn crate_commands() -> usize {
    iris_gateway::command::catalog_entries().len()
}
