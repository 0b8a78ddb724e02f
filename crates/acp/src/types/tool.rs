//! Tool calls as reported in `session/update` and shown in permission requests.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ContentChunk;

/// A tool call as first reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// Id that later updates refer to.
    pub tool_call_id: String,
    /// What is being done; Hermes puts the tool name first (`terminal: echo hi`).
    #[serde(default)]
    pub title: String,
    /// The category of tool.
    #[serde(default)]
    pub kind: ToolKind,
    /// Progress; agents may omit it (meaning pending).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ToolCallStatus>,
    /// The tool's arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_input: Option<Value>,
    /// The tool's raw result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_output: Option<Value>,
    /// Previews and results to show.
    #[serde(default)]
    pub content: Vec<ToolCallContent>,
    /// Files the call touches.
    #[serde(default)]
    pub locations: Vec<ToolCallLocation>,
}

/// Changes to a tool call; `None` fields are unchanged. Also the `toolCall` of a permission
/// request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallUpdate {
    /// The tool call being updated.
    pub tool_call_id: String,
    /// New title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// New kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ToolKind>,
    /// New status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ToolCallStatus>,
    /// New arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_input: Option<Value>,
    /// The raw result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_output: Option<Value>,
    /// Replacement content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Vec<ToolCallContent>>,
    /// Replacement locations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locations: Option<Vec<ToolCallLocation>>,
}

/// Category of a tool, used to pick an icon.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// Reading files or data.
    Read,
    /// Modifying files.
    Edit,
    /// Removing files.
    Delete,
    /// Moving or renaming files.
    Move,
    /// Searching.
    Search,
    /// Running commands or code.
    Execute,
    /// Internal reasoning.
    Think,
    /// Retrieving external data.
    Fetch,
    /// Switching session mode.
    SwitchMode,
    /// Anything else, including kinds this crate does not know.
    #[default]
    #[serde(other)]
    Other,
}

/// Progress of a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallStatus {
    /// Not started (e.g. awaiting approval or still streaming input).
    Pending,
    /// Running.
    InProgress,
    /// Finished successfully.
    Completed,
    /// Finished with an error.
    Failed,
}

tagged_union! {
    /// Something a tool call shows.
    pub enum ToolCallContent, tag = "type" {
        /// A content block (a preview or a result).
        Content(ContentChunk) = "content",
        /// A file change.
        Diff(Diff) = "diff",
        /// A terminal owned by the client.
        Terminal(TerminalRef) = "terminal",
    }
}

/// A file change in a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Diff {
    /// Absolute path of the file.
    pub path: String,
    /// Previous contents; absent for a new file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_text: Option<String>,
    /// New contents.
    pub new_text: String,
}

/// A client terminal shown in a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TerminalRef {
    /// The terminal's id.
    pub terminal_id: String,
}

/// A file (and line) a tool call touches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallLocation {
    /// Absolute path.
    pub path: String,
    /// 1-based line, if relevant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}
