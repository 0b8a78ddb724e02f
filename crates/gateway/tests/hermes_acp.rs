//! Real Hermes (hermes-agent 0.19.0, `hermes acp`) driven through `iris_acp::AgentClient`, against
//! a scripted fake LLM in a loopback-only network namespace.
//!
//! These tests pin what the gateway relies on: the handshake, streamed text and reasoning, tool
//! calls and their titles, permissions, cancellation (including the wedge Hermes falls into when
//! a permission is pending, and the kill + respawn + `session/load` recovery), titles, usage,
//! model switching, and what `/steer` does while a turn runs. When a Hermes upgrade changes any
//! of these, a test here fails and says which assumption broke.
//!
//! Skipped (with a message) when no Hermes venv exists locally; never skipped under CI.

#[path = "common/hermes.rs"]
mod hermes;

use std::future::Future;
use std::time::{Duration, Instant};

use hermes::HermesEnv;
use iris_acp::{
    AcpError, AgentClient, AgentEvent, AgentEvents, ContentBlock, InitializeResponse,
    NewSessionResponse, PromptResponse, RequestPermissionRequest, SessionUpdate, StopReason,
    ToolCall, ToolCallContent, ToolCallStatus, ToolCallUpdate, ToolKind,
};
use serde_json::{json, Value};

/// Every test finishes well inside a minute; this bound turns a hang into a failure.
const TEST_BUDGET: Duration = Duration::from_secs(55);
/// How long to wait for something Hermes sends after a turn (titles) or for a quick answer.
const SHORT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------------
// Harness.

async fn within<F: Future<Output = ()>>(test: F) {
    tokio::time::timeout(TEST_BUDGET, test)
        .await
        .expect("test exceeded its time budget");
}

/// A started Hermes with one session.
struct Hermes {
    client: AgentClient,
    events: AgentEvents,
    init: InitializeResponse,
    session: NewSessionResponse,
}

impl Hermes {
    fn sid(&self) -> String {
        self.session.session_id.clone()
    }

    fn stderr(&self) -> String {
        self.client
            .process()
            .map(|p| p.stderr_tail())
            .unwrap_or_default()
    }
}

async fn spawn(env: &HermesEnv) -> (AgentClient, AgentEvents, InitializeResponse) {
    let (client, events) = AgentClient::spawn(&env.spec()).expect("spawn Hermes");
    let init = match tokio::time::timeout(Duration::from_secs(30), client.initialize()).await {
        Ok(Ok(init)) => init,
        Ok(Err(e)) => panic!("initialize failed: {e}"),
        Err(_) => panic!(
            "initialize timed out; Hermes stderr:\n{}",
            client
                .process()
                .map(|p| p.stderr_tail())
                .unwrap_or_default()
        ),
    };
    (client, events, init)
}

async fn start(env: &HermesEnv) -> Hermes {
    let (client, events, init) = spawn(env).await;
    let session = client
        .new_session(&env.work)
        .await
        .unwrap_or_else(|e| panic!("session/new failed: {e}"));
    Hermes {
        client,
        events,
        init,
        session,
    }
}

/// Prepares a Hermes environment, or returns from the test (a skip) when Hermes is not installed.
macro_rules! hermes_env {
    ($script:expr) => {
        match HermesEnv::new(&$script) {
            Some(env) => env,
            None => return,
        }
    };
}

/// Everything the agent sent while one prompt ran, and how it ended.
#[derive(Default)]
struct Turn {
    updates: Vec<SessionUpdate>,
    permissions: Vec<RequestPermissionRequest>,
    result: Option<Result<PromptResponse, AcpError>>,
}

impl Turn {
    fn response(&self) -> &PromptResponse {
        match &self.result {
            Some(Ok(response)) => response,
            Some(Err(e)) => panic!("prompt failed: {e}"),
            None => panic!("prompt did not finish"),
        }
    }

    fn text(&self) -> String {
        chunk_text(&self.updates, |u| match u {
            SessionUpdate::AgentMessageChunk(c) => Some(&c.content),
            _ => None,
        })
    }

