//! How each server frame travels, decided by its type.
//!
//! Clients count durable frames to know their cursor, so a durable frame that reached a device
//! without being stored, or an ephemeral one that took a cursor, breaks every client's count.
//! The gateway therefore never picks by hand: it builds a [`DurableFrame`] (the only thing its
//! outbox appends) or an [`EphemeralFrame`] (the only thing it broadcasts live without storing),
//! and each converts into the [`ServerFrame`] that goes on the wire. The answer to one request
//! (`history`, `search.results`, `ack`, …) is a [`ResponseFrame`]: written to the connection that
//! asked, never stored. None of the three can hold another's type, so a durable frame cannot
//! reach a device past the outbox. What remains (`hello.ack`, `error`, `sync.done`, `media.pull`,
//! `media.pull.end`) the connection writes itself ([`CONNECTION_TYPES`]).

use crate::client::Empty;
use crate::server::*;

/// A frame that is appended to the outbox, under a cursor, before any device is sent it.
#[derive(Debug, Clone, PartialEq)]
pub enum DurableFrame {
    /// A final or standalone message.
    Message(Message),
    /// A streamed bubble begins.
    MessageStart(MessageStart),
    /// A streamed bubble is final.
    MessageStop(MessageStop),
    /// Messages were deleted.
    MessageDeleted(MessageDeleted),
    /// An intermediate assistant beat between tool calls.
    Commentary(Commentary),
    /// A tool call began.
    ToolStart(ToolStart),
    /// A tool call ended.
    ToolEnd(ToolEnd),
    /// An in-app banner or push mirror.
    Notification(Notification),
    /// Model picker.
    PickerModel(PickerModel),
    /// Finite-choice picker.
    PickerChoice(PickerChoice),
    /// A question from the agent.
    PickerClarify(PickerClarify),
    /// The agent asks for permission.
    PickerApproval(PickerApproval),
    /// A yes/no confirmation.
    PickerConfirm(PickerConfirm),
    /// A picker was answered, expired or was cancelled.
    PickerClosed(crate::PickerClosed),
    /// The whole channel directory.
    ChannelList(ChannelList),
    /// A channel or thread was created.
    ChannelCreated(ChannelCreated),
    /// A channel or thread was renamed.
    ChannelRenamed(ChannelRenamed),
    /// A channel or thread was deleted.
    ChannelDeleted(ChannelDeleted),
    /// The lane's agent is working.
    AgentBusy(AgentBusy),
    /// The lane's agent is idle.
    AgentIdle,
    /// Where a user message stands with the agent.
    MessageState(crate::MessageStateChanged),
    /// A voice note's transcript changed.
    MessageTranscript(crate::MessageTranscript),
    /// Agent-produced media is available.
    MediaOffer(MediaInfo),
    /// Another device read a message: a `read.receipt` that carries `device_id`.
    ReadBy {
        /// The message.
        message_id: String,
        /// The device that read it.
        device_id: String,
    },
}

/// A frame sent to live connections only: never stored, never counted, replaced or dropped
/// under backpressure where the protocol allows.
#[derive(Debug, Clone, PartialEq)]
pub enum EphemeralFrame {
    /// The full text so far of a streamed bubble.
    MessageUpdate(MessageUpdate),
    /// A tool call made progress.
    ToolProgress(ToolProgress),
    /// Typing indicator.
    Typing(Typing),
    /// Typing stopped.
    TypingStop,
    /// Gateway health.
    Status(Status),
    /// The gateway took the sender's own message: a `read.receipt` without `device_id`.
    Accepted {
        /// The message.
        message_id: String,
    },
}

