//! Serde types for the parts of the Agent Client Protocol (v1) a client needs, named exactly as
//! on the wire (camelCase fields, snake_case tags).
//!
//! Parsing is lenient where agents vary: unknown fields are ignored, optional fields may be
//! missing, and every tagged union ([`SessionUpdate`], [`ContentBlock`], [`ToolCallContent`]) has
//! an `Unknown(Value)` variant that keeps anything this crate does not recognise (including a
//! known tag whose fields do not parse), so decoding a `session/update` never fails.

use serde::de::Deserializer;
use serde::ser::{Error as _, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The ACP protocol version this crate speaks.
pub const PROTOCOL_VERSION: u32 = 1;

/// Prefix of a permission request's tool-call title that marks it as a clarifying question
/// rather than a tool approval (a convention of the demo agent; see [`crate::demo`]).
pub const CLARIFY_TITLE_PREFIX: &str = "clarify:";

/// ACP method names.
pub mod method {
    /// Client → agent request: handshake.
    pub const INITIALIZE: &str = "initialize";
    /// Client → agent request: create a session.
    pub const SESSION_NEW: &str = "session/new";
    /// Client → agent request: reopen a session (history is replayed as updates first).
    pub const SESSION_LOAD: &str = "session/load";
    /// Client → agent request: run one turn.
    pub const SESSION_PROMPT: &str = "session/prompt";
    /// Client → agent notification: stop the running turn.
    pub const SESSION_CANCEL: &str = "session/cancel";
    /// Client → agent request: switch model.
    pub const SESSION_SET_MODEL: &str = "session/set_model";
    /// Client → agent request: switch mode.
    pub const SESSION_SET_MODE: &str = "session/set_mode";
    /// Agent → client notification: streamed progress of a session.
    pub const SESSION_UPDATE: &str = "session/update";
    /// Agent → client request: ask the user to approve a tool call.
    pub const SESSION_REQUEST_PERMISSION: &str = "session/request_permission";
}

// ---------------------------------------------------------------------------------------------
// Tagged unions that keep what they do not know.

/// Serializes `inner` as an object and adds the tag field.
fn tagged_value<T: Serialize>(
    tag: &str,
    kind: &str,
    inner: &T,
) -> Result<Value, serde_json::Error> {
    let mut value = serde_json::to_value(inner)?;
    match &mut value {
        Value::Object(map) => {
            map.insert(tag.to_owned(), Value::String(kind.to_owned()));
            Ok(value)
        }
        _ => Err(<serde_json::Error as serde::ser::Error>::custom(
            "tagged variant must serialize to an object",
        )),
    }
}

macro_rules! tagged_union {
    (
        $(#[$meta:meta])*
        pub enum $name:ident, tag = $tag:literal {
            $( $(#[$vmeta:meta])* $variant:ident($inner:ty) = $kind:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        pub enum $name {
            $( $(#[$vmeta])* $variant($inner), )*
            /// Anything else, kept verbatim: an unknown kind, or a known kind whose fields did
            /// not parse.
            Unknown(Value),
        }

        impl $name {
            /// The wire tag of this value, if it has one.
            pub fn kind(&self) -> Option<&str> {
                match self {
                    $( $name::$variant(_) => Some($kind), )*
                    $name::Unknown(value) => value.get($tag).and_then(Value::as_str),
                }
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                match self {
                    $( $name::$variant(inner) => tagged_value($tag, $kind, inner)
                        .map_err(S::Error::custom)?
                        .serialize(serializer), )*
                    $name::Unknown(value) => value.serialize(serializer),
                }
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let value = Value::deserialize(deserializer)?;
                let parsed = match value.get($tag).and_then(Value::as_str) {
                    $( Some($kind) => <$inner>::deserialize(&value).map($name::$variant), )*
                    _ => return Ok($name::Unknown(value)),
                };
                Ok(parsed.unwrap_or_else(|error| {
                    tracing::debug!(%error, kind = ?value.get($tag), "kept a malformed value as unknown");
                    $name::Unknown(value)
                }))
            }
        }
    };
}

// ---------------------------------------------------------------------------------------------
// Content.

tagged_union! {
    /// A piece of content in a prompt, a message chunk or a tool call.
    pub enum ContentBlock, tag = "type" {
        /// Plain text (Markdown by convention).
        Text(TextContent) = "text",
        /// A base64-encoded image.
        Image(ImageContent) = "image",
        /// A base64-encoded audio clip.
        Audio(AudioContent) = "audio",
        /// A reference to a file the agent can read itself.
        ResourceLink(ResourceLink) = "resource_link",
        /// A file's contents embedded in the message.
        Resource(EmbeddedResource) = "resource",
    }
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> ContentBlock {
        ContentBlock::Text(TextContent { text: text.into() })
    }

    /// An image block from base64 data.
    pub fn image(data_base64: impl Into<String>, mime_type: impl Into<String>) -> ContentBlock {
        ContentBlock::Image(ImageContent {
            data: data_base64.into(),
            mime_type: mime_type.into(),
            uri: None,
        })
    }

    /// A link to a file on the agent's disk (a `file://` URI).
    pub fn resource_link(uri: impl Into<String>, name: impl Into<String>) -> ContentBlock {
        ContentBlock::ResourceLink(ResourceLink {
            uri: uri.into(),
            name: name.into(),
            mime_type: None,
            size: None,
            title: None,
            description: None,
        })
    }

    /// The text of a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            ContentBlock::Text(t) => Some(&t.text),
            _ => None,
        }
    }
}

/// `{"type":"text"}` content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextContent {
    /// The text.
    pub text: String,
}

/// `{"type":"image"}` content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageContent {
    /// Base64-encoded bytes.
    pub data: String,
    /// e.g. `image/png`.
    pub mime_type: String,
    /// Where the image came from, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
}

/// `{"type":"audio"}` content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AudioContent {
    /// Base64-encoded bytes.
    pub data: String,
    /// e.g. `audio/wav`.
    pub mime_type: String,
}

/// `{"type":"resource_link"}` content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceLink {
    /// Usually a `file://` URI.
    pub uri: String,
    /// The file name shown to people.
    pub name: String,
    /// The media type, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Size in bytes, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// A display title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// A description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// `{"type":"resource"}` content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbeddedResource {
    /// The embedded contents.
    pub resource: ResourceContents,
}

