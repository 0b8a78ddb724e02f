//! Serde types for the parts of the Agent Client Protocol (v1) a client needs, named exactly as
//! on the wire (camelCase fields, snake_case tags).
//!
//! Parsing is lenient where agents vary: unknown fields are ignored, optional fields may be
//! missing, and every tagged union ([`SessionUpdate`], [`ContentBlock`], [`ToolCallContent`]) has
//! an `Unknown(Value)` variant that keeps anything this crate does not recognise (including a
//! known tag whose fields do not parse), so decoding a `session/update` never fails.

use serde::Serialize;
use serde_json::Value;

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
    /// Client → agent request: reopen a session without replaying its history (where
    /// `sessionCapabilities.resume` is advertised).
    pub const SESSION_RESUME: &str = "session/resume";
    /// Client → agent request: end a session and free what it holds (where
    /// `sessionCapabilities.close` is advertised).
    pub const SESSION_CLOSE: &str = "session/close";
    /// A copy of a session with its history so far, as a new session (advertised as
    /// `sessionCapabilities.fork`; params as `session/load`'s, result as `session/new`'s).
    pub const SESSION_FORK: &str = "session/fork";
    /// Client → agent request: the sessions the agent holds (where `sessionCapabilities.list`
    /// is advertised).
    pub const SESSION_LIST: &str = "session/list";
    /// Client → agent request: run one turn.
    pub const SESSION_PROMPT: &str = "session/prompt";
    /// Client → agent notification: stop the running turn.
    pub const SESSION_CANCEL: &str = "session/cancel";
    /// Client → agent request: switch model.
    pub const SESSION_SET_MODEL: &str = "session/set_model";
    /// Client → agent request: switch mode.
    pub const SESSION_SET_MODE: &str = "session/set_mode";
    /// Client → agent request: set a session config option (for Iris: the model, where the
    /// agent offers it as one).
    pub const SESSION_SET_CONFIG_OPTION: &str = "session/set_config_option";
    /// Agent → client notification: streamed progress of a session.
    pub const SESSION_UPDATE: &str = "session/update";
    /// Agent → client request: ask the user to approve a tool call.
    pub const SESSION_REQUEST_PERMISSION: &str = "session/request_permission";
    /// Agent → client request (unstable): ask the user to fill in a form.
    pub const ELICITATION_CREATE: &str = "elicitation/create";
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

/// Defines a tagged union that keeps what it does not know: an enum with one variant per known
/// tag, an `Unknown(Value)` variant, `kind()`, and serde impls that read and write the tag field.
/// The expansion names everything by full path, so the modules that use it need no imports.
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
            Unknown(::serde_json::Value),
        }

        impl $name {
            /// The wire tag of this value, if it has one.
            pub fn kind(&self) -> Option<&str> {
                match self {
                    $( $name::$variant(_) => Some($kind), )*
                    $name::Unknown(value) => value.get($tag).and_then(::serde_json::Value::as_str),
                }
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                use ::serde::ser::Error as _;
                match self {
                    $( $name::$variant(inner) => ::serde::Serialize::serialize(
                        &$crate::types::tagged_value($tag, $kind, inner).map_err(S::Error::custom)?,
                        serializer,
                    ), )*
                    $name::Unknown(value) => ::serde::Serialize::serialize(value, serializer),
                }
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let value = <::serde_json::Value as ::serde::Deserialize>::deserialize(deserializer)?;
                let parsed = match value.get($tag).and_then(::serde_json::Value::as_str) {
                    $( Some($kind) => <$inner as ::serde::Deserialize>::deserialize(&value)
                        .map($name::$variant), )*
                    _ => return Ok($name::Unknown(value)),
                };
                Ok(parsed.unwrap_or_else(|error| {
                    ::tracing::debug!(%error, kind = ?value.get($tag), "kept a malformed value as unknown");
                    $name::Unknown(value)
                }))
            }
        }
    };
}

mod content;
mod elicitation;
mod initialize;
mod permission;
mod session;
mod tool;
mod update;

pub use content::*;
pub use elicitation::*;
pub use initialize::*;
pub use permission::*;
pub use session::*;
pub use tool::*;
pub use update::*;
