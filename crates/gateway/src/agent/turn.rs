//! One turn's mapping from ACP session updates to wire frames, as a plain state machine.
//!
//! - Text streams into one bubble: `message.start`, then `message.update` with the full text so
//!   far, on the leading edge: a chunk that comes when the bubble's last update is at least
//!   `update_interval` old goes out at once; chunks within the interval wait together for its end
//!   (the lane's timer, [`TurnMapper::next_flush`]); text still waiting when the turn ends goes
//!   out just before `message.stop`. Each connection then writes the update whole or, to a
//!   device that asked for it, as an append (`conn/stream.rs`).
//! - Text followed by a tool call is a `commentary` beat (Hermes semantics): it leaves the bubble,
//!   which is cleared; the final answer is the text after the last tool.
//! - Tool calls become `tool.start` / `tool.progress` / `tool.end` with a per-turn `index`.
//! - Thoughts become the final message's `reasoning` (when shown), a plan a checklist
//!   `commentary`, usage the runtime's `context_pct`.
//! - Files in the answer (ACP image/resource content, `MEDIA:<path>` lines) are collected for the
//!   lane to store ([`TurnMapper::take_files`]); `MEDIA:` lines never show in the text, and the
//!   stored files are listed in the final message's `media`.
//! - A turn holds at most [`MAX_TURN_TEXT`] bytes of text (answer, commentary and reasoning),
//!   [`MAX_TURN_TOOLS`] tool calls (plan updates count as ones) and [`MAX_TURN_FILES`] files;
//!   what comes beyond is left out, and [`TurnMapper::runaway`] tells the lane to stop the turn.
//!   Live cards are cut as the answer's steps are.
//! - [`TurnMapper::finish`] closes what is still open and produces the final `message.stop` (or a
//!   `message` when nothing streamed) with the runtime footer.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use iris_acp::{ContentBlock, SessionUpdate, ToolCallContent};
use iris_protocol::{
    DurableFrame, EphemeralFrame, FileChange, MediaInfo, Message, MessageStart, MessageStop,
    MessageUpdate, Role, Runtime, TurnEnd, MAX_TURN_FILES, MAX_TURN_TEXT, MAX_TURN_TOOLS,
};

use crate::ids::now_ms;
use crate::media::agent::{self as media_agent, AgentFile};
use crate::text::prefix_bytes;
use steps::Steps;

/// What the turn wants sent.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // short-lived, one per update: boxing would only allocate
pub enum Out {
    /// Appended to the outbox (filed under the turn's message id, so deleting the answer
    /// removes the whole turn).
    Durable(DurableFrame),
    /// Sent live only; frames with the same key coalesce.
    Ephemeral(EphemeralFrame, String),
    /// The final frame, stored together with the message row.
    Final(DurableFrame, Message),
}

/// Settings of one turn.
#[derive(Debug, Clone)]
pub struct TurnConfig {
    /// Id of the answer bubble.
    pub message_id: String,
    /// `assistant`, or `cron` for scheduled runs.
    pub role: Role,
    /// Model id as the agent names it (`provider:model`).
    pub model: Option<String>,
    /// The agent's name in the gateway's configuration.
    pub agent: Option<String>,
    /// Home-relative working directory.
    pub cwd: String,
    /// The agent's working directory as it is: file changes outside it are marked `outside`
    /// (empty: none is).
    pub workdir: std::path::PathBuf,
    /// Whether reasoning goes into the final message.
    pub show_reasoning: bool,
    /// Minimum spacing of `message.update` frames (leading edge: see the module docs).
    pub update_interval: Duration,
    /// The turn can be taken back (`runtime.rewind`).
    pub rewind: bool,
}

/// One tool call of the turn, as its card shows it.
#[derive(Debug)]
struct ToolState {
    id: String,
    index: u32,
    name: String,
    started: Instant,
    open: bool,
    /// Whether the card shows the call's input yet (some agents send it in a later update).
    has_input: bool,
    /// The files it changes, and whether a frame has yet to show them.
    changes: Vec<FileChange>,
    changes_unsent: bool,
}

impl ToolState {
    /// The changes for the call's `tool.end`: those no frame showed yet.
    fn unsent_changes(&mut self) -> Vec<FileChange> {
        if std::mem::take(&mut self.changes_unsent) {
            self.changes.clone()
        } else {
            Vec::new()
        }
    }
}

