//! Claude Code (through its ACP adapter `claude-agent-acp`) as a second real agent behind the
//! gateway, next to the demo agent, against a scripted fake Messages API in a loopback-only
//! network namespace (see `common/claude.rs`). Ignored where the adapter or network namespaces
//! are missing (the build script looks); never under CI.

#[path = "common/claude.rs"]
mod claude;
mod common;

use common::*;
use iris_client::Event;
use iris_gateway::config::{AgentTimeouts, NamedAgent};
use iris_protocol::{ChannelCreate, ClientFrame, Empty, Header, Role, ServerFrame, Step};

/// A gateway with Claude Code as the agent named `claude` beside the built-in demo; `default`
/// names the default agent.
async fn with_claude(env: &claude::ClaudeEnv, default: &str) -> TestGateway {
    TestGateway::start_with(|c| {
        c.agent_command = None;
        c.default_agent = Some(default.into());
        c.agents = vec![NamedAgent {
            name: "claude".into(),
            command: env.command_line(),
            cwd: Some(env.work.clone()),
            env: Vec::new(),
            timeouts: AgentTimeouts::default(),
            spare_session: None,
        }];
    })
    .await
}

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
#[cfg_attr(
    lacks_claude_adapter,
    ignore = "needs Claude Code's ACP adapter: (cd crates/gateway/tests/claude/adapter && npm ci), or IRIS_CLAUDE_ACP"
)]
#[cfg_attr(
    lacks_claude_netns,
    ignore = "needs network namespaces: unshare (util-linux) and ip (iproute2)"
)]
async fn claude_code_and_the_demo_answer_side_by_side_with_their_own_catalogs_and_models() {
    let env = claude::ClaudeEnv::new();
    let gw = with_claude(&env, "demo").await;
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

    // Claude Code offers its models as a session config option: switching is
    // `session/set_config_option`, and the next turn asks the fake API for that model.
    send(&mut a, Header::lane(&code, None), "/model haiku", false).await;
    let events = until(
        &mut a,
        |e| matches!(&e.body, ServerFrame::Message(m) if m.role == Role::System),
    )
    .await;
    let said = system_texts(&events);
    assert_eq!(said, ["Model switched to haiku."], "{:?}", types(&events));
    send(&mut a, Header::lane(&code, None), "and now", false).await;
    let events = until(&mut a, |e| {
        e.frame_type() == "agent.idle" && e.header.chat_id.as_deref() == Some(code.as_str())
    })
    .await;
    assert_eq!(
        stop_text(&events, &code).as_deref(),
        Some("Claude heard: and now")
    );
    // The turns' own requests (Claude Code's side requests offer no tools): the first, before
    // the switch, and the last.
    let models: Vec<String> = env
        .requests()
        .into_iter()
        .filter(|r| r["body"]["tools"].as_array().is_some_and(|t| !t.is_empty()))
        .filter_map(|r| r["body"]["model"].as_str().map(str::to_owned))
        .collect();
    let (before, after) = (models.first().unwrap(), models.last().unwrap());
    assert!(!before.contains("haiku"), "{before}");
    assert!(after.contains("haiku"), "{after}");
    gw.stop().await;
}

/// How many commands the gateway itself lists.
fn crate_commands() -> usize {
    iris_gateway::command::catalog_entries().len()
}

