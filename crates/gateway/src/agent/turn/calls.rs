//! A turn's tool calls and its plan: each call's card (`tool.start`, `tool.progress`,
//! `tool.end`, with its preview, output and file changes), the `agent.busy` that follows the
//! first call opening and the last closing, the text before a call kept as a `commentary` beat,
//! and the plan as a checklist `commentary` updated in place.

use std::time::Instant;

use iris_acp::{Plan, PlanEntryStatus, ToolCall, ToolCallContent, ToolCallStatus, ToolCallUpdate};
use iris_protocol::{
    AgentBusy, BusyReason, Commentary, DurableFrame, EphemeralFrame, ToolEnd, ToolProgress,
    ToolStart, ToolStep, MAX_STEP_TEXT,
};

use super::super::tools;
use super::{round_secs, Out, ToolState, TurnMapper};
use crate::ids::new_id;
use crate::media::agent::{self as media_agent, AgentFile};
use crate::text::{agent_line, head, tail};

/// A tool's name on its card is cut to this many characters.
pub(super) const MAX_TOOL_NAME: usize = 100;

fn content_text(content: &[ToolCallContent]) -> Option<String> {
    let mut out = String::new();
    for c in content {
        match c {
            ToolCallContent::Content(chunk) => {
                if let Some(t) = chunk.content.as_text() {
                    if !out.is_empty() {
                        out.push('\n');
                    }
                    out.push_str(unfenced(t));
                }
            }
            ToolCallContent::Diff(d) => {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(&format!("{}\n{}", d.path, d.new_text));
            }
            _ => {}
        }
    }
    Some(out).filter(|s| !s.is_empty())
}

/// A tool's text output without the Markdown code fence around all of it (Claude Code's adapter
/// sends a command's output as `` ```console `` … `` ``` ``), else the text as it is.
pub(super) fn unfenced(text: &str) -> &str {
    let trimmed = text.trim_end();
    let ticks = trimmed.len() - trimmed.trim_start_matches('`').len();
    if ticks < 3 {
        return text;
    }
    let fence = &trimmed[..ticks];
    let Some((opening, rest)) = trimmed.split_once('\n') else {
        return text;
    };
    let info = &opening[ticks..];
    if info.contains('`') || info.contains(char::is_whitespace) {
        return text;
    }
    let Some(inner) = rest.strip_suffix(fence) else {
        return text;
    };
    if !(inner.is_empty() || inner.ends_with('\n')) {
        return text;
    }
    // One fence around everything: no line inside closes it early.
    if inner.lines().any(|l| l.trim_start().starts_with(fence)) {
        return text;
    }
    inner.strip_suffix('\n').unwrap_or(inner)
}

/// Whether a tool call's input says anything (Claude Code's adapter starts a card with `{}`).
fn shows_input(raw_input: Option<&serde_json::Value>) -> bool {
    raw_input.is_some_and(|v| !v.is_null() && v.as_object().is_none_or(|o| !o.is_empty()))
}

/// A one-line preview of a tool call: the title's detail, else a command or path from its input.
fn preview(detail: Option<String>, raw_input: Option<&serde_json::Value>) -> Option<String> {
    let from_input = || {
        let input = raw_input?;
        ["command", "path", "query", "url", "file_path"]
            .iter()
            .find_map(|k| input.get(k).and_then(|v| v.as_str()).map(str::to_owned))
    };
    detail
        .or_else(from_input)
        .map(|p| tail(&agent_line(&p), 200))
        .filter(|p| !p.is_empty())
}

/// Tool calls and the plan are steps of the turn's answer, and cards while it runs.
impl TurnMapper {
    /// Tool calls the turn has finished (or failed).
    pub fn tools_closed(&self) -> usize {
        self.tools.iter().filter(|t| !t.open).count()
    }

    /// Whether a tool call is running.
    pub fn tool_open(&self) -> bool {
        self.tools.iter().any(|t| t.open)
    }

