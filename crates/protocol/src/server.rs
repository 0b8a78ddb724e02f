//! Frames the gateway sends to the app (events and responses).

use serde::{Deserialize, Serialize};

use crate::caps::ServerCaps;
use crate::client::Empty;
use crate::codec::{frame_enum, ErrorCode};
pub use crate::commands::*;
pub use crate::pickers::*;
pub use crate::search::*;
pub use crate::tools::*;

frame_enum! {
    /// A frame sent by the gateway.
    pub enum ServerFrame {
        /// Response to `hello`.
        HelloAck(HelloAck) = "hello.ack",
        /// A final or standalone message.
        Message(Message) = "message",
        /// A streamed bubble begins.
        MessageStart(MessageStart) = "message.start",
        /// The full text so far of a streamed bubble.
        MessageUpdate(MessageUpdate) = "message.update",
        /// A streamed bubble is final.
        MessageStop(MessageStop) = "message.stop",
        /// Messages were deleted.
        MessageDeleted(MessageDeleted) = "message.deleted",
        /// An intermediate assistant beat between tool calls.
        Commentary(Commentary) = "commentary",
        /// A tool call began.
        ToolStart(ToolStart) = "tool.start",
        /// A tool call made progress.
        ToolProgress(ToolProgress) = "tool.progress",
        /// A tool call ended.
        ToolEnd(ToolEnd) = "tool.end",
        /// Typing indicator.
        Typing(Typing) = "typing",
        /// Typing stopped.
        TypingStop(Empty) = "typing.stop",
        /// An in-app banner or push mirror.
        Notification(Notification) = "notification",
        /// Model picker.
        PickerModel(PickerModel) = "picker.model",
        /// Finite-choice picker.
        PickerChoice(PickerChoice) = "picker.choice",
        /// A question from the agent.
        PickerClarify(PickerClarify) = "picker.clarify",
        /// The agent asks for permission.
        PickerApproval(PickerApproval) = "picker.approval",
        /// A yes/no confirmation.
        PickerConfirm(PickerConfirm) = "picker.confirm",
        /// A picker was answered, expired or was cancelled. An Iris extension.
        PickerClosed(crate::PickerClosed) = "picker.closed",
        /// The whole channel directory.
        ChannelList(ChannelList) = "channel.list",
        /// A channel or thread was created.
        ChannelCreated(ChannelCreated) = "channel.created",
        /// A channel or thread was renamed.
        ChannelRenamed(ChannelRenamed) = "channel.renamed",
        /// A channel or thread was deleted.
        ChannelDeleted(ChannelDeleted) = "channel.deleted",
        /// A page of messages.
        History(History) = "history",
        /// The slash-command catalog.
        CommandsCatalog(CommandsCatalog) = "commands.catalog",
        /// Autocomplete matches.
        CommandsComplete(CommandsComplete) = "commands.complete",
        /// The lane's agent is working.
        AgentBusy(AgentBusy) = "agent.busy",
        /// The lane's agent is idle.
        AgentIdle(Empty) = "agent.idle",
        /// Where a user message stands with the agent. An Iris extension.
        MessageState(crate::MessageStateChanged) = "message.state",
        /// A voice note's transcript changed. An Iris extension.
        MessageTranscript(crate::MessageTranscript) = "message.transcript",
        /// Search hits.
        SearchResults(SearchResults) = "search.results",
        /// Agent-produced media is available.
        MediaOffer(MediaInfo) = "media.offer",
        /// Response to `media.upload.end`.
        MediaUploadAck(MediaUploadAck) = "media.upload.ack",
        /// Header of a media pull: followed by binary frames.
        MediaPullHeader(MediaPullHeader) = "media.pull",
        /// End of a media pull.
        MediaPullEnd(MediaPullEnd) = "media.pull.end",
        /// A message was read.
        ReadReceipt(ReadReceiptEvent) = "read.receipt",
        /// Gateway health.
        Status(Status) = "status",
        /// An error, answering the request with the same id.
        Error(ErrorPayload) = "error",
        /// Reply to `ping`.
        Pong(Pong) = "pong",
        /// End of a `sync` replay.
        SyncDone(SyncDone) = "sync.done",
        /// Response to a request that has no natural response frame (`fcm.register`,
        /// `agent.stop`, `agent.steer` with an `id`). An Iris extension.
        Ack(Ack) = "ack",
        /// Response to `pair.create`. An Iris extension.
        PairCode(crate::pairing::PairCode) = "pair.code",
        /// Response to `push.status` and `push.test`. An Iris extension.
        PushStatus(crate::push::PushStatus) = "push.status",
        /// Response to `usage`. An Iris extension.
        Usage(crate::usage::Usage) = "usage",
        /// Response to `devices.list` and `device.revoke`. An Iris extension.
        DevicesList(crate::pairing::DeviceList) = "devices.list",
        /// Response to `files.list`. An Iris extension.
        FilesList(crate::files::FilesListing) = "files.list",
        /// Response to `files.read`. An Iris extension.
        FilesRead(crate::files::FileContent) = "files.read",
        /// The header of a `files.pull`, before its bytes and `media.pull.end`. An Iris
        /// extension.
        FilesPull(crate::files::FilesPullHeader) = "files.pull",
        /// Response to `speech.create`: the recording to pull. An Iris extension.
        Speech(crate::speech::Speech) = "speech",
    }
}

