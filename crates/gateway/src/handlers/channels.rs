//! Channels and threads: create, rename, make default, choose the agent, delete (with every
//! trace of them).

use iris_protocol::{
    ChannelCreate, ChannelCreated, ChannelDeleted, ChannelInfo, ChannelRenamed, DurableFrame,
    ErrorCode, Header,
};
use std::collections::HashMap;

use iris_store::{ChannelActivity, ChannelRow, StoreError};

use super::context::Context;
use crate::ids::{new_id, now_ms};
use crate::outbox::{self, Origin};
use crate::state::Shared;
use crate::wire::{Reply, Result, WireError};

/// Checks a channel name: format characters (zero-width, bidi overrides) removed, trimmed,
/// 1–100 characters, no control characters.
fn clean_name(name: &str) -> Result<String> {
    let name = crate::text::without_format(name);
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 100 || name.chars().any(char::is_control) {
        return Err(WireError::bad_request(
            "name must be 1-100 characters without control characters",
        ));
    }
    Ok(name.to_owned())
}

/// Refuses `name` for a chat beside `parent` (a channel among the channels, a thread among its
/// channel's threads) when another one there, not `except`, has it already, letter case and
/// invisible characters aside: two chats named "Default" and "default" cannot be told apart.
/// Placeholders waiting for their title do not count.
fn name_free(
    tx: &mut iris_store::WriteTx<'_>,
    name: &str,
    parent: Option<&str>,
    except: Option<&str>,
) -> std::result::Result<(), StoreError> {
    let wanted = name.to_lowercase();
    let taken = tx.list_channels()?.into_iter().find(|c| {
        c.parent_chat_id.as_deref() == parent
            && Some(c.chat_id.as_str()) != except
            && !c.awaiting_title
            && crate::text::without_format(&c.name).trim().to_lowercase() == wanted
    });
    match taken {
        Some(c) => Err(StoreError::Invalid(format!(
            "there is already a chat named {:?}; choose another name",
            c.name
        ))),
        None => Ok(()),
    }
}

pub(super) async fn create(ctx: &Context, req: ChannelCreate, origin: &Origin) -> Result<Reply> {
    // No name (absent, empty or only spaces): a placeholder, until the first message names it.
    let awaiting_title = req.name.trim().is_empty();
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
    let agent = match (kind, req.agent.as_deref().map(str::trim)) {
        ("thread", Some(_)) => {
            return Err(WireError::bad_request(
                "a thread uses its channel's agent; agent is for channels",
            ))
        }
        (_, Some(name)) if !ctx.agents.knows(name) => {
            return Err(WireError::not_found(format!(
                "there is no agent {name:?}; this gateway has: {}",
                ctx.agents.names().join(", ")
            )))
        }
        (_, Some(name)) => Some(name.to_owned()),
        ("channel", None) if !ctx.agents.names().is_empty() => {
            Some(ctx.agents.default_agent().to_owned())
        }
        _ => None,
    };
    let name = match (awaiting_title, kind) {
        (false, _) => clean_name(&req.name)?,
        (true, "thread") => crate::text::NEW_THREAD.to_owned(),
        (true, _) => crate::text::NEW_CHAT.to_owned(),
    };
    let row = ChannelRow {
        chat_id: new_id(if kind == "thread" { "t_" } else { "c_" }),
        name,
        kind: kind.to_owned(),
        parent_chat_id: req.parent_chat_id,
        is_default: false,
        name_set_by_user: !awaiting_title,
        awaiting_title,
        created_at: now_ms(),
        agent,
    };
    let origin = origin.clone();
    let cap = ctx.shared.config.limits.max_channels;
    let created = ctx
        .shared
        .store
        .write(move |tx| {
            if tx.list_channels()?.len() >= cap {
                return Ok(false);
            }
            if !row.awaiting_title {
                name_free(tx, &row.name, row.parent_chat_id.as_deref(), None)?;
            }
            create_channel_tx(tx, row, false, &origin).map(|_| true)
        })
        .await?;
    if !created {
        return Err(WireError::new(
            ErrorCode::RateLimited,
            format!("channel quota: at most {cap} channels and threads; delete some first"),
        ));
    }
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
    // A thread's agent is its channel's, as stored.
    let agent = tx.get_channel(&row.chat_id)?.and_then(|r| r.agent);
    let frame = DurableFrame::ChannelCreated(ChannelCreated {
        chat_id: row.chat_id.clone(),
        name: row.name.clone(),
        kind: row.kind.clone(),
        parent_chat_id: row.parent_chat_id.clone(),
        auto,
        agent,
        last_activity_at: Some(row.created_at),
    });
    announce(tx, frame, &row, origin)
}