    /// A tool call starts (or, under an id already seen, updates).
    pub(super) fn on_tool_call(&mut self, call: &ToolCall, now: Instant) -> Vec<Out> {
        if self.tools.iter().any(|t| t.id == call.tool_call_id) {
            let update = ToolCallUpdate {
                tool_call_id: call.tool_call_id.clone(),
                status: call.status,
                content: Some(call.content.clone()),
                raw_input: call.raw_input.clone(),
                raw_output: call.raw_output.clone(),
                title: Some(call.title.clone()),
                ..ToolCallUpdate::default()
            };
            return self.on_tool_update(&update, now);
        }
        if !self.one_more_call() {
            return Vec::new();
        }
        let mut out = Vec::new();
        self.commentary_before_tool(&mut out);
        self.files_in(&call.content);
        let was_idle = !self.tool_open();
        let (name, detail) = tools::split_title(&agent_line(&call.title));
        let name = head(&name, MAX_TOOL_NAME);
        let index = self.tools.len() as u32;
        self.tools.push(ToolState {
            id: call.tool_call_id.clone(),
            index,
            name: name.clone(),
            started: now,
            open: true,
            has_input: shows_input(call.raw_input.as_ref()),
            changes: Vec::new(),
            changes_unsent: false,
        });
        let start = ToolStart {
            index,
            emoji: tools::emoji(&name).map(str::to_owned),
            preview: preview(detail, call.raw_input.as_ref()),
            // Live cards show what the answer's steps keep.
            args: ToolStep::bounded_args(call.raw_input.as_ref()),
            name,
            changes: self.changes.take_for(&call.tool_call_id, &call.content),
        };
        if let Some(tool) = self.tools.last_mut() {
            tool.changes = start.changes.clone();
        }
        self.steps.tool_start(&start);
        out.push(Out::Durable(DurableFrame::ToolStart(start)));
        if was_idle {
            out.push(Out::Durable(DurableFrame::AgentBusy(AgentBusy {
                reason: BusyReason::Tool,
            })));
        }
        if matches!(
            call.status,
            Some(ToolCallStatus::Completed | ToolCallStatus::Failed)
        ) {
            let update = ToolCallUpdate {
                tool_call_id: call.tool_call_id.clone(),
                status: call.status,
                raw_output: call.raw_output.clone(),
                ..ToolCallUpdate::default()
            };
            out.extend(self.on_tool_update(&update, now));
        }
        out
    }

    /// A plan update: one checklist `commentary`, updated in place.
    pub(super) fn on_plan(&mut self, plan: &Plan) -> Vec<Out> {
        // Each update is a durable frame: it counts like a tool call.
        if !self.one_more_call() {
            return Vec::new();
        }
        let id = self.plan_id.get_or_insert_with(|| new_id("m_")).clone();
        let mut text = String::from("Plan:");
        for e in &plan.entries {
            let mark = match e.status {
                PlanEntryStatus::Completed => "☑",
                PlanEntryStatus::InProgress => "◐",
                PlanEntryStatus::Pending => "☐",
            };
            text.push_str(&format!("\n{mark} {}", e.content));
        }
        self.steps.plan(&text);
        vec![Out::Durable(DurableFrame::Commentary(Commentary {
            message_id: id,
            text: head(&text, MAX_STEP_TEXT),
        }))]
    }

    /// Text before a tool call is a `commentary` beat: it leaves the bubble, which is cleared.
    pub(super) fn commentary_before_tool(&mut self, out: &mut Vec<Out>) {
        if self.text.trim().is_empty() {
            return;
        }
        let (text, paths) = media_agent::split_media_lines(&std::mem::take(&mut self.text));
        self.add_files(paths.into_iter().map(AgentFile::Path));
        self.steps.commentary(&text);
        out.push(Out::Durable(DurableFrame::Commentary(Commentary {
            message_id: new_id("m_"),
            text: head(&text, MAX_STEP_TEXT),
        })));
        if self.bubble_started {
            out.push(self.update_frame());
        }
        self.dirty = false;
    }

