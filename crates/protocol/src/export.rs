//! The JSON form of `iris-gateway export`: one document per chat, stable across releases.
//!
//! Messages are exactly the [`Message`] objects `history` sends, so everything an app sees of a
//! message (media, runtime, how its turn ended, later additive fields) is in the export too.
//! A reader must ignore fields it does not know, as apps do with frames; `version` changes only
//! if a field changes meaning or goes away.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Message;

/// `format` of every export document.
pub const EXPORT_FORMAT: &str = "iris-export";

/// The version of the export document this crate writes.
pub const EXPORT_VERSION: u32 = 1;

/// One exported chat: a channel (or the default chat) with its threads, or one thread alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatExport {
    /// Always [`EXPORT_FORMAT`].
    pub format: String,
    /// [`EXPORT_VERSION`] when written.
    pub version: u32,
    /// When the export was made, unix milliseconds.
    pub exported_at: i64,
    /// The chat's own lane.
    pub chat: ExportedLane,
    /// Its threads in creation order (empty for a thread exported alone).
    #[serde(default)]
    pub threads: Vec<ExportedLane>,
    /// Media files copied next to the document: media id → path relative to the document.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub media_files: BTreeMap<String, String>,
}

/// One lane of an export and its messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportedLane {
    /// The chat id (a thread's own id for a thread).
    pub chat_id: String,
    /// Display name.
    pub name: String,
    /// `default`, `channel` or `thread`.
    pub kind: String,
    /// Creation time, unix milliseconds.
    pub created_at: i64,
    /// Every message of the lane, oldest first.
    pub messages: Vec<Message>,
}

impl ChatExport {
    /// The document as pretty-printed JSON.
    pub fn to_json(&self) -> String {
        // Serializing plain data with string keys cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Reads a document back.
    pub fn from_json(text: &str) -> Result<ChatExport, serde_json::Error> {
        serde_json::from_str(text)
    }
}
