//! The envelope: decoding a text frame into a typed frame, and encoding one back.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::PROTOCOL_VERSION;

/// A request id chosen by the client and echoed on the response. Numbers and strings are accepted.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    /// A numeric id, as in the seed's examples.
    Number(serde_json::Number),
    /// A string id.
    Str(String),
}

impl From<u64> for RequestId {
    fn from(n: u64) -> Self {
        RequestId::Number(n.into())
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestId::Number(n) => write!(f, "{n}"),
            RequestId::Str(s) => write!(f, "{s:?}"),
        }
    }
}

impl RequestId {
    /// The id as JSON text, ready to splice into an encoded frame.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a request id always serializes")
    }
}

/// Error codes of the `error` frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// Missing or wrong token, or a request before `hello`.
    Auth,
    /// The referenced chat, message, picker or media does not exist.
    NotFound,
    /// Too many requests; try again later.
    RateLimited,
    /// The declared media size is above the configured limit.
    MediaTooLarge,
    /// An unknown frame type (with an id), or an unsupported protocol version.
    Unsupported,
    /// Something failed inside the gateway; details are in its log only.
    Internal,
    /// The frame is not valid JSON, misses a required field or has a wrong value.
    BadRequest,
    /// A service the gateway relies on for this request (the speech endpoint) failed or did not
    /// answer; the request may succeed later. An Iris extension.
    Unavailable,
    /// A code this version does not know.
    #[serde(other)]
    Other,
}

impl ErrorCode {
    /// The wire string of this code.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Auth => "auth",
            ErrorCode::NotFound => "not_found",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::MediaTooLarge => "media_too_large",
            ErrorCode::Unsupported => "unsupported",
            ErrorCode::Internal => "internal",
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Other => "other",
        }
    }
}

/// Why a text frame could not be decoded. `id` is set when the frame's id could still be read,
/// so that the error frame can answer the request it belongs to.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code:?}: {message}")]
pub struct DecodeError {
    /// The request id, when it could be read.
    pub id: Option<RequestId>,
    /// `bad_request` or `unsupported`.
    pub code: ErrorCode,
    /// A human-readable reason, safe to send to the app.
    pub message: String,
    /// True when the frame names an unknown major protocol version (the server closes with 4400).
    pub version_mismatch: bool,
}

impl DecodeError {
    fn bad(id: Option<RequestId>, message: impl Into<String>) -> Self {
        DecodeError {
            id,
            code: ErrorCode::BadRequest,
            message: message.into(),
            version_mismatch: false,
        }
    }
}

/// A frame body: an enum over payload types keyed by the wire `type`.
pub trait FrameBody: Sized {
    /// The wire `type` of this frame.
    fn frame_type(&self) -> &str;
    /// Decodes a payload (JSON object text) for the given wire type.
    fn from_payload(frame_type: &str, payload: &str) -> serde_json::Result<Self>;
    /// Writes the payload as JSON.
    fn write_payload(&self, out: &mut Vec<u8>) -> serde_json::Result<()>;
}

/// The envelope fields around a frame body.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Header {
    /// Request id (requests and their responses).
    pub id: Option<RequestId>,
    /// Chat scope.
    pub chat_id: Option<String>,
    /// Thread scope inside the chat.
    pub thread_id: Option<String>,
    /// Outbox cursor; only on frames replayed by `sync`.
    pub cursor: Option<u64>,
}

impl Header {
    /// A header scoped to a lane.
    pub fn lane(chat_id: impl Into<String>, thread_id: Option<String>) -> Self {
        Header {
            chat_id: Some(chat_id.into()),
            thread_id,
            ..Header::default()
        }
    }

    /// The same header answering a request.
    pub fn with_id(mut self, id: Option<RequestId>) -> Self {
        self.id = id;
        self
    }
}

/// A decoded frame: its envelope and typed body.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded<F> {
    /// The envelope fields. For client frames, `chat_id`/`thread_id` fall back to the payload's.
    pub header: Header,
    /// The typed frame.
    pub body: F,
}