    pub(super) fn on_tool_update(&mut self, update: &ToolCallUpdate, now: Instant) -> Vec<Out> {
        let mut out = Vec::new();
        let Some(tool) = self.tools.iter_mut().find(|t| t.id == update.tool_call_id) else {
            return out;
        };
        if !tool.open {
            return out;
        }
        if let Some(content) = &update.content {
            self.files_in(content);
            let changes = self.changes.take_for(&update.tool_call_id, content);
            let tool = self.tools.iter_mut().find(|t| t.id == update.tool_call_id);
            if let (Some(tool), false) = (tool, changes.is_empty()) {
                tool.changes = changes;
                tool.changes_unsent = true;
            }
        }
        let Some(tool) = self.tools.iter_mut().find(|t| t.id == update.tool_call_id) else {
            return out;
        };
        let mut output_or_input = None;
        if !tool.has_input && shows_input(update.raw_input.as_ref()) {
            // The call's input came after its card (Claude Code's adapter does this): the
            // answer's step gets it, and the live card sees it as progress.
            tool.has_input = true;
            let detail = update
                .title
                .as_deref()
                .and_then(|t| tools::split_title(&agent_line(t)).1);
            let shown = preview(detail, update.raw_input.as_ref());
            self.steps
                .tool_input(tool.index, shown.clone(), update.raw_input.as_ref());
            output_or_input = shown;
        }
        let Some(tool) = self.tools.iter_mut().find(|t| t.id == update.tool_call_id) else {
            return out;
        };
        let output = update
            .content
            .as_deref()
            .and_then(content_text)
            .or_else(|| {
                update.raw_output.as_ref().map(|v| {
                    v.as_str()
                        .map(str::to_owned)
                        .unwrap_or_else(|| v.to_string())
                })
            });
        match update.status {
            Some(status @ (ToolCallStatus::Completed | ToolCallStatus::Failed)) => {
                tool.open = false;
                self.changes
                    .ended(&tool.id, status == ToolCallStatus::Completed);
                let end = ToolEnd {
                    index: tool.index,
                    name: tool.name.clone(),
                    ok: status == ToolCallStatus::Completed,
                    duration: Some(round_secs(now.duration_since(tool.started))),
                    output_preview: output.map(|o| tail(&o, 500)),
                    changes: tool.unsent_changes(),
                };
                self.steps.tool_end(&end);
                out.push(Out::Durable(DurableFrame::ToolEnd(end)));
                if !self.tool_open() {
                    out.push(Out::Durable(DurableFrame::AgentBusy(AgentBusy {
                        reason: BusyReason::Processing,
                    })));
                }
            }
            _ => {
                let key = format!("tp:{}:{}", self.cfg.message_id, tool.index);
                let note = output
                    .map(|o| tail(&o, 200))
                    .or(output_or_input)
                    .or_else(|| Some("running…".into()));
                out.push(Out::Ephemeral(
                    EphemeralFrame::ToolProgress(ToolProgress {
                        index: tool.index,
                        name: tool.name.clone(),
                        note,
                    }),
                    key,
                ));
            }
        }
        out
    }

    /// Ends the calls still open when the turn ends, `ok` when the turn ended normally.
    pub(super) fn end_open_tools(&mut self, ok: bool, now: Instant, out: &mut Vec<Out>) {
        for tool in self.tools.iter_mut().filter(|t| t.open) {
            tool.open = false;
            self.changes.ended(&tool.id, ok);
            let end = ToolEnd {
                index: tool.index,
                name: tool.name.clone(),
                ok,
                duration: Some(round_secs(now.duration_since(tool.started))),
                output_preview: None,
                changes: tool.unsent_changes(),
            };
            self.steps.tool_end(&end);
            out.push(Out::Durable(DurableFrame::ToolEnd(end)));
        }
    }
}
