//! Plain data types exchanged with the store.

use std::path::PathBuf;
use std::sync::Arc;

/// How to open a [`crate::Store`].
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// The SQLite database file. Its parent directory must already exist.
    pub path: PathBuf,
    /// Commit every queued write job in one transaction (one fsync per batch).
    /// `false` gives every job its own transaction, which only exists to measure the gain.
    pub group_commit: bool,
    /// Number of read-only connections, each on its own thread (clamped to 1..=16).
    pub readers: usize,
}

impl StoreConfig {
    /// A configuration with group commit on and three readers.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        StoreConfig {
            path: path.into(),
            group_commit: true,
            readers: 3,
        }
    }
}

/// Called on the writer thread with every frame of a batch, in cursor order, right
/// after the batch's COMMIT succeeded and before any caller of the batch is answered.
/// It must be quick and must not block on the store.
pub type CommitHook = Arc<dyn Fn(&[Committed]) + Send + Sync>;

/// Data attached to a frame by the gateway; the store only carries it through to the hook.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FrameMeta {
    pub origin_conn: u64,
    pub request_id: Option<Arc<str>>,
}

/// A frame to append to the outbox. `json` is the frame without its cursor; the
/// store never parses it. The id columns exist so that deletes can find the frame.
#[derive(Clone, Debug, Default)]
pub struct NewFrame {
    pub frame_type: String,
    pub chat_id: Option<String>,
    pub thread_id: Option<String>,
    pub message_id: Option<String>,
    pub json: String,
    pub meta: FrameMeta,
}

/// A frame that is durably committed, as handed to the [`CommitHook`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed {
    pub cursor: u64,
    pub frame_type: Arc<str>,
    pub json: Arc<str>,
    pub meta: FrameMeta,
}

/// A chat message. `extra` is a JSON object text opaque to the store (`"{}"` when empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredMessage {
    pub message_id: String,
    pub chat_id: String,
    pub thread_id: Option<String>,
    pub role: String,
    pub text: String,
    pub ts: i64,
    pub extra: String,
    /// Where a user message stands with the agent, opaque to the store (`None` for others).
    pub state: Option<String>,
}

/// One page of a lane's history.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HistoryPage {
    /// Oldest first.
    pub messages: Vec<StoredMessage>,
    /// Older messages exist in the lane before the first one of this page.
    pub has_more: bool,
}

/// The sums over a lane's answers ([`crate::Store::lane_usage`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LaneUsage {
    /// Assistant and scheduled messages in the lane.
    pub answers: u64,
    /// The sum of their `tokens`, where any reported them.
    pub tokens: Option<u64>,
    /// The sum of their `runtime.cost`, where any reported one.
    pub cost: Option<f64>,
}

/// One search result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchHit {
    pub message_id: String,
    pub chat_id: String,
    pub thread_id: Option<String>,
    pub role: String,
    /// Excerpt of the text with matches wrapped in `[` and `]` and cuts marked with `…`.
    pub snippet: String,
    pub ts: i64,
}

/// A chat: the default chat, a channel or a thread of a channel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelRow {
    pub chat_id: String,
    pub name: String,
    /// `default`, `channel` or `thread`.
    pub kind: String,
    /// Set for threads only: the channel the thread belongs to.
    pub parent_chat_id: Option<String>,
    pub is_default: bool,
    pub name_set_by_user: bool,
    /// The name is a placeholder that the chat's first message replaces.
    pub awaiting_title: bool,
    pub created_at: i64,
    /// The agent the chat talks to (`None`: the default agent). A thread's is its channel's:
    /// read, it is the parent's; written, it is ignored.
    pub agent: Option<String>,
}

/// A channel's or thread's latest activity, as the directory of `hello.ack` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelActivity {
    pub chat_id: String,
    /// The time of the lane's newest message, or of its creation (unix milliseconds).
    pub last_activity_at: i64,
    /// The start (at most 2000 characters) of the lane's newest user or assistant message
    /// with text; `None` when it has none.
    pub latest_text: Option<String>,
    /// That message's id.
    pub latest_id: Option<String>,
}

/// What [`crate::WriteTx::delete_channel`] removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeletedChannel {
    /// The channel itself first, then its threads.
    pub chat_ids: Vec<String>,
    pub message_ids: Vec<String>,
}

/// A paired device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceRow {
    pub device_id: String,
    pub name: String,
    /// JSON text, opaque to the store.
    pub caps: String,
    pub fcm_token: Option<String>,
    pub ntfy_topic: Option<String>,
    pub confirmed_cursor: u64,
    pub last_pushed_cursor: u64,
    pub created_at: i64,
    pub last_seen: i64,
    /// The device's Web Push subscription, if it registered one.
    pub webpush: Option<crate::WebPushRow>,
}

impl DeviceRow {
    /// The push backends it is registered with: `fcm`, `ntfy`, `webpush`.
    pub fn push_backends(&self) -> Vec<String> {
        let mut push = Vec::new();
        if self.fcm_token.as_deref().is_some_and(|t| !t.is_empty()) {
            push.push("fcm".to_owned());
        }
        if self.ntfy_topic.as_deref().is_some_and(|t| !t.is_empty()) {
            push.push("ntfy".to_owned());
        }
        if self.webpush.is_some() {
            push.push("webpush".to_owned());
        }
        push
    }
}