    fn thoughts(&self) -> String {
        chunk_text(&self.updates, |u| match u {
            SessionUpdate::AgentThoughtChunk(c) => Some(&c.content),
            _ => None,
        })
    }

    fn message_chunks(&self) -> Vec<String> {
        self.updates
            .iter()
            .filter_map(|u| match u {
                SessionUpdate::AgentMessageChunk(c) => c.content.as_text().map(str::to_owned),
                _ => None,
            })
            .collect()
    }

    fn tool_calls(&self) -> Vec<&ToolCall> {
        self.updates
            .iter()
            .filter_map(|u| match u {
                SessionUpdate::ToolCall(call) => Some(call),
                _ => None,
            })
            .collect()
    }

    fn tool_updates(&self) -> Vec<&ToolCallUpdate> {
        self.updates
            .iter()
            .filter_map(|u| match u {
                SessionUpdate::ToolCallUpdate(update) => Some(update),
                _ => None,
            })
            .collect()
    }

    /// Index of the first update matching `pred`.
    fn position(&self, pred: impl Fn(&SessionUpdate) -> bool) -> Option<usize> {
        self.updates.iter().position(pred)
    }
}

fn chunk_text(
    updates: &[SessionUpdate],
    pick: impl Fn(&SessionUpdate) -> Option<&ContentBlock>,
) -> String {
    updates
        .iter()
        .filter_map(pick)
        .filter_map(ContentBlock::as_text)
        .collect()
}

