//! Request handlers: channels, messages, history, search, deletes and receipts.
//!
//! A handler that changes state does it in one store transaction that also appends the durable
//! frame announcing the change; the requesting connection receives that frame (with its request
//! `id`) through its queue like every other device, so the response and the broadcast are one
//! outbox entry.

use iris_protocol::{
    ChannelCreate, ChannelCreated, ChannelDeleted, ChannelInfo, ChannelList, ChannelRenamed,
    ClientFrame, ErrorCode, Header, Hello, History, HistoryRequest, MediaInfo, Message,
    MessageDeleted, MessageSend, ReadReceipt, ReadReceiptEvent, RequestId, Role, Runtime, Search,
    SearchHit, SearchResults, SearchScope, ServerFrame,
};
use iris_store::{ChannelRow, DeviceRow, StoreError, StoredMessage};
use serde::{Deserialize, Serialize};

use std::sync::Arc;

use tokio::sync::oneshot;

use crate::agent::lane::{CommandJob, LaneCmd, PromptJob};
use crate::conn::Conn;
use crate::ids::{new_id, now_ms};
use crate::state::{append_filed, append_frame, Origin, Shared};

/// What a handler answers.
#[allow(clippy::large_enum_variant)] // one per request, moved once: boxing would only allocate
pub enum Reply {
    /// A response written straight to the requesting connection (not outboxed).
    Direct(ServerFrame, Header),
    /// The response is the durable frame the handler appended; it arrives through the queue.
    ViaOutbox,
    /// No response (a request without id that needs none).
    Nothing,
}

/// An error answered to the app: a code and a message without internals.
#[derive(Debug)]
pub struct WireError {
    /// The code.
    pub code: ErrorCode,
    /// The message.
    pub message: String,
}

impl WireError {
    /// An error with this code.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        WireError {
            code,
            message: message.into(),
        }
    }

    /// `bad_request`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadRequest, message)
    }

    /// `not_found`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }

    /// `internal`: logs the cause and tells the app nothing about it.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "internal error");
        Self::new(ErrorCode::Internal, "internal error")
    }
}

impl From<StoreError> for WireError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => WireError::not_found("not found"),
            StoreError::Invalid(msg) => WireError::bad_request(msg),
            other => WireError::internal(other),
        }
    }
}

type Result<T> = std::result::Result<T, WireError>;

/// The request id of a frame too large to decode, found without parsing the whole frame.
pub fn sniff_id(text: &str) -> Option<RequestId> {
    #[derive(Deserialize)]
    struct Id {
        id: Option<RequestId>,
    }
    // Only the start of the frame is looked at, so a huge frame costs nothing to answer.
    let head = &text[..text.floor_char_boundary(4096)];
    let pos = head.find("\"id\"")?;
    let rest = &head[pos..];
    let end = rest.find([',', '}'])?;
    serde_json::from_str::<Id>(&format!("{{{}}}", &rest[..end]))
        .ok()?
        .id
}

/// Stores the device's name, caps and push registration; returns its row.
pub async fn register_device(
    shared: &Shared,
    hello: &Hello,
) -> std::result::Result<DeviceRow, StoreError> {
    let device_id = hello.device_id.clone();
    let name = hello
        .device_name
        .clone()
        .unwrap_or_else(|| device_id.clone());
    let caps = serde_json::to_string(&hello.caps).unwrap_or_else(|_| "{}".into());
    let fcm = hello.fcm_token.clone();
    let ntfy = hello.ntfy_topic.clone();
    // A subscription that does not check out is left out rather than failing the connection.
    let webpush = match hello
        .webpush
        .as_ref()
        .map(|w| w.as_ref().map(crate::push::webpush::parse_subscription))
    {
        Some(Some(Err(reason))) => {
            tracing::warn!(device_id = %device_id, %reason, "hello: ignoring an invalid webpush subscription");
            None
        }
        Some(Some(Ok(row))) => Some(row),
        Some(None) => Some(None),
        None => None,
    };
    shared
        .store
        .write(move |tx| {
            let row = tx.upsert_device(&device_id, &name, &caps, now_ms())?;
            if fcm.is_some() || ntfy.is_some() {
                tx.set_push_tokens(&device_id, fcm.map(Some), ntfy.map(Some))?;
            }
            if let Some(webpush) = webpush {
                tx.set_webpush(&device_id, webpush.as_ref())?;
            }
            Ok(row)
        })
        .await
}

