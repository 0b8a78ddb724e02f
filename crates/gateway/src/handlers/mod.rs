//! Request handlers, one room per family: [`messages`] (send, history, delete, receipts),
//! [`search`] (with its cost bounds), [`channels`] (create, rename, default, delete), [`control`] (stop, steer, pickers,
//! the command catalog), [`registration`] (a device's name, caps and push registration),
//! [`pairing`] (a code for another device), [`devices`] (the paired devices, revoking one) and
//! [`files`] (the file browser, read-only) and [`speech`] (read aloud in the server's voice).
//!
//! A handler that changes state does it in one store transaction that also appends the durable
//! frame announcing the change; the requesting connection receives that frame (with its request
//! `id`) through its queue like every other device, so the response and the broadcast are one
//! outbox entry.
//!
//! Layer: requests. Imports the agent bridge, the services and the ground floor.

use iris_protocol::{ClientFrame, ErrorCode, Header};

use crate::media::ConnMedia;
use crate::outbox::Origin;
use crate::wire::{Reply, Result, WireError};

mod channels;
mod client_ids;
mod context;
mod control;
mod devices;
mod files;
mod messages;
mod pairing;
mod registration;
mod search;
mod speech;

pub use channels::{channel_directory, create_channel_tx};
pub use context::{resolve_lane, Context, SearchRate};
pub use registration::register_device;
pub use search::search;

/// Dispatches one request (not `hello`, `sync`, `ping` or `focus.set`, which the connection
/// handles).
/// `device` is the connection's device, `media` its upload and pulls.
pub async fn handle(
    ctx: &Context,
    device: &str,
    media: &mut ConnMedia,
    header: &Header,
    body: ClientFrame,
    origin: &Origin,
) -> Result<Reply> {
    if changes_state(&body) && !ctx.guard.take_request(device) {
        let per_minute = ctx.shared.config.limits.requests_per_minute;
        return Err(WireError::new(
            ErrorCode::RateLimited,
            format!("too many requests: at most {per_minute} a minute from one device"),
        ));
    }
    match body {
        ClientFrame::MessageSend(send) => messages::send(ctx, device, header, send, origin).await,
        ClientFrame::History(req) => messages::history(ctx, header, req).await,
        ClientFrame::Search(req) => search::search(ctx, device, header, req).await,
        ClientFrame::MessageDelete(req) => {
            messages::delete(ctx, header, req.message_ids, origin).await
        }
        ClientFrame::ReadReceipt(req) => {
            messages::read_receipt(ctx, device, header, req, origin).await
        }
        ClientFrame::MessageRetry(req) => control::retry(ctx, header, req, device, origin).await,
        ClientFrame::AgentStop(_) => control::stop(ctx, header).await,
        ClientFrame::AgentSteer(req) => control::steer(ctx, device, header, req).await,
        ClientFrame::PickerSelect(req) => control::picker_select(ctx, device, req).await,
        ClientFrame::CommandsCatalog(_) => control::catalog(ctx, header).await,
        ClientFrame::CommandsComplete(req) => control::complete(ctx, header, &req.prefix).await,
        ClientFrame::ChannelCreate(req) => channels::create(ctx, req, origin).await,
        ClientFrame::ChannelRename(req) => channels::rename(ctx, header, req.name, origin).await,
        ClientFrame::ChannelSetAgent(req) => {
            channels::set_agent(ctx, header, &req.agent, origin).await
        }
        ClientFrame::ChannelSetDefault(_) => channels::set_default(ctx, header, origin).await,
        ClientFrame::ChannelDelete(_) => channels::delete(ctx, header, origin).await,
        ClientFrame::FcmRegister(req) => registration::fcm_register(ctx, device, header, req).await,
        ClientFrame::MediaUploadStart(req) => {
            let voice_on = req.voice && ctx.agents.voice_on();
            media.start(&ctx.media, device, header, req, voice_on).await
        }
        ClientFrame::MediaUploadEnd(req) => media.end(&ctx.media, device, req).await,
        ClientFrame::MediaPull(req) => media.pull(&ctx.media, header, req).await,
        ClientFrame::PairCreate(_) => pairing::create(ctx, device, header).await,
        ClientFrame::PushStatus(_) => registration::push_status(ctx, device).await,
        ClientFrame::PushTest(_) => registration::push_test(ctx, device).await,
        ClientFrame::Usage(_) => messages::usage(ctx, header).await,
        ClientFrame::DevicesList(_) => devices::list(ctx, device, header).await,
        ClientFrame::DeviceRevoke(req) => devices::revoke(ctx, device, header, req).await,
        ClientFrame::FilesList(req) => files::list(ctx, header, req).await,
        ClientFrame::FilesRead(req) => files::read(ctx, header, req).await,
        ClientFrame::FilesPull(req) => files::pull(ctx, media, header, req).await,
        ClientFrame::SpeechCreate(req) => speech::create(ctx, device, header, req).await,
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
        ClientFrame::Hello(_)
        | ClientFrame::Sync(_)
        | ClientFrame::Ping(_)
        | ClientFrame::FocusSet(_) => Err(WireError::internal("frame dispatched twice")),
    }
}

/// Requests that write to the store (most append a durable frame every device receives), under
/// the per-device request budget. `message.send` has a budget of its own; reading requests
/// (history, search, pulls, the catalog) and uploads, which have their own quotas, are not
/// counted; nor are the file browser's reads, bounded by their caps and by
/// [`crate::files::MAX_BUSY`] at once.
fn changes_state(body: &ClientFrame) -> bool {
    matches!(
        body,
        ClientFrame::ReadReceipt(_)
            | ClientFrame::MessageDelete(_)
            | ClientFrame::MessageRetry(_)
            | ClientFrame::AgentStop(_)
            | ClientFrame::AgentSteer(_)
            | ClientFrame::PickerSelect(_)
            | ClientFrame::ChannelCreate(_)
            | ClientFrame::ChannelRename(_)
            | ClientFrame::ChannelSetAgent(_)
            | ClientFrame::ChannelSetDefault(_)
            | ClientFrame::ChannelDelete(_)
            | ClientFrame::FcmRegister(_)
            | ClientFrame::PairCreate(_)
            | ClientFrame::PushTest(_)
            // Reads every answer of a lane: budgeted like a write, so it cannot be spun.
            | ClientFrame::Usage(_)
            | ClientFrame::DeviceRevoke(_)
            // Stores a recording and may cost the speech endpoint a synthesis.
            | ClientFrame::SpeechCreate(_)
    )
}
