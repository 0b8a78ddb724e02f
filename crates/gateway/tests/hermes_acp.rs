//! Real Hermes (hermes-agent 0.19.0, `hermes acp`) driven through `iris_acp::AgentClient`, against
//! a scripted fake LLM in a loopback-only network namespace.
//!
//! These tests pin what the gateway relies on: the handshake, streamed text and reasoning, tool
//! calls and their titles. Permissions and cancellation are in `hermes_acp_permissions.rs`,
//! titles, usage, models and `/steer` in `hermes_acp_session.rs`. When a Hermes upgrade changes
//! any of these, a test here fails and says which assumption broke.
//!
//! Ignored where no Hermes venv or network namespaces exist (the build script looks); never
//! under CI.

#[path = "common/hermes_drive.rs"]
#[macro_use]
mod drive;

use drive::hermes::HermesEnv;
use drive::*;
use iris_acp::{
    ContentBlock, SessionUpdate, StopReason, ToolCallContent, ToolCallStatus, ToolKind,
};
use serde_json::json;

// ---------------------------------------------------------------------------------------------
// Handshake.

/// `initialize` advertises what the gateway relies on (session/load, image prompts), and
/// `session/new` lists the models the fake endpoint serves, the modes, and the slash commands,
/// without calling the LLM.
#[tokio::test]
#[cfg_attr(
    lacks_hermes_venv,
    ignore = "needs a Hermes venv: IRIS_HERMES_VENV, or .venv in the checkout (README, Connecting Hermes)"
)]
#[cfg_attr(
    lacks_hermes_netns,
    ignore = "needs network namespaces: unshare (util-linux) and ip (iproute2)"
)]
async fn initialize_and_new_session_report_capabilities_models_and_commands() {
    let env = hermes_env!(json!([]));
    within(async {
        let mut h = start(&env).await;
        assert_eq!(h.init.protocol_version, 1);
        assert!(h.init.agent_capabilities.load_session, "{:?}", h.init);
        assert!(
            h.init.agent_capabilities.prompt_capabilities.image,
            "{:?}",
            h.init
        );
        let info = h.init.agent_info.as_ref().expect("agentInfo");
        assert_eq!(info.name, "hermes-agent");
        assert_eq!(info.version, "0.19.0");

        let models = h.session.models.as_ref().expect("session/new lists models");
        assert_eq!(models.current_model_id, hermes::MODEL_ID);
        let ids: Vec<&str> = models
            .available_models
            .iter()
            .map(|m| m.model_id.as_str())
            .collect();
        assert!(ids.contains(&hermes::MODEL_ID), "{ids:?}");
        assert!(ids.contains(&hermes::OTHER_MODEL_ID), "{ids:?}");
        let modes = h.session.modes.as_ref().expect("session/new lists modes");
        assert_eq!(modes.current_mode_id, "default");
        let mode_ids: Vec<&str> = modes
            .available_modes
            .iter()
            .map(|m| m.id.as_str())
            .collect();
        assert_eq!(mode_ids, ["default", "accept_edits", "dont_ask"]);

        let Some(SessionUpdate::AvailableCommandsUpdate(commands)) =
            wait_update(&mut h.events, SHORT, |u| {
                matches!(u, SessionUpdate::AvailableCommandsUpdate(_))
            })
            .await
        else {
            panic!("no available_commands_update after session/new");
        };
        let names: Vec<&str> = commands
            .available_commands
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        for expected in ["help", "model", "steer", "queue", "compact", "reset"] {
            assert!(
                names.contains(&expected),
                "{expected} missing from {names:?}"
            );
        }
        let steer = commands
            .available_commands
            .iter()
            .find(|c| c.name == "steer")
            .unwrap();
        assert_eq!(
            steer.input.as_ref().map(|i| i.hint.as_str()),
            Some("guidance for the active turn")
        );

        // Starting a session costs no tokens: only model metadata was fetched.
        assert!(env.chat_requests().is_empty(), "{:?}", env.chat_requests());
        assert!(env
            .requests()
            .iter()
            .any(|r| r["method"] == "GET" && r["path"] == "/v1/models"));
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Streaming.

/// A scripted reply arrives as several agent_message_chunk updates that concatenate to it
/// exactly; the next turn carries the history; unmatched prompts get the default echo.
#[tokio::test]
#[cfg_attr(
    lacks_hermes_venv,
    ignore = "needs a Hermes venv: IRIS_HERMES_VENV, or .venv in the checkout (README, Connecting Hermes)"
)]
#[cfg_attr(
    lacks_hermes_netns,
    ignore = "needs network namespaces: unshare (util-linux) and ip (iproute2)"
)]
async fn streamed_answer_is_the_concatenation_of_message_chunks() {
    let env = hermes_env!(json!([
        {"match": "hello", "reply": {"chunks": ["Hello ", "from the ", "fake LLM!"]}}
    ]));
    within(async {
        let mut h = start(&env).await;
        let first = turn(&mut h, "hello there").await;
        assert_eq!(first.response().stop_reason, StopReason::EndTurn);
        assert_eq!(first.text(), "Hello from the fake LLM!");
        assert_eq!(first.message_chunks(), ["Hello ", "from the ", "fake LLM!"]);

        let requests = turn_requests_for(&env, "hello there");
        assert_eq!(requests.len(), 1, "{requests:?}");
        assert_eq!(requests[0]["stream"], true);
        assert_eq!(requests[0]["model"], "fake-model");
        let tools = requests[0]["tool_names"].as_array().unwrap();
        assert!(tools.contains(&json!("terminal")), "{tools:?}");

        let second = turn(&mut h, "something else").await;
        assert_eq!(second.text(), "OK: something else");
        let requests = turn_requests_for(&env, "something else");
        assert_eq!(requests.len(), 1);
        let history = requests[0]["body"]["messages"].to_string();
        assert!(history.contains("hello there") && history.contains("Hello from the fake LLM!"));
    })
    .await;
}