/// The channel directory as sent in `hello.ack` and `channel.list`.
pub async fn channel_directory(
    shared: &Shared,
) -> std::result::Result<Vec<ChannelInfo>, StoreError> {
    Ok(shared
        .store
        .list_channels()
        .await?
        .iter()
        .map(channel_info)
        .collect())
}

fn channel_info(row: &ChannelRow) -> ChannelInfo {
    ChannelInfo {
        chat_id: row.chat_id.clone(),
        name: row.name.clone(),
        kind: row.kind.clone(),
        is_default: row.is_default,
        parent_chat_id: row.parent_chat_id.clone(),
    }
}

/// The fields of a message kept in the store's `extra` JSON column.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct MessageExtra {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reasoning: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    media: Vec<MediaInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reply_to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    runtime: Option<Runtime>,
}

/// A protocol message as a store row.
pub fn to_stored(chat_id: &str, thread_id: Option<&str>, m: &Message) -> StoredMessage {
    let extra = MessageExtra {
        reasoning: m.reasoning.clone(),
        media: m.media.clone(),
        reply_to: m.reply_to.clone(),
        model: m.model.clone(),
        tokens: m.tokens,
        runtime: m.runtime.clone(),
    };
    StoredMessage {
        message_id: m.message_id.clone(),
        chat_id: chat_id.to_owned(),
        thread_id: thread_id.map(str::to_owned),
        role: m.role.as_str().to_owned(),
        text: m.text.clone(),
        ts: m.ts,
        extra: serde_json::to_string(&extra).unwrap_or_else(|_| "{}".into()),
    }
}

/// A store row as a protocol message.
pub fn from_stored(row: &StoredMessage) -> Message {
    let extra: MessageExtra = serde_json::from_str(&row.extra).unwrap_or_default();
    Message {
        message_id: row.message_id.clone(),
        role: Role::parse(&row.role).unwrap_or(Role::System),
        text: row.text.clone(),
        reasoning: extra.reasoning,
        media: extra.media,
        reply_to: extra.reply_to,
        model: extra.model,
        tokens: extra.tokens,
        ts: row.ts,
        runtime: extra.runtime,
    }
}

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
}

/// Resolves the lane a request names. A missing `chat_id` means the default channel; a `chat_id`
/// naming a thread means that thread in its channel.
pub async fn resolve_lane(shared: &Shared, header: &Header) -> Result<Lane> {
    let channels = shared.store.list_channels().await?;
    let chat = match &header.chat_id {
        Some(id) => channels
            .iter()
            .find(|c| &c.chat_id == id)
            .ok_or_else(|| WireError::not_found("chat_id unknown"))?,
        None => channels
            .iter()
            .find(|c| c.is_default)
            .ok_or_else(|| WireError::not_found("no default channel"))?,
    };
    if chat.kind == "thread" {
        if header
            .thread_id
            .as_ref()
            .is_some_and(|t| t != &chat.chat_id)
        {
            return Err(WireError::bad_request(
                "chat_id names a thread; thread_id must be that thread or omitted",
            ));
        }
        let parent = chat
            .parent_chat_id
            .clone()
            .ok_or_else(|| WireError::internal("thread without parent"))?;
        return Ok(Lane {
            chat_id: parent,
            thread_id: Some(chat.chat_id.clone()),
        });
    }
    if let Some(thread) = &header.thread_id {
        let ok = channels
            .iter()
            .any(|c| &c.chat_id == thread && c.parent_chat_id.as_ref() == Some(&chat.chat_id));
        if !ok {
            return Err(WireError::not_found("thread_id unknown in this chat"));
        }
    }
    Ok(Lane {
        chat_id: chat.chat_id.clone(),
        thread_id: header.thread_id.clone(),
    })
}

