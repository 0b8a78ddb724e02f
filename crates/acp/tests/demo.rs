//! The demo agent, run in-process over an in-memory pipe and driven by `AgentClient`.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::task::Poll;

use iris_acp::rpc::METHOD_NOT_FOUND;
use iris_acp::*;
use serde_json::json;
use tokio::task::JoinHandle;

struct Demo {
    client: AgentClient,
    events: AgentEvents,
    session: String,
    agent: JoinHandle<std::io::Result<()>>,
}

/// What the test answers to a permission request.
enum Answer {
    Select(&'static str),
    Cancelled,
    /// Send `session/cancel` and leave the request to the responder's drop.
    CancelTurn,
}

struct TurnLog {
    result: Result<PromptResponse, AcpError>,
    updates: Vec<SessionUpdate>,
    permissions: Vec<RequestPermissionRequest>,
}

impl TurnLog {
    fn text(&self) -> String {
        chunks(&self.updates, |u| match u {
            SessionUpdate::AgentMessageChunk(c) => Some(c),
            _ => None,
        })
    }

    fn stop_reason(&self) -> StopReason {
        self.result.as_ref().expect("prompt succeeds").stop_reason
    }

    fn position(&self, what: impl Fn(&SessionUpdate) -> bool) -> usize {
        self.updates.iter().position(what).expect("update present")
    }
}

fn chunks(
    updates: &[SessionUpdate],
    pick: impl Fn(&SessionUpdate) -> Option<&ContentChunk>,
) -> String {
    updates
        .iter()
        .filter_map(pick)
        .filter_map(|c| c.content.as_text())
        .collect()
}

async fn start() -> Demo {
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let (agent_in, agent_out) = tokio::io::split(theirs);
    let agent = tokio::spawn(demo::run(agent_in, agent_out));
    let (reader, writer) = tokio::io::split(ours);
    let (client, mut events) = AgentClient::over(reader, writer);
    client.initialize().await.unwrap();
    let session = client
        .new_session(Path::new("/tmp"))
        .await
        .unwrap()
        .session_id;
    // session/new is followed by the command list.
    assert!(matches!(
        next_update(&mut events).await,
        SessionUpdate::AvailableCommandsUpdate(_)
    ));
    Demo {
        client,
        events,
        session,
        agent,
    }
}

async fn next_update(events: &mut AgentEvents) -> SessionUpdate {
    match events.recv().await {
        Some(AgentEvent::Update(notification)) => notification.update,
        other => panic!("expected an update, got {other:?}"),
    }
}

impl Demo {
    async fn say(&mut self, text: &str) -> TurnLog {
        self.turn(vec![ContentBlock::text(text)], Answer::Select("allow_once"))
            .await
    }

    /// Runs one prompt to its end, answering permission requests with `answer`.
    async fn turn(&mut self, prompt: Vec<ContentBlock>, answer: Answer) -> TurnLog {
        let mut log = TurnLog {
            result: Err(AcpError::Closed {
                stderr_tail: String::new(),
            }),
            updates: vec![],
            permissions: vec![],
        };
        let prompting = self.client.prompt(&self.session, prompt);
        tokio::pin!(prompting);
        let mut held = Vec::new();
        loop {
            tokio::select! {
                result = &mut prompting => {
                    log.result = result;
                    break;
                }
                Some(event) = self.events.recv() => self.record(event, &answer, &mut log, &mut held),
            }
        }
        // Updates sent before the answer are already queued.
        while let Some(event) = self.events.try_recv() {
            self.record(event, &answer, &mut log, &mut held);
        }
        log
    }

