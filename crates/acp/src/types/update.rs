//! `session/update`: the streamed events of a session, and the payloads that are not tool calls.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ContentBlock, ToolCall, ToolCallUpdate};

/// `session/update` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionNotification {
    /// The session the update belongs to.
    pub session_id: String,
    /// What happened.
    pub update: SessionUpdate,
}

tagged_union! {
    /// One streamed event of a session.
    pub enum SessionUpdate, tag = "sessionUpdate" {
        /// Part of the user's message (history replay, or a prompt queued by the agent).
        UserMessageChunk(ContentChunk) = "user_message_chunk",
        /// Part of the agent's answer.
        AgentMessageChunk(ContentChunk) = "agent_message_chunk",
        /// Part of the model's reasoning.
        AgentThoughtChunk(ContentChunk) = "agent_thought_chunk",
        /// A tool call started.
        ToolCall(ToolCall) = "tool_call",
        /// A tool call progressed or finished; absent fields are unchanged.
        ToolCallUpdate(ToolCallUpdate) = "tool_call_update",
        /// The agent's plan (the whole list each time).
        Plan(Plan) = "plan",
        /// The slash commands the agent understands.
        AvailableCommandsUpdate(AvailableCommandsUpdate) = "available_commands_update",
        /// The session's mode changed.
        CurrentModeUpdate(CurrentModeUpdate) = "current_mode_update",
        /// Context window usage.
        UsageUpdate(UsageUpdate) = "usage_update",
        /// Session metadata such as a generated title.
        SessionInfoUpdate(SessionInfoUpdate) = "session_info_update",
    }
}

/// Payload of the message and thought chunk updates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContentChunk {
    /// The chunk.
    pub content: ContentBlock,
}

/// The agent's plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// All entries, in order.
    pub entries: Vec<PlanEntry>,
}

/// One step of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanEntry {
    /// What the step is.
    pub content: String,
    /// How important it is.
    pub priority: PlanEntryPriority,
    /// Where it stands.
    pub status: PlanEntryStatus,
}

/// Importance of a plan step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanEntryPriority {
    /// High.
    High,
    /// Medium.
    Medium,
    /// Low.
    Low,
}

/// Progress of a plan step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanEntryStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
}

/// `available_commands_update` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AvailableCommandsUpdate {
    /// The full list of commands.
    pub available_commands: Vec<AvailableCommand>,
}

/// A slash command the agent answers (sent as plain prompt text `/name args`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AvailableCommand {
    /// Name without the slash.
    pub name: String,
    /// What it does.
    #[serde(default)]
    pub description: String,
    /// Present when the command takes an argument.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<AvailableCommandInput>,
}

/// Argument hint of a command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AvailableCommandInput {
    /// Placeholder text for the argument.
    #[serde(default)]
    pub hint: String,
}

/// `current_mode_update` payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CurrentModeUpdate {
    /// The mode now in use.
    pub current_mode_id: String,
}

/// `usage_update` payload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageUpdate {
    /// Context window size in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Tokens in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used: Option<u64>,
    /// Spend so far, kept raw (`{amount, currency}` in the spec; Hermes sends none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Value>,
}

/// `session_info_update` payload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfoUpdate {
    /// A (generated) session title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// When the session last changed (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
}