/// Dispatches one request (not `hello`, `sync` or `ping`, which the connection handles).
pub async fn handle(
    conn: &mut Conn,
    header: &Header,
    body: ClientFrame,
    origin: &Origin,
) -> Result<Reply> {
    let shared = conn.shared.clone();
    match body {
        ClientFrame::MessageSend(send) => {
            message_send(&shared, &conn.device_id, header, send, origin).await
        }
        ClientFrame::AgentStop(_) => agent_stop(&shared, header).await,
        ClientFrame::AgentSteer(req) => agent_steer(&shared, header, req.text).await,
        ClientFrame::PickerSelect(req) => picker_select(&shared, req).await,
        ClientFrame::History(req) => history(&shared, header, req).await,
        ClientFrame::Search(req) => search(&shared, header, req).await,
        ClientFrame::MessageDelete(req) => {
            message_delete(&shared, header, req.message_ids, origin).await
        }
        ClientFrame::ReadReceipt(req) => {
            read_receipt(&shared, &conn.device_id, header, req, origin).await
        }
        ClientFrame::ChannelCreate(req) => channel_create(&shared, req, origin).await,
        ClientFrame::ChannelRename(req) => channel_rename(&shared, header, req.name, origin).await,
        ClientFrame::ChannelSetDefault(_) => channel_set_default(&shared, header, origin).await,
        ClientFrame::ChannelDelete(_) => channel_delete(&shared, header, origin).await,
        ClientFrame::CommandsCatalog(_) => {
            let entries = crate::agent::catalog(&shared.agents.host);
            Ok(Reply::Direct(
                crate::commands::catalog(entries),
                Header::default(),
            ))
        }
        ClientFrame::CommandsComplete(req) => {
            let entries = crate::agent::catalog(&shared.agents.host);
            Ok(Reply::Direct(
                crate::commands::complete(entries, &req.prefix),
                Header::default(),
            ))
        }
        ClientFrame::FcmRegister(req) => fcm_register(&shared, &conn.device_id, header, req).await,
        ClientFrame::MediaUploadStart(req) => conn.media.start(&shared, header, req).await,
        ClientFrame::MediaUploadEnd(req) => conn.media.end(&shared, &conn.device_id, req).await,
        ClientFrame::MediaPull(req) => conn.media.pull(&shared, header, req).await,
        ClientFrame::Unknown { frame_type, .. } => {
            if header.id.is_some() {
                Err(WireError::new(
                    ErrorCode::Unsupported,
                    format!("unknown frame type {frame_type:?}"),
                ))
            } else {
                Ok(Reply::Nothing)
            }
        }
        ClientFrame::Hello(_) | ClientFrame::Sync(_) | ClientFrame::Ping(_) => {
            Err(WireError::internal("frame dispatched twice"))
        }
    }
}

/// Largest accepted message text, in bytes.
const MAX_TEXT: usize = 64 * 1024;

