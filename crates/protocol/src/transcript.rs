//! Additive fields that keep the transcript honest: how a turn ended ([`TurnEnd`]), which user
//! messages steered a running turn (`Message::steering`), the steps of a turn kept on its answer
//! ([`Step`]), and how a picker closed ([`PickerClosed`]). Older apps ignore them.

use serde::{Deserialize, Serialize};

/// How the turn behind a final assistant (or cron) message ended: the `ended` field of
/// `message`, `message.stop` and history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnEnd {
    /// The agent finished its answer.
    Completed,
    /// The user (or the gateway, for a lane being closed) stopped the turn.
    Stopped,
    /// The gateway itself went down during the turn; the text is the last checkpoint of it.
    CutOff,
    /// The agent failed the turn: it reported an error, crashed, went silent for too long, or
    /// sent more than a turn may hold ([`MAX_TURN_TEXT`], [`MAX_TURN_TOOLS`], [`MAX_TURN_FILES`]).
    AgentFailed,
}

/// The text of one turn (its answer, commentary and reasoning together) is at most this many
/// bytes: an agent that writes more has its turn stopped, and the answer keeps what fit.
pub const MAX_TURN_TEXT: usize = 512 * 1024;
/// One turn starts at most this many tool calls (a plan update counts as one): an agent that
/// starts more has its turn stopped.
pub const MAX_TURN_TOOLS: usize = 1000;
/// One turn sends at most this many files (each at most `[media] max_upload_bytes`): an agent
/// that sends more has its turn stopped, and the answer keeps the first ones.
pub const MAX_TURN_FILES: usize = 64;

/// At most this many steps are kept on one message; later ones are left out (the plan, which is
/// updated in place, always fits).
pub const MAX_STEPS: usize = 200;
/// A tool call's `args` longer than this many bytes of JSON are kept as a string of their first
/// bytes followed by `…`.
pub const MAX_STEP_ARGS: usize = 2048;
/// Most bytes of one file's diff a step keeps ([`FileChange::diff`]); a longer one is cut at a
/// line and marked `truncated`.
pub const MAX_CHANGE_BYTES: usize = 16 * 1024;
/// Most bytes of diffs one turn keeps in all; later changes keep their counts only.
pub const MAX_TURN_CHANGE_BYTES: usize = 256 * 1024;

/// A file a tool call changed (ACP `diff` content), as a unified diff. An Iris extension.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    /// The file, as the agent named it (usually absolute).
    pub path: String,
    /// The change as a unified diff with three lines of context (`---`/`+++` headers, `@@`
    /// hunks), at most [`MAX_CHANGE_BYTES`]; empty when not kept (see `truncated`).
    pub diff: String,
    /// Lines added.
    pub added: u32,
    /// Lines removed.
    pub removed: u32,
    /// The file did not exist before.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub new_file: bool,
    /// `diff` is cut short, or left out (too large to compare, or the turn's bound reached).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// The path is not inside the agent's working directory (an absolute path elsewhere, or
    /// one whose `..` leads out): an edit of a file the user may not expect the agent to touch.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub outside: bool,
}
/// Commentary text and a plan's text are cut to this many characters.
pub const MAX_STEP_TEXT: usize = 4000;

/// One step of a turn, in the order it happened: the `steps` of an assistant (or cron) message
/// in `history`, `message` and `message.stop` (additive). Steps repeat what the turn's live
/// frames showed, so that a device that was not watching renders the same cards.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Step {
    /// A commentary beat: the text the agent said before a tool call.
    Commentary {
        /// The beat's text (as in its `commentary` frame, cut to [`MAX_STEP_TEXT`]).
        text: String,
    },
    /// A tool call (`tool.start` and `tool.end` in one).
    Tool(ToolStep),
    /// The plan as last shown, at the place it was first shown.
    Plan {
        /// The checklist text of its last `commentary` frame.
        text: String,
    },
    /// A picker the agent opened during the turn, and how it closed.
    Picker(PickerStep),
}

/// A tool call in a message's `steps`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolStep {
    /// Index of the call within the turn.
    pub index: u32,
    /// Tool name.
    pub name: String,
    /// Cosmetic glyph.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emoji: Option<String>,
    /// Short preview (command, path…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
    /// Arguments, cut to [`MAX_STEP_ARGS`] (see [`ToolStep::bounded_args`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<serde_json::Value>,
    /// Whether it succeeded; absent while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok: Option<bool>,
    /// Seconds it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<f64>,
    /// Short tail of its output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_preview: Option<String>,
    /// The files it changed. An Iris extension.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<FileChange>,
}