/// The text of a tool call's `content` blocks, joined.
fn content_text(content: &[ToolCallContent]) -> String {
    content
        .iter()
        .filter_map(|c| match c {
            ToolCallContent::Content(chunk) => chunk.content.as_text(),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// How to answer a permission request during [`drive`].
enum Answer {
    Select(&'static str),
    Cancel,
}

/// Runs `prompt` to its end while collecting the agent's events. Permission requests are
/// recorded and answered by `decide`; `on_update` sees each update as it arrives (to cancel, say).
async fn drive<F>(
    events: &mut AgentEvents,
    prompt: F,
    mut decide: impl FnMut(&RequestPermissionRequest) -> Answer,
    mut on_update: impl FnMut(&SessionUpdate, &Turn),
) -> Turn
where
    F: Future<Output = Result<PromptResponse, AcpError>>,
{
    let mut turn = Turn::default();
    tokio::pin!(prompt);
    loop {
        tokio::select! {
            result = &mut prompt => {
                turn.result = Some(result);
                break;
            }
            event = events.recv() => match event {
                Some(event) => handle(event, &mut turn, &mut decide, &mut on_update),
                None => {
                    turn.result = Some(prompt.await);
                    break;
                }
            },
        }
    }
    // Updates the agent wrote before its answer were already queued when the answer arrived.
    while let Some(event) = events.try_recv() {
        handle(event, &mut turn, &mut decide, &mut on_update);
    }
    turn
}

fn handle(
    event: AgentEvent,
    turn: &mut Turn,
    decide: &mut impl FnMut(&RequestPermissionRequest) -> Answer,
    on_update: &mut impl FnMut(&SessionUpdate, &Turn),
) {
    match event {
        AgentEvent::Update(notification) => {
            on_update(&notification.update, turn);
            turn.updates.push(notification.update);
        }
        AgentEvent::Permission { request, responder } => {
            match decide(&request) {
                Answer::Select(option) => responder.select(option),
                Answer::Cancel => responder.cancel(),
            }
            turn.permissions.push(request);
        }
        AgentEvent::Request {
            method, responder, ..
        } => {
            // Iris offers no fs/terminal capabilities; Hermes is not expected to ask.
            responder.error(
                iris_acp::rpc::METHOD_NOT_FOUND,
                format!("{method} not offered"),
            );
        }
        AgentEvent::Notification { .. } => {}
    }
}

fn no_permissions(request: &RequestPermissionRequest) -> Answer {
    panic!("unexpected permission request: {request:?}")
}

/// One plain text prompt, no permissions expected.
async fn turn(hermes: &mut Hermes, text: &str) -> Turn {
    let sid = hermes.sid();
    let prompt = hermes.client.prompt(&sid, vec![ContentBlock::text(text)]);
    let turn = drive(&mut hermes.events, prompt, no_permissions, |_, _| {}).await;
    if let Some(Err(e)) = &turn.result {
        panic!(
            "prompt {text:?} failed: {e}\nHermes stderr:\n{}",
            hermes.stderr()
        );
    }
    turn
}

/// Waits for an update matching `pred`, returning it; `None` after `limit`.
async fn wait_update(
    events: &mut AgentEvents,
    limit: Duration,
    mut pred: impl FnMut(&SessionUpdate) -> bool,
) -> Option<SessionUpdate> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let event = tokio::time::timeout_at(deadline, events.recv())
            .await
            .ok()??;
        if let AgentEvent::Update(n) = event {
            if pred(&n.update) {
                return Some(n.update);
            }
        }
    }
}

/// The text of the last message of a logged chat request.
fn last_message_text(request: &Value) -> String {
    let last = &request["body"]["messages"]
        .as_array()
        .and_then(|m| m.last().cloned())
        .unwrap_or(Value::Null);
    match &last["content"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn turn_requests_for(env: &HermesEnv, last_user: &str) -> Vec<Value> {
    env.turn_requests()
        .into_iter()
        .filter(|r| r["last_user"] == last_user)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Handshake.

/// `initialize` advertises what the gateway relies on (session/load, image prompts), and
/// `session/new` lists the models the fake endpoint serves, the modes, and the slash commands,
/// without calling the LLM.
#[tokio::test]
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

// ---------------------------------------------------------------------------------------------
// Permissions.

/// Prepares `<work>/junk` and a script whose "clean up" prompt runs `rm -rf <work>/junk`, which
/// Hermes' approval rules flag as "delete in root path" (any `rm` of an absolute path).
fn dangerous_setup(env: &HermesEnv, after_tool: &str) -> String {
    let junk = env.work.join("junk");
    std::fs::create_dir_all(&junk).unwrap();
    std::fs::write(junk.join("file"), "x").unwrap();
    let command = format!("rm -rf {}", junk.display());
    env.set_script(&json!([
        {"match": "clean up", "reply": {"tool_calls": [
            {"name": "terminal", "arguments": {"command": command}}
        ]}},
        {"after_tool": true, "reply": {"content": after_tool}}
    ]));
    command
}

fn check_dangerous_request(request: &RequestPermissionRequest, command: &str, live_id: &str) {
    let call = &request.tool_call;
    assert!(
        call.tool_call_id.starts_with("perm-check-"),
        "{}",
        call.tool_call_id
    );
    // The permission's tool-call id is not the live tool call's id.
    assert_ne!(call.tool_call_id, live_id);
    assert_eq!(
        call.title.as_deref(),
        Some(format!("delete in root path: {command}").as_str())
    );
    assert_eq!(call.kind, Some(ToolKind::Execute));
    assert_eq!(call.status, Some(ToolCallStatus::Pending));
    assert_eq!(
        call.raw_input,
        Some(json!({"command": command, "description": "delete in root path"}))
    );
    let options: Vec<(&str, &str)> = request
        .options
        .iter()
        .map(|o| (o.option_id.as_str(), o.name.as_str()))
        .collect();
    assert_eq!(
        options,
        [
            ("allow_once", "Allow once"),
            ("allow_session", "Allow for session"),
            ("allow_always", "Allow always"),
            ("deny", "Deny"),
            ("deny_always", "Deny always"),
        ]
    );
    let kinds: Vec<bool> = request.options.iter().map(|o| o.kind.is_allow()).collect();
    assert_eq!(kinds, [true, true, true, false, false]);
}

/// A dangerous command asks `session/request_permission` after its tool_call; allowing it runs
/// the command for real and the turn completes normally.
#[tokio::test]
async fn dangerous_command_runs_after_permission_is_allowed() {
    let env = hermes_env!(json!([]));
    let command = dangerous_setup(&env, "Cleaned up.");
    within(async {
        let mut h = start(&env).await;
        let sid = h.sid();
        let prompt = h
            .client
            .prompt(&sid, vec![ContentBlock::text("clean up please")]);
        let t = drive(
            &mut h.events,
            prompt,
            |_| Answer::Select("allow_once"),
            |_, _| {},
        )
        .await;
        assert_eq!(t.response().stop_reason, StopReason::EndTurn);
        assert_eq!(t.permissions.len(), 1);
        let live = t.tool_calls()[0].clone();
        assert_eq!(live.title, format!("terminal: {command}"));
        check_dangerous_request(&t.permissions[0], &command, &live.tool_call_id);

        let updates = t.tool_updates();
        assert_eq!(updates.len(), 1);
        assert_eq!(updates[0].tool_call_id, live.tool_call_id);
        assert_eq!(updates[0].status, Some(ToolCallStatus::Completed));
        assert!(
            !env.work.join("junk").exists(),
            "the approved command did not run"
        );
        assert_eq!(t.text().trim_start(), "Cleaned up.");
        let after = &turn_requests_for(&env, "clean up please")[1];
        assert!(
            last_message_text(after).contains("approved by the user"),
            "{after}"
        );
    })
    .await;
}

/// Denying the permission blocks the command: the tool call fails with Hermes' "BLOCKED" text,
/// the model is told so, and the turn still ends normally. An answer of `cancelled` does the same.
#[tokio::test]
async fn dangerous_command_is_blocked_when_permission_is_denied() {
    let env = hermes_env!(json!([]));
    let command = dangerous_setup(&env, "Understood, not deleting.");
    within(async {
        let mut h = start(&env).await;
        let sid = h.sid();
        let prompt = h
            .client
            .prompt(&sid, vec![ContentBlock::text("clean up please")]);
        let t = drive(&mut h.events, prompt, |_| Answer::Select("deny"), |_, _| {}).await;
        assert_eq!(t.response().stop_reason, StopReason::EndTurn);
        let live = t.tool_calls()[0].clone();
        check_dangerous_request(&t.permissions[0], &command, &live.tool_call_id);

        let updates = t.tool_updates();
        assert_eq!(updates.len(), 1);
        assert_eq!(updates[0].status, Some(ToolCallStatus::Failed));
        let shown = content_text(updates[0].content.as_deref().unwrap_or_default());
        assert!(
            shown.contains("BLOCKED: User denied this command"),
            "{shown}"
        );
        assert!(
            env.work.join("junk/file").exists(),
            "the denied command ran"
        );
        assert_eq!(t.text().trim_start(), "Understood, not deleting.");
        let after = &turn_requests_for(&env, "clean up please")[1];
        assert!(last_message_text(after).contains("BLOCKED"), "{after}");

        // Answering `cancelled` (what a dropped PermissionResponder sends) is a denial too, and
        // without a session/cancel it leaves the session healthy.
        let prompt = h
            .client
            .prompt(&sid, vec![ContentBlock::text("clean up again")]);
        let t = drive(&mut h.events, prompt, |_| Answer::Cancel, |_, _| {}).await;
        assert_eq!(t.response().stop_reason, StopReason::EndTurn);
        assert_eq!(t.permissions.len(), 1);
        assert_eq!(t.tool_updates()[0].status, Some(ToolCallStatus::Failed));
        assert!(
            env.work.join("junk/file").exists(),
            "the cancelled command ran"
        );
        assert_eq!(
            turn(&mut h, "still there?").await.text(),
            "OK: still there?"
        );
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Cancellation.

fn ticks(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("tick {i} ")).collect()
}

/// `session/cancel` while text streams ends the prompt with stopReason cancelled within a
/// moment, no more text of that reply arrives, and the session keeps working.
#[tokio::test]
async fn cancel_mid_stream_ends_the_turn_as_cancelled() {
    let env = hermes_env!(json!([
        {"match": "count slowly", "reply": {"chunks": ticks(20), "delay": 0.25}}
    ]));
    within(async {
        let mut h = start(&env).await;
        let sid = h.sid();
        let client = h.client.clone();
        let mut cancelled_at = None;
        let prompt = h
            .client
            .prompt(&sid, vec![ContentBlock::text("count slowly")]);
        let t = drive(&mut h.events, prompt, no_permissions, |update, turn| {
            let chunks = turn
                .updates
                .iter()
                .filter(|u| matches!(u, SessionUpdate::AgentMessageChunk(_)))
                .count();
            if cancelled_at.is_none()
                && matches!(update, SessionUpdate::AgentMessageChunk(_))
                && chunks >= 1
            {
                client.cancel(&sid).expect("send session/cancel");
                cancelled_at = Some(Instant::now());
            }
        })
        .await;
        let cancelled_at = cancelled_at.expect("no text streamed before the cancel");
        assert_eq!(t.response().stop_reason, StopReason::Cancelled);
        assert!(
            cancelled_at.elapsed() < Duration::from_secs(3),
            "{:?}",
            cancelled_at.elapsed()
        );
        let text = t.text();
        assert!(text.starts_with("tick 0 tick 1 "), "{text}");
        assert!(
            !text.contains("tick 19"),
            "the whole reply streamed despite the cancel: {text}"
        );
        // Nothing of the abandoned reply trickles in afterwards. (Hermes stops reading the LLM
        // stream but may close the HTTP connection only later, so the fake LLM's "client
        // disconnected" event is not a reliable signal here.)
        let late = wait_update(&mut h.events, Duration::from_millis(1500), |u| {
            matches!(u, SessionUpdate::AgentMessageChunk(_))
        })
        .await;
        assert!(late.is_none(), "text after the cancelled result: {late:?}");

        let next = turn(&mut h, "hello again").await;
        assert_eq!(next.response().stop_reason, StopReason::EndTurn);
        assert_eq!(next.text(), "OK: hello again");
    })
    .await;
}

/// The Hermes 0.19.0 wedge and its recovery. `session/cancel` while a permission is pending does
/// not release the permission (the prompt keeps waiting); answering it `cancelled` then fails the
/// prompt with -32603, and every later prompt answers "Queued for the next turn" at once without
/// running. Killing the process group, respawning and `session/load`ing the same session id
/// brings the session back: history replays and a new prompt runs.
#[tokio::test]
async fn cancel_during_permission_wedges_until_respawn_and_load() {
    let env = hermes_env!(json!([]));
    dangerous_setup(&env, "Cleaned up.");
    within(async {
        let mut h = start(&env).await;
        let sid = h.sid();
        let prompt = tokio::spawn({
            let client = h.client.clone();
            let sid = sid.clone();
            async move {
                client
                    .prompt(&sid, vec![ContentBlock::text("clean up please")])
                    .await
            }
        });
        let responder = loop {
            match tokio::time::timeout(SHORT * 2, h.events.recv()).await {
                Ok(Some(AgentEvent::Permission { responder, .. })) => break responder,
                Ok(Some(_)) => continue,
                other => panic!("no permission request: {other:?}\n{}", h.stderr()),
            }
        };
        h.client.cancel(&sid).unwrap();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(
            !prompt.is_finished(),
            "session/cancel released a pending permission"
        );
        responder.cancel();
        let failed = tokio::time::timeout(SHORT, prompt)
            .await
            .expect("prompt still running after the permission was answered")
            .unwrap();
        match failed {
            Err(AcpError::Rpc { code, .. }) => assert_eq!(code, -32603),
            other => panic!("expected the -32603 failure, got {other:?}"),
        }
        assert!(env.work.join("junk/file").exists());

        let started = Instant::now();
        let wedged = turn(&mut h, "hello while wedged").await;
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(wedged.response().stop_reason, StopReason::EndTurn);
        assert!(
            wedged.text().starts_with("Queued for the next turn."),
            "{}",
            wedged.text()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(turn_requests_for(&env, "hello while wedged").is_empty());

        // Recovery: kill the whole group (Hermes and the fake LLM), start again, reload.
        let process = h.client.process().expect("a process");
        process.kill();
        tokio::time::timeout(SHORT, process.wait_exit())
            .await
            .expect("Hermes did not die");
        drop(h);

        let (client, mut events, _) = spawn(&env).await;
        let load = client.load_session(&sid, &env.work);
        let replay = drive(&mut events, load_as_prompt(load), no_permissions, |_, _| {}).await;
        replay.response();
        let replayed_users = chunk_text(&replay.updates, |u| match u {
            SessionUpdate::UserMessageChunk(c) => Some(&c.content),
            _ => None,
        });
        assert!(
            replayed_users.contains("clean up please"),
            "{replayed_users}"
        );

        let prompt = client.prompt(&sid, vec![ContentBlock::text("hello after restart")]);
        let t = drive(&mut events, prompt, no_permissions, |_, _| {}).await;
        assert_eq!(t.response().stop_reason, StopReason::EndTurn);
        assert_eq!(t.text(), "OK: hello after restart");
        let request = &turn_requests_for(&env, "hello after restart")[0];
        assert!(request["body"]["messages"]
            .to_string()
            .contains("clean up please"));
    })
    .await;
}

/// Adapts `session/load` to [`drive`], which collects the replayed history like a turn's updates.
async fn load_as_prompt(
    load: impl Future<Output = Result<iris_acp::LoadSessionResponse, AcpError>>,
) -> Result<PromptResponse, AcpError> {
    load.await.map(|_| PromptResponse {
        stop_reason: StopReason::EndTurn,
        usage: None,
    })
}

// ---------------------------------------------------------------------------------------------
// Session metadata.

/// After the first turn Hermes asks the LLM for a title in a non-streamed side call and sends
/// it as session_info_update.
#[tokio::test]
async fn title_arrives_as_session_info_update_after_the_first_turn() {
    let env = hermes_env!(json!([
        {"kind": "title", "reply": {"content": "Trip To Lisbon"}}
    ]));
    within(async {
        let mut h = start(&env).await;
        let t = turn(&mut h, "plan a trip to Lisbon").await;
        assert_eq!(t.text(), "OK: plan a trip to Lisbon");
        let title = wait_update(&mut h.events, SHORT, |u| {
            matches!(u, SessionUpdate::SessionInfoUpdate(_))
        })
        .await
        .expect("no session_info_update after the turn");
        let SessionUpdate::SessionInfoUpdate(info) = title else {
            unreachable!()
        };
        assert_eq!(info.title.as_deref(), Some("Trip To Lisbon"));
        assert!(info.updated_at.is_some());

        let titles: Vec<Value> = env
            .chat_requests()
            .into_iter()
            .filter(|r| r["kind"] == "title")
            .collect();
        assert_eq!(titles.len(), 1, "{titles:?}");
        assert_eq!(titles[0]["stream"], false);
        assert_eq!(
            titles[0]["last_user"],
            "User: plan a trip to Lisbon\n\nAssistant: OK: plan a trip to Lisbon"
        );
    })
    .await;
}

/// usage_update reports the context window (`size`, from the config) and Hermes' estimate of
/// tokens in use (`used`); the prompt result's `usage` is what the LLM reported, summed over the
/// agent process's lifetime.
#[tokio::test]
async fn usage_update_and_prompt_usage() {
    let env = hermes_env!(json!([]));
    within(async {
        let mut h = start(&env).await;
        let first = turn(&mut h, "count my tokens").await;
        let usage_updates: Vec<_> = first
            .updates
            .iter()
            .filter_map(|u| match u {
                SessionUpdate::UsageUpdate(usage) => Some(usage.clone()),
                _ => None,
            })
            .collect();
        let last = usage_updates
            .last()
            .expect("no usage_update during the turn");
        assert_eq!(last.size, Some(hermes::CONTEXT_LENGTH));
        assert!(last.used.unwrap_or(0) > 0, "{last:?}");
        assert_eq!(last.cost, None);

        let reported = |text: &str| -> (u64, u64) {
            let r = &turn_requests_for(&env, text)[0]["usage"];
            (
                r["prompt_tokens"].as_u64().unwrap(),
                r["completion_tokens"].as_u64().unwrap(),
            )
        };
        let usage = first
            .response()
            .usage
            .clone()
            .expect("prompt result carries usage");
        let (input1, output1) = reported("count my tokens");
        assert_eq!((usage.input_tokens, usage.output_tokens), (input1, output1));
        assert_eq!(usage.total_tokens, input1 + output1);

        let second = turn(&mut h, "and again").await;
        let usage = second.response().usage.clone().unwrap();
        let (input2, output2) = reported("and again");
        assert_eq!(
            (usage.input_tokens, usage.output_tokens),
            (input1 + input2, output1 + output2),
            "usage is cumulative per agent process"
        );
    })
    .await;
}

/// `session/set_model` with a "provider:model" id switches the model the next request names.
#[tokio::test]
async fn set_model_switches_the_model_sent_to_the_llm() {
    let env = hermes_env!(json!([]));
    within(async {
        let mut h = start(&env).await;
        turn(&mut h, "first model").await;
        h.client
            .set_model(&h.sid(), hermes::OTHER_MODEL_ID)
            .await
            .expect("session/set_model");
        turn(&mut h, "second model").await;
        assert_eq!(
            turn_requests_for(&env, "first model")[0]["model"],
            "fake-model"
        );
        assert_eq!(
            turn_requests_for(&env, "second model")[0]["model"],
            "fake-model-2"
        );
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// /steer while a turn runs.

const STEER: &str = "STEER-7f3a use the word banana";

/// Sends `/steer <STEER>` as a second prompt as soon as the running turn first streams something,
/// and records how the steer prompt ended and how long it took.
struct SteerOutcome {
    turn: Turn,
    steer: Result<PromptResponse, AcpError>,
    steer_took: Duration,
    /// Whether the first prompt had already finished when the steer prompt returned.
    first_done_before_steer: bool,
}

async fn steer_during(h: &mut Hermes, text: &str) -> SteerOutcome {
    let sid = h.sid();
    let (steer_tx, mut steer_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut sent = false;
    let prompt = h.client.prompt(&sid, vec![ContentBlock::text(text)]);
    let client = h.client.clone();
    let steer_sid = sid.clone();
    let t = drive(&mut h.events, prompt, no_permissions, |update, _| {
        let streaming = matches!(
            update,
            SessionUpdate::AgentMessageChunk(_) | SessionUpdate::AgentThoughtChunk(_)
        );
        if streaming && !sent {
            sent = true;
            let client = client.clone();
            let sid = steer_sid.clone();
            let tx = steer_tx.clone();
            tokio::spawn(async move {
                let started = Instant::now();
                let result = client
                    .prompt(&sid, vec![ContentBlock::text(format!("/steer {STEER}"))])
                    .await;
                let _ = tx.send((result, started.elapsed(), Instant::now()));
            });
        }
    })
    .await;
    let first_done = Instant::now();
    // Only the spawned steer task may still hold a sender now.
    drop(steer_tx);
    let (steer, steer_took, steer_done) = steer_rx.recv().await.expect("the steer prompt ran");
    SteerOutcome {
        turn: t,
        steer,
        steer_took,
        first_done_before_steer: first_done < steer_done,
    }
}

fn mentions_steer(request: &Value) -> bool {
    request.to_string().contains("STEER-7f3a")
}

/// `/steer` during a turn that only streams text: the steer prompt returns end_turn at once
/// while the turn keeps running, its acknowledgement ("⏩ Steer queued for the active turn: …")
/// arrives as an agent_message_chunk in the middle of the running turn's text, the running
/// turn's own output is unchanged, and the steering text never reaches the LLM, neither in this
/// turn nor in the next one: it is lost.
#[tokio::test]
async fn steer_during_a_text_only_turn_is_acknowledged_but_never_reaches_the_llm() {
    let env = hermes_env!(json!([
        {"match": "count slowly", "reply": {"chunks": ticks(10), "delay": 0.3}}
    ]));
    within(async {
        let mut h = start(&env).await;
        let outcome = steer_during(&mut h, "count slowly").await;
        let steer = outcome.steer.expect("the steer prompt succeeded");
        assert_eq!(steer.stop_reason, StopReason::EndTurn);
        assert_eq!(steer.usage, None);
        assert!(
            outcome.steer_took < Duration::from_millis(1500),
            "{:?}",
            outcome.steer_took
        );
        assert!(
            !outcome.first_done_before_steer,
            "the steer waited for the turn"
        );

        let t = &outcome.turn;
        assert_eq!(t.response().stop_reason, StopReason::EndTurn);
        let ack = format!("⏩ Steer queued for the active turn: {STEER}");
        let chunks = t.message_chunks();
        let at = chunks
            .iter()
            .position(|c| *c == ack)
            .expect("no steer acknowledgement");
        assert!(
            at > 0 && at < chunks.len() - 1,
            "ack not mid-turn: {chunks:?}"
        );
        let own: String = chunks
            .iter()
            .filter(|c| **c != ack)
            .map(String::as_str)
            .collect();
        assert_eq!(own, ticks(10).concat());

        turn(&mut h, "what now").await;
        let reached: Vec<Value> = env
            .chat_requests()
            .into_iter()
            .filter(mentions_steer)
            .collect();
        assert!(
            reached.is_empty(),
            "steer text reached the LLM: {reached:?}"
        );
    })
    .await;
}

/// `/steer` during a turn that goes on to call a tool: same immediate acknowledgement, and the
/// steering text reaches the LLM appended to the tool result of the next request, wrapped in
/// Hermes' "[OUT-OF-BAND USER MESSAGE …]" marker. The turn's own output is unchanged.
#[tokio::test]
async fn steer_during_a_tool_turn_reaches_the_llm_inside_the_tool_result() {
    let env = hermes_env!(json!([
        {"match": "slow tool", "reply": {
            "reasoning": ["Planning ", "the ", "command ", "now."], "delay": 0.3,
            "tool_calls": [{"name": "terminal", "arguments": {"command": "echo hello"}}]}},
        {"after_tool": true, "reply": {"content": "Done after the tool."}}
    ]));
    within(async {
        let mut h = start(&env).await;
        let outcome = steer_during(&mut h, "slow tool please").await;
        let steer = outcome.steer.expect("the steer prompt succeeded");
        assert_eq!(steer.stop_reason, StopReason::EndTurn);
        assert!(
            outcome.steer_took < Duration::from_millis(1500),
            "{:?}",
            outcome.steer_took
        );
        assert!(!outcome.first_done_before_steer);

        let t = &outcome.turn;
        assert_eq!(t.response().stop_reason, StopReason::EndTurn);
        assert_eq!(t.thoughts(), "Planning the command now.");
        let ack = format!("⏩ Steer queued for the active turn: {STEER}");
        let own: String = t
            .message_chunks()
            .iter()
            .filter(|c| **c != ack)
            .map(String::as_str)
            .collect();
        assert_eq!(own.trim_start(), "Done after the tool.");
        assert!(t.message_chunks().contains(&ack));

        let requests = turn_requests_for(&env, "slow tool please");
        assert_eq!(requests.len(), 2, "{requests:?}");
        assert!(!mentions_steer(&requests[0]["body"]));
        let tool_result = last_message_text(&requests[1]);
        assert_eq!(requests[1]["last_role"], "tool");
        assert!(
            tool_result.contains("[OUT-OF-BAND USER MESSAGE") && tool_result.contains(STEER),
            "{tool_result}"
        );
    })
    .await;
}
