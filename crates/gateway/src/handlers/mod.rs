//! Request handlers, one room per family: [`messages`] (send, history, search, delete,
//! receipts), [`channels`] (create, rename, default, delete), [`control`] (stop, steer, pickers,
//! the command catalog) and [`registration`] (a device's name, caps and push registration).
//!
//! A handler that changes state does it in one store transaction that also appends the durable
//! frame announcing the change; the requesting connection receives that frame (with its request
//! `id`) through its queue like every other device, so the response and the broadcast are one
//! outbox entry.
//!
//! Layer: requests. Imports the agent bridge, the services and the ground floor.

use std::sync::Arc;

use iris_protocol::{ChannelInfo, ClientFrame, ErrorCode, Header};
use iris_store::{ChannelRow, StoreError};
use tokio_util::sync::CancellationToken;

use crate::agent::Agents;
use crate::conn::Conn;
use crate::guard::Guard;
use crate::media::Media;
use crate::outbox::{Lane, Origin};
use crate::state::Shared;
use crate::wire::{Reply, Result, WireError};

mod channels;
mod control;
mod messages;
mod registration;

pub use channels::create_channel_tx;
pub use registration::register_device;

/// What request handlers work with: the shared state, the door guard, the agent bridge and
/// media, handed down by the server to every connection.
pub struct Context {
    /// Configuration, store, hub and counters.
    pub shared: Arc<Shared>,
    /// Credentials and budgets.
    pub guard: Arc<Guard>,
    /// The lanes' actors.
    pub agents: Agents,
    /// Uploads, pulls and files from the agent.
    pub media: Arc<Media>,
    /// Cancelled when the gateway shuts down.
    pub shutdown: CancellationToken,
}

/// Dispatches one request (not `hello`, `sync` or `ping`, which the connection handles).
pub async fn handle(
    conn: &mut Conn,
    header: &Header,
    body: ClientFrame,
    origin: &Origin,
) -> Result<Reply> {
    let ctx = conn.ctx.clone();
    let ctx = &*ctx;
    let device = conn.device_id.as_str();
    match body {
        ClientFrame::MessageSend(send) => messages::send(ctx, device, header, send, origin).await,
        ClientFrame::History(req) => messages::history(ctx, header, req).await,
        ClientFrame::Search(req) => messages::search(ctx, header, req).await,
        ClientFrame::MessageDelete(req) => {
            messages::delete(ctx, header, req.message_ids, origin).await
        }
        ClientFrame::ReadReceipt(req) => {
            messages::read_receipt(ctx, device, header, req, origin).await
        }
        ClientFrame::AgentStop(_) => control::stop(ctx, header).await,
        ClientFrame::AgentSteer(req) => control::steer(ctx, header, req.text).await,
        ClientFrame::PickerSelect(req) => control::picker_select(ctx, req).await,
        ClientFrame::CommandsCatalog(_) => Ok(control::catalog(ctx)),
        ClientFrame::CommandsComplete(req) => Ok(control::complete(ctx, &req.prefix)),
        ClientFrame::ChannelCreate(req) => channels::create(ctx, req, origin).await,
        ClientFrame::ChannelRename(req) => channels::rename(ctx, header, req.name, origin).await,
        ClientFrame::ChannelSetDefault(_) => channels::set_default(ctx, header, origin).await,
        ClientFrame::ChannelDelete(_) => channels::delete(ctx, header, origin).await,
        ClientFrame::FcmRegister(req) => registration::fcm_register(ctx, device, header, req).await,
        ClientFrame::MediaUploadStart(req) => conn.media.start(&ctx.media, header, req).await,
        ClientFrame::MediaUploadEnd(req) => {
            let device = conn.device_id.clone();
            conn.media.end(&ctx.media, &device, req).await
        }
        ClientFrame::MediaPull(req) => conn.media.pull(&ctx.media, header, req).await,
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

pub(crate) fn channel_info(row: &ChannelRow) -> ChannelInfo {
    ChannelInfo {
        chat_id: row.chat_id.clone(),
        name: row.name.clone(),
        kind: row.kind.clone(),
        is_default: row.is_default,
        parent_chat_id: row.parent_chat_id.clone(),
    }
}

/// Resolves the lane a request names. A missing `chat_id` means the default channel; a `chat_id`
/// naming a thread means that thread in its channel.
pub async fn resolve_lane(ctx: &Context, header: &Header) -> Result<Lane> {
    let channels = ctx.shared.store.list_channels().await?;
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