async fn message_send(
    shared: &Arc<Shared>,
    device_id: &str,
    header: &Header,
    send: MessageSend,
    origin: &Origin,
) -> Result<Reply> {
    if send.text.trim().is_empty() && send.media_refs.is_empty() {
        return Err(WireError::bad_request("text is empty"));
    }
    if send.text.len() > MAX_TEXT {
        return Err(WireError::bad_request(format!(
            "text longer than {MAX_TEXT} bytes"
        )));
    }
    let mut lane = resolve_lane(shared, header).await?;
    if !shared.take_send(device_id) {
        return Err(WireError::new(
            ErrorCode::RateLimited,
            "too many messages; slow down",
        ));
    }
    let attachments = crate::media::resolve_refs(shared, device_id, &send.media_refs).await?;
    let command = crate::commands::parse(&send.text);
    let is_agent_command = command.is_none() && is_agent_command(shared, &send.text);
    let thread =
        (send.auto_thread && lane.thread_id.is_none() && command.is_none() && !is_agent_command)
            .then(|| ChannelRow {
                chat_id: new_id("t_"),
                name: instant_title(&send.text),
                kind: "thread".into(),
                parent_chat_id: Some(lane.chat_id.clone()),
                is_default: false,
                name_set_by_user: false,
                created_at: now_ms(),
            });
    if let Some(t) = &thread {
        lane.thread_id = Some(t.chat_id.clone());
    }
    let message = Message {
        message_id: new_id("m_"),
        role: Role::User,
        text: send.text.clone(),
        reply_to: send.reply_to,
        ts: now_ms(),
        media: attachments.iter().map(crate::media::info).collect(),
        ..Message::default()
    };
    let message_id = message.message_id.clone();
    let media_ids: Vec<String> = attachments.iter().map(|m| m.media_id.clone()).collect();
    let stored = to_stored(&lane.chat_id, lane.thread_id.as_deref(), &message);
    let lane_header = lane.header();
    let tx_origin = origin.clone();
    shared
        .store
        .write(move |tx| {
            if let Some(t) = thread {
                create_channel_tx(tx, t, true, &Origin::none())?;
            }
            tx.upsert_message(&stored)?;
            tx.attach_media(&stored.message_id, &media_ids)?;
            let frame = ServerFrame::Message(message);
            append_frame(
                tx,
                &lane_header,
                &frame,
                Some(&stored.message_id),
                &tx_origin,
            )
        })
        .await?;
    let cmd = match command {
        Some((name, args)) => LaneCmd::Command(CommandJob {
            name,
            args,
            origin_conn: origin.conn,
            message_id,
        }),
        None => {
            let blocks = crate::media::agent::prompt_links(shared, &attachments);
            LaneCmd::Prompt(PromptJob {
                text: send.text,
                blocks,
                origin_conn: origin.conn,
                message_id,
            })
        }
    };
    shared.agents.send(shared, &lane, cmd);
    Ok(Reply::ViaOutbox)
}

/// Whether the text starts with a command the agent advertised (forwarded to it as a prompt).
fn is_agent_command(shared: &Shared, text: &str) -> bool {
    let Some(rest) = text.trim_start().strip_prefix('/') else {
        return false;
    };
    let name = rest.split(char::is_whitespace).next().unwrap_or("");
    !name.is_empty() && shared.agents.host.has_command(name)
}

/// The instant title of an auto-thread: the first non-empty line, at most 48 characters, cut at a
/// word boundary.
pub fn instant_title(text: &str) -> String {
    const MAX: usize = 48;
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("New thread");
    if line.chars().count() <= MAX {
        return line.to_owned();
    }
    let cut: String = line.chars().take(MAX).collect();
    match cut.rfind(char::is_whitespace) {
        Some(i) if i > 0 => cut[..i].trim_end().to_owned(),
        _ => cut,
    }
}

async fn agent_stop(shared: &Arc<Shared>, header: &Header) -> Result<Reply> {
    let lane = resolve_lane(shared, header).await?;
    let (tx, rx) = oneshot::channel();
    shared.agents.send(shared, &lane, LaneCmd::Stop(tx));
    match rx.await {
        Ok(true) => Ok(ack(header)),
        _ => Err(WireError::not_found("no turn is running in this lane")),
    }
}