    fn record(
        &self,
        event: AgentEvent,
        answer: &Answer,
        log: &mut TurnLog,
        held: &mut Vec<PermissionResponder>,
    ) {
        match event {
            AgentEvent::Update(notification) => {
                assert_eq!(notification.session_id, self.session);
                log.updates.push(notification.update);
            }
            AgentEvent::Permission { request, responder } => {
                assert_eq!(request.session_id, self.session);
                log.permissions.push(request);
                match answer {
                    Answer::Select(option) => responder.select(option),
                    Answer::Cancelled => responder.cancel(),
                    Answer::CancelTurn => {
                        self.client.cancel(&self.session).unwrap();
                        held.push(responder);
                    }
                }
            }
            other => panic!("unexpected event {other:?}"),
        }
    }
}

/// Polls a future once so that its request is on the wire before the next one.
async fn poll_once<F: Future>(future: Pin<&mut F>) -> Poll<F::Output> {
    let mut future = Some(future);
    std::future::poll_fn(|cx| Poll::Ready(future.take().unwrap().poll(cx))).await
}

#[tokio::test]
async fn initialize_and_new_session_describe_the_demo() {
    let (ours, theirs) = tokio::io::duplex(4096);
    let (agent_in, agent_out) = tokio::io::split(theirs);
    tokio::spawn(demo::run(agent_in, agent_out));
    let (reader, writer) = tokio::io::split(ours);
    let (client, mut events) = AgentClient::over(reader, writer);

    let init = client.initialize().await.unwrap();
    assert_eq!(init.protocol_version, PROTOCOL_VERSION);
    assert!(init.agent_capabilities.load_session);
    assert!(init.agent_capabilities.prompt_capabilities.image);
    assert!(init.agent_info.unwrap().name.contains("demo"));

    let session = client.new_session(Path::new("/tmp")).await.unwrap();
    let models = session.models.unwrap();
    assert_eq!(models.current_model_id, "demo:echo");
    let ids: Vec<_> = models
        .available_models
        .iter()
        .map(|m| (m.model_id.as_str(), m.name.as_str()))
        .collect();
    assert_eq!(
        ids,
        [
            ("demo:echo", "Demo Echo"),
            ("demo:verbose", "Demo Verbose"),
            ("other:mini", "Other Mini")
        ]
    );

    let SessionUpdate::AvailableCommandsUpdate(commands) = next_update(&mut events).await else {
        panic!("expected the command list")
    };
    let names: Vec<_> = commands
        .available_commands
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert!(
        names.contains(&"help") && names.contains(&"tools"),
        "{names:?}"
    );
}

#[tokio::test]
async fn default_turn_echoes_in_chunks_with_usage() {
    let mut demo = start().await;
    let turn = demo.say("Hello there, agent").await;
    assert_eq!(turn.stop_reason(), StopReason::EndTurn);
    assert_eq!(turn.text(), "Echo: Hello there, agent");
    let chunk_count = turn
        .updates
        .iter()
        .filter(|u| matches!(u, SessionUpdate::AgentMessageChunk(_)))
        .count();
    assert!(chunk_count >= 2, "streamed in several chunks");
    let Some(SessionUpdate::UsageUpdate(usage)) = turn.updates.last() else {
        panic!("usage_update comes last")
    };
    assert_eq!(usage.size, Some(65536));
    let first_used = usage.used.unwrap();

    let usage = turn.result.unwrap().usage.unwrap();
    assert!(usage.input_tokens > 0 && usage.output_tokens > 0);
    assert_eq!(usage.total_tokens, usage.input_tokens + usage.output_tokens);

    let turn = demo.say("again").await;
    let Some(SessionUpdate::UsageUpdate(usage)) = turn.updates.last() else {
        panic!("usage_update comes last")
    };
    assert!(usage.used.unwrap() > first_used, "context usage grows");
}

#[tokio::test]
async fn think_streams_thoughts_before_the_answer() {
    let mut demo = start().await;
    let turn = demo.say("Please THINK hard").await;
    let thought = chunks(&turn.updates, |u| match u {
        SessionUpdate::AgentThoughtChunk(c) => Some(c),
        _ => None,
    });
    assert!(!thought.is_empty());
    let last_thought = turn
        .updates
        .iter()
        .rposition(|u| matches!(u, SessionUpdate::AgentThoughtChunk(_)))
        .unwrap();
    let first_message = turn.position(|u| matches!(u, SessionUpdate::AgentMessageChunk(_)));
    assert!(last_thought < first_message);
    assert_eq!(turn.text(), "Echo: Please THINK hard");
}

#[tokio::test]
async fn tool_runs_a_command_between_texts() {
    let mut demo = start().await;
    let turn = demo.say("use a tool").await;
    assert_eq!(turn.stop_reason(), StopReason::EndTurn);

    let intro = turn.position(|u| matches!(u, SessionUpdate::AgentMessageChunk(c) if c.content.as_text() == Some("Let me run a command.")));
    let call_at = turn.position(|u| matches!(u, SessionUpdate::ToolCall(_)));
    let SessionUpdate::ToolCall(call) = &turn.updates[call_at] else {
        unreachable!()
    };
    assert_eq!(call.title, "terminal: echo hello");
    assert_eq!(call.kind, ToolKind::Execute);
    assert_eq!(call.status, Some(ToolCallStatus::Pending));
    assert_eq!(call.raw_input, Some(json!({"command": "echo hello"})));

    let updates: Vec<(usize, &ToolCallUpdate)> = turn
        .updates
        .iter()
        .enumerate()
        .filter_map(|(i, u)| match u {
            SessionUpdate::ToolCallUpdate(update) => Some((i, update)),
            _ => None,
        })
        .collect();
    assert_eq!(updates.len(), 2);
    let (running_at, running) = updates[0];
    assert_eq!(running.tool_call_id, call.tool_call_id);
    assert_eq!(running.status, Some(ToolCallStatus::InProgress));
    assert!(running.content.as_ref().is_some_and(|c| !c.is_empty()));
    let (done_at, done) = updates[1];
    assert_eq!(done.status, Some(ToolCallStatus::Completed));
    let output: Vec<_> = done
        .content
        .iter()
        .flatten()
        .filter_map(|c| match c {
            ToolCallContent::Content(chunk) => chunk.content.as_text(),
            _ => None,
        })
        .collect();
    assert_eq!(output, ["hello"]);

    let outro = turn
        .updates
        .iter()
        .rposition(|u| matches!(u, SessionUpdate::AgentMessageChunk(_)))
        .unwrap();
    assert!(intro < call_at && call_at < running_at && running_at < done_at && done_at < outro);
    assert!(turn.text().contains("hello"));
}

#[tokio::test]
async fn fail_ends_a_tool_call_failed() {
    let mut demo = start().await;
    let turn = demo.say("make it fail").await;
    assert_eq!(turn.stop_reason(), StopReason::EndTurn);
    assert!(turn
        .updates
        .iter()
        .any(|u| matches!(u, SessionUpdate::ToolCall(c) if c.kind == ToolKind::Execute)));
    assert!(turn
        .updates
        .iter()
        .any(|u| matches!(u, SessionUpdate::ToolCallUpdate(c) if c.status == Some(ToolCallStatus::Failed))));
}

#[tokio::test]
async fn plan_sends_entries() {
    let mut demo = start().await;
    let turn = demo.say("make a plan").await;
    let SessionUpdate::Plan(plan) =
        &turn.updates[turn.position(|u| matches!(u, SessionUpdate::Plan(_)))]
    else {
        unreachable!()
    };
    assert!((2..=3).contains(&plan.entries.len()));
    assert_eq!(plan.entries[0].status, PlanEntryStatus::Completed);
    assert_eq!(plan.entries[1].priority, PlanEntryPriority::Medium);
}

#[tokio::test]
async fn permission_allowed() {
    let mut demo = start().await;
    let turn = demo
        .turn(
            vec![ContentBlock::text("needs permission")],
            Answer::Select("allow_always"),
        )
        .await;
    assert_eq!(turn.stop_reason(), StopReason::EndTurn);
    assert_eq!(turn.permissions.len(), 1);
    let request = &turn.permissions[0];
    assert_eq!(request.clarify_question(), None);
    assert_eq!(request.tool_call.kind, Some(ToolKind::Execute));
    let kinds: Vec<_> = request
        .options
        .iter()
        .map(|o| (o.option_id.as_str(), o.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("allow_once", PermissionOptionKind::AllowOnce),
            ("allow_always", PermissionOptionKind::AllowAlways),
            ("reject_once", PermissionOptionKind::RejectOnce),
        ]
    );
    assert!(
        turn.text().contains("Permission granted: allow_always"),
        "{}",
        turn.text()
    );
    assert!(turn
        .updates
        .iter()
        .any(|u| matches!(u, SessionUpdate::ToolCallUpdate(c) if c.status == Some(ToolCallStatus::Completed))));
}

#[tokio::test]
async fn permission_denied() {
    let mut demo = start().await;
    let turn = demo
        .turn(
            vec![ContentBlock::text("approve this")],
            Answer::Select("reject_once"),
        )
        .await;
    assert_eq!(turn.stop_reason(), StopReason::EndTurn);
    assert!(turn.text().contains("Permission denied"), "{}", turn.text());
    assert!(!turn.text().contains("granted"));
}

#[tokio::test]
async fn permission_cancelled_outcome_ends_the_turn_cancelled() {
    let mut demo = start().await;
    let turn = demo
        .turn(vec![ContentBlock::text("permission")], Answer::Cancelled)
        .await;
    assert_eq!(turn.stop_reason(), StopReason::Cancelled);
    assert!(!turn.text().contains("Echo:"));
}

#[tokio::test]
async fn session_cancel_during_a_permission_request() {
    let mut demo = start().await;
    let turn = demo
        .turn(vec![ContentBlock::text("permission")], Answer::CancelTurn)
        .await;
    assert_eq!(turn.stop_reason(), StopReason::Cancelled);
    // The session is usable afterwards.
    assert_eq!(demo.say("next").await.text(), "Echo: next");
}

#[tokio::test]
async fn clarify_asks_through_a_permission_request() {
    let mut demo = start().await;
    let turn = demo
        .turn(
            vec![ContentBlock::text("clarify please")],
            Answer::Select("blue"),
        )
        .await;
    assert_eq!(turn.stop_reason(), StopReason::EndTurn);
    let request = &turn.permissions[0];
    assert_eq!(
        request.clarify_question(),
        Some("Which color do you prefer?")
    );
    assert_eq!(request.tool_call.kind, Some(ToolKind::Other));
    let names: Vec<_> = request.options.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["Red", "Blue"]);
    assert!(turn.text().contains("You chose Blue."), "{}", turn.text());
}