/// How a turn ended.
#[derive(Debug, Clone, Default)]
pub struct Ending {
    /// The user or the gateway cancelled it.
    pub cancelled: bool,
    /// It failed (agent error or crash).
    pub failed: bool,
    /// Tokens the turn used, when known.
    pub tokens: Option<u64>,
}

impl Ending {
    /// The `ended` field of the final message.
    pub fn end(&self) -> TurnEnd {
        match (self.failed, self.cancelled) {
            (true, _) => TurnEnd::AgentFailed,
            (false, true) => TurnEnd::Stopped,
            (false, false) => TurnEnd::Completed,
        }
    }
}

/// The state of one running turn.
#[derive(Debug)]
pub struct TurnMapper {
    cfg: TurnConfig,
    started_at: Instant,
    bubble_started: bool,
    text: String,
    reasoning: String,
    tools: Vec<ToolState>,
    dirty: bool,
    last_update: Option<Instant>,
    context_pct: Option<u8>,
    cost: Option<f64>,
    plan_id: Option<String>,
    /// Files seen in the answer, waiting for the lane to store them.
    files: Vec<AgentFile>,
    /// Stored files of the answer, and their content hashes.
    media: Vec<MediaInfo>,
    media_shas: HashSet<String>,
    /// The turn's steps, for its answer.
    steps: Steps,
    /// The diff bytes the turn may still keep.
    changes: changes::ChangeBudget,
    /// The user message the turn answers.
    reply_to: Option<String>,
    /// Bytes of text (answer, commentary, reasoning) taken so far, at most [`MAX_TURN_TEXT`].
    written: usize,
    /// Files the agent sent so far, at most [`MAX_TURN_FILES`].
    files_seen: usize,
    /// Tool calls started and plan updates so far, at most [`MAX_TURN_TOOLS`].
    calls: usize,
    /// The agent wrote more than a turn may hold: the turn is to be stopped.
    runaway: bool,
}

impl TurnMapper {
    /// A turn starting now.
    pub fn new(cfg: TurnConfig) -> TurnMapper {
        let changes = changes::ChangeBudget::within(cfg.workdir.clone());
        TurnMapper {
            cfg,
            started_at: Instant::now(),
            bubble_started: false,
            text: String::new(),
            reasoning: String::new(),
            tools: Vec::new(),
            dirty: false,
            last_update: None,
            context_pct: None,
            cost: None,
            plan_id: None,
            files: Vec::new(),
            media: Vec::new(),
            media_shas: HashSet::new(),
            steps: Steps::default(),
            changes,
            reply_to: None,
            written: 0,
            files_seen: 0,
            calls: 0,
            runaway: false,
        }
    }

    /// Whether the agent wrote more text, started more tool calls or sent more files than a turn
    /// may hold ([`MAX_TURN_TEXT`], [`MAX_TURN_TOOLS`], [`MAX_TURN_FILES`]): what came beyond
    /// was left out, and the turn is to be stopped.
    pub fn runaway(&self) -> bool {
        self.runaway
    }

    /// Counts a tool call or plan update; false (and the turn a runaway) beyond the bound.
    fn one_more_call(&mut self) -> bool {
        if self.calls == MAX_TURN_TOOLS {
            self.runaway = true;
            return false;
        }
        self.calls += 1;
        true
    }

    /// Files for the lane to store, as many as the turn may still hold; more mark it a runaway.
    fn add_files(&mut self, files: impl IntoIterator<Item = AgentFile>) {
        for file in files {
            if self.files_seen == MAX_TURN_FILES {
                self.runaway = true;
                return;
            }
            self.files_seen += 1;
            self.files.push(file);
        }
    }

