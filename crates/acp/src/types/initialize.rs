//! The `initialize` handshake: who each side is and what it supports.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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
/// uses its own; it offers form elicitation (`elicitation: {form: {}}`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientCapabilities {
    /// File access through the client.
    #[serde(default)]
    pub fs: FileSystemCapability,
    /// Terminals through the client.
    #[serde(default)]
    pub terminal: bool,
    /// `elicitation/create` modes the client answers (unstable in ACP), kept raw: Iris sends
    /// `{"form": {}}`; absent means none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elicitation: Option<Value>,
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
    /// Always [`PROTOCOL_VERSION`](super::PROTOCOL_VERSION).
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

impl AgentCapabilities {
    /// Whether `sessionCapabilities.<name>` (`resume`, `close`, `list`, …) is advertised: present
    /// and neither `null` nor `false`. Capabilities this crate does not know stay in `other`
    /// and change nothing.
    pub fn session_capability(&self, name: &str) -> bool {
        self.other
            .get("sessionCapabilities")
            .and_then(|caps| caps.get(name))
            .is_some_and(|v| !v.is_null() && *v != Value::Bool(false))
    }
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
