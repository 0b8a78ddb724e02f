//! Control of the agent's turns: stop, steer, retry, answering pickers, and the command catalog.

use iris_protocol::{
    Ack, AgentSteer, Header, MessageRetry, MessageState, PickerSelect, ResponseFrame, Role,
};

use super::client_ids;
use super::context::{resolve_lane, Context};
use crate::agent::set_receipt;
use crate::command::Command;
use crate::outbox::{from_stored, Origin};
use crate::wire::{Reply, Result, WireError};

/// Largest accepted steering text, in bytes (as for a message).
const MAX_TEXT: usize = super::messages::MAX_TEXT;

pub(super) async fn stop(ctx: &Context, header: &Header) -> Result<Reply> {
    let lane = resolve_lane(ctx, header).await?;
    ctx.agents.stop(&lane).await?;
    Ok(Reply::ack(header))
}

pub(super) async fn steer(
    ctx: &Context,
    device: &str,
    header: &Header,
    req: AgentSteer,
) -> Result<Reply> {
    let text = req.text;
    if text.len() > MAX_TEXT {
        return Err(WireError::bad_request(format!(
            "text longer than {MAX_TEXT} bytes"
        )));
    }
    let client_id = client_ids::check(req.client_id.as_deref())?;
    let lane = resolve_lane(ctx, header).await?;
    let digest = client_ids::digest("agent.steer", &[lane.row_id(), &text]);
    if let Some(reply) = client_ids::answer_prior(ctx, device, header, client_id, &digest).await? {
        return Ok(reply);
    }
    let taken = client_ids::take(ctx, device, client_id, digest).await?;
    let result = match ctx.agents.steer(&lane, text).await {
        Ok(()) => Ok(Reply::ack(header)),
        Err(e) => Err(WireError::from(e)),
    };
    if result.is_err() {
        // Refused: the same id may be sent again.
        client_ids::release(ctx, device, taken).await?;
    }
    result
}

pub(super) async fn picker_select(ctx: &Context, device: &str, req: PickerSelect) -> Result<Reply> {
    let lane = ctx
        .agents
        .answer_picker(req.picker_id, req.value, Some(device.to_owned()))
        .await?;
    Ok(Reply::Direct(ResponseFrame::Ack(Ack::ok()), lane.header()))
}

/// `message.retry`: the lane's user message runs again as a new turn, with its attachments
/// (those not expired since). Refused for an unknown id or one of another lane (`not_found`), a
/// message that is not a user's prompt (`bad_request`), and while the lane runs a turn
/// (`rate_limited`: retry when it has ended).
pub(super) async fn retry(
    ctx: &Context,
    header: &Header,
    req: MessageRetry,
    device: &str,
    origin: &Origin,
) -> Result<Reply> {
    let client_id = client_ids::check(req.client_id.as_deref())?;
    let lane = resolve_lane(ctx, header).await?;
    let mut parts = vec![lane.row_id(), req.message_id.as_str()];
    if req.rewind {
        parts.push("rewind");
    }
    let digest = client_ids::digest("message.retry", &parts);
    if let Some(reply) = client_ids::answer_prior(ctx, device, header, client_id, &digest).await? {
        return Ok(reply);
    }
    let row = ctx
        .shared
        .store
        .get_message(&req.message_id)
        .await?
        .filter(|m| m.chat_id == lane.chat_id && m.thread_id == lane.thread_id)
        .ok_or_else(|| WireError::not_found("message_id unknown in this lane"))?;
    let message = from_stored(&row);
    if message.role != Role::User {
        return Err(WireError::bad_request("only a user message can be retried"));
    }
    if Command::parse(&message.text).is_some() {
        return Err(WireError::bad_request(
            "a gateway command cannot be retried",
        ));
    }
    if req.rewind && !ctx.agents.can_rewind(&lane, &message.message_id) {
        return Err(crate::agent::AgentError::NoCheckpoint.into());
    }
    let mut attachments = Vec::new();
    for m in &message.media {
        if let Some(row) = ctx.media.get(&m.media_id).await? {
            attachments.push(row);
        }
    }
    // The message waits for its turn again; its receipt says so from here.
    let (id, was) = (message.message_id.clone(), message.state);
    let queued = lane.clone();
    let taken = client_ids::take_with(
        ctx,
        device,
        client_id,
        digest,
        Some(id.clone()),
        move |tx| set_receipt(tx, &queued, &id, MessageState::Queued).map(|_| ()),
    )
    .await?;
    let blocks = ctx.media.prompt_links(&attachments);
    let result = match ctx
        .agents
        .retry(
            &lane,
            message.message_id,
            message.text,
            blocks,
            req.rewind,
            origin.conn,
        )
        .await
    {
        Ok(()) => Ok(Reply::ack(header)),
        Err(e) => Err(WireError::from(e)),
    };
    if result.is_err() {
        // Refused: the receipt goes back to what it was, and the same id may be sent again.
        let id = row.message_id.clone();
        let back = lane.clone();
        ctx.shared
            .store
            .write(move |tx| match was {
                Some(state) => set_receipt(tx, &back, &id, state).map(|_| ()),
                None => Ok(()),
            })
            .await?;
        client_ids::release(ctx, device, taken).await?;
    }
    result
}

/// `commands.catalog`: the gateway's commands and those of the agent of the lane the request
/// names (`chat_id`, `thread_id`), else of the default channel.
pub(super) async fn catalog(ctx: &Context, header: &Header) -> Result<Reply> {
    let agent = lane_agent(ctx, header).await?;
    let frame = crate::command::catalog(ctx.agents.catalog(agent.as_deref()));
    Ok(Reply::Direct(frame, Header::default()))
}

/// `commands.complete`: the commands whose name or alias starts with the prefix, for the lane
/// the request names, as `commands.catalog`.
pub(super) async fn complete(ctx: &Context, header: &Header, prefix: &str) -> Result<Reply> {
    let agent = lane_agent(ctx, header).await?;
    let frame = crate::command::complete(ctx.agents.catalog(agent.as_deref()), prefix);
    Ok(Reply::Direct(frame, Header::default()))
}

/// The agent of the lane a request names, else of the default channel (`None`: the default
/// agent). A lane that does not exist is `not_found`.
async fn lane_agent(ctx: &Context, header: &Header) -> Result<Option<String>> {
    let store = &ctx.shared.store;
    let row = match header.thread_id.as_deref().or(header.chat_id.as_deref()) {
        Some(id) => Some(
            store
                .get_channel(id)
                .await?
                .ok_or_else(|| WireError::not_found("no such chat"))?,
        ),
        None => store
            .list_channels()
            .await?
            .into_iter()
            .find(|c| c.is_default),
    };
    Ok(row.and_then(|r| r.agent))
}