#[tokio::test]
async fn title_follows_the_answer() {
    let mut demo = start().await;
    let turn = demo.say("give it a title").await;
    assert_eq!(turn.stop_reason(), StopReason::EndTurn);
    let update = match turn
        .updates
        .iter()
        .find(|u| matches!(u, SessionUpdate::SessionInfoUpdate(_)))
    {
        Some(update) => update.clone(),
        None => next_update(&mut demo.events).await,
    };
    let SessionUpdate::SessionInfoUpdate(info) = update else {
        panic!("expected session_info_update, got {update:?}")
    };
    assert_eq!(info.title.as_deref(), Some("Demo title"));
}

#[tokio::test]
async fn slow_stops_on_cancel_and_keeps_what_was_sent() {
    let mut demo = start().await;
    let prompting = demo
        .client
        .prompt(&demo.session, vec![ContentBlock::text("slow please")]);
    tokio::pin!(prompting);
    let mut ticks = 0;
    let result = loop {
        tokio::select! {
            result = &mut prompting => break result,
            update = next_update(&mut demo.events) => {
                if let SessionUpdate::AgentMessageChunk(c) = update {
                    assert!(c.content.as_text().unwrap().starts_with("tick "));
                    ticks += 1;
                    if ticks == 2 {
                        demo.client.cancel(&demo.session).unwrap();
                    }
                }
            }
        }
    };
    assert_eq!(result.unwrap().stop_reason, StopReason::Cancelled);
    assert!((2..20).contains(&ticks), "{ticks} ticks");
}