#[derive(Deserialize)]
struct RawEnvelope<'a> {
    #[serde(default)]
    v: Option<serde_json::Number>,
    #[serde(default)]
    id: Option<RequestId>,
    #[serde(rename = "type")]
    frame_type: String,
    #[serde(default)]
    chat_id: Option<String>,
    #[serde(default)]
    thread_id: Option<String>,
    #[serde(default)]
    cursor: Option<u64>,
    #[serde(borrow, default)]
    payload: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct IdOnly {
    #[serde(default)]
    id: Option<RequestId>,
}

#[derive(Deserialize)]
struct PayloadScope {
    #[serde(default)]
    chat_id: Option<String>,
    #[serde(default)]
    thread_id: Option<String>,
}

/// Decodes one text frame.
///
/// A missing `payload` is an empty object. A missing top-level `chat_id`/`thread_id` is taken from
/// the payload when it carries one (the seed allows either place).
pub fn decode<F: FrameBody>(text: &str) -> Result<Decoded<F>, DecodeError> {
    if nesting_depth(text) > MAX_NESTING {
        // The parser would give up before reading the id: look for it near the start.
        let id = sniff_id(text);
        return Err(DecodeError::bad(
            id,
            format!("JSON nested deeper than {MAX_NESTING} levels"),
        ));
    }
    let raw: RawEnvelope<'_> = match serde_json::from_str(text) {
        Ok(raw) => raw,
        Err(e) => {
            let id = serde_json::from_str::<IdOnly>(text)
                .ok()
                .and_then(|i| i.id)
                .or_else(|| sniff_id(text));
            let what = if e.is_syntax() || e.is_eof() {
                "invalid JSON"
            } else {
                "invalid frame"
            };
            return Err(DecodeError::bad(id, format!("{what}: {e}")));
        }
    };
    if let Some(v) = &raw.v {
        let major = v.as_f64().map(|f| f.trunc());
        if major != Some(f64::from(PROTOCOL_VERSION)) {
            return Err(DecodeError {
                id: raw.id,
                code: ErrorCode::Unsupported,
                message: format!(
                    "unsupported protocol version {v}; this gateway speaks v{PROTOCOL_VERSION}"
                ),
                version_mismatch: true,
            });
        }
    }
    let payload = match raw.payload {
        None => "{}",
        Some(p) if p.get() == "null" => "{}",
        Some(p) if p.get().trim_start().starts_with('{') => p.get(),
        Some(_) => return Err(DecodeError::bad(raw.id, "payload must be a JSON object")),
    };
    let body = F::from_payload(&raw.frame_type, payload).map_err(|e| {
        DecodeError::bad(
            raw.id.clone(),
            format!("invalid {} payload: {e}", raw.frame_type),
        )
    })?;
    let (mut chat_id, mut thread_id) = (raw.chat_id, raw.thread_id);
    if chat_id.is_none() || thread_id.is_none() {
        if let Ok(scope) = serde_json::from_str::<PayloadScope>(payload) {
            chat_id = chat_id.or(scope.chat_id);
            thread_id = thread_id.or(scope.thread_id);
        }
    }
    Ok(Decoded {
        header: Header {
            id: raw.id,
            chat_id,
            thread_id,
            cursor: raw.cursor,
        },
        body,
    })
}

/// The request id of a frame that cannot be decoded (too large, too deep, truncated), found by
/// reading only its first 4 KiB: a huge frame costs nothing to answer with an error that still
/// names the request. `None` when the text is not a JSON object or no id is near its start.
pub fn sniff_id(text: &str) -> Option<RequestId> {
    const LOOK: usize = 4096;
    if !text.trim_start().starts_with('{') {
        return None;
    }
    let mut end = text.len().min(LOOK);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let head = &text[..end];
    let pos = head.find("\"id\"")?;
    let rest = &head[pos..];
    let stop = rest.find([',', '}'])?;
    serde_json::from_str::<IdOnly>(&format!("{{{}}}", &rest[..stop]))
        .ok()?
        .id
}

/// The deepest nesting of arrays and objects a frame may have. Real frames need about six.
pub const MAX_NESTING: usize = 32;