async fn agent_steer(shared: &Arc<Shared>, header: &Header, text: String) -> Result<Reply> {
    if text.len() > MAX_TEXT {
        return Err(WireError::bad_request(format!(
            "text longer than {MAX_TEXT} bytes"
        )));
    }
    let lane = resolve_lane(shared, header).await?;
    let (tx, rx) = oneshot::channel();
    shared.agents.send(shared, &lane, LaneCmd::Steer(text, tx));
    match rx.await {
        Ok(Ok(())) => Ok(ack(header)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(WireError::internal("lane ended while steering")),
    }
}

async fn picker_select(shared: &Arc<Shared>, req: iris_protocol::PickerSelect) -> Result<Reply> {
    let Some(lane) = shared.agents.picker_lane(&req.picker_id) else {
        return Err(WireError::not_found("picker unknown or expired"));
    };
    let (tx, rx) = oneshot::channel();
    shared.agents.send(
        shared,
        &lane,
        LaneCmd::Picker {
            picker_id: req.picker_id,
            value: req.value,
            reply: tx,
        },
    );
    match rx.await {
        Ok(Ok(())) => Ok(Reply::Direct(
            ServerFrame::Ack(iris_protocol::Ack { ok: true }),
            lane.header(),
        )),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(WireError::not_found("picker unknown or expired")),
    }
}

/// `ack` for a request with an id; nothing for one without.
fn ack(header: &Header) -> Reply {
    match header.id {
        Some(_) => Reply::Direct(
            ServerFrame::Ack(iris_protocol::Ack { ok: true }),
            Header::default(),
        ),
        None => Reply::Nothing,
    }
}

async fn history(shared: &Shared, header: &Header, req: HistoryRequest) -> Result<Reply> {
    let limit = match req.limit {
        None => 50,
        Some(n) if n < 1 => return Err(WireError::bad_request("limit must be at least 1")),
        Some(n) => n.min(200) as usize,
    };
    let lane = resolve_lane(shared, header).await?;
    let page = shared
        .store
        .history(
            &lane.chat_id,
            lane.thread_id.as_deref(),
            req.before_message_id.as_deref(),
            limit,
        )
        .await
        .map_err(|e| match e {
            StoreError::NotFound => WireError::not_found("before_message_id unknown in this lane"),
            other => other.into(),
        })?;
    let messages: Vec<Message> = page.messages.iter().map(from_stored).collect();
    let oldest_message_id = messages.first().map(|m| m.message_id.clone());
    let frame = ServerFrame::History(History {
        messages,
        has_more: page.has_more,
        oldest_message_id,
    });
    Ok(Reply::Direct(frame, lane.header()))
}

/// Longest accepted search query, in bytes.
const MAX_QUERY: usize = 1024;

async fn search(shared: &Shared, header: &Header, req: Search) -> Result<Reply> {
    if req.query.len() > MAX_QUERY {
        return Err(WireError::bad_request(format!(
            "query longer than {MAX_QUERY} bytes"
        )));
    }
    let limit = match req.limit {
        None => 50,
        Some(n) if n < 1 => return Err(WireError::bad_request("limit must be at least 1")),
        Some(n) => n.min(200) as usize,
    };
    let scope = match req.scope {
        SearchScope::All => None,
        SearchScope::Chat => {
            if header.chat_id.is_none() {
                return Err(WireError::bad_request("scope chat needs a chat_id"));
            }
            let lane = resolve_lane(shared, header).await?;
            Some((lane.chat_id, lane.thread_id))
        }
    };
    let hits = shared.store.search(&req.query, scope, limit).await?;
    let hits = hits
        .into_iter()
        .map(|h| SearchHit {
            message_id: h.message_id,
            chat_id: h.chat_id,
            thread_id: h.thread_id,
            role: Role::parse(&h.role).unwrap_or(Role::System),
            snippet: h.snippet,
            ts: h.ts,
        })
        .collect();
    Ok(Reply::Direct(
        ServerFrame::SearchResults(SearchResults {
            query: req.query,
            scope: req.scope,
            hits,
        }),
        Header::default(),
    ))
}

async fn message_delete(
    shared: &Shared,
    header: &Header,
    ids: Vec<String>,
    origin: &Origin,
) -> Result<Reply> {
    if ids.is_empty() {
        return Err(WireError::bad_request("message_ids is empty"));
    }
    if ids.len() > 500 {
        return Err(WireError::bad_request("at most 500 message_ids at once"));
    }
    let lane = resolve_lane(shared, header).await?;
    let origin = origin.clone();
    let unused = shared
        .store
        .write(move |tx| {
            tx.delete_messages(&ids)?;
            let unused = tx.detach_media(&ids)?;
            // Idempotent: ids already gone are announced too, so every cache drops them.
            let frame = ServerFrame::MessageDeleted(MessageDeleted { message_ids: ids });
            append_frame(tx, &lane.header(), &frame, None, &origin)?;
            Ok(unused)
        })
        .await?;
    // Files go before this request is done, so a device's next request sees them gone.
    crate::media::remove_unused(shared, unused).await;
    Ok(Reply::ViaOutbox)
}

async fn read_receipt(
    shared: &Shared,
    device_id: &str,
    header: &Header,
    req: ReadReceipt,
    origin: &Origin,
) -> Result<Reply> {
    let Some(message) = shared.store.get_message(&req.message_id).await? else {
        return Err(WireError::not_found("message_id unknown"));
    };
    if header
        .chat_id
        .as_ref()
        .is_some_and(|c| c != &message.chat_id && Some(c) != message.thread_id.as_ref())
    {
        return Err(WireError::not_found("message_id unknown in this chat"));
    }
    let device = device_id.to_owned();
    let origin = origin.clone();
    shared
        .store
        .write(move |tx| {
            tx.mark_read(&message.chat_id, &message.message_id, &device, now_ms())?;
            let lane = Header::lane(message.chat_id.clone(), message.thread_id.clone());
            let frame = ServerFrame::ReadReceipt(ReadReceiptEvent {
                message_id: message.message_id.clone(),
                device_id: Some(device.clone()),
            });
            append_frame(tx, &lane, &frame, Some(&message.message_id), &origin)
        })
        .await?;
    Ok(Reply::ViaOutbox)
}

/// Checks a channel name: trimmed, 1–100 characters, no control characters.
fn clean_name(name: &str) -> Result<String> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 100 || name.chars().any(char::is_control) {
        return Err(WireError::bad_request(
            "name must be 1-100 characters without control characters",
        ));
    }
    Ok(name.to_owned())
}

