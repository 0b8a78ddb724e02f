//! Frames the app sends to the gateway (requests and actions).

use serde::{Deserialize, Serialize};

use crate::codec::frame_enum;

frame_enum! {
    /// A frame sent by the app.
    pub enum ClientFrame {
        /// First frame of a connection: authentication and capabilities.
        Hello(Hello) = "hello",
        /// Send text or a slash command to a lane.
        MessageSend(MessageSend) = "message.send",
        /// Begin a binary upload.
        MediaUploadStart(MediaUploadStart) = "media.upload.start",
        /// Finish a binary upload.
        MediaUploadEnd(MediaUploadEnd) = "media.upload.end",
        /// Ask for the bytes of a media item.
        MediaPull(MediaPull) = "media.pull",
        /// Answer an interactive picker.
        PickerSelect(PickerSelect) = "picker.select",
        /// Create a channel, or a thread when `parent_chat_id` is set.
        ChannelCreate(ChannelCreate) = "channel.create",
        /// Rename the channel or thread named by the envelope's `chat_id`.
        ChannelRename(ChannelRename) = "channel.rename",
        /// Change the agent of the channel named by the envelope's `chat_id` (an Iris extension).
        ChannelSetAgent(ChannelSetAgent) = "channel.set_agent",
        /// Make the envelope's `chat_id` the default channel.
        ChannelSetDefault(Empty) = "channel.set_default",
        /// Hard-delete the envelope's `chat_id` with its threads and history.
        ChannelDelete(Empty) = "channel.delete",
        /// Full-text search.
        Search(Search) = "search",
        /// The user has seen a message.
        ReadReceipt(ReadReceipt) = "read.receipt",
        /// Load a page of a lane's messages.
        History(HistoryRequest) = "history",
        /// Hard-delete messages.
        MessageDelete(MessageDelete) = "message.delete",
        /// Run a user message again as a new turn. An Iris extension.
        MessageRetry(MessageRetry) = "message.retry",
        /// Fetch the slash-command catalog.
        CommandsCatalog(Empty) = "commands.catalog",
        /// Autocomplete a typed command prefix.
        CommandsComplete(CommandsCompleteRequest) = "commands.complete",
        /// Stop the lane's running turn.
        AgentStop(Empty) = "agent.stop",
        /// Redirect the lane's running turn.
        AgentSteer(AgentSteer) = "agent.steer",
        /// Replay outbox frames after a cursor.
        Sync(Sync) = "sync",
        /// Update push registration.
        FcmRegister(FcmRegister) = "fcm.register",
        /// Application-level keepalive.
        Ping(Ping) = "ping",
        /// Ask for a one-time pairing code for another device. An Iris extension.
        PairCreate(Empty) = "pair.create",
        /// Say which lanes this connection shows: streaming updates of the others stay away. An
        /// Iris extension.
        FocusSet(FocusSet) = "focus.set",
        /// How pushes reach this device and how the last ones ended. An Iris extension.
        PushStatus(Empty) = "push.status",
        /// Send this device a test notification now. An Iris extension.
        PushTest(Empty) = "push.test",
        /// What the envelope's lane has used so far: answers, tokens, cost. An Iris extension.
        Usage(Empty) = "usage",
        /// List the paired devices. An Iris extension.
        DevicesList(Empty) = "devices.list",
        /// Revoke this device or one paired through its codes. An Iris extension.
        DeviceRevoke(crate::pairing::DeviceRevoke) = "device.revoke",
        /// List a directory of an agent's working directory. An Iris extension.
        FilesList(crate::files::FilesList) = "files.list",
        /// Read a file of an agent's working directory (its kind; text, bounded). An Iris
        /// extension.
        FilesRead(crate::files::FilesRead) = "files.read",
        /// Stream a file of an agent's working directory. An Iris extension.
        FilesPull(crate::files::FilesPull) = "files.pull",
        /// Read a text aloud in the gateway's voice. An Iris extension.
        SpeechCreate(crate::speech::SpeechCreate) = "speech.create",
    }
}

/// A payload with no fields (unknown fields are ignored).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Empty {}

/// `hello`: authentication and device identity.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// The gateway token.
    pub token: String,
    /// A stable id for this device; a second connection with the same id replaces the first.
    pub device_id: String,
    /// Display name of the device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    /// Client capabilities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caps: Option<ClientCaps>,
    /// Firebase Cloud Messaging registration token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fcm_token: Option<String>,
    /// ntfy topic to push to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ntfy_topic: Option<String>,
    /// Web Push subscription (an Iris extension): absent leaves the stored one as it is, `null`
    /// or an empty `endpoint` removes it.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub webpush: Option<Option<WebPushSubscription>>,
}

/// A browser's Web Push subscription, flattened from `PushSubscription.toJSON()`: the push
/// service URL and the keys the payload is encrypted for (RFC 8291).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebPushSubscription {
    /// The push resource URL the gateway POSTs to.
    #[serde(default)]
    pub endpoint: String,
    /// The subscriber's P-256 public key: an uncompressed point, base64url.
    #[serde(default)]
    pub p256dh: String,
    /// The subscriber's 16-byte authentication secret, base64url.
    #[serde(default)]
    pub auth: String,
}

