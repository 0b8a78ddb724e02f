//! Messages: sending (with gateway commands, agent commands and auto-threads), history,
//! deletes and read receipts.

use iris_protocol::{
    DurableFrame, ErrorCode, Header, History, HistoryRequest, Message, MessageDeleted, MessageSend,
    MessageState, ReadReceipt, ResponseFrame, Role, Usage, VoiceTranscript,
};
use iris_store::{ChannelRow, ClientRequest, MediaRow, StoreError, StoredMessage, WriteTx};

use super::channels::create_channel_tx;
use super::client_ids;
use super::context::{resolve_lane, Context};
use crate::agent::{lane_open, BusyMarker, Submission, Work};
use crate::command::Command;
use crate::ids::{new_id, now_ms};
use crate::outbox::{self, from_stored, to_stored, Lane, Origin};
use crate::text::instant_title;
use crate::wire::{Reply, Result, WireError};

/// Largest accepted message text, in bytes.
pub(super) const MAX_TEXT: usize = 64 * 1024;

pub(super) async fn send(
    ctx: &Context,
    device_id: &str,
    header: &Header,
    send: MessageSend,
    origin: &Origin,
) -> Result<Reply> {
    check_text(&send)?;
    let client_id = client_ids::check(send.client_id.as_deref())?.map(str::to_owned);
    let mut lane = resolve_lane(ctx, header).await?;
    let digest = send_digest(&lane, &send);
    if let Some(reply) =
        client_ids::answer_prior(ctx, device_id, header, client_id.as_deref(), &digest).await?
    {
        return Ok(reply);
    }
    if !ctx.guard.take_send(device_id) {
        return Err(WireError::new(
            ErrorCode::RateLimited,
            "too many messages; slow down",
        ));
    }
    let attachments = ctx.media.resolve_refs(device_id, &send.media_refs).await?;
    let command = Command::parse(&send.text);
    let is_agent_command = command.is_none() && is_agent_command(ctx, &send.text);
    let rewind = check_edit(ctx, &lane, &send, command.is_none() && !is_agent_command).await?;
    let thread =
        (send.auto_thread && lane.thread_id.is_none() && command.is_none() && !is_agent_command)
            .then(|| new_thread(&send.text, &lane.chat_id));
    if let Some(t) = &thread {
        lane.thread_id = Some(t.chat_id.clone());
    }
    // A prompt names a chat created without a name; a command does not.
    let title = (command.is_none() && !is_agent_command)
        .then(|| crate::text::chat_title(&send.text))
        .flatten();
    // A voice note the gateway transcribes waits `queued` until its transcript is done: its
    // `agent.busy` comes after the transcription (see `agent::lane::voice`).
    let transcribe = command.is_none()
        && is_voice_note(&send.text, &attachments)
        && ctx.media.voice().transcribes()
        && !ctx.agents.names().is_empty();
    // Held until the message is handed over: stored order is handed-over order.
    let _handoff = ctx.agents.handoff(&lane).await;
    // A lane that cannot take another turn refuses the message before it is stored.
    let ticket = ctx
        .agents
        .reserve(&lane, command.is_none() && !transcribe)?;
    // A prompt waits for its turn (it runs at once in an idle lane: `agent.busy` below).
    // Without an agent (`--agent none`) no turn runs at all.
    let queued = command.is_none() && !ctx.agents.names().is_empty();
    let message = user_message(&send, &attachments, client_id.clone(), queued, transcribe);
    let message_id = message.message_id.clone();
    let media_ids: Vec<String> = attachments.iter().map(|m| m.media_id.clone()).collect();
    let stored = to_stored(&lane.chat_id, lane.thread_id.as_deref(), &message);
    let write = SendWrite {
        device: device_id.to_owned(),
        client_id,
        digest,
        thread,
        title,
        stored,
        message,
        media_ids,
        busy: ticket.marker(),
        lane: lane.clone(),
        origin: origin.clone(),
    };
    let taken = ctx
        .shared
        .store
        .write(move |tx| store_send(tx, write))
        .await?;
    if let Err(prior) = taken {
        return client_ids::answer(ctx, header, prior, send.client_id).await;
    }
    let work = match command {
        Some(command) => Work::Command(command),
        None => Work::Prompt {
            text: send.text,
            blocks: ctx.media.prompt_links(&attachments),
            rewind,
        },
    };
    let submission = Submission {
        message_id,
        origin_conn: origin.conn,
        work,
    };
    ctx.agents.submit(ticket, submission).await?;
    Ok(Reply::ViaOutbox)
}

/// A message needs text or attachments, and its text fits [`MAX_TEXT`].
fn check_text(send: &MessageSend) -> Result<()> {
    if send.text.trim().is_empty() && send.media_refs.is_empty() {
        return Err(WireError::bad_request("text is empty"));
    }
    if send.text.len() > MAX_TEXT {
        return Err(WireError::bad_request(format!(
            "text longer than {MAX_TEXT} bytes"
        )));
    }
    Ok(())
}