/// The maximal nesting depth of arrays and objects in JSON text, ignoring brackets inside strings.
/// Malformed text is measured as far as it goes; the parser reports its other faults.
fn nesting_depth(text: &str) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for b in text.bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Encodes a frame with its envelope. Always writes `"v":1`; writes `"thread_id":null` when the
/// frame is chat-scoped but not in a thread, as the seed's examples do.
pub fn encode<F: FrameBody>(header: &Header, body: &F) -> String {
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(b"{\"v\":1,");
    if let Some(cursor) = header.cursor {
        out.extend_from_slice(format!("\"cursor\":{cursor},").as_bytes());
    }
    if let Some(id) = &header.id {
        out.extend_from_slice(b"\"id\":");
        serde_json::to_writer(&mut out, id).expect("ids serialize");
        out.push(b',');
    }
    out.extend_from_slice(b"\"type\":");
    serde_json::to_writer(&mut out, body.frame_type()).expect("strings serialize");
    if let Some(chat) = &header.chat_id {
        out.extend_from_slice(b",\"chat_id\":");
        serde_json::to_writer(&mut out, chat).expect("strings serialize");
        out.extend_from_slice(b",\"thread_id\":");
        serde_json::to_writer(&mut out, &header.thread_id).expect("strings serialize");
    } else if let Some(thread) = &header.thread_id {
        out.extend_from_slice(b",\"thread_id\":");
        serde_json::to_writer(&mut out, thread).expect("strings serialize");
    }
    out.extend_from_slice(b",\"payload\":");
    body.write_payload(&mut out).expect("payloads serialize");
    out.push(b'}');
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// Adds `"cursor":N` to an encoded frame (as `sync` replays it). The frame must be one produced by
/// [`encode`] without a cursor.
pub fn splice_cursor(encoded: &str, cursor: u64) -> String {
    splice_field(encoded, "cursor", &cursor.to_string())
}

/// Adds `"id":…` to an encoded frame, turning a broadcast into the response to a request.
pub fn splice_id(encoded: &str, id: &RequestId) -> String {
    splice_field(encoded, "id", &id.to_json())
}

/// Adds `"id":…` to an encoded frame, given the id as JSON text (see [`RequestId::to_json`]).
pub fn splice_id_json(encoded: &str, id_json: &str) -> String {
    splice_field(encoded, "id", id_json)
}

fn splice_field(encoded: &str, key: &str, value_json: &str) -> String {
    debug_assert!(encoded.starts_with('{') && encoded.len() > 2);
    let mut out = String::with_capacity(encoded.len() + key.len() + value_json.len() + 4);
    out.push_str("{\"");
    out.push_str(key);
    out.push_str("\":");
    out.push_str(value_json);
    out.push(',');
    out.push_str(&encoded[1..]);
    out
}

/// Declares a frame enum: one variant per wire type, plus `Unknown` for forward compatibility.
macro_rules! frame_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident($payload:ty) = $tag:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        pub enum $name {
            $( $(#[$vmeta])* $variant($payload), )*
            /// A frame type this version does not know, kept untouched so that it can be ignored.
            Unknown {
                /// The wire `type`.
                frame_type: String,
                /// The payload as sent.
                payload: serde_json::Value,
            },
        }

        impl $name {
            /// Every wire type this enum knows.
            pub const TYPES: &'static [&'static str] = &[$($tag),*];
        }

        impl $crate::codec::FrameBody for $name {
            fn frame_type(&self) -> &str {
                match self {
                    $( Self::$variant(_) => $tag, )*
                    Self::Unknown { frame_type, .. } => frame_type,
                }
            }

            fn from_payload(frame_type: &str, payload: &str) -> serde_json::Result<Self> {
                match frame_type {
                    $( $tag => Ok(Self::$variant(serde_json::from_str(payload)?)), )*
                    other => Ok(Self::Unknown {
                        frame_type: other.to_owned(),
                        payload: serde_json::from_str(payload)?,
                    }),
                }
            }

            fn write_payload(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
                match self {
                    $( Self::$variant(p) => serde_json::to_writer(out, p), )*
                    Self::Unknown { payload, .. } => serde_json::to_writer(out, payload),
                }
            }
        }
    };
}
pub(crate) use frame_enum;