/// The answer to one request, written to the connection that sent it: never stored, never
/// broadcast. Only types that are not durable are here, so an answer cannot bypass the outbox.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // one per request, moved once: boxing would only allocate
pub enum ResponseFrame {
    /// `ack` of a request that changes state.
    Ack(Ack),
    /// `pong` to a `ping`.
    Pong(Pong),
    /// A page of a lane's history.
    History(History),
    /// Search hits.
    SearchResults(SearchResults),
    /// The command catalog.
    CommandsCatalog(CommandsCatalog),
    /// Command completions for a prefix.
    CommandsComplete(CommandsComplete),
    /// An upload was stored.
    MediaUploadAck(MediaUploadAck),
    /// A pairing code made by `pair.create`.
    PairCode(crate::pairing::PairCode),
    /// This device's push state, for `push.status` and `push.test`.
    PushStatus(crate::push::PushStatus),
    /// A lane's usage so far, for `usage`.
    Usage(crate::usage::Usage),
    /// The paired devices, for `devices.list` and `device.revoke`.
    DevicesList(crate::pairing::DeviceList),
    /// A directory of an agent's working directory, for `files.list`.
    FilesList(crate::files::FilesListing),
    /// A file of an agent's working directory, for `files.read`.
    FilesRead(crate::files::FileContent),
    /// A recording of a text, for `speech.create`.
    Speech(crate::speech::Speech),
}

/// Server frame types the connection writes itself, outside the three kinds above: the answer to
/// `hello`, errors, the end of a `sync` replay, and a pull's header and end around its bytes
/// (`media.pull` or `files.pull`, then `media.pull.end`).
pub const CONNECTION_TYPES: &[&str] = &[
    "hello.ack",
    "error",
    "sync.done",
    "media.pull",
    "files.pull",
    "media.pull.end",
];

impl From<ResponseFrame> for ServerFrame {
    fn from(frame: ResponseFrame) -> ServerFrame {
        use ResponseFrame as R;
        match frame {
            R::Ack(p) => ServerFrame::Ack(p),
            R::Pong(p) => ServerFrame::Pong(p),
            R::History(p) => ServerFrame::History(p),
            R::SearchResults(p) => ServerFrame::SearchResults(p),
            R::CommandsCatalog(p) => ServerFrame::CommandsCatalog(p),
            R::CommandsComplete(p) => ServerFrame::CommandsComplete(p),
            R::MediaUploadAck(p) => ServerFrame::MediaUploadAck(p),
            R::PairCode(p) => ServerFrame::PairCode(p),
            R::PushStatus(p) => ServerFrame::PushStatus(p),
            R::Usage(p) => ServerFrame::Usage(p),
            R::DevicesList(p) => ServerFrame::DevicesList(p),
            R::FilesList(p) => ServerFrame::FilesList(p),
            R::FilesRead(p) => ServerFrame::FilesRead(p),
            R::Speech(p) => ServerFrame::Speech(p),
        }
    }
}

impl From<DurableFrame> for ServerFrame {
    fn from(frame: DurableFrame) -> ServerFrame {
        use DurableFrame as D;
        match frame {
            D::Message(p) => ServerFrame::Message(p),
            D::MessageStart(p) => ServerFrame::MessageStart(p),
            D::MessageStop(p) => ServerFrame::MessageStop(p),
            D::MessageDeleted(p) => ServerFrame::MessageDeleted(p),
            D::Commentary(p) => ServerFrame::Commentary(p),
            D::ToolStart(p) => ServerFrame::ToolStart(p),
            D::ToolEnd(p) => ServerFrame::ToolEnd(p),
            D::Notification(p) => ServerFrame::Notification(p),
            D::PickerModel(p) => ServerFrame::PickerModel(p),
            D::PickerChoice(p) => ServerFrame::PickerChoice(p),
            D::PickerClarify(p) => ServerFrame::PickerClarify(p),
            D::PickerApproval(p) => ServerFrame::PickerApproval(p),
            D::PickerConfirm(p) => ServerFrame::PickerConfirm(p),
            D::PickerClosed(p) => ServerFrame::PickerClosed(p),
            D::ChannelList(p) => ServerFrame::ChannelList(p),
            D::ChannelCreated(p) => ServerFrame::ChannelCreated(p),
            D::ChannelRenamed(p) => ServerFrame::ChannelRenamed(p),
            D::ChannelDeleted(p) => ServerFrame::ChannelDeleted(p),
            D::AgentBusy(p) => ServerFrame::AgentBusy(p),
            D::AgentIdle => ServerFrame::AgentIdle(Empty {}),
            D::MessageState(p) => ServerFrame::MessageState(p),
            D::MessageTranscript(p) => ServerFrame::MessageTranscript(p),
            D::MediaOffer(p) => ServerFrame::MediaOffer(p),
            D::ReadBy {
                message_id,
                device_id,
            } => ServerFrame::ReadReceipt(ReadReceiptEvent {
                message_id,
                device_id: Some(device_id),
            }),
        }
    }
}

