//! The one door to the outbox, and the lane and origin types its frames are filed under.
//!
//! A durable frame reaches devices only by being appended here inside a store transaction; the
//! store's commit hook then hands it to the hub in cursor order. Only a
//! [`DurableFrame`] can be appended, and only an [`EphemeralFrame`] can be broadcast without
//! being stored ([`crate::hub::Hub::broadcast`]): which way a frame goes is decided by its type,
//! never by the caller.
//!
//! This is also where messages become store rows and back, and where system messages are made.
//!
//! Ground floor: imports nothing of the gateway but [`crate::ids`].

use std::sync::Arc;

use iris_protocol::{
    encode, ChannelInfo, DurableFrame, Header, Message, MessageState, Role, ServerFrame,
};
use iris_store::{ChannelRow, FrameMeta, NewFrame, StoreError, StoredMessage, WriteTx};

use crate::ids::{new_id, now_ms};

/// A lane: a channel and optionally one of its threads.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Lane {
    /// The channel.
    pub chat_id: String,
    /// The thread, or `None` for the channel's flat lane.
    pub thread_id: Option<String>,
}

impl Lane {
    /// The envelope header of frames in this lane.
    pub fn header(&self) -> Header {
        Header::lane(self.chat_id.clone(), self.thread_id.clone())
    }

    /// The lane as `(chat_id, thread_id)`, the way frames are filed.
    pub fn filing(&self) -> (Option<&str>, Option<&str>) {
        (Some(&self.chat_id), self.thread_id.as_deref())
    }

    /// The channel or thread row that must exist for this lane to take frames.
    pub fn row_id(&self) -> &str {
        self.thread_id.as_deref().unwrap_or(&self.chat_id)
    }
}

/// Who a durable frame answers: its connection and request id, so that the origin receives the
/// frame as its response (with `id`) while every other device gets the broadcast.
#[derive(Debug, Clone, Default)]
pub struct Origin {
    /// Connection id (0 = none).
    pub conn: u64,
    /// The request id, as JSON text.
    pub request_id: Option<Arc<str>>,
}

impl Origin {
    /// No origin: a pure broadcast.
    pub fn none() -> Self {
        Origin::default()
    }
}

/// Appends a durable frame to the outbox inside a write transaction, filed under its header's
/// lane (so deleting the lane or the message removes it); returns its cursor.
pub fn append(
    tx: &mut WriteTx<'_>,
    header: &Header,
    frame: DurableFrame,
    message_id: Option<&str>,
    origin: &Origin,
) -> Result<u64, StoreError> {
    let lane = (header.chat_id.clone(), header.thread_id.clone());
    append_filed(
        tx,
        header,
        frame,
        (lane.0.as_deref(), lane.1.as_deref()),
        message_id,
        origin,
    )
}

/// Appends a durable frame filed under a lane other than its header's: `channel.*` frames carry
/// no lane in their envelope but belong to the channel they describe, and go when it is deleted.
pub fn append_filed(
    tx: &mut WriteTx<'_>,
    header: &Header,
    frame: DurableFrame,
    lane: (Option<&str>, Option<&str>),
    message_id: Option<&str>,
    origin: &Origin,
) -> Result<u64, StoreError> {
    let frame_type = frame.frame_type().to_owned();
    let json = encode(header, &ServerFrame::from(frame));
    tx.append(NewFrame {
        frame_type,
        chat_id: lane.0.map(str::to_owned),
        thread_id: lane.1.map(str::to_owned),
        message_id: message_id.map(str::to_owned),
        json,
        meta: FrameMeta {
            origin_conn: origin.conn,
            request_id: origin.request_id.clone(),
        },
    })
}