impl ServerFrame {
    /// Whether this frame was appended to the outbox. Like [`ServerFrame::is_durable_type`],
    /// except for `read.receipt`: the receipt relaying another device's read state carries
    /// `device_id` and is durable; the one acknowledging the sender's own `message.send` carries
    /// none and is not.
    pub fn is_durable(&self) -> bool {
        use crate::codec::FrameBody;
        match self {
            ServerFrame::ReadReceipt(r) => r.device_id.is_some(),
            other => Self::is_durable_type(other.frame_type()),
        }
    }

    /// Whether this frame type is appended to the outbox before it is sent (protocol notes §2).
    pub fn is_durable_type(frame_type: &str) -> bool {
        matches!(
            frame_type,
            "message"
                | "message.start"
                | "message.stop"
                | "message.deleted"
                | "commentary"
                | "tool.start"
                | "tool.end"
                | "notification"
                | "channel.list"
                | "channel.created"
                | "channel.renamed"
                | "channel.deleted"
                | "agent.busy"
                | "agent.idle"
                | "message.state"
                | "message.transcript"
                | "media.offer"
                | "read.receipt"
        ) || frame_type.starts_with("picker.")
    }
}

/// One entry of the channel directory.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChannelInfo {
    /// Id of the channel or thread.
    pub chat_id: String,
    /// Display name.
    pub name: String,
    /// `default`, `channel` or `thread`.
    pub kind: String,
    /// Whether this is the default channel.
    #[serde(default)]
    pub is_default: bool,
    /// The channel a thread belongs to.
    #[serde(default)]
    pub parent_chat_id: Option<String>,
    /// The agent the chat talks to; a thread's is its channel's (an Iris extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// When the lane last saw activity: its latest message, or its creation; unix milliseconds.
    /// Sent in `hello.ack`; absent from `channel.list` (an Iris extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_activity_at: Option<i64>,
    /// One line of the lane's latest user or assistant message: plain text, whitespace
    /// collapsed, at most 120 characters and a `…`; absent for a chat without one. Sent in
    /// `hello.ack`; absent from `channel.list` (an Iris extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
    /// The id of the message `preview` shows, so that an app can tell when a `message.deleted`
    /// takes it away. Sent with `preview` (an Iris extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview_message_id: Option<String>,
}

/// `hello.ack`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HelloAck {
    /// What the gateway offers.
    pub server_caps: ServerCaps,
    /// This device's confirmed-delivery watermark: sync from here.
    pub sync_cursor: u64,
    /// Highest cursor already delivered to this device by push (0 = never).
    pub last_pushed_cursor: u64,
    /// The channel directory.
    pub channels: Vec<ChannelInfo>,
    /// The outbox head when this connection began receiving live frames: the first durable frame
    /// sent live on this connection has cursor `head_cursor + 1`. An Iris extension.
    #[serde(default)]
    pub head_cursor: u64,
    /// The device id the gateway registered. An Iris extension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
    /// This device's own credential, issued when it presented a pairing code: present it as
    /// `token` from now on. An Iris extension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_token: Option<String>,
    /// The lanes whose agent is working now, each with its answer so far: a device that joins
    /// mid-answer shows it (with Stop) at once. An Iris extension.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub running: Vec<crate::RunningTurn>,
    /// The pickers open when this connection began receiving live frames, in order of arrival,
    /// each as its durable frame with its `cursor` (as `sync` would replay it): a device whose
    /// cursor is past them still lists them. An Iris extension.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open_pickers: Vec<serde_json::Value>,
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The user.
    #[default]
    User,
    /// The agent.
    Assistant,
    /// The gateway.
    System,
    /// A scheduled job's result.
    Cron,
}