/// Contents of an embedded resource: text or a base64 blob.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceContents {
    /// The resource's URI.
    pub uri: String,
    /// The media type, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Text contents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Base64-encoded binary contents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// initialize.

/// Name and version of a client or agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Implementation {
    /// Program name.
    pub name: String,
    /// Program version.
    #[serde(default)]
    pub version: String,
    /// Display title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// What the client offers the agent. Iris offers no file system or terminal access: the agent
/// uses its own.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientCapabilities {
    /// File access through the client.
    #[serde(default)]
    pub fs: FileSystemCapability,
    /// Terminals through the client.
    #[serde(default)]
    pub terminal: bool,
}

/// `clientCapabilities.fs`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileSystemCapability {
    /// `fs/read_text_file` is available.
    #[serde(default)]
    pub read_text_file: bool,
    /// `fs/write_text_file` is available.
    #[serde(default)]
    pub write_text_file: bool,
}

/// `initialize` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeRequest {
    /// Always [`PROTOCOL_VERSION`].
    pub protocol_version: u32,
    /// What the client offers.
    #[serde(default)]
    pub client_capabilities: ClientCapabilities,
    /// Who the client is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_info: Option<Implementation>,
}

/// `initialize` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResponse {
    /// The version the agent speaks.
    pub protocol_version: u32,
    /// What the agent supports.
    #[serde(default)]
    pub agent_capabilities: AgentCapabilities,
    /// Who the agent is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_info: Option<Implementation>,
    /// Authentication methods, kept raw (Iris does not authenticate agents over ACP).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub auth_methods: Vec<Value>,
}

/// `agentCapabilities`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    /// `session/load` is supported.
    #[serde(default)]
    pub load_session: bool,
    /// Which content blocks prompts may carry besides text and resource links.
    #[serde(default)]
    pub prompt_capabilities: PromptCapabilities,
    /// Everything else (`mcpCapabilities`, `sessionCapabilities`, `_meta`, …), kept raw.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// `agentCapabilities.promptCapabilities`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptCapabilities {
    /// Image blocks are accepted.
    #[serde(default)]
    pub image: bool,
    /// Audio blocks are accepted.
    #[serde(default)]
    pub audio: bool,
    /// Embedded `resource` blocks are accepted.
    #[serde(default)]
    pub embedded_context: bool,
}

// ---------------------------------------------------------------------------------------------
// Sessions.

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

/// `session/cancel` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelNotification {
    /// The session whose turn should stop.
    pub session_id: String,
}

// ---------------------------------------------------------------------------------------------
// Prompt turns.

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
    /// Token counts, if the agent reports them (Hermes: cumulative per agent process).
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

// ---------------------------------------------------------------------------------------------
// session/update.

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

// ---------------------------------------------------------------------------------------------
// session/request_permission.

/// `session/request_permission` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestPermissionRequest {
    /// The session asking.
    pub session_id: String,
    /// What would run. Its id may differ from the live tool call's id (Hermes: `perm-check-N`).
    pub tool_call: ToolCallUpdate,
    /// The choices.
    pub options: Vec<PermissionOption>,
}

impl RequestPermissionRequest {
    /// The question, when this request is a clarifying question (its title starts with
    /// [`CLARIFY_TITLE_PREFIX`]); the options are then the possible answers.
    pub fn clarify_question(&self) -> Option<&str> {
        let title = self.tool_call.title.as_deref()?;
        Some(title.strip_prefix(CLARIFY_TITLE_PREFIX)?.trim_start())
    }
}

/// One choice of a permission request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionOption {
    /// Id to answer with.
    pub option_id: String,
    /// Label shown to people.
    pub name: String,
    /// What choosing it means.
    pub kind: PermissionOptionKind,
}

/// Meaning of a permission option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionOptionKind {
    /// Allow this once.
    AllowOnce,
    /// Allow from now on.
    AllowAlways,
    /// Refuse this once.
    RejectOnce,
    /// Refuse from now on.
    RejectAlways,
}

impl PermissionOptionKind {
    /// True for the allow kinds.
    pub fn is_allow(self) -> bool {
        matches!(
            self,
            PermissionOptionKind::AllowOnce | PermissionOptionKind::AllowAlways
        )
    }
}

/// `session/request_permission` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestPermissionResponse {
    /// The user's decision.
    pub outcome: RequestPermissionOutcome,
}

impl RequestPermissionResponse {
    /// The user picked `option_id`.
    pub fn selected(option_id: impl Into<String>) -> Self {
        RequestPermissionResponse {
            outcome: RequestPermissionOutcome::Selected {
                option_id: option_id.into(),
            },
        }
    }

    /// The turn was cancelled before the user decided.
    pub fn cancelled() -> Self {
        RequestPermissionResponse {
            outcome: RequestPermissionOutcome::Cancelled,
        }
    }
}

/// The decision on a permission request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum RequestPermissionOutcome {
    /// No decision: the turn was cancelled.
    Cancelled,
    /// The user picked an option.
    Selected {
        /// The chosen option's id.
        #[serde(rename = "optionId")]
        option_id: String,
    },
}
