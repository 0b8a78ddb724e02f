//! Driving real Hermes over ACP with `iris_acp::AgentClient` (the `hermes_acp*.rs` tests): a
//! started agent with one session, a prompt run to its end while its updates and permission
//! requests are collected, and the fake LLM's request log read back.
//!
//! Standalone (includes `hermes.rs`), used with
//! `#[path = "common/hermes_drive.rs"] #[macro_use] mod drive;`.
#![allow(dead_code)]

#[path = "hermes.rs"]
pub mod hermes;

use std::future::Future;
use std::time::Duration;

use hermes::HermesEnv;
use iris_acp::{
    AcpError, AgentClient, AgentEvent, AgentEvents, ContentBlock, InitializeResponse,
    NewSessionResponse, PromptResponse, RequestPermissionRequest, SessionUpdate, ToolCall,
    ToolCallContent, ToolCallUpdate,
};
use serde_json::Value;

/// Every test finishes well inside a minute; this bound turns a hang into a failure.
pub const TEST_BUDGET: Duration = Duration::from_secs(55);
/// How long to wait for something Hermes sends after a turn (titles) or for a quick answer.
pub const SHORT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------------
// Harness.

pub async fn within<F: Future<Output = ()>>(test: F) {
    tokio::time::timeout(TEST_BUDGET, test)
        .await
        .expect("test exceeded its time budget");
}

/// A started Hermes with one session.
pub struct Hermes {
    pub client: AgentClient,
    pub events: AgentEvents,
    pub init: InitializeResponse,
    pub session: NewSessionResponse,
}

impl Hermes {
    pub fn sid(&self) -> String {
        self.session.session_id.clone()
    }

    pub fn stderr(&self) -> String {
        self.client
            .process()
            .map(|p| p.stderr_tail())
            .unwrap_or_default()
    }
}

pub async fn spawn(env: &HermesEnv) -> (AgentClient, AgentEvents, InitializeResponse) {
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

pub async fn start(env: &HermesEnv) -> Hermes {
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

/// Prepares a Hermes environment (a test that gets here without Hermes fails, saying what is
/// missing; where it is not installed the test is ignored, see `build.rs`).
macro_rules! hermes_env {
    ($script:expr) => {
        HermesEnv::new(&$script)
    };
}

/// Everything the agent sent while one prompt ran, and how it ended.
#[derive(Default)]
pub struct Turn {
    pub updates: Vec<SessionUpdate>,
    pub permissions: Vec<RequestPermissionRequest>,
    pub result: Option<Result<PromptResponse, AcpError>>,
}

impl Turn {
    pub fn response(&self) -> &PromptResponse {
        match &self.result {
            Some(Ok(response)) => response,
            Some(Err(e)) => panic!("prompt failed: {e}"),
            None => panic!("prompt did not finish"),
        }
    }

    pub fn text(&self) -> String {
        chunk_text(&self.updates, |u| match u {
            SessionUpdate::AgentMessageChunk(c) => Some(&c.content),
            _ => None,
        })
    }

    pub fn thoughts(&self) -> String {
        chunk_text(&self.updates, |u| match u {
            SessionUpdate::AgentThoughtChunk(c) => Some(&c.content),
            _ => None,
        })
    }

    pub fn message_chunks(&self) -> Vec<String> {
        self.updates
            .iter()
            .filter_map(|u| match u {
                SessionUpdate::AgentMessageChunk(c) => c.content.as_text().map(str::to_owned),
                _ => None,
            })
            .collect()
    }

    pub fn tool_calls(&self) -> Vec<&ToolCall> {
        self.updates
            .iter()
            .filter_map(|u| match u {
                SessionUpdate::ToolCall(call) => Some(call),
                _ => None,
            })
            .collect()
    }

    pub fn tool_updates(&self) -> Vec<&ToolCallUpdate> {
        self.updates
            .iter()
            .filter_map(|u| match u {
                SessionUpdate::ToolCallUpdate(update) => Some(update),
                _ => None,
            })
            .collect()
    }

    /// Index of the first update matching `pred`.
    pub fn position(&self, pred: impl Fn(&SessionUpdate) -> bool) -> Option<usize> {
        self.updates.iter().position(pred)
    }
}

pub fn chunk_text(
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
pub fn content_text(content: &[ToolCallContent]) -> String {
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
pub enum Answer {
    Select(&'static str),
    Cancel,
}

/// Runs `prompt` to its end while collecting the agent's events. Permission requests are
/// recorded and answered by `decide`; `on_update` sees each update as it arrives (to cancel, say).
pub async fn drive<F>(
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

pub fn handle(
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
        AgentEvent::Elicitation { request, .. } => {
            panic!("unexpected elicitation: {request:?}")
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

pub fn no_permissions(request: &RequestPermissionRequest) -> Answer {
    panic!("unexpected permission request: {request:?}")
}

/// One plain text prompt, no permissions expected.
pub async fn turn(hermes: &mut Hermes, text: &str) -> Turn {
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
pub async fn wait_update(
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
pub fn last_message_text(request: &Value) -> String {
    let last = &request["body"]["messages"]
        .as_array()
        .and_then(|m| m.last().cloned())
        .unwrap_or(Value::Null);
    match &last["content"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub fn turn_requests_for(env: &HermesEnv, last_user: &str) -> Vec<Value> {
    env.turn_requests()
        .into_iter()
        .filter(|r| r["last_user"] == last_user)
        .collect()
}

/// `n` numbered chunks of a scripted reply, for turns that stream for a while.
pub fn ticks(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("tick {i} ")).collect()
}