/// Appends a `channel.*` frame about `row`, filed under the channel it describes.
fn announce(
    tx: &mut iris_store::WriteTx<'_>,
    frame: DurableFrame,
    row: &ChannelRow,
    origin: &Origin,
) -> std::result::Result<u64, StoreError> {
    outbox::append_filed(
        tx,
        &Header::default(),
        frame,
        outbox::filed_under(row),
        None,
        origin,
    )
}

fn required_chat(header: &Header) -> Result<String> {
    header
        .chat_id
        .clone()
        .ok_or_else(|| WireError::bad_request("chat_id is required"))
}

pub(super) async fn rename(
    ctx: &Context,
    header: &Header,
    name: String,
    origin: &Origin,
) -> Result<Reply> {
    let chat_id = required_chat(header)?;
    let name = clean_name(&name)?;
    let origin = origin.clone();
    ctx.shared
        .store
        .write(move |tx| {
            let current = tx.get_channel(&chat_id)?.ok_or(StoreError::NotFound)?;
            name_free(tx, &name, current.parent_chat_id.as_deref(), Some(&chat_id))?;
            if !tx.rename_channel(&chat_id, &name, true)? {
                return Err(StoreError::NotFound);
            }
            let row = tx.get_channel(&chat_id)?.ok_or(StoreError::NotFound)?;
            let frame = DurableFrame::ChannelRenamed(ChannelRenamed {
                chat_id: chat_id.clone(),
                name,
            });
            announce(tx, frame, &row, &origin)
        })
        .await?;
    Ok(Reply::ViaOutbox)
}

pub(super) async fn set_default(ctx: &Context, header: &Header, origin: &Origin) -> Result<Reply> {
    let chat_id = required_chat(header)?;
    let origin = origin.clone();
    ctx.shared
        .store
        .write(move |tx| {
            tx.set_default(&chat_id)?;
            let list = outbox::channel_list(tx)?;
            outbox::append(tx, &Header::default(), list, None, &origin)
        })
        .await?;
    Ok(Reply::ViaOutbox)
}

/// `channel.set_agent`: the channel (not a thread) talks to another agent from its next
/// message on, in fresh sessions; a system message says so and `channel.list` answers.
pub(super) async fn set_agent(
    ctx: &Context,
    header: &Header,
    agent: &str,
    origin: &Origin,
) -> Result<Reply> {
    let chat_id = required_chat(header)?;
    ctx.agents.switch_channel(&chat_id, agent, origin).await?;
    Ok(Reply::ViaOutbox)
}

pub(super) async fn delete(ctx: &Context, header: &Header, origin: &Origin) -> Result<Reply> {
    let chat_id = required_chat(header)?;
    // The chat "default" always exists, even after the default flag moved to another channel.
    if chat_id == "default" {
        return Err(WireError::bad_request("the default chat cannot be deleted"));
    }
    let origin = origin.clone();
    let target = chat_id.clone();
    let silenced = ctx
        .agents
        .silence_lanes(|l| l.chat_id == target || l.thread_id.as_deref() == Some(target.as_str()));
    let result = ctx
        .shared
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
            let frame = DurableFrame::ChannelDeleted(ChannelDeleted {
                chat_id: chat_id.clone(),
                thread_ids,
            });
            outbox::append(tx, &Header::default(), frame, None, &origin)?;
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
    ctx.media.remove_unused(unused).await;
    // The deleted lanes' actors end; a turn still running there is cancelled.
    ctx.agents
        .delete_lanes(|l| {
            gone.contains(&l.chat_id) || l.thread_id.as_ref().is_some_and(|t| gone.contains(t))
        })
        .await;
    Ok(Reply::ViaOutbox)
}

/// The channel directory as sent in `hello.ack`: every entry with its latest activity and the
/// preview of its newest user or assistant message (one query for all of them).
pub async fn channel_directory(
    shared: &Shared,
) -> std::result::Result<Vec<ChannelInfo>, StoreError> {
    let rows = shared.store.channel_directory().await?;
    let activity: HashMap<String, ChannelActivity> = shared
        .store
        .channel_activity()
        .await?
        .into_iter()
        .map(|a| (a.chat_id.clone(), a))
        .collect();
    Ok(rows
        .iter()
        .map(|row| {
            let mut info = channel_info(row);
            let seen = activity.get(&row.chat_id);
            info.last_activity_at = Some(seen.map_or(row.created_at, |a| a.last_activity_at));
            info.preview = seen
                .and_then(|a| a.latest_text.as_deref())
                .and_then(crate::text::preview);
            if info.preview.is_some() {
                info.preview_message_id = seen.and_then(|a| a.latest_id.clone());
            }
            info
        })
        .collect())
}

pub(crate) fn channel_info(row: &ChannelRow) -> ChannelInfo {
    outbox::channel_info(row)
}