#[tokio::test]
async fn hang_answers_only_when_cancelled_and_a_second_prompt_is_busy() {
    let mut demo = start().await;
    {
        let hanging = demo
            .client
            .prompt(&demo.session, vec![ContentBlock::text("hang")]);
        tokio::pin!(hanging);
        assert!(poll_once(hanging.as_mut()).await.is_pending());

        let second = demo
            .client
            .prompt(&demo.session, vec![ContentBlock::text("me too")])
            .await;
        assert_eq!(second.unwrap_err().rpc_code(), Some(demo::BUSY));
        assert!(poll_once(hanging.as_mut()).await.is_pending());

        demo.client.cancel(&demo.session).unwrap();
        assert_eq!(hanging.await.unwrap().stop_reason, StopReason::Cancelled);
        assert!(
            demo.events.try_recv().is_some(),
            "usage_update before the answer"
        );
    }
    assert_eq!(demo.say("after").await.text(), "Echo: after");
}

#[tokio::test]
async fn garbage_on_stdout_is_skipped() {
    let mut demo = start().await;
    let turn = demo.say("garbage").await;
    assert_eq!(turn.text(), "Echo: garbage");
    assert_eq!(demo.say("still fine").await.text(), "Echo: still fine");
}

#[tokio::test]
async fn attachments_are_acknowledged() {
    let mut demo = start().await;
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
    let prompt = vec![
        ContentBlock::text("what is this"),
        ContentBlock::image(png, "image/png"),
        ContentBlock::resource_link("file:///tmp/notes.txt", "notes.txt"),
    ];
    let turn = demo.turn(prompt, Answer::Cancelled).await;
    let text = turn.text();
    assert!(
        text.contains("Received image image/png (70 bytes)"),
        "{text}"
    );
    assert!(text.contains("Received file notes.txt"), "{text}");
    assert!(text.ends_with("Echo: what is this"), "{text}");
}