/// Tells a present `null` (`Some(None)`) from an absent field (`None`, by `default`).
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// Capabilities a client announces in `hello`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientCaps {
    /// Lowest protocol version the client accepts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_protocol: Option<u32>,
    /// Whether the client handles media.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media: Option<bool>,
    /// Push backend the client uses (`fcm`, `ntfy`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push: Option<String>,
    /// `true`: this connection gets `message.update` in append form, an `offset` and the text
    /// from there on (see [`crate::StreamText`]), instead of the whole text each time. An Iris
    /// extension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append_updates: Option<bool>,
    /// The lanes this connection shows (at most [`MAX_FOCUS`]); present, even empty, it opts in
    /// to focus: `message.update` and `tool.progress` of other lanes are not sent to it. Changed
    /// later with `focus.set`. An Iris extension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub focus: Option<Vec<LaneRef>>,
}

/// Lanes one connection may focus on at once.
pub const MAX_FOCUS: usize = 16;

/// A lane named in a frame's payload: a channel, or a thread inside it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LaneRef {
    /// The channel.
    pub chat_id: String,
    /// The thread inside it, if the lane is a thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
}

impl LaneRef {
    /// Why a set of focused lanes is refused (too many, an empty or over-long id), if it is.
    pub fn focus_error(lanes: &[LaneRef]) -> Option<String> {
        if lanes.len() > MAX_FOCUS {
            return Some(format!(
                "focus names {} lanes; at most {MAX_FOCUS}",
                lanes.len()
            ));
        }
        let bad = |id: &str| id.is_empty() || id.len() > 128;
        lanes
            .iter()
            .any(|l| bad(&l.chat_id) || l.thread_id.as_deref().is_some_and(bad))
            .then(|| "a focused lane's chat_id and thread_id are 1-128 bytes".to_owned())
    }
}

/// `focus.set`: the lanes this connection shows from now on (replacing the earlier set; at most
/// [`MAX_FOCUS`]). An Iris extension.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FocusSet {
    /// The lanes shown; empty: none (every lane gets durable frames only).
    #[serde(default)]
    pub lanes: Vec<LaneRef>,
}

impl ClientCaps {
    /// Why the `caps` of a `hello` frame that did not decode are wrong (a flag of the wrong type,
    /// say `"append_updates":"yes"`), so the device can be told so; `None` when `text` is not a
    /// `hello` or its `caps` are fine (absent, `null` or valid) and the fault lies elsewhere.
    pub fn error_in_hello(text: &str) -> Option<String> {
        let frame: serde_json::Value = serde_json::from_str(text).ok()?;
        if frame.get("type")?.as_str()? != "hello" {
            return None;
        }
        let caps = frame.get("payload")?.get("caps").filter(|c| !c.is_null())?;
        match ClientCaps::deserialize(caps) {
            Ok(_) => None,
            Err(e) => Some(format!("invalid hello caps: {e}")),
        }
    }
}

/// `message.send`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MessageSend {
    /// The text (or slash command).
    #[serde(default)]
    pub text: String,
    /// The message this one answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    /// Completed uploads to attach.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub media_refs: Vec<String>,
    /// Ask the gateway to mint a thread for this message.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub auto_thread: bool,
    /// The device's own id for this request (at most [`crate::MAX_CLIENT_ID`] characters): the
    /// same id again is answered with the original message, never stored or run twice. An Iris
    /// extension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// Edit and resend (an Iris extension): this message replaces the lane's newest answered
    /// user message `edit_of`; the agent's session goes back to where it was before that message,
    /// which is marked `replaced` with its answers. Only where that answer's `runtime.rewind`
    /// says the agent can.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edit_of: Option<String>,
}

/// `media.upload.start`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MediaUploadStart {
    /// Client-chosen reference for this upload.
    pub media_ref: String,
    /// `image`, `video`, `audio` or `file`.
    #[serde(default)]
    pub kind: String,
    /// MIME type.
    #[serde(default)]
    pub mime: String,
    /// Declared size in bytes.
    pub size: u64,
    /// Display name; never used as a path.
    #[serde(default)]
    pub filename: String,
    /// A voice note recorded by the app, to be transcribed (an Iris extension).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub voice: bool,
}

/// `media.upload.end`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MediaUploadEnd {
    /// The reference given at start.
    pub media_ref: String,
    /// Lowercase hex SHA-256 of the bytes.
    pub sha256: String,
}

/// `media.pull`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MediaPull {
    /// The media to fetch.
    pub media_id: String,
}

/// `picker.select`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PickerSelect {
    /// The picker being answered.
    pub picker_id: String,
    /// The chosen value (or typed text for a clarify picker that has `free_text`).
    pub value: String,
}

/// `channel.create`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChannelCreate {
    /// Display name. Empty or absent: the gateway gives a placeholder (`New chat`, `New thread`)
    /// and names the chat from its first message (an Iris extension).
    #[serde(default)]
    pub name: String,
    /// `channel` (default) or `thread`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Parent channel; makes the new entry a thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_chat_id: Option<String>,
    /// The agent the channel talks to (an Iris extension; default: the gateway's default agent).
    /// A thread always uses its channel's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