/// Stores a message in its lane and appends the `message` frame announcing it, in the caller's
/// transaction; returns the frame's cursor.
pub fn post(
    tx: &mut WriteTx<'_>,
    lane: &Lane,
    message: Message,
    origin: &Origin,
) -> Result<u64, StoreError> {
    tx.upsert_message(&to_stored(
        &lane.chat_id,
        lane.thread_id.as_deref(),
        &message,
    ))?;
    let id = message.message_id.clone();
    append(
        tx,
        &lane.header(),
        DurableFrame::Message(message),
        Some(&id),
        origin,
    )
}

/// A channel or thread as the channel directory lists it.
pub fn channel_info(row: &ChannelRow) -> ChannelInfo {
    ChannelInfo {
        chat_id: row.chat_id.clone(),
        name: row.name.clone(),
        kind: row.kind.clone(),
        is_default: row.is_default,
        parent_chat_id: row.parent_chat_id.clone(),
        agent: row.agent.clone(),
        // Only `hello.ack` says these: the frames the outbox keeps must not keep a message's
        // text after the message is deleted, and a directory replayed later would show the
        // activity of its own time.
        last_activity_at: None,
        preview: None,
        preview_message_id: None,
    }
}

/// The whole channel directory as a `channel.list` frame, read inside a transaction.
pub fn channel_list(tx: &WriteTx<'_>) -> Result<DurableFrame, StoreError> {
    let channels = tx.list_channels()?.iter().map(channel_info).collect();
    Ok(DurableFrame::ChannelList(iris_protocol::ChannelList {
        channels,
    }))
}

/// A new system message: the gateway speaking in a lane (errors, notices, command output).
/// Every system message of the gateway is made here.
pub fn system_message(text: impl Into<String>) -> Message {
    Message {
        message_id: new_id("m_"),
        role: Role::System,
        text: text.into(),
        ts: now_ms(),
        ..Message::default()
    }
}

/// A protocol message as a store row.
pub fn to_stored(chat_id: &str, thread_id: Option<&str>, m: &Message) -> StoredMessage {
    StoredMessage {
        message_id: m.message_id.clone(),
        chat_id: chat_id.to_owned(),
        thread_id: thread_id.map(str::to_owned),
        role: m.role.as_str().to_owned(),
        text: m.text.clone(),
        ts: m.ts,
        extra: m.extra_json(),
        state: m.state.map(|s| s.as_str().to_owned()),
    }
}

/// A store row as a protocol message.
pub fn from_stored(row: &StoredMessage) -> Message {
    let mut m = Message::from_stored(
        row.message_id.clone(),
        &row.role,
        row.text.clone(),
        row.ts,
        &row.extra,
    );
    m.state = row.state.as_deref().and_then(MessageState::parse);
    m
}

/// The lane a channel's own frames are filed under: the channel, or a thread in its channel.
pub fn filed_under(row: &ChannelRow) -> (Option<&str>, Option<&str>) {
    match &row.parent_chat_id {
        Some(parent) => (Some(parent), Some(&row.chat_id)),
        None => (Some(&row.chat_id), None),
    }
}

/// Names the chat of a user's message from it, when the chat (the message's thread, or its
/// channel) still carries the placeholder it was created with; each one named is announced with
/// `channel.renamed`, like a rename. Run in the message's own transaction (for a voice note, its
/// transcript's), so a chat is never left unnamed behind a stored prompt.
pub fn give_awaited_titles(
    tx: &mut WriteTx<'_>,
    lane: &Lane,
    title: &str,
) -> Result<(), StoreError> {
    for id in lane.thread_id.iter().chain([&lane.chat_id]) {
        if !tx.give_awaited_title(id, title)? {
            continue;
        }
        let row = tx.get_channel(id)?.ok_or(StoreError::NotFound)?;
        let frame = DurableFrame::ChannelRenamed(iris_protocol::ChannelRenamed {
            chat_id: id.clone(),
            name: title.to_owned(),
        });
        append_filed(
            tx,
            &Header::default(),
            frame,
            filed_under(&row),
            None,
            &Origin::none(),
        )?;
    }
    Ok(())
}
