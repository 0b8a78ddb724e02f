//! Taking a turn back: regenerate the newest answer, or edit the message it answers and send it
//! again. ACP has no way to cut a session's history, so the lane keeps checkpoints instead: once
//! a turn has ended and the lane is idle, it forks its session (`session/fork`, where the agent
//! advertises `sessionCapabilities.fork`) and keeps the copy aside. When the next turn starts,
//! that copy becomes the checkpoint *before* the turn's user message. Regenerating or editing that
//! turn moves the lane to a fork of the checkpoint (a fork again, so the checkpoint serves any
//! number of tries) and runs the message, or its edit, there; the answers it replaces, and an
//! edited message, are marked `replaced` and stay in the transcript.
//!
//! Before a session's first turn the checkpoint is an empty session: taking the first turn back
//! opens a new one. Only the lane's newest turn can be taken back: a checkpoint is dropped (and
//! closed on the agent, where it can close sessions) as soon as a later turn starts. `/new` and a
//! move to another agent drop them too. Checkpoints live in the lane's memory: after a restart
//! of the gateway the newest turn can no longer be taken back.
//!
//! Cost: one fork per turn, made while the lane is idle (a message queued behind the turn waits
//! for it; with Hermes about as long as opening a session). An agent that cannot close sessions
//! (Hermes 0.19) keeps every checkpoint until it restarts.

use iris_protocol::MessageState;

use super::branch::Checkpoint;
use super::parts::LaneParts;
use crate::agent::error::AgentError;
use crate::agent::receipts;

/// A turn for `message_id` starts in the lane's session (`fresh`: an empty one). The
/// checkpoint made after the last turn becomes this turn's; returns whether the turn can be
/// taken back.
pub(super) async fn begin(parts: &mut LaneParts, message_id: &str, fresh: bool) -> bool {
    parts.rewind.due = false;
    parts.env.set_rewind(parts.lane(), None);
    let next = parts.rewind.next.take();
    let session = match (fresh, next) {
        (true, stale) => {
            close_checkpoints(parts, stale, None).await;
            None
        }
        (false, Some(id)) => Some(id),
        (false, None) => {
            drop_checkpoints(parts).await;
            return false;
        }
    };
    let old = parts.rewind.prev.take().and_then(|c| c.session);
    close_checkpoints(parts, old, None).await;
    parts.rewind.prev = Some(Checkpoint {
        session,
        before: message_id.to_owned(),
        answers: Vec::new(),
    });
    true
}

/// The turn for `message_id` ended with `answer` (none when it said nothing). The next
/// checkpoint is made once the lane is idle ([`take_checkpoint`]).
pub(super) fn ended(parts: &mut LaneParts, message_id: &str, answer: Option<&str>) {
    if let Some(prev) = parts
        .rewind
        .prev
        .as_mut()
        .filter(|c| c.before == message_id)
    {
        prev.answers.extend(answer.map(str::to_owned));
        parts.rewind.due = true;
        // Devices learn of the turn's end next; the turn can be taken back from then on.
        parts.env.set_rewind(parts.out.lane(), Some(message_id));
    }
}

/// Makes the checkpoint of the next turn, when the newest one ended since the last: a fork
/// of the session as it stands. Called while the lane is idle, before its next job.
pub(super) async fn take_checkpoint(parts: &mut LaneParts, rewinds_next: bool) {
    if !std::mem::take(&mut parts.rewind.due) || rewinds_next {
        return;
    }
    let forked = parts.session.fork_current(&mut parts.events).await;
    let stale = std::mem::replace(&mut parts.rewind.next, forked);
    close_checkpoints(parts, stale, None).await;
}

/// Whether a regenerate or an edit of the turn of `before` can run now.
pub(super) fn can_rewind(parts: &LaneParts, before: &str) -> bool {
    parts
        .rewind
        .prev
        .as_ref()
        .is_some_and(|c| c.before == before)
}

/// Moves the lane back to the checkpoint before `before`, for the turn of `message_id`
/// (the same message for a regenerate, its edit otherwise): the session becomes a fork of
/// the checkpoint, and the answers it replaces (and an edited message) are marked
/// `replaced`.
pub(super) async fn rewind_to(
    parts: &mut LaneParts,
    before: &str,
    message_id: &str,
) -> Result<(), AgentError> {
    if !can_rewind(parts, before) {
        return Err(AgentError::NoCheckpoint);
    }
    parts.env.set_rewind(parts.lane(), None);
    parts.rewind.due = false;
    let stale = parts.rewind.next.take();
    close_checkpoints(parts, stale, None).await;
    let from = parts.rewind.prev.as_ref().and_then(|c| c.session.clone());
    parts
        .session
        .rewind_to(from.as_deref(), &mut parts.events)
        .await?;
    let Some(prev) = parts.rewind.prev.as_mut() else {
        return Err(AgentError::NoCheckpoint);
    };
    let mut replaced = std::mem::take(&mut prev.answers);
    if before != message_id {
        replaced.push(before.to_owned());
    }
    prev.before = message_id.to_owned();
    if let Some(s) = parts.session.current_mut() {
        s.fresh = false;
    }
    let lane = parts.lane().clone();
    let marked = parts
        .env
        .shared
        .store
        .write(move |tx| {
            for id in &replaced {
                receipts::set(tx, &lane, id, MessageState::Replaced)?;
            }
            Ok(())
        })
        .await;
    if let Err(e) = marked {
        tracing::warn!(error = %e, "could not mark the replaced answers");
    }
    Ok(())
}

/// Forgets every checkpoint (`/new`, another agent, a turn that cannot be taken back).
pub(super) async fn drop_checkpoints(parts: &mut LaneParts) {
    parts.env.set_rewind(parts.lane(), None);
    parts.rewind.due = false;
    let next = parts.rewind.next.take();
    let prev = parts.rewind.prev.take().and_then(|c| c.session);
    close_checkpoints(parts, next, prev).await;
}

async fn close_checkpoints(parts: &LaneParts, a: Option<String>, b: Option<String>) {
    for id in a.iter().chain(b.iter()) {
        parts.session.close_checkpoint(id).await;
    }
}