/// `channel.set_agent` (an Iris extension).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChannelSetAgent {
    /// The agent's name.
    pub agent: String,
}

/// `channel.rename`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChannelRename {
    /// The new name.
    pub name: String,
}

/// Scope of a search.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchScope {
    /// Every chat.
    #[default]
    All,
    /// One lane, named by `chat_id`/`thread_id`.
    Chat,
}

/// `search`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Search {
    /// The query: words, `"a phrase"`, or `prefix*`.
    pub query: String,
    /// `all` (default) or `chat`.
    #[serde(default)]
    pub scope: SearchScope,
    /// Maximum number of hits (default 50, at most 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<i64>,
}

/// `read.receipt` from the app.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReadReceipt {
    /// The message seen.
    pub message_id: String,
    /// Its chat (may also be given in the envelope).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_id: Option<String>,
}

/// `history` request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HistoryRequest {
    /// Return messages older than this one; omit for the newest page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_message_id: Option<String>,
    /// Page size (default 50, at most 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<i64>,
}

/// `message.delete`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MessageDelete {
    /// Messages to delete.
    pub message_ids: Vec<String>,
}

/// `message.retry`: run the lane's user message `message_id` again as a new turn.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MessageRetry {
    /// The user message to run again.
    pub message_id: String,
    /// Regenerate (an Iris extension): the agent's session goes back to where it was before the
    /// message, and the answers it had are marked `replaced`. Only for the lane's newest answered
    /// message, where its answer's `runtime.rewind` says the agent can.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rewind: bool,
    /// The device's own id for this request, as for `message.send`. An Iris extension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
}

/// `commands.complete` request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CommandsCompleteRequest {
    /// The typed prefix, with its slash.
    pub prefix: String,
}

/// `agent.steer`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentSteer {
    /// The steering text.
    pub text: String,
    /// The device's own id for this request, as for `message.send`. An Iris extension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
}

/// `sync`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sync {
    /// Replay frames with a cursor above this one.
    pub cursor: u64,
}

/// `fcm.register`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FcmRegister {
    /// New FCM token (empty string removes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fcm_token: Option<String>,
    /// New ntfy topic (empty string removes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ntfy_topic: Option<String>,
    /// New Web Push subscription (an Iris extension; `null` or an empty `endpoint` removes it).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub webpush: Option<Option<WebPushSubscription>>,
}

/// `ping` (application keepalive).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Ping {
    /// Client timestamp, echoed in `pong`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ts: Option<i64>,
}

#[cfg(test)]
mod tests {

    #[test]
    fn bad_hello_caps_are_named() {
        let hello = |caps: &str| {
            format!(
                r#"{{"v":1,"type":"hello","payload":{{"token":"t","device_id":"d","caps":{caps}}}}}"#
            )
        };
        let err = ClientCaps::error_in_hello(&hello(r#"{"append_updates":"yes"}"#));
        assert!(err.is_some_and(|e| e.starts_with("invalid hello caps: ")));
        assert_eq!(
            ClientCaps::error_in_hello(&hello(r#"{"append_updates":true}"#)),
            None
        );
        assert_eq!(ClientCaps::error_in_hello(&hello("null")), None);
        let ping = r#"{"v":1,"type":"ping","payload":{"caps":{"media":"x"}}}"#;
        assert_eq!(ClientCaps::error_in_hello(ping), None, "not a hello");
        assert_eq!(ClientCaps::error_in_hello("{not json"), None);
    }
    use super::*;
    use crate::{decode, encode, Header};

    fn register(payload: &str) -> FcmRegister {
        let text = format!(r#"{{"v":1,"type":"fcm.register","payload":{payload}}}"#);
        match decode::<ClientFrame>(&text).expect("decodes").body {
            ClientFrame::FcmRegister(r) => r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_webpush_subscription_is_set_removed_or_left_alone() {
        let sub = WebPushSubscription {
            endpoint: "https://push.example/abc".into(),
            p256dh: "BK".into(),
            auth: "x".into(),
        };
        let set = register(
            r#"{"webpush":{"endpoint":"https://push.example/abc","p256dh":"BK","auth":"x","extra":1}}"#,
        );
        assert_eq!(set.webpush, Some(Some(sub.clone())));
        assert_eq!(
            register(r#"{"webpush":null}"#).webpush,
            Some(None),
            "null removes"
        );
        assert_eq!(
            register(r#"{"fcm_token":"t"}"#).webpush,
            None,
            "absent leaves it alone"
        );

        // Encoding keeps the three cases apart.
        for value in [None, Some(None), Some(Some(sub))] {
            let frame = ClientFrame::FcmRegister(FcmRegister {
                webpush: value.clone(),
                ..FcmRegister::default()
            });
            let text = encode(&Header::default(), &frame);
            match decode::<ClientFrame>(&text).expect("round trip").body {
                ClientFrame::FcmRegister(r) => assert_eq!(r.webpush, value, "{text}"),
                other => panic!("{other:?}"),
            }
        }
    }
}
