//! A tool call's frames: `tool.start`, `tool.progress` and `tool.end`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `tool.start`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolStart {
    /// Index of the call within the turn.
    pub index: u32,
    /// Tool name.
    pub name: String,
    /// Short preview (command, path…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
    /// Arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
    /// Cosmetic glyph.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emoji: Option<String>,
    /// The files the call changes, as far as the agent said when it started (an edit waiting
    /// for approval shows its diff). An Iris extension.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<crate::FileChange>,
}

/// `tool.progress`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolProgress {
    /// Index of the call within the turn.
    pub index: u32,
    /// Tool name.
    pub name: String,
    /// Progress note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// `tool.end`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolEnd {
    /// Index of the call within the turn.
    pub index: u32,
    /// Tool name.
    pub name: String,
    /// Whether it succeeded.
    pub ok: bool,
    /// Seconds it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<f64>,
    /// Short tail of its output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_preview: Option<String>,
    /// The files it changed, when they differ from what `tool.start` said. An Iris extension.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<crate::FileChange>,
}