/// `delta.reasoning_content` from the model becomes agent_thought_chunk updates, all before the
/// answer's first agent_message_chunk.
#[tokio::test]
#[cfg_attr(
    lacks_hermes_venv,
    ignore = "needs a Hermes venv: IRIS_HERMES_VENV, or .venv in the checkout (README, Connecting Hermes)"
)]
#[cfg_attr(
    lacks_hermes_netns,
    ignore = "needs network namespaces: unshare (util-linux) and ip (iproute2)"
)]
async fn reasoning_arrives_as_thought_chunks_before_the_answer() {
    let env = hermes_env!(json!([
        {"match": "think", "reply": {
            "reasoning": "Let me think about this.",
            "content": "Thought about it."
        }}
    ]));
    within(async {
        let mut h = start(&env).await;
        let t = turn(&mut h, "think first").await;
        assert_eq!(t.thoughts(), "Let me think about this.");
        assert_eq!(t.text(), "Thought about it.");
        let last_thought = t
            .updates
            .iter()
            .rposition(|u| matches!(u, SessionUpdate::AgentThoughtChunk(_)))
            .unwrap();
        let first_message = t
            .position(|u| matches!(u, SessionUpdate::AgentMessageChunk(_)))
            .unwrap();
        assert!(last_thought < first_message);
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Tools.

/// A terminal tool call shows as tool_call "terminal: <command>" (kind execute, the command as
/// content, no rawInput), then tool_call_update completed with the output; the model's next
/// request carries the tool result, and its final answer streams after the tool.
#[tokio::test]
#[cfg_attr(
    lacks_hermes_venv,
    ignore = "needs a Hermes venv: IRIS_HERMES_VENV, or .venv in the checkout (README, Connecting Hermes)"
)]
#[cfg_attr(
    lacks_hermes_netns,
    ignore = "needs network namespaces: unshare (util-linux) and ip (iproute2)"
)]
async fn terminal_tool_call_completes_then_the_final_answer_streams() {
    let env = hermes_env!(json!([
        {"match": "run a command", "reply": {"tool_calls": [
            {"name": "terminal", "arguments": {"command": "echo hello"}}
        ]}},
        {"after_tool": true, "reply": {"content": "The command printed hello."}}
    ]));
    within(async {
        let mut h = start(&env).await;
        let t = turn(&mut h, "please run a command").await;
        assert_eq!(t.response().stop_reason, StopReason::EndTurn);

        let calls = t.tool_calls();
        assert_eq!(calls.len(), 1, "{calls:?}");
        let call = calls[0];
        assert_eq!(call.title, "terminal: echo hello");
        assert_eq!(call.kind, ToolKind::Execute);
        assert_eq!(call.status, None);
        assert_eq!(call.raw_input, None);
        assert_eq!(content_text(&call.content), "$ echo hello");
        assert!(
            call.tool_call_id.starts_with("tc-"),
            "{}",
            call.tool_call_id
        );

        let updates = t.tool_updates();
        assert_eq!(updates.len(), 1, "{updates:?}");
        assert_eq!(updates[0].tool_call_id, call.tool_call_id);
        assert_eq!(updates[0].status, Some(ToolCallStatus::Completed));
        let result = content_text(updates[0].content.as_deref().unwrap_or_default());
        assert!(
            result.contains("hello") && result.contains("exit_code"),
            "{result}"
        );

        // Hermes separates the post-tool answer with a blank line.
        assert_eq!(t.text().trim_start(), "The command printed hello.");
        let started = t
            .position(|u| matches!(u, SessionUpdate::ToolCall(_)))
            .unwrap();
        let finished = t
            .position(|u| matches!(u, SessionUpdate::ToolCallUpdate(_)))
            .unwrap();
        let answered = t
            .position(|u| matches!(u, SessionUpdate::AgentMessageChunk(_)))
            .unwrap();
        assert!(started < finished && finished < answered);

        let requests = turn_requests_for(&env, "please run a command");
        assert_eq!(requests.len(), 2, "{requests:?}");
        assert_eq!(requests[1]["last_role"], "tool");
        assert_eq!(requests[1]["last_tool"], "terminal");
        assert!(last_message_text(&requests[1]).contains("hello"));
    })
    .await;
}

