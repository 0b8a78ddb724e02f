//! Codex (through its ACP adapter `codex-acp`) as a third real agent behind the gateway, against
//! a scripted fake Responses API in a loopback-only network namespace (see `common/codex.rs`).
//! Ignored where the adapter or network namespaces are missing (the build script looks); never
//! under CI.

#[path = "common/codex.rs"]
mod codex;
mod common;

use common::*;
use iris_client::Event;
use iris_gateway::config::{AgentTimeouts, NamedAgent};
use iris_protocol::{ChannelCreate, ClientFrame, Header, ServerFrame, Step};

/// A gateway with Codex as the agent named `codex` beside the built-in demo; `default` names the
/// default agent.
async fn with_codex(env: &codex::CodexEnv, default: &str) -> TestGateway {
    TestGateway::start_with(|c| {
        c.agent_command = None;
        c.default_agent = Some(default.into());
        c.agents = vec![NamedAgent {
            name: "codex".into(),
            command: env.command_line(),
            cwd: Some(env.work.clone()),
            env: Vec::new(),
            timeouts: AgentTimeouts::default(),
            spare_session: None,
        }];
    })
    .await
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

/// A chat with Codex answers from the fake API, streamed, with the configured model.
#[tokio::test]
#[cfg_attr(
    lacks_codex_adapter,
    ignore = "needs Codex's ACP adapter: (cd crates/gateway/tests/codex/adapter && npm ci), or IRIS_CODEX_ACP"
)]
#[cfg_attr(
    lacks_codex_netns,
    ignore = "needs network namespaces: unshare (util-linux) and ip (iproute2)"
)]
async fn codex_answers_a_chat_from_the_phone() {
    let env = codex::CodexEnv::new();
    let gw = with_codex(&env, "demo").await;
    let (mut a, _) = gw.connect("phone").await;
    let created = a
        .request(
            Header::default(),
            ClientFrame::ChannelCreate(ChannelCreate {
                name: "Code".into(),
                agent: Some("codex".into()),
                ..Default::default()
            }),
        )
        .await
        .unwrap();
    let code = created.json()["payload"]["chat_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let events = turn(&mut a, Header::lane(&code, None), "hello codex").await;
    let stop = stop_of(&events);
    // Codex warns first that it has no metadata for the fake's model (see `common/codex.rs`).
    assert!(
        stop.final_text.ends_with("Codex heard: hello codex"),
        "{:?}\nrequests: {:?}\nfake API: {}",
        stop.final_text,
        env.requests(),
        env.fake_api_stderr()
    );
    let turns: Vec<_> = env
        .requests()
        .into_iter()
        .filter(|r| r["path"] == "/v1/responses")
        .collect();
    assert_eq!(turns.len(), 1, "{turns:?}");
    assert_eq!(turns[0]["body"]["stream"], true);
    assert_eq!(turns[0]["body"]["model"], codex::MODEL);
    gw.stop().await;
}

/// A shell command as a phone sees it: a tool card that first asks through `picker.approval`,
/// runs once a device allows it and shows its output; then the final text.
#[tokio::test]
#[cfg_attr(
    lacks_codex_adapter,
    ignore = "needs Codex's ACP adapter: (cd crates/gateway/tests/codex/adapter && npm ci), or IRIS_CODEX_ACP"
)]
#[cfg_attr(
    lacks_codex_netns,
    ignore = "needs network namespaces: unshare (util-linux) and ip (iproute2)"
)]
async fn codex_s_commands_ask_the_phone_first() {
    let env = codex::CodexEnv::new();
    let gw = with_codex(&env, "codex").await;
    let (mut a, _) = gw.connect("phone").await;

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
    // The choices are the adapter's permission options, by their ids.
    assert_eq!(
        values,
        ["allow_once", "accept_execpolicy_amendment", "cancel"]
    );
    assert!(
        !env.work.join("greeting.txt").exists(),
        "nothing ran before the approval"
    );
    select(&mut a, &picker.picker_id, "allow_once")
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
    // Codex sends a command's output only in the update's `_meta` (`terminal_output_delta`),
    // which the gateway does not read: the card has no output preview.
    assert_eq!(end.output_preview, None, "{end:?}");
    assert_eq!(
        std::fs::read_to_string(env.work.join("greeting.txt")).unwrap(),
        "hi\n",
        "the allowed command ran"
    );
    let stop = stop_of(&after);
    assert_eq!(stop.final_text, "The command printed hi.");
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
    assert_eq!(kinds, ["commentary", "tool", "picker"], "{:?}", stop.steps);
    let Step::Commentary { text } = &stop.steps[0] else {
        unreachable!()
    };
    assert!(text.ends_with("Let me run it."), "{text:?}");
    let Step::Tool(tool) = &stop.steps[1] else {
        unreachable!()
    };
    let args = tool.args.as_ref().unwrap_or_else(|| panic!("{tool:?}"));
    assert_eq!(args["command"], command, "{tool:?}");
    // The fake API got the command's output back.
    let outputs: Vec<String> = env
        .requests()
        .iter()
        .flat_map(|r| r["body"]["input"].as_array().cloned().unwrap_or_default())
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| i["output"].to_string())
        .collect();
    assert!(
        outputs
            .iter()
            .any(|o| o.contains("exited with code 0") && o.contains("hi")),
        "{outputs:?}"
    );
    gw.stop().await;
}