    /// The part of `text` the turn's text budget still holds; a cut marks the turn a runaway.
    fn within_budget<'t>(&mut self, text: &'t str) -> &'t str {
        let kept = prefix_bytes(text, MAX_TURN_TEXT - self.written);
        self.written += kept.len();
        self.runaway |= kept.len() < text.len();
        kept
    }

    /// The turn answers this user message: its answer's `reply_to`.
    pub fn answering(&mut self, message_id: &str) {
        self.reply_to = Some(message_id.to_owned()).filter(|id| !id.is_empty());
    }

    /// Whether the turn has shown nothing yet: no text, files or steps.
    pub fn said_nothing(&self) -> bool {
        !self.bubble_started
            && self.text.is_empty()
            && self.media.is_empty()
            && self.steps.is_empty()
    }

    /// Takes the files seen since the last call, for the lane to store.
    pub fn take_files(&mut self) -> Vec<AgentFile> {
        std::mem::take(&mut self.files)
    }

    /// The turn's text is complete: its `MEDIA:` lines become files to store.
    pub fn end_text(&mut self) {
        let (_, paths) = media_agent::split_media_lines(&self.text);
        self.add_files(paths.into_iter().map(AgentFile::Path));
    }

    /// Files in a tool's result: images and embedded resources. Links are left out: tools link
    /// the files they merely read.
    fn files_in(&mut self, content: &[ToolCallContent]) {
        for c in content {
            if let ToolCallContent::Content(chunk) = c {
                if !matches!(chunk.content, ContentBlock::ResourceLink(_)) {
                    self.add_files(media_agent::from_block(&chunk.content));
                }
            }
        }
    }

    /// The answer's message id.
    pub fn message_id(&self) -> &str {
        &self.cfg.message_id
    }
}

/// Files from the agent are added to the answer being mapped.
impl media_agent::Answer for TurnMapper {
    fn answer_id(&self) -> &str {
        &self.cfg.message_id
    }

    /// Whether content with this hash is already part of the answer.
    fn has_media(&self, sha256: &str) -> bool {
        self.media_shas.contains(sha256)
    }

    /// Lists a stored file in the answer's `media`.
    fn add_media(&mut self, media: MediaInfo, sha256: String) {
        self.media_shas.insert(sha256);
        self.media.push(media);
    }
}

impl TurnMapper {
    /// Text of the bubble so far (after the last tool).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Maps one update.
    pub fn on_update(&mut self, update: &SessionUpdate, now: Instant) -> Vec<Out> {
        let mut out = Vec::new();
        match update {
            SessionUpdate::AgentMessageChunk(chunk) => {
                self.add_files(media_agent::from_block(&chunk.content));
                if let ContentBlock::Text(t) = &chunk.content {
                    self.answer_text(&t.text, now, &mut out);
                }
            }
            SessionUpdate::AgentThoughtChunk(chunk) => {
                if let Some(t) = chunk.content.as_text() {
                    let kept = self.within_budget(t);
                    self.reasoning.push_str(kept);
                }
            }
            SessionUpdate::ToolCall(call) => return self.on_tool_call(call, now),
            SessionUpdate::ToolCallUpdate(update) => out.extend(self.on_tool_update(update, now)),
            SessionUpdate::Plan(plan) => return self.on_plan(plan),
            SessionUpdate::UsageUpdate(usage) => {
                if let (Some(size), Some(used)) = (usage.size, usage.used) {
                    // The latest report holds, even one that cannot be shown.
                    self.context_pct = super::usage::context_pct(size, used);
                }
                if let Some(cost) = usage.cost.as_ref() {
                    self.cost = cost
                        .as_f64()
                        .or_else(|| cost.get("amount").and_then(|a| a.as_f64()));
                }
            }
            _ => {}
        }
        out
    }

    /// Text of the answer: the bubble opens with the first, and updates follow (leading edge).
    fn answer_text(&mut self, text: &str, now: Instant, out: &mut Vec<Out>) {
        // Hermes opens the text after a tool with blank lines; a bubble never starts with them.
        let text = if self.text.is_empty() {
            text.trim_start_matches(['\n', '\r'])
        } else {
            text
        };
        // An empty chunk is an agent's keep-alive (newer Hermes sends one every 45 s of a long
        // turn), not text: no bubble, no update, nothing to store or push.
        if text.is_empty() {
            return;
        }
        if !self.bubble_started {
            self.bubble_started = true;
            out.push(Out::Durable(DurableFrame::MessageStart(MessageStart {
                message_id: self.cfg.message_id.clone(),
                role: self.cfg.role,
                reply_to: self.reply_to.clone(),
            })));
        }
        let kept = self.within_budget(text);
        self.text.push_str(kept);
        self.dirty = true;
        out.extend(self.flush_due(now));
    }