impl From<EphemeralFrame> for ServerFrame {
    fn from(frame: EphemeralFrame) -> ServerFrame {
        use EphemeralFrame as E;
        match frame {
            E::MessageUpdate(p) => ServerFrame::MessageUpdate(p),
            E::ToolProgress(p) => ServerFrame::ToolProgress(p),
            E::Typing(p) => ServerFrame::Typing(p),
            E::TypingStop => ServerFrame::TypingStop(Empty {}),
            E::Status(p) => ServerFrame::Status(p),
            E::Accepted { message_id } => ServerFrame::ReadReceipt(ReadReceiptEvent {
                message_id,
                device_id: None,
            }),
        }
    }
}

impl DurableFrame {
    /// The wire `type` of this frame.
    pub fn frame_type(&self) -> &'static str {
        use DurableFrame as D;
        match self {
            D::Message(_) => "message",
            D::MessageStart(_) => "message.start",
            D::MessageStop(_) => "message.stop",
            D::MessageDeleted(_) => "message.deleted",
            D::Commentary(_) => "commentary",
            D::ToolStart(_) => "tool.start",
            D::ToolEnd(_) => "tool.end",
            D::Notification(_) => "notification",
            D::PickerModel(_) => "picker.model",
            D::PickerChoice(_) => "picker.choice",
            D::PickerClarify(_) => "picker.clarify",
            D::PickerApproval(_) => "picker.approval",
            D::PickerConfirm(_) => "picker.confirm",
            D::PickerClosed(_) => "picker.closed",
            D::ChannelList(_) => "channel.list",
            D::ChannelCreated(_) => "channel.created",
            D::ChannelRenamed(_) => "channel.renamed",
            D::ChannelDeleted(_) => "channel.deleted",
            D::AgentBusy(_) => "agent.busy",
            D::AgentIdle => "agent.idle",
            D::MessageState(_) => "message.state",
            D::MessageTranscript(_) => "message.transcript",
            D::MediaOffer(_) => "media.offer",
            D::ReadBy { .. } => "read.receipt",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::FrameBody;

    fn durable_samples() -> Vec<DurableFrame> {
        use DurableFrame as D;
        vec![
            D::Message(Message::default()),
            D::MessageStart(MessageStart::default()),
            D::MessageStop(MessageStop::default()),
            D::MessageDeleted(MessageDeleted::default()),
            D::Commentary(Commentary::default()),
            D::ToolStart(ToolStart::default()),
            D::ToolEnd(ToolEnd::default()),
            D::Notification(Notification::default()),
            D::PickerModel(PickerModel::default()),
            D::PickerChoice(PickerChoice::default()),
            D::PickerClarify(PickerClarify::default()),
            D::PickerApproval(PickerApproval::default()),
            D::PickerConfirm(PickerConfirm::default()),
            D::PickerClosed(crate::PickerClosed::default()),
            D::ChannelList(ChannelList::default()),
            D::ChannelCreated(ChannelCreated::default()),
            D::ChannelRenamed(ChannelRenamed::default()),
            D::ChannelDeleted(ChannelDeleted::default()),
            D::AgentBusy(AgentBusy::default()),
            D::AgentIdle,
            D::MessageState(crate::MessageStateChanged::default()),
            D::MessageTranscript(crate::MessageTranscript::default()),
            D::MediaOffer(MediaInfo::default()),
            D::ReadBy {
                message_id: "m".into(),
                device_id: "d".into(),
            },
        ]
    }

    fn ephemeral_samples() -> Vec<EphemeralFrame> {
        use EphemeralFrame as E;
        vec![
            E::MessageUpdate(MessageUpdate::default()),
            E::ToolProgress(ToolProgress::default()),
            E::Typing(Typing::default()),
            E::TypingStop,
            E::Status(Status::default()),
            E::Accepted {
                message_id: "m".into(),
            },
        ]
    }

    #[test]
    fn every_durable_frame_is_durable_on_the_wire_and_every_ephemeral_one_is_not() {
        for d in durable_samples() {
            let ty = d.frame_type();
            let frame = ServerFrame::from(d);
            assert_eq!(frame.frame_type(), ty);
            assert!(frame.is_durable(), "{ty} must be durable");
        }
        for e in ephemeral_samples() {
            let frame = ServerFrame::from(e);
            assert!(
                !frame.is_durable(),
                "{} must be ephemeral",
                frame.frame_type()
            );
        }
    }

    fn response_samples() -> Vec<ResponseFrame> {
        use ResponseFrame as R;
        vec![
            R::Ack(Ack::default()),
            R::Pong(Pong::default()),
            R::History(History::default()),
            R::SearchResults(SearchResults::default()),
            R::CommandsCatalog(CommandsCatalog::default()),
            R::CommandsComplete(CommandsComplete::default()),
            R::MediaUploadAck(MediaUploadAck::default()),
            R::PairCode(crate::pairing::PairCode::default()),
            R::PushStatus(crate::push::PushStatus::default()),
            R::Usage(crate::usage::Usage::default()),
            R::DevicesList(crate::pairing::DeviceList::default()),
            R::FilesList(crate::files::FilesListing::default()),
            R::FilesRead(crate::files::FileContent::default()),
            R::Speech(crate::speech::Speech::default()),
        ]
    }

    #[test]
    fn no_response_is_durable() {
        for r in response_samples() {
            let frame = ServerFrame::from(r);
            assert!(
                !frame.is_durable(),
                "{} must not be durable",
                frame.frame_type()
            );
        }
    }

    /// Every server frame type travels in exactly one way, so a new type must be placed.
    #[test]
    fn every_server_type_has_exactly_one_way() {
        let mut ways: Vec<(String, &str)> = Vec::new();
        for d in durable_samples() {
            ways.push((d.frame_type().to_owned(), "durable"));
        }
        for e in ephemeral_samples() {
            ways.push((ServerFrame::from(e).frame_type().to_owned(), "ephemeral"));
        }
        for r in response_samples() {
            ways.push((ServerFrame::from(r).frame_type().to_owned(), "response"));
        }
        for ty in CONNECTION_TYPES {
            ways.push((ty.to_string(), "connection"));
        }
        for ty in ServerFrame::TYPES {
            let of: Vec<&str> = ways
                .iter()
                .filter(|(t, _)| t == ty)
                .map(|(_, w)| *w)
                .collect();
            // `read.receipt` is durable with `device_id` and ephemeral without it.
            let expected = if *ty == "read.receipt" { 2 } else { 1 };
            assert_eq!(of.len(), expected, "{ty} travels as {of:?}");
        }
    }

    #[test]
    fn every_durable_type_of_the_protocol_has_a_durable_frame() {
        let built: Vec<&str> = durable_samples().iter().map(|d| d.frame_type()).collect();
        for ty in ServerFrame::TYPES {
            if ServerFrame::is_durable_type(ty) {
                assert!(
                    built.contains(ty),
                    "{ty} is durable but has no DurableFrame"
                );
            }
        }
    }
}