impl ToolStep {
    /// Arguments as a step keeps them: unchanged when their JSON is at most [`MAX_STEP_ARGS`]
    /// bytes, else a string of that many bytes of it (cut at a character boundary) and `…`.
    pub fn bounded_args(args: Option<&serde_json::Value>) -> Option<serde_json::Value> {
        let args = args?;
        let json = serde_json::to_string(args).ok()?;
        if json.len() <= MAX_STEP_ARGS {
            return Some(args.clone());
        }
        let mut end = MAX_STEP_ARGS;
        while !json.is_char_boundary(end) {
            end -= 1;
        }
        Some(serde_json::Value::String(format!("{}…", &json[..end])))
    }
}

/// How a picker closed: the `outcome` of `picker.closed` and of a picker step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PickerOutcome {
    /// A device answered it.
    #[default]
    Answered,
    /// Nobody answered in time.
    Expired,
    /// The turn it belonged to ended (stopped, failed or finished) before an answer.
    Cancelled,
}

/// A picker in a message's `steps`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PickerStep {
    /// The picker's id.
    pub picker_id: String,
    /// Which picker frame asked: `approval` or `clarify`.
    pub picker: String,
    /// What was asked (the picker's title).
    pub title: String,
    /// How it closed; absent only when the turn ended with it still open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<PickerOutcome>,
    /// The chosen value, when answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// The chosen choice's label, when answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The device that answered it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by_device: Option<String>,
    /// The files the approved (or refused) call would change. An Iris extension.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<FileChange>,
}

/// `picker.closed` (durable, additive): a picker was answered, expired or was cancelled, so no
/// device offers it any more. Sent in the picker's lane.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PickerClosed {
    /// The picker.
    pub picker_id: String,
    /// How it closed.
    pub outcome: PickerOutcome,
    /// The chosen value, when answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// The device that answered it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by_device: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{decode, ServerFrame};
    use serde_json::json;

    #[test]
    fn steps_and_picker_closed_have_the_documented_shape() {
        let steps = vec![
            Step::Commentary {
                text: "Let me look.".into(),
            },
            Step::Plan {
                text: "Plan:\n☐ a".into(),
            },
            Step::Tool(ToolStep {
                index: 0,
                name: "terminal".into(),
                ok: Some(true),
                duration: Some(0.25),
                ..ToolStep::default()
            }),
            Step::Picker(PickerStep {
                picker_id: "p_1".into(),
                picker: "approval".into(),
                title: "Run it?".into(),
                outcome: Some(PickerOutcome::Answered),
                value: Some("allow_once".into()),
                label: Some("Allow once".into()),
                by_device: Some("phone".into()),
                changes: Vec::new(),
            }),
        ];
        assert_eq!(
            serde_json::to_value(&steps).unwrap(),
            json!([
                {"kind": "commentary", "text": "Let me look."},
                {"kind": "plan", "text": "Plan:\n☐ a"},
                {"kind": "tool", "index": 0, "name": "terminal", "ok": true, "duration": 0.25},
                {"kind": "picker", "picker_id": "p_1", "picker": "approval", "title": "Run it?",
                 "outcome": "answered", "value": "allow_once", "label": "Allow once",
                 "by_device": "phone"},
            ])
        );
        let frame = decode::<ServerFrame>(
            r#"{"v":1,"type":"picker.closed","chat_id":"c","payload":{"picker_id":"p_1","outcome":"expired","later":1}}"#,
        )
        .unwrap();
        assert_eq!(
            frame.body,
            ServerFrame::PickerClosed(PickerClosed {
                picker_id: "p_1".into(),
                outcome: PickerOutcome::Expired,
                ..PickerClosed::default()
            })
        );
    }

    #[test]
    fn args_over_the_bound_become_a_cut_string() {
        let small = json!({"command": "ls"});
        assert_eq!(ToolStep::bounded_args(Some(&small)), Some(small));
        let big = json!({"text": "é".repeat(MAX_STEP_ARGS)});
        let cut = ToolStep::bounded_args(Some(&big)).unwrap();
        let cut = cut.as_str().unwrap();
        assert!(cut.len() <= MAX_STEP_ARGS + '…'.len_utf8() && cut.ends_with('…'));
        assert_eq!(ToolStep::bounded_args(None), None);
    }
}