impl Role {
    /// The wire string of this role.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::System => "system",
            Role::Cron => "cron",
        }
    }

    /// Parses a wire string.
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "user" => Some(Role::User),
            "assistant" => Some(Role::Assistant),
            "system" => Some(Role::System),
            "cron" => Some(Role::Cron),
            _ => None,
        }
    }
}

/// A media item attached to a message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MediaInfo {
    /// Id to pull it with.
    pub media_id: String,
    /// `image`, `video`, `audio` or `file`.
    pub kind: String,
    /// MIME type.
    pub mime: String,
    /// Size in bytes.
    pub size: u64,
    /// Display name.
    pub filename: String,
    /// A voice note recorded in an app (`media.upload.start {voice:true}`), not an audio file
    /// attached. An Iris extension.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub voice: bool,
}

/// Runtime metadata shown under final assistant messages.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Runtime {
    /// Bare model id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Context occupancy, 0–100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_pct: Option<u8>,
    /// Home-relative working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Wall-clock turn duration in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<f64>,
    /// Turn cost in USD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// The agent that answered, by its name in the gateway's configuration (an Iris extension).
    /// Also on the system message that says a chat's model or agent changed, so a client shows
    /// the chat's agent and model from its newest message that carries a runtime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The turn can be taken back (an Iris extension): while this is the lane's newest answer,
    /// `message.retry {rewind:true}` regenerates it and `message.send {edit_of}` edits the
    /// message it answers. Set only when the agent can fork its session.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rewind: bool,
}

/// `message` (also the entries of `history`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Opaque, time-ordered id.
    pub message_id: String,
    /// Author.
    pub role: Role,
    /// The text.
    #[serde(default)]
    pub text: String,
    /// Reasoning, rendered above the text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// Attached media.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub media: Vec<MediaInfo>,
    /// The message this one answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    /// Model that produced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Tokens used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// Creation time, unix milliseconds.
    pub ts: i64,
    /// Runtime footer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<Runtime>,
    /// How the turn ended (final assistant and cron messages; additive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<crate::TurnEnd>,
    /// A user message that steered a running turn (additive).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub steering: bool,
    /// The turn's steps in order (final assistant and cron messages; additive).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<crate::Step>,
    /// The turn's change to each file that more than one of its tool calls changed, as one
    /// diff from before the turn to after it, when the gateway could combine the edits (whole
    /// files, or each edit starting from the text the one before left); other files' changes
    /// are those of the tool steps. An Iris extension.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turn_changes: Vec<crate::FileChange>,
    /// The sending device's own id of this user message (`message.send`'s `client_id`; an Iris
    /// extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// Where a user message stands with the agent (an Iris extension; see `message.state`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<crate::MessageState>,
    /// A voice note's transcript (an Iris extension; see `message.transcript`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript: Option<crate::VoiceTranscript>,
}

/// `message.start`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MessageStart {
    /// The bubble's id.
    pub message_id: String,
    /// Author.
    pub role: Role,
    /// The user message this answer answers (additive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
}

/// `message.update`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MessageUpdate {
    /// The bubble's id.
    pub message_id: String,
    /// Without `offset`, the full text so far; with it, the text that follows the first
    /// `offset` UTF-16 code units of the bubble's previous text.
    pub text: String,
    /// Append form, only to a connection that asked for it (`hello.caps.append_updates`): how
    /// many UTF-16 code units of the text this connection last had for the bubble stay (0 on the
    /// connection's first update of a bubble). [`crate::StreamText`] applies it. An Iris
    /// extension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
}

/// `message.stop`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MessageStop {
    /// The bubble's id.
    pub message_id: String,
    /// The final text.
    pub final_text: String,
    /// Reasoning, when shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// Model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Tokens used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// Runtime footer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<Runtime>,
    /// Media produced by the turn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub media: Vec<MediaInfo>,
    /// How the turn ended (additive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<crate::TurnEnd>,
    /// The turn's steps in order (additive).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<crate::Step>,
    /// The turn's change to each file that more than one of its tool calls changed, as one
    /// diff from before the turn to after it, when the gateway could combine the edits (whole
    /// files, or each edit starting from the text the one before left); other files' changes
    /// are those of the tool steps. An Iris extension.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turn_changes: Vec<crate::FileChange>,
}

/// `message.deleted`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MessageDeleted {
    /// The deleted messages.
    pub message_ids: Vec<String>,
}

