//! What the gateway announces it can do, in `hello.ack` (`server_caps`).

use serde::{Deserialize, Serialize};

/// Capabilities the gateway announces.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerCaps {
    /// Streaming bubbles.
    pub streaming: bool,
    /// Reasoning display.
    pub reasoning: bool,
    /// Tool events.
    pub tools: bool,
    /// Media transfer.
    pub media: bool,
    /// Full-text search.
    pub search: bool,
    /// Push backend in use, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push: Option<String>,
    /// Interactive pickers.
    pub pickers: bool,
    /// The gateway's VAPID public key (an uncompressed P-256 point, base64url without padding),
    /// when it sends Web Push: the `applicationServerKey` a browser subscribes with. An Iris
    /// extension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webpush_key: Option<String>,
    /// The names of the agents a chat can be given (`channel.create {agent}`,
    /// `channel.set_agent`), the default first; empty (and absent) without an agent. An Iris
    /// extension.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<String>,
    /// Whether voice notes are accepted (`media.upload.start {voice:true}`): the gateway
    /// transcribes them, or an agent takes audio. An app shows its microphone only then. An Iris
    /// extension.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub voice: bool,
    /// Whether the gateway reads texts aloud in its own voice (`speech.create`, `[voice]
    /// speech_url`). An Iris extension.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub speech: bool,
}