    fn update_frame(&self) -> Out {
        Out::Ephemeral(
            EphemeralFrame::MessageUpdate(MessageUpdate {
                message_id: self.cfg.message_id.clone(),
                text: media_agent::display_text(&self.text),
                offset: None,
            }),
            update_key(&self.cfg.message_id),
        )
    }

    /// A pending `message.update`, if one is due: when text waits and the last update is at
    /// least `update_interval` old (or there was none).
    pub fn flush_due(&mut self, now: Instant) -> Option<Out> {
        if !self.dirty
            || self
                .last_update
                .is_some_and(|t| now < t + self.cfg.update_interval)
        {
            return None;
        }
        self.dirty = false;
        self.last_update = Some(now);
        Some(self.update_frame())
    }

    /// When the next rate-limited `message.update` is due.
    pub fn next_flush(&self) -> Option<Instant> {
        self.dirty.then(|| {
            self.last_update
                .map(|t| t + self.cfg.update_interval)
                .unwrap_or_else(Instant::now)
        })
    }

    /// Closes the turn: open tools end, and the final frame carries the text after the last
    /// tool, the reasoning (when shown) and the runtime footer.
    pub fn finish(mut self, ending: &Ending, now: Instant) -> Vec<Out> {
        let mut out = Vec::new();
        // Text still waiting for its interval goes out now: it is visible without waiting for
        // the final frame's commit, and the last update of a bubble holds all of its text.
        if self.dirty && self.bubble_started {
            self.dirty = false;
            out.push(self.update_frame());
        }
        // An agent may never report the end of a call (Hermes' write_file); a turn that ended
        // normally ran it.
        self.end_open_tools(!ending.cancelled && !ending.failed, now, &mut out);
        let steps = self.steps.to_vec();
        let turn_changes = self.changes.combined();
        let reasoning = (self.cfg.show_reasoning && !self.reasoning.trim().is_empty())
            .then(|| self.reasoning.clone());
        let model = self.cfg.model.as_deref().map(bare_model);
        let runtime = Runtime {
            model: model.clone(),
            context_pct: self.context_pct,
            cwd: Some(self.cfg.cwd.clone()),
            latency: Some(round_secs(now.duration_since(self.started_at))),
            cost: self.cost,
            agent: self.cfg.agent.clone(),
            rewind: self.cfg.rewind,
        };
        // A turn that answers a user message always ends in an answer, empty when the agent
        // said nothing: its `ended` tells devices how the turn went (and offers Retry), and the
        // message's receipt follows from it.
        if self.said_nothing() && reasoning.is_none() && self.reply_to.is_none() {
            return out;
        }
        let text = media_agent::split_media_lines(&self.text).0;
        let message = Message {
            message_id: self.cfg.message_id.clone(),
            role: self.cfg.role,
            text: text.clone(),
            reasoning: reasoning.clone(),
            media: self.media.clone(),
            model: model.clone(),
            tokens: ending.tokens,
            ts: now_ms(),
            runtime: Some(runtime.clone()),
            ended: Some(ending.end()),
            steps: steps.clone(),
            turn_changes: turn_changes.clone(),
            reply_to: self.reply_to.clone(),
            ..Message::default()
        };
        let frame = if self.bubble_started {
            DurableFrame::MessageStop(MessageStop {
                message_id: self.cfg.message_id.clone(),
                final_text: text,
                reasoning,
                model,
                tokens: ending.tokens,
                runtime: Some(runtime),
                media: self.media,
                ended: Some(ending.end()),
                steps,
                turn_changes,
            })
        } else {
            DurableFrame::Message(message.clone())
        };
        out.push(Out::Final(frame, message));
        out
    }
}

/// A model id without its provider or vendor prefix: `openrouter:openai/gpt-5.4` → `gpt-5.4`.
pub fn bare_model(model: &str) -> String {
    let after_provider = model.rsplit(':').next().unwrap_or(model);
    after_provider
        .rsplit('/')
        .next()
        .unwrap_or(after_provider)
        .to_owned()
}

fn round_secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

mod calls;
mod changes;
mod pickers;
mod steps;
/// The coalescing key of a bubble's `message.update`: a newer update replaces a queued one.
pub(crate) fn update_key(message_id: &str) -> String {
    format!("mu:{message_id}")
}

#[cfg(test)]
mod tests;