/// Claude Code's tool calls, approvals and plans as a phone sees them: a TodoWrite plan is a
/// checklist `commentary`; a Bash command is a tool card that first asks through
/// `picker.approval`, runs once a device allows it, and shows its output; then the final text.
#[tokio::test]
#[cfg_attr(
    lacks_claude_adapter,
    ignore = "needs Claude Code's ACP adapter: (cd crates/gateway/tests/claude/adapter && npm ci), or IRIS_CLAUDE_ACP"
)]
#[cfg_attr(
    lacks_claude_netns,
    ignore = "needs network namespaces: unshare (util-linux) and ip (iproute2)"
)]
async fn claude_code_s_plans_tools_and_approvals_reach_the_phone() {
    let env = claude::ClaudeEnv::new();
    let gw = with_claude(&env, "claude").await;
    let (mut a, _) = gw.connect("phone").await;

    // A TodoWrite plan: a checklist commentary, kept as the answer's plan step. The adapter names
    // the item in progress by its `activeForm`.
    let frames = turn(&mut a, default_lane(), "make a plan").await;
    let plan = "Plan:\n☑ Read the code\n◐ Fixing the bug\n☐ Run the tests";
    let commentary: Vec<&str> = frames
        .iter()
        .filter_map(|e| match &e.body {
            ServerFrame::Commentary(c) => Some(c.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(commentary, [plan], "{:?}", types(&frames));
    let stop = stop_of(&frames);
    assert_eq!(stop.final_text, "Run echo next.");
    assert!(
        matches!(stop.steps.as_slice(), [Step::Plan { text }] if text == plan),
        "{:?}",
        stop.steps
    );

    // A Bash command that writes a file: the tool card, then an approval a device answers, then
    // the command's output, then the final text.
    send(&mut a, default_lane(), "please run echo", false).await;
    let before = until(&mut a, |e| e.frame_type() == "picker.approval").await;
    let ServerFrame::PickerApproval(picker) = &before.last().unwrap().body else {
        unreachable!()
    };
    assert!(
        types(&before).contains(&"tool.start"),
        "{:?}",
        types(&before)
    );
    let command = "echo hi > greeting.txt && cat greeting.txt";
    assert!(picker.title.contains(command), "{picker:?}");
    let values: Vec<&str> = picker.choices.iter().map(|c| c.value.as_str()).collect();
    assert_eq!(values, ["allow-once", "allow-with-updates", "reject"]);
    assert!(
        !env.work.join("greeting.txt").exists(),
        "nothing ran before the approval"
    );
    select(&mut a, &picker.picker_id, "allow-once")
        .await
        .unwrap();
    let after = until_idle(&mut a).await;
    let end = after
        .iter()
        .find_map(|e| match &e.body {
            ServerFrame::ToolEnd(t) => Some(t.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("a tool.end: {:?}", types(&after)));
    assert!(end.ok, "{end:?}");
    assert_eq!(end.output_preview.as_deref(), Some("hi"));
    assert!(
        env.work.join("greeting.txt").exists(),
        "the allowed command ran"
    );
    let closed = after.iter().any(|e| {
        matches!(&e.body, ServerFrame::PickerClosed(c)
            if c.picker_id == picker.picker_id && c.value.as_deref() == Some("allow-once"))
    });
    assert!(closed, "{:?}", types(&after));
    let stop = stop_of(&after);
    assert_eq!(stop.final_text, "The command printed hi.");
    // The adapter reports usage: the footer has the context occupancy and a cost.
    let runtime = stop.runtime.as_ref().expect("a runtime footer");
    assert!(
        runtime.context_pct.is_some() && runtime.cost.is_some_and(|c| c > 0.0),
        "{runtime:?}"
    );
    let kinds: Vec<&str> = stop
        .steps
        .iter()
        .map(|s| match s {
            Step::Commentary { .. } => "commentary",
            Step::Plan { .. } => "plan",
            Step::Tool(_) => "tool",
            Step::Picker(_) => "picker",
        })
        .collect();
    assert_eq!(kinds, ["commentary", "tool", "picker"]);
    // Claude Code sends the command after the card; the answer's tool step still has it.
    let Step::Tool(tool) = &stop.steps[1] else {
        unreachable!()
    };
    let args = tool.args.as_ref().unwrap_or_else(|| panic!("{tool:?}"));
    assert_eq!(args["command"], command, "{tool:?}");
    assert!(
        tool.preview
            .as_deref()
            .is_some_and(|p| p.contains("echo hi")),
        "{tool:?}"
    );
    gw.stop().await;
}

fn stop_of(events: &[Event]) -> iris_protocol::MessageStop {
    events
        .iter()
        .find_map(|e| match &e.body {
            ServerFrame::MessageStop(s) => Some(s.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("a message.stop: {:?}", types(events)))
}

/// The `tool_result` blocks Claude Code sent back to the fake API, as JSON text.
fn tool_results(env: &claude::ClaudeEnv) -> Vec<String> {
    env.requests()
        .iter()
        .flat_map(|r| {
            r["body"]["messages"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_result")
        .map(|b| b["content"].to_string())
        .collect()
}

/// Claude Code's `AskUserQuestion` reaches the phone through ACP elicitation (offered because
/// the gateway advertises form elicitation): a question picker with the options as choices and
/// a typed answer; a choice, a typed answer, and two questions asked one after the other go back
/// to Claude as the tool's result.
#[tokio::test]
#[cfg_attr(
    lacks_claude_adapter,
    ignore = "needs Claude Code's ACP adapter: (cd crates/gateway/tests/claude/adapter && npm ci), or IRIS_CLAUDE_ACP"
)]
#[cfg_attr(
    lacks_claude_netns,
    ignore = "needs network namespaces: unshare (util-linux) and ip (iproute2)"
)]
async fn claude_code_s_questions_are_answered_from_the_phone() {
    let env = claude::ClaudeEnv::new();
    let gw = with_claude(&env, "claude").await;
    let (mut a, _) = gw.connect("phone").await;

    send(&mut a, default_lane(), "ask me a question", false).await;
    let before = until(&mut a, |e| e.frame_type() == "picker.clarify").await;
    let ServerFrame::PickerClarify(picker) = &before.last().unwrap().body else {
        unreachable!()
    };
    assert_eq!(picker.title, "Which color do you prefer?");
    let choices: Vec<&str> = picker.choices.iter().map(|c| c.value.as_str()).collect();
    assert_eq!(choices, ["Red", "Blue"]);
    assert!(
        picker.free_text,
        "the adapter's Other box is a typed answer"
    );
    select(&mut a, &picker.picker_id, "Blue").await.unwrap();
    let after = until_idle(&mut a).await;
    assert_eq!(stop_of(&after).final_text, "Noted your color.");
    let results = tool_results(&env);
    assert!(
        results
            .iter()
            .any(|r| r.contains("Which color do you prefer?") && r.contains("Blue")),
        "{results:?}"
    );

    send(&mut a, default_lane(), "ask me again", false).await;
    let before = until(&mut a, |e| e.frame_type() == "picker.clarify").await;
    let ServerFrame::PickerClarify(picker) = &before.last().unwrap().body else {
        unreachable!()
    };
    select(&mut a, &picker.picker_id, "Mango, ripe")
        .await
        .unwrap();
    let after = until_idle(&mut a).await;
    assert_eq!(stop_of(&after).final_text, "Noted your fruit.");
    let results = tool_results(&env);
    assert!(
        results
            .iter()
            .any(|r| r.contains("Which fruit do you like?") && r.contains("Mango, ripe")),
        "{results:?}"
    );

    // Two questions, one a multi-select: asked one after the other, answered together.
    send(&mut a, default_lane(), "ask me twice", false).await;
    let mut titles = Vec::new();
    for answer in ["Dog", "Juice"] {
        let before = until(&mut a, |e| e.frame_type() == "picker.clarify").await;
        let ServerFrame::PickerClarify(picker) = &before.last().unwrap().body else {
            unreachable!()
        };
        titles.push(picker.title.clone());
        select(&mut a, &picker.picker_id, answer).await.unwrap();
    }
    assert_eq!(
        titles,
        [
            "(1/2) Which pet do you have?",
            "(2/2) Which drinks do you like?"
        ]
    );
    let after = until_idle(&mut a).await;
    assert_eq!(stop_of(&after).final_text, "Noted your pet and drinks.");
    let results = tool_results(&env);
    assert!(
        results.iter().any(|r| r.contains("Which pet do you have?")
            && r.contains("Dog")
            && r.contains("Which drinks do you like?")
            && r.contains("Juice")),
        "{results:?}"
    );
    gw.stop().await;
}