async fn channel_create(shared: &Shared, req: ChannelCreate, origin: &Origin) -> Result<Reply> {
    let name = clean_name(&req.name)?;
    let kind = match (req.kind.as_deref(), &req.parent_chat_id) {
        (None | Some("channel"), None) => "channel",
        (None | Some("thread"), Some(_)) => "thread",
        (Some("thread"), None) => {
            return Err(WireError::bad_request("a thread needs parent_chat_id"))
        }
        (Some("channel"), Some(_)) => {
            return Err(WireError::bad_request("a channel has no parent_chat_id"))
        }
        (Some(other), _) => {
            return Err(WireError::bad_request(format!(
                "kind {other:?} is not channel or thread"
            )))
        }
    };
    let row = ChannelRow {
        chat_id: new_id(if kind == "thread" { "t_" } else { "c_" }),
        name,
        kind: kind.to_owned(),
        parent_chat_id: req.parent_chat_id,
        is_default: false,
        name_set_by_user: true,
        created_at: now_ms(),
    };
    let origin = origin.clone();
    shared
        .store
        .write(move |tx| create_channel_tx(tx, row, false, &origin))
        .await?;
    Ok(Reply::ViaOutbox)
}

/// Inserts a channel or thread and appends `channel.created`; checks the parent of a thread.
pub fn create_channel_tx(
    tx: &mut iris_store::WriteTx<'_>,
    row: ChannelRow,
    auto: bool,
    origin: &Origin,
) -> std::result::Result<u64, StoreError> {
    if let Some(parent) = &row.parent_chat_id {
        match tx.get_channel(parent)? {
            None => return Err(StoreError::NotFound),
            Some(p) if p.kind == "thread" => {
                return Err(StoreError::Invalid(
                    "a thread cannot contain threads".into(),
                ))
            }
            Some(_) => {}
        }
    }
    tx.insert_channel(&row)?;
    let frame = ServerFrame::ChannelCreated(ChannelCreated {
        chat_id: row.chat_id.clone(),
        name: row.name.clone(),
        kind: row.kind.clone(),
        parent_chat_id: row.parent_chat_id.clone(),
        auto,
    });
    append_filed(
        tx,
        &Header::default(),
        &frame,
        filed_under(&row),
        None,
        origin,
    )
}

/// The lane a channel's own frames are filed under: the channel, or a thread in its channel.
fn filed_under(row: &ChannelRow) -> (Option<&str>, Option<&str>) {
    match &row.parent_chat_id {
        Some(parent) => (Some(parent), Some(&row.chat_id)),
        None => (Some(&row.chat_id), None),
    }
}

fn required_chat(header: &Header) -> Result<String> {
    header
        .chat_id
        .clone()
        .ok_or_else(|| WireError::bad_request("chat_id is required"))
}