/// The user's message as it is stored: `queued` when a turn is to answer it, with a pending
/// transcript when the gateway transcribes its voice note.
fn user_message(
    send: &MessageSend,
    attachments: &[MediaRow],
    client_id: Option<String>,
    queued: bool,
    transcribe: bool,
) -> Message {
    Message {
        message_id: new_id("m_"),
        role: Role::User,
        text: send.text.clone(),
        reply_to: send.reply_to.clone(),
        ts: now_ms(),
        media: attachments.iter().map(crate::media::info).collect(),
        client_id,
        state: queued.then_some(MessageState::Queued),
        transcript: transcribe.then(VoiceTranscript::pending),
        ..Message::default()
    }
}

/// A voice note: no text, and one attachment recorded as a voice note.
fn is_voice_note(text: &str, attachments: &[MediaRow]) -> bool {
    text.trim().is_empty() && matches!(attachments, [one] if one.voice)
}

/// The thread `auto_thread` mints for a message in a channel.
fn new_thread(text: &str, chat_id: &str) -> ChannelRow {
    ChannelRow {
        chat_id: new_id("t_"),
        name: instant_title(text),
        kind: "thread".into(),
        parent_chat_id: Some(chat_id.to_owned()),
        is_default: false,
        name_set_by_user: false,
        awaiting_title: false,
        created_at: now_ms(),
        agent: None,
    }
}

/// What `message.send` stores, in one transaction.
struct SendWrite {
    device: String,
    client_id: Option<String>,
    digest: String,
    thread: Option<ChannelRow>,
    /// The title the message gives its chat if the chat still waits for one.
    title: Option<String>,
    stored: StoredMessage,
    message: Message,
    media_ids: Vec<String>,
    /// The lane's `agent.busy`, stored with the message when it runs at once.
    busy: BusyMarker,
    lane: Lane,
    origin: Origin,
}

/// Stores a sent message with its echo (and its thread, its `client_id`, and the lane's
/// `agent.busy` when it runs at once). Returns the prior request of its `client_id` instead
/// when there is one (then nothing was written).
fn store_send(
    tx: &mut WriteTx<'_>,
    w: SendWrite,
) -> std::result::Result<std::result::Result<(), client_ids::Prior>, StoreError> {
    let SendWrite {
        device,
        client_id,
        digest,
        thread,
        title,
        mut stored,
        mut message,
        media_ids,
        busy,
        lane,
        origin,
    } = w;
    if let Some(cid) = &client_id {
        // Checked again here: two connections may race with the same id.
        if let Some(prior) = client_ids::prior(tx, &device, cid, &digest)? {
            return Ok(Err(prior));
        }
    }
    if let Some(t) = thread {
        create_channel_tx(tx, t, true, &Origin::none())?;
    }
    // A prompt for an idle lane runs at once: its receipt says so from the echo on.
    if message.state.is_some() && busy.wanted() && !lane_open(tx, &lane)? {
        message.state = Some(MessageState::Running);
        stored.state = Some(MessageState::Running.as_str().to_owned());
    }
    tx.upsert_message(&stored)?;
    tx.attach_media(&stored.message_id, &media_ids)?;
    let frame = DurableFrame::Message(message);
    let id = Some(stored.message_id.as_str());
    let cursor = outbox::append(tx, &lane.header(), frame, id, &origin)?;
    if let Some(title) = &title {
        outbox::give_awaited_titles(tx, &lane, title)?;
    }
    if let Some(cid) = &client_id {
        let request = ClientRequest {
            digest,
            message_id: Some(stored.message_id.clone()),
            cursor: Some(cursor),
        };
        tx.insert_client_request(&device, cid, &request)?;
    }
    busy.write(tx)?;
    Ok(Ok(()))
}

/// The content a `client_id` stands for: lane, text, reply, attachments, thread wish.
fn send_digest(lane: &Lane, send: &MessageSend) -> String {
    let refs = send.media_refs.join("\n");
    let mut parts = vec![
        lane.row_id(),
        &send.text,
        send.reply_to.as_deref().unwrap_or(""),
        &refs,
        if send.auto_thread { "thread" } else { "" },
    ];
    // Only an edit names what it edits: the digests of other sends stay as they were.
    if let Some(edit_of) = &send.edit_of {
        parts.extend(["edit_of", edit_of]);
    }
    client_ids::digest("message.send", &parts)
}

