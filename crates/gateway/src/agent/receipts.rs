//! Receipts: where each user message that asks the agent for a turn stands
//! ([`MessageState`]: queued, running, answered, stopped, failed, interrupted).
//!
//! The state lives in the message's row and every change is announced by a durable
//! `message.state` frame, filed under the message, in the transaction that made it. The lane
//! never sets a state itself: [`super::recovery::track`] derives each change from the frames a
//! lane appends (a turn's first `agent.busy`, `message.start` and the final answer with their
//! `reply_to`, and `agent.idle`), in their own transaction. The messages left `queued` are the
//! gateway's durable queue ([`super::requeue`]).

use iris_protocol::{DurableFrame, MessageState, MessageStateChanged, Role, TurnEnd};
use iris_store::{StoreError, StoredMessage, WriteTx};

use crate::outbox::{self, from_stored, Lane, Origin};

/// Sets a message's state and announces it, when it changed. Returns whether it did.
pub fn set(
    tx: &mut WriteTx<'_>,
    lane: &Lane,
    message_id: &str,
    state: MessageState,
) -> Result<bool, StoreError> {
    let before = tx.set_message_state(message_id, state.as_str())?;
    match before {
        None => Ok(false),
        Some(s) if s.as_deref() == Some(state.as_str()) => Ok(false),
        Some(_) => {
            let frame = DurableFrame::MessageState(MessageStateChanged {
                message_id: message_id.to_owned(),
                state,
            });
            outbox::append(tx, &lane.header(), frame, Some(message_id), &Origin::none())?;
            Ok(true)
        }
    }
}

/// The state a message has now (none for a message without one, or no message).
pub fn get(tx: &WriteTx<'_>, message_id: &str) -> Result<Option<MessageState>, StoreError> {
    Ok(tx
        .get_message(message_id)?
        .and_then(|m| m.state)
        .and_then(|s| MessageState::parse(&s)))
}

/// The lane's messages waiting for their turn, oldest first.
pub fn queued(tx: &WriteTx<'_>, lane: &Lane) -> Result<Vec<StoredMessage>, StoreError> {
    Ok(tx
        .messages_in_state(MessageState::Queued.as_str())?
        .into_iter()
        .filter(|m| m.chat_id == lane.chat_id && m.thread_id == lane.thread_id)
        .collect())
}

/// A turn of the lane begins: the oldest message waiting in it is the one the lane runs now
/// (the lane takes its prompts in order); without one, the message stored `running` with this
/// turn's `agent.busy` (an idle lane). Returns it, now `running`.
pub fn turn_begins(tx: &mut WriteTx<'_>, lane: &Lane) -> Result<Option<String>, StoreError> {
    if let Some(first) = queued(tx, lane)?.into_iter().next() {
        set(tx, lane, &first.message_id, MessageState::Running)?;
        return Ok(Some(first.message_id));
    }
    // A message sent to an idle lane is stored `running`, with this `agent.busy`.
    Ok(tx
        .messages_in_state(MessageState::Running.as_str())?
        .into_iter()
        .rev()
        .find(|m| m.chat_id == lane.chat_id && m.thread_id == lane.thread_id)
        .map(|m| m.message_id))
}

/// The answer of the lane's turn began, answering `reply_to`. `guessed` is the message taken
/// as running when the turn began; returns the one that runs.
pub fn answer_begins(
    tx: &mut WriteTx<'_>,
    lane: &Lane,
    reply_to: &str,
    guessed: Option<&str>,
) -> Result<Option<String>, StoreError> {
    if guessed != Some(reply_to) {
        if let Some(g) = guessed {
            settle_wrong_guess(tx, lane, g, Some(reply_to))?;
        }
        if get(tx, reply_to)? == Some(MessageState::Queued) {
            set(tx, lane, reply_to, MessageState::Running)?;
        }
    }
    Ok(Some(reply_to.to_owned()))
}

/// The turn's final answer was written: the message it answers takes the state of its end.
/// `answer_id` is the answer (its row is written in this transaction already).
pub fn answered(
    tx: &mut WriteTx<'_>,
    lane: &Lane,
    answer_id: &str,
    ended: Option<TurnEnd>,
    guessed: Option<&str>,
) -> Result<(), StoreError> {
    let reply_to = tx
        .get_message(answer_id)?
        .map(|m| from_stored(&m))
        .filter(|m| matches!(m.role, Role::Assistant))
        .and_then(|m| m.reply_to);
    if let Some(g) = guessed.filter(|g| Some(*g) != reply_to.as_deref()) {
        settle_wrong_guess(tx, lane, g, reply_to.as_deref())?;
    }
    let Some(reply_to) = reply_to else {
        return Ok(());
    };
    if get(tx, &reply_to)?.is_some_and(MessageState::is_open) {
        set(tx, lane, &reply_to, end_state(ended))?;
    }
    Ok(())
}

/// The lane's turn ended (`agent.idle`) and the message taken as running got no answer: the turn
/// failed before the agent said anything (or the agent was not available).
pub fn turn_ends(tx: &mut WriteTx<'_>, lane: &Lane, running: &str) -> Result<(), StoreError> {
    if get(tx, running)? == Some(MessageState::Running) {
        set(tx, lane, running, MessageState::Failed)?;
    }
    Ok(())
}

/// The state of a message whose turn ended so.
pub fn end_state(ended: Option<TurnEnd>) -> MessageState {
    match ended {
        None | Some(TurnEnd::Completed) => MessageState::Answered,
        Some(TurnEnd::Stopped) => MessageState::Stopped,
        Some(TurnEnd::CutOff) => MessageState::Interrupted,
        Some(TurnEnd::AgentFailed) => MessageState::Failed,
    }
}

/// The message taken as running when a turn began was not the one the turn answered (a turn of
/// steering text, or a prompt the lane could not run): one sent before the answered one was
/// skipped (`failed`), a later one still waits (`queued`).
fn settle_wrong_guess(
    tx: &mut WriteTx<'_>,
    lane: &Lane,
    guessed: &str,
    answered: Option<&str>,
) -> Result<(), StoreError> {
    let Some(g) = tx.get_message(guessed)? else {
        return Ok(());
    };
    if g.state.as_deref() != Some(MessageState::Running.as_str()) {
        return Ok(());
    }
    let answered_ts = match answered {
        Some(a) => tx.get_message(a)?.map(|m| m.ts),
        None => None,
    };
    let state = match answered_ts {
        Some(ts) if g.ts < ts => MessageState::Failed,
        _ => MessageState::Queued,
    };
    set(tx, lane, guessed, state).map(|_| ())
}
