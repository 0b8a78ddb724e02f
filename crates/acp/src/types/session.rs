//! Session requests (`session/new`, `session/load`, model and mode switches, cancel) and the
//! prompt turn (`session/prompt` and its result).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ContentBlock;

/// `session/new` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewSessionRequest {
    /// Absolute working directory for the session.
    pub cwd: String,
    /// MCP servers to attach; Iris attaches none.
    #[serde(default)]
    pub mcp_servers: Vec<Value>,
}

/// `session/new` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewSessionResponse {
    /// The new session's id.
    pub session_id: String,
    /// Models the agent offers, if it reports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub models: Option<SessionModelState>,
    /// Modes the agent offers, if it reports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modes: Option<SessionModeState>,
}

/// `session/load` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadSessionRequest {
    /// The session to reopen.
    pub session_id: String,
    /// Absolute working directory.
    pub cwd: String,
    /// MCP servers to attach; Iris attaches none.
    #[serde(default)]
    pub mcp_servers: Vec<Value>,
}

/// `session/load` result. The agent replays the history as `session/update`s before it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadSessionResponse {
    /// Models the agent offers, if it reports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub models: Option<SessionModelState>,
    /// Modes the agent offers, if it reports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modes: Option<SessionModeState>,
}

/// `models` of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionModelState {
    /// What can be selected with `session/set_model`.
    #[serde(default)]
    pub available_models: Vec<ModelInfo>,
    /// The model in use.
    pub current_model_id: String,
}

/// One selectable model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelInfo {
    /// Id to pass to `session/set_model` (Hermes uses `provider:model`).
    pub model_id: String,
    /// Display name.
    pub name: String,
    /// Longer description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// `modes` of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionModeState {
    /// What can be selected with `session/set_mode`.
    #[serde(default)]
    pub available_modes: Vec<SessionMode>,
    /// The mode in use.
    pub current_mode_id: String,
}

/// One selectable mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionMode {
    /// Id to pass to `session/set_mode`.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Longer description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// `session/set_model` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetSessionModelRequest {
    /// The session.
    pub session_id: String,
    /// One of the session's `availableModels`.
    pub model_id: String,
}

/// `session/set_mode` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetSessionModeRequest {
    /// The session.
    pub session_id: String,
    /// One of the session's `availableModes`.
    pub mode_id: String,
}

/// `session/list` result (only what Iris reads; the rest is ignored).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListSessionsResponse {
    /// The sessions, each at least with its `sessionId`.
    #[serde(default)]
    pub sessions: Vec<Value>,
}

/// `session/close` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CloseSessionRequest {
    /// The session to end.
    pub session_id: String,
}

/// `session/cancel` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelNotification {
    /// The session whose turn should stop.
    pub session_id: String,
}

/// `session/prompt` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptRequest {
    /// The session.
    pub session_id: String,
    /// The user's message.
    pub prompt: Vec<ContentBlock>,
}

/// `session/prompt` result: the turn is over.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptResponse {
    /// Why the turn ended.
    pub stop_reason: StopReason,
    /// Token counts, if the agent reports them: the turn's own in ACP; Hermes sends the session's
    /// running totals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// Why a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The agent finished.
    EndTurn,
    /// The model hit its token limit.
    MaxTokens,
    /// The agent hit its limit of model requests in one turn.
    MaxTurnRequests,
    /// The model refused.
    Refusal,
    /// The client cancelled the turn.
    Cancelled,
    /// A reason this crate does not know.
    #[serde(other)]
    Other,
}

/// Token counts of a prompt result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Prompt tokens.
    #[serde(default)]
    pub input_tokens: u64,
    /// Completion tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Sum of all tokens.
    #[serde(default)]
    pub total_tokens: u64,
    /// Reasoning tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought_tokens: Option<u64>,
    /// Prompt tokens served from cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_read_tokens: Option<u64>,
    /// Prompt tokens written to cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_write_tokens: Option<u64>,
}