/// An edit (`edit_of`) takes back the lane's newest turn: refused for a command, an
/// auto-thread, a message that is not a user's prompt of this lane, and where the lane cannot
/// take that turn back now.
async fn check_edit(
    ctx: &Context,
    lane: &Lane,
    send: &MessageSend,
    prompt: bool,
) -> Result<Option<String>> {
    let Some(edit_of) = &send.edit_of else {
        return Ok(None);
    };
    if !prompt || send.auto_thread {
        return Err(WireError::bad_request(
            "only a message for the agent can be an edit, in the same chat",
        ));
    }
    let edited = ctx
        .shared
        .store
        .get_message(edit_of)
        .await?
        .filter(|m| m.chat_id == lane.chat_id && m.thread_id == lane.thread_id)
        .ok_or_else(|| WireError::not_found("edit_of unknown in this lane"))?;
    if from_stored(&edited).role != Role::User {
        return Err(WireError::bad_request("only a user message can be edited"));
    }
    if !ctx.agents.can_rewind(lane, edit_of) {
        return Err(crate::agent::AgentError::NoCheckpoint.into());
    }
    Ok(Some(edit_of.clone()))
}

/// Whether the text starts with a command the agent advertised (forwarded to it as a prompt).
fn is_agent_command(ctx: &Context, text: &str) -> bool {
    let Some(rest) = text.trim_start().strip_prefix('/') else {
        return false;
    };
    let name = rest.split(char::is_whitespace).next().unwrap_or("");
    !name.is_empty() && ctx.agents.has_command(name)
}

pub(super) async fn history(ctx: &Context, header: &Header, req: HistoryRequest) -> Result<Reply> {
    let limit = match req.limit {
        None => 50,
        Some(n) if n < 1 => return Err(WireError::bad_request("limit must be at least 1")),
        Some(n) => n.min(200) as usize,
    };
    let lane = resolve_lane(ctx, header).await?;
    let page = ctx
        .shared
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
    let mut messages: Vec<Message> = page.messages.iter().map(from_stored).collect();
    // Stored, `runtime.rewind` says the turn could be taken back when it ended; a page says so
    // only of the lane's newest turn while its checkpoint is kept (never after a restart).
    for m in &mut messages {
        let prompt = m.reply_to.as_deref();
        if let Some(runtime) = m.runtime.as_mut().filter(|r| r.rewind) {
            runtime.rewind = prompt.is_some_and(|p| ctx.agents.can_rewind(&lane, p));
        }
    }
    let oldest_message_id = messages.first().map(|m| m.message_id.clone());
    let frame = ResponseFrame::History(History {
        messages,
        has_more: page.has_more,
        oldest_message_id,
    });
    Ok(Reply::Direct(frame, lane.header()))
}

/// `usage`: the sums over the answers of the lane the envelope names (an unknown lane is
/// `not_found`, as for `history`).
pub(super) async fn usage(ctx: &Context, header: &Header) -> Result<Reply> {
    let lane = resolve_lane(ctx, header).await?;
    let sums = ctx
        .shared
        .store
        .lane_usage(&lane.chat_id, lane.thread_id.as_deref())
        .await?;
    let frame = ResponseFrame::Usage(Usage {
        answers: sums.answers,
        tokens: sums.tokens,
        cost: sums.cost,
    });
    Ok(Reply::Direct(frame, lane.header()))
}

pub(super) async fn delete(
    ctx: &Context,
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
    let lane = resolve_lane(ctx, header).await?;
    let origin = origin.clone();
    let outcome = ctx
        .shared
        .store
        .write(move |tx| {
            // Only messages of the lane the request names: an id of another lane is refused, and
            // nothing is deleted.
            for id in &ids {
                if let Some(m) = tx.get_message(id)? {
                    if m.chat_id != lane.chat_id || m.thread_id != lane.thread_id {
                        return Ok(Err(id.clone()));
                    }
                }
            }
            tx.delete_messages(&ids)?;
            let unused = tx.detach_media(&ids)?;
            // Idempotent: ids already gone are announced too, so every cache drops them.
            let frame = DurableFrame::MessageDeleted(MessageDeleted { message_ids: ids });
            outbox::append(tx, &lane.header(), frame, None, &origin)?;
            Ok(Ok(unused))
        })
        .await?;
    let unused = outcome.map_err(|id| {
        WireError::not_found(format!("message {id} is not in this chat or thread"))
    })?;
    // Files go before this request is done, so a device's next request sees them gone.
    ctx.media.remove_unused(unused).await;
    Ok(Reply::ViaOutbox)
}

pub(super) async fn read_receipt(
    ctx: &Context,
    device_id: &str,
    header: &Header,
    req: ReadReceipt,
    origin: &Origin,
) -> Result<Reply> {
    let Some(message) = ctx.shared.store.get_message(&req.message_id).await? else {
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
    ctx.shared
        .store
        .write(move |tx| {
            tx.mark_read(&message.chat_id, &message.message_id, &device, now_ms())?;
            let lane = Header::lane(message.chat_id.clone(), message.thread_id.clone());
            let frame = DurableFrame::ReadBy {
                message_id: message.message_id.clone(),
                device_id: device.clone(),
            };
            outbox::append(tx, &lane, frame, Some(&message.message_id), &origin)
        })
        .await?;
    Ok(Reply::ViaOutbox)
}