/// `commentary`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Commentary {
    /// Id of this beat.
    pub message_id: String,
    /// Its text.
    pub text: String,
}

/// `typing`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Typing {
    /// Whether the agent is typing.
    pub on: bool,
}

/// `notification`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Notification {
    /// `channel_renamed`, `channel_created`, `cron`, `approval`, `clarify` or `generic`.
    pub kind: String,
    /// Title.
    pub title: String,
    /// Body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Time, unix milliseconds.
    pub ts: i64,
}

/// `channel.list`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChannelList {
    /// The whole directory.
    pub channels: Vec<ChannelInfo>,
}

/// `channel.created`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChannelCreated {
    /// Id of the new channel or thread.
    pub chat_id: String,
    /// Its name.
    pub name: String,
    /// `channel` or `thread`.
    pub kind: String,
    /// The channel a thread belongs to.
    #[serde(default)]
    pub parent_chat_id: Option<String>,
    /// Minted by the gateway for an auto-threaded message.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub auto: bool,
    /// The agent the chat talks to (an Iris extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// When it was created, unix milliseconds: its activity until its first message (an Iris
    /// extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_activity_at: Option<i64>,
}

/// `channel.renamed`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChannelRenamed {
    /// The renamed channel or thread.
    pub chat_id: String,
    /// Its new name.
    pub name: String,
}

/// `channel.deleted`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChannelDeleted {
    /// The deleted channel or thread.
    pub chat_id: String,
    /// Threads deleted with it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thread_ids: Vec<String>,
}

/// `history` response.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct History {
    /// Messages, oldest → newest.
    pub messages: Vec<Message>,
    /// Older messages exist.
    pub has_more: bool,
    /// Id of the first message of the page (to pass as `before_message_id`).
    #[serde(default)]
    pub oldest_message_id: Option<String>,
}

/// Why the agent is busy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BusyReason {
    /// Working on a prompt.
    #[default]
    Processing,
    /// Running a tool.
    Tool,
    /// Waiting for the user to answer a picker.
    WaitingInput,
    /// Running a scheduled job.
    Cron,
}

/// `agent.busy`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentBusy {
    /// Why.
    pub reason: BusyReason,
}

/// `media.upload.ack`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MediaUploadAck {
    /// Always true; failures are `error` frames.
    pub ok: bool,
    /// The reference, now usable in `media_refs`.
    pub media_ref: String,
}

/// Header of a `media.pull` response.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MediaPullHeader {
    /// The media.
    pub media_id: String,
    /// Kind.
    pub kind: String,
    /// MIME type.
    pub mime: String,
    /// Size in bytes (the sum of the binary frames that follow).
    pub size: u64,
    /// Display name.
    pub filename: String,
    /// Lowercase hex SHA-256.
    pub sha256: String,
}

/// `media.pull.end`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MediaPullEnd {
    /// Whether every byte was sent.
    pub ok: bool,
}

/// `read.receipt` from the gateway.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReadReceiptEvent {
    /// The message.
    pub message_id: String,
    /// The device that read it, for receipts relayed from another device. An Iris extension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_id: Option<String>,
}

/// Gateway state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GatewayState {
    /// Serving.
    #[default]
    Online,
    /// Shutting down or restarting.
    Restarting,
    /// Reserved.
    Degraded,
}

/// `status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// The state.
    pub state: GatewayState,
}

/// `error`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorPayload {
    /// Machine-readable code.
    pub code: ErrorCode,
    /// Human-readable reason; never carries internals.
    pub message: String,
}

/// `pong`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Pong {
    /// The `ts` of the ping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ts: Option<i64>,
}

/// `sync.done`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SyncDone {
    /// The outbox head the replay reached: every durable frame up to it has been delivered.
    pub cursor: u64,
    /// Frames below the retention floor were pruned: reload history.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gap: bool,
}

/// `ack`: the request with this `id` was accepted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Ack {
    /// Always true; failures are `error` frames.
    pub ok: bool,
    /// The request repeated a `client_id` the gateway already took: nothing was done again, and
    /// `message_id`, `cursor` and `message` say what the first request made. An Iris extension.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub duplicate: bool,
    /// The message the first request made (or ran again, for `message.retry`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// The cursor of the durable frame that answered the first request, when it made one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<u64>,
    /// That message as it is now, when it still exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
}

impl Ack {
    /// A plain `ack {ok:true}`.
    pub fn ok() -> Self {
        Ack {
            ok: true,
            ..Ack::default()
        }
    }
}