async fn channel_rename(
    shared: &Shared,
    header: &Header,
    name: String,
    origin: &Origin,
) -> Result<Reply> {
    let chat_id = required_chat(header)?;
    let name = clean_name(&name)?;
    let origin = origin.clone();
    shared
        .store
        .write(move |tx| {
            if !tx.rename_channel(&chat_id, &name, true)? {
                return Err(StoreError::NotFound);
            }
            let row = tx.get_channel(&chat_id)?.ok_or(StoreError::NotFound)?;
            let frame = ServerFrame::ChannelRenamed(ChannelRenamed {
                chat_id: chat_id.clone(),
                name,
            });
            append_filed(
                tx,
                &Header::default(),
                &frame,
                filed_under(&row),
                None,
                &origin,
            )
        })
        .await?;
    Ok(Reply::ViaOutbox)
}

async fn channel_set_default(shared: &Shared, header: &Header, origin: &Origin) -> Result<Reply> {
    let chat_id = required_chat(header)?;
    let origin = origin.clone();
    shared
        .store
        .write(move |tx| {
            tx.set_default(&chat_id)?;
            let channels = tx.list_channels()?.iter().map(channel_info).collect();
            append_frame(
                tx,
                &Header::default(),
                &ServerFrame::ChannelList(ChannelList { channels }),
                None,
                &origin,
            )
        })
        .await?;
    Ok(Reply::ViaOutbox)
}

async fn channel_delete(shared: &Arc<Shared>, header: &Header, origin: &Origin) -> Result<Reply> {
    let chat_id = required_chat(header)?;
    // The chat "default" always exists, even after the default flag moved to another channel.
    if chat_id == "default" {
        return Err(WireError::bad_request("the default chat cannot be deleted"));
    }
    let origin = origin.clone();
    let target = chat_id.clone();
    let silenced = shared
        .agents
        .silence_lanes(|l| l.chat_id == target || l.thread_id.as_deref() == Some(target.as_str()));
    let result = shared
        .store
        .write(move |tx| {
            let deleted = tx.delete_channel(&chat_id)?;
            let unused = tx.detach_media(&deleted.message_ids)?;
            let thread_ids = deleted
                .chat_ids
                .iter()
                .filter(|c| **c != chat_id)
                .cloned()
                .collect();
            let frame = ServerFrame::ChannelDeleted(ChannelDeleted {
                chat_id: chat_id.clone(),
                thread_ids,
            });
            append_frame(tx, &Header::default(), &frame, None, &origin)?;
            Ok((deleted.chat_ids, unused))
        })
        .await;
    let (gone, unused) = match result {
        Ok(done) => done,
        Err(e) => {
            for flag in silenced {
                flag.store(false, std::sync::atomic::Ordering::SeqCst);
            }
            return Err(e.into());
        }
    };
    crate::media::remove_unused(shared, unused).await;
    // The deleted lanes' actors end; a turn still running there is cancelled.
    shared
        .agents
        .delete_lanes(|l| {
            gone.contains(&l.chat_id) || l.thread_id.as_ref().is_some_and(|t| gone.contains(t))
        })
        .await;
    Ok(Reply::ViaOutbox)
}

async fn fcm_register(
    shared: &Shared,
    device_id: &str,
    header: &Header,
    req: iris_protocol::FcmRegister,
) -> Result<Reply> {
    let device = device_id.to_owned();
    // An empty string removes a registration; an absent field leaves it as it is.
    let norm = |v: Option<String>| v.map(|s| Some(s).filter(|s| !s.is_empty()));
    let (fcm, ntfy) = (norm(req.fcm_token), norm(req.ntfy_topic));
    // `null` or an empty endpoint removes the Web Push subscription.
    let webpush = match req.webpush {
        Some(Some(sub)) => Some(
            crate::push::webpush::parse_subscription(&sub)
                .map_err(|e| WireError::bad_request(format!("webpush: {e}")))?,
        ),
        Some(None) => Some(None),
        None => None,
    };
    shared
        .store
        .write(move |tx| {
            tx.set_push_tokens(&device, fcm, ntfy)?;
            match webpush {
                Some(webpush) => tx.set_webpush(&device, webpush.as_ref()),
                None => Ok(()),
            }
        })
        .await?;
    Ok(match header.id {
        Some(_) => Reply::Direct(
            ServerFrame::Ack(iris_protocol::Ack { ok: true }),
            Header::default(),
        ),
        None => Reply::Nothing,
    })
}
