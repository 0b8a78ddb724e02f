//! One prompt turn being played, and what every behaviour uses to speak: message chunks, tool
//! calls, pauses and the cancel signal.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::watch;

use super::server::{record_prompt, Demo, Prompt};
use crate::types::*;

/// The pause before each chunk of a `slow` turn.
pub(super) const SLOW_PAUSE: Duration = Duration::from_millis(50);

/// Plays a prompt the session took as one turn, and answers the prompt.
pub(super) async fn play(demo: Arc<Demo>, prompt: Prompt) {
    let Prompt {
        request,
        cancel,
        responder,
    } = prompt;
    let session_id = request.session_id.clone();
    let text = prompt_text(&request.prompt);
    record_prompt(&text);
    let (model_id, cwd) = demo.model_and_cwd(&session_id);
    let mut turn = Turn::new(&demo, &session_id, cancel, cwd);
    let ending = turn.play(&request.prompt, &model_id).await;
    if let Some((code, message)) = ending.error {
        demo.drain().await;
        demo.end_turn(&session_id);
        responder.error(code, message);
        return;
    }
    let said = turn.into_said();
    demo.answer(&session_id, text, said, ending.stop_reason, responder)
        .await;
    for title in ending.titles {
        let info = SessionInfoUpdate {
            title: Some(title),
            updated_at: None,
        };
        demo.send_update(&session_id, SessionUpdate::SessionInfoUpdate(info));
    }
}

/// The turn was cancelled.
pub(super) struct Cancelled;

/// How a turn ended, for the answer to its prompt.
pub(super) struct Ending {
    /// Why the turn ended.
    pub(super) stop_reason: StopReason,
    /// A `session_info_update` with each of these titles follows the answer.
    pub(super) titles: Vec<String>,
    /// The prompt fails with this JSON-RPC error instead of answering.
    pub(super) error: Option<(i64, String)>,
}

/// One prompt turn being played.
pub(super) struct Turn<'a> {
    /// The agent, for its connection and its memory.
    pub(super) demo: &'a Demo,
    /// The session the turn runs in.
    pub(super) session_id: &'a str,
    /// Turns `true` when the client cancels the turn.
    cancel: watch::Receiver<bool>,
    /// Everything said so far, recorded as the answer in the history.
    pub(super) said: String,
    /// The session's working directory.
    pub(super) cwd: String,
    /// Set by the `title` and `rename` keywords: titles that follow the answer.
    pub(super) titles: Vec<String>,
}

impl<'a> Turn<'a> {
    /// A turn of `session_id` that has said nothing yet.
    pub(super) fn new(
        demo: &'a Demo,
        session_id: &'a str,
        cancel: watch::Receiver<bool>,
        cwd: String,
    ) -> Turn<'a> {
        Turn {
            demo,
            session_id,
            cancel,
            said: String::new(),
            cwd,
            titles: Vec::new(),
        }
    }

    /// Everything the turn said, which becomes the answer in the history.
    pub(super) fn into_said(self) -> String {
        self.said
    }

    /// Sends a `session/update` of this turn's session.
    pub(super) fn update(&self, update: SessionUpdate) {
        self.demo.send_update(self.session_id, update);
    }

    /// Waits until the connection can take `lines` more updates at once: a turn that writes
    /// without pause goes as fast as the client reads, and no update is lost.
    pub(super) async fn room(&self, lines: usize) {
        self.demo.drain().await;
        let _ = self.demo.conn().room(lines).await;
    }

    /// Says `text` as one `agent_message_chunk`.
    pub(super) fn say(&mut self, text: &str) {
        self.said.push_str(text);
        self.update(SessionUpdate::AgentMessageChunk(chunk(text)));
    }

    /// Fails when the turn has been cancelled.
    pub(super) fn check(&self) -> Result<(), Cancelled> {
        if *self.cancel.borrow() {
            Err(Cancelled)
        } else {
            Ok(())
        }
    }

    /// Returns once the turn is cancelled, which may be never.
    pub(super) async fn wait_cancel(&mut self) {
        // The sender lives until this turn ends, so this only returns on cancel.
        let _ = self.cancel.wait_for(|cancelled| *cancelled).await;
    }

    /// Simulates model latency; stops early on cancel.
    pub(super) async fn pause(&mut self) -> Result<(), Cancelled> {
        tokio::select! {
            _ = tokio::time::sleep(SLOW_PAUSE) => self.check(),
            _ = self.wait_cancel() => Err(Cancelled),
        }
    }

    /// A new tool call id.
    pub(super) fn fresh_tool_id(&self) -> String {
        self.demo.state().fresh_id("tool")
    }

    /// Announces a `terminal` tool call and returns its id.
    pub(super) fn start_tool(&self, command: &str) -> String {
        let id = self.fresh_tool_id();
        self.update(SessionUpdate::ToolCall(ToolCall {
            tool_call_id: id.clone(),
            title: format!("terminal: {command}"),
            kind: ToolKind::Execute,
            status: Some(ToolCallStatus::Pending),
            raw_input: Some(json!({ "command": command })),
            raw_output: None,
            content: text_content(&format!("$ {command}")),
            locations: Vec::new(),
        }));
        id
    }

    /// Reports a new status of the tool call `id`, with its output so far.
    pub(super) fn tool_status(
        &self,
        id: &str,
        status: ToolCallStatus,
        output: Option<&str>,
        raw_output: Option<Value>,
    ) {
        self.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate {
            tool_call_id: id.into(),
            status: Some(status),
            content: output.map(text_content),
            raw_output,
            ..ToolCallUpdate::default()
        }));
    }
}

/// The text blocks of a prompt, joined by newlines.
pub(super) fn prompt_text(prompt: &[ContentBlock]) -> String {
    prompt
        .iter()
        .filter_map(ContentBlock::as_text)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A text chunk.
pub(super) fn chunk(text: &str) -> ContentChunk {
    ContentChunk {
        content: ContentBlock::text(text),
    }
}

/// Tool call content that is only `text`.
pub(super) fn text_content(text: &str) -> Vec<ToolCallContent> {
    vec![ToolCallContent::Content(chunk(text))]
}