/// read_file, write_file and patch: their titles, kinds and locations; write and patch ask an
/// "Approve edit" permission carrying a diff and `rawInput {tool, arguments}`; none of the three
/// gets a tool_call_update in Hermes 0.19.0 (the gateway must close such calls at turn end).
#[tokio::test]
#[cfg_attr(
    lacks_hermes_venv,
    ignore = "needs a Hermes venv: IRIS_HERMES_VENV, or .venv in the checkout (README, Connecting Hermes)"
)]
#[cfg_attr(
    lacks_hermes_netns,
    ignore = "needs network namespaces: unshare (util-linux) and ip (iproute2)"
)]
async fn file_tools_titles_kinds_permissions_and_missing_updates() {
    let env = hermes_env!(json!([]));
    let notes = env.work.join("notes.txt");
    let fresh = env.work.join("fresh.txt");
    std::fs::write(&notes, "line one\nline two\n").unwrap();
    let (notes_s, fresh_s) = (notes.display().to_string(), fresh.display().to_string());
    env.set_script(&json!([
        {"match": "read the notes", "reply": {"tool_calls": [
            {"name": "read_file", "arguments": {"path": notes_s}}
        ]}},
        {"match": "write a file", "reply": {"tool_calls": [
            {"name": "write_file", "arguments": {"path": fresh_s, "content": "new file\n"}}
        ]}},
        {"match": "patch the notes", "reply": {"tool_calls": [
            {"name": "patch", "arguments": {
                "path": notes_s, "old_string": "line two", "new_string": "line 2"
            }}
        ]}},
        {"after_tool": true, "reply": {"content": "Done."}}
    ]));
    within(async {
        let mut h = start(&env).await;
        let sid = h.sid();

        let read = turn(&mut h, "read the notes").await;
        let call = read.tool_calls()[0].clone();
        assert_eq!(call.title, format!("read: {notes_s}"));
        assert_eq!(call.kind, ToolKind::Read);
        assert_eq!(call.raw_input, None);
        assert!(call.content.is_empty());
        assert_eq!(call.locations.len(), 1);
        assert_eq!(call.locations[0].path, notes_s);
        assert!(read.tool_updates().is_empty(), "{:?}", read.tool_updates());
        let after_read = last_message_text(&turn_requests_for(&env, "read the notes")[1]);
        assert!(after_read.contains("line two"), "{after_read}");

        let prompt = h
            .client
            .prompt(&sid, vec![ContentBlock::text("write a file")]);
        let write = drive(
            &mut h.events,
            prompt,
            |_| Answer::Select("allow_once"),
            |_, _| {},
        )
        .await;
        write.response();
        let call = write.tool_calls()[0].clone();
        assert_eq!(call.title, format!("write: {fresh_s}"));
        assert_eq!(call.kind, ToolKind::Edit);
        assert_eq!(call.raw_input, None);
        assert_eq!(call.locations[0].path, fresh_s);
        assert_eq!(write.permissions.len(), 1);
        let ask = &write.permissions[0];
        let approve_fresh = format!("Approve edit: {fresh_s}");
        assert_eq!(ask.tool_call.title.as_deref(), Some(approve_fresh.as_str()));
        assert!(ask.tool_call.tool_call_id.starts_with("edit-approval-"));
        assert_eq!(ask.tool_call.kind, Some(ToolKind::Edit));
        assert_eq!(ask.tool_call.status, Some(ToolCallStatus::Pending));
        assert_eq!(
            ask.tool_call.raw_input,
            Some(json!({
                "tool": "write_file",
                "arguments": {"path": fresh_s, "content": "new file\n"}
            }))
        );
        let options: Vec<&str> = ask.options.iter().map(|o| o.option_id.as_str()).collect();
        assert_eq!(options, ["allow_once", "deny"]);
        match ask.tool_call.content.as_deref() {
            Some([ToolCallContent::Diff(diff)]) => {
                assert_eq!(diff.path, fresh_s);
                assert_eq!(diff.old_text, None);
                assert_eq!(diff.new_text, "new file\n");
            }
            other => panic!("expected one diff, got {other:?}"),
        }
        assert!(
            write.tool_updates().is_empty(),
            "{:?}",
            write.tool_updates()
        );
        assert_eq!(std::fs::read_to_string(&fresh).unwrap(), "new file\n");

        let prompt = h
            .client
            .prompt(&sid, vec![ContentBlock::text("patch the notes")]);
        let patch = drive(
            &mut h.events,
            prompt,
            |_| Answer::Select("allow_once"),
            |_, _| {},
        )
        .await;
        patch.response();
        let call = patch.tool_calls()[0].clone();
        assert_eq!(call.title, format!("patch (replace): {notes_s}"));
        assert_eq!(call.kind, ToolKind::Edit);
        let ask = &patch.permissions[0];
        let approve_notes = format!("Approve edit: {notes_s}");
        assert_eq!(ask.tool_call.title.as_deref(), Some(approve_notes.as_str()));
        assert_eq!(
            ask.tool_call.raw_input,
            Some(json!({
                "tool": "patch",
                "arguments": {"path": notes_s, "old_string": "line two", "new_string": "line 2"}
            }))
        );
        match ask.tool_call.content.as_deref() {
            Some([ToolCallContent::Diff(diff)]) => {
                assert_eq!(diff.old_text.as_deref(), Some("line one\nline two\n"));
                assert_eq!(diff.new_text, "line one\nline 2\n");
            }
            other => panic!("expected one diff, got {other:?}"),
        }
        assert!(
            patch.tool_updates().is_empty(),
            "{:?}",
            patch.tool_updates()
        );
        assert_eq!(
            std::fs::read_to_string(&notes).unwrap(),
            "line one\nline 2\n"
        );
    })
    .await;
}