#[tokio::test]
async fn set_model_and_mode() {
    let mut demo = start().await;
    demo.client
        .set_model(&demo.session, "demo:verbose")
        .await
        .unwrap();
    let turn = demo.say("hi").await;
    assert!(turn.text().starts_with("Echo: hi"));
    assert!(turn.text().contains("demo:verbose"), "{}", turn.text());
    let unknown = demo
        .client
        .set_model(&demo.session, "nope:nothing")
        .await
        .unwrap_err();
    assert_eq!(unknown.rpc_code(), Some(-32602));

    demo.client
        .set_mode(&demo.session, "accept_edits")
        .await
        .unwrap();
    let SessionUpdate::CurrentModeUpdate(mode) = next_update(&mut demo.events).await else {
        panic!("mode update")
    };
    assert_eq!(mode.current_mode_id, "accept_edits");
}

#[tokio::test]
async fn load_replays_history_and_accepts_unknown_ids() {
    let mut demo = start().await;
    demo.say("first message").await;
    let loaded = demo
        .client
        .load_session(&demo.session, Path::new("/tmp"))
        .await
        .unwrap();
    assert_eq!(loaded.models.unwrap().current_model_id, "demo:echo");
    let mut replay = Vec::new();
    while let Some(AgentEvent::Update(n)) = demo.events.try_recv() {
        replay.push(n.update);
    }
    let user = chunks(&replay, |u| match u {
        SessionUpdate::UserMessageChunk(c) => Some(c),
        _ => None,
    });
    assert_eq!(user, "first message");
    assert!(replay.iter().any(|u| matches!(u, SessionUpdate::AgentMessageChunk(c) if c.content.as_text() == Some("Echo: first message"))));

    // An id from before a restart: an empty session that works.
    demo.client
        .load_session("demo-session-gone-1", Path::new("/tmp"))
        .await
        .unwrap();
    assert!(matches!(
        next_update(&mut demo.events).await,
        SessionUpdate::AvailableCommandsUpdate(_)
    ));
    demo.session = "demo-session-gone-1".into();
    assert_eq!(demo.say("hello again").await.text(), "Echo: hello again");
}

#[tokio::test]
async fn slash_commands_and_unknown_methods() {
    let mut demo = start().await;
    assert!(demo.say("/help").await.text().contains("/tools"));
    let err = demo
        .client
        .connection()
        .request("fs/read_text_file", json!({}))
        .await
        .unwrap_err();
    assert_eq!(err.rpc_code(), Some(METHOD_NOT_FOUND));
    let err = demo
        .client
        .prompt("no-such-session", vec![ContentBlock::text("x")])
        .await
        .unwrap_err();
    assert_eq!(err.rpc_code(), Some(-32602));
}

#[tokio::test]
async fn the_demo_stops_when_its_input_closes() {
    let Demo {
        client,
        events,
        agent,
        ..
    } = start().await;
    drop((client, events));
    agent.await.unwrap().unwrap();
}

#[tokio::test]
async fn raw_wire_of_a_garbage_turn() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let (agent_in, agent_out) = tokio::io::split(theirs);
    tokio::spawn(demo::run(agent_in, agent_out));
    let (reader, mut writer) = tokio::io::split(ours);
    let mut lines = BufReader::new(reader).lines();

    let new = json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}});
    writer
        .write_all(format!("{new}\n").as_bytes())
        .await
        .unwrap();
    let answer: serde_json::Value =
        serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    let session = answer["result"]["sessionId"].as_str().unwrap().to_owned();

    let prompt = json!({"jsonrpc": "2.0", "id": "p", "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "garbage"}]}});
    writer
        .write_all(format!("{prompt}\n").as_bytes())
        .await
        .unwrap();
    let mut not_json = 0;
    let mut kinds = Vec::new();
    let result = loop {
        let line = lines.next_line().await.unwrap().expect("the demo answers");
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line) else {
            not_json += 1;
            continue;
        };
        if msg["id"] == "p" {
            break msg["result"].clone();
        }
        if let Some(kind) = msg["params"]["update"]["sessionUpdate"].as_str() {
            kinds.push(kind.to_owned());
        }
    };
    assert_eq!(not_json, 1);
    assert_eq!(kinds.last().map(String::as_str), Some("usage_update"));
    assert!(kinds.contains(&"agent_message_chunk".to_owned()));
    assert_eq!(result["stopReason"], "end_turn");
    for field in ["inputTokens", "outputTokens", "totalTokens"] {
        assert!(result["usage"][field].is_u64(), "{field} in {result}");
    }
}
