//! Taking a turn back: regenerate the newest answer, or edit the message it answers and send it
//! again. ACP has no way to cut a session's history, so each turn has a checkpoint, the place
//! a take-back starts again from ([`Base`]):
//!
//! - **A fork** (`session/fork`), where the agent forks sessions *and closes them*
//!   (`sessionCapabilities.fork` and `close`): once a turn has ended and the lane is idle, with
//!   no message waiting, the lane forks its session and keeps the copy aside; when the next turn
//!   starts, that copy becomes its checkpoint. Forks are made one at a time across the gateway
//!   (a lane that finds another fork running makes none), at most two per chat (the newest
//!   turn's and the next one's), and closed as soon as they are stale.
//! - **A replay** everywhere else: an agent that cannot close sessions (Hermes 0.19 keeps every
//!   session in its memory until it restarts, so it is never forked for this), an agent that
//!   cannot fork, a turn after which the lane made no fork. Taking the turn back opens a new
//!   session whose first prompt carries the conversation before the message as text
//!   (`super::replay`). Nothing is paid per turn; the take-back costs a session and a longer
//!   first prompt, and the agent sees what was said, not what its tools returned then.
//! - **An empty session** before a session's first turn.
//!
//! Regenerating or editing a turn moves the lane to a new session from its checkpoint (a fork
//! of the fork, so the checkpoint serves any number of tries) and runs the message, or its edit,
//! there; the answers it replaces, and an edited message, are marked `replaced` and stay in the
//! transcript. Only the lane's newest turn can be taken back: a checkpoint is dropped as soon
//! as a later turn starts. `/new` and a move to another agent drop them too. Checkpoints live
//! in the lane's memory: after a restart of the gateway the newest turn can no longer be taken
//! back.

use iris_protocol::MessageState;

use super::branch::{Base, Checkpoint};
use super::parts::LaneParts;
use super::replay;
use crate::agent::error::AgentError;
use crate::agent::receipts;

/// A turn for `message_id` starts in the lane's session (`fresh`: an empty one). The fork
/// made after the last turn, if any, becomes this turn's checkpoint.
pub(super) async fn begin(parts: &mut LaneParts, message_id: &str, fresh: bool) {
    parts.rewind.due = false;
    parts.env.set_rewind(parts.lane(), None);
    let next = parts.rewind.next.take();
    let base = match (fresh, next) {
        (true, stale) => {
            close_checkpoints(parts, stale, None).await;
            Base::Empty
        }
        (false, Some(id)) => Base::Fork(id),
        (false, None) => Base::Replay,
    };
    let old = parts
        .rewind
        .prev
        .take()
        .and_then(|c| c.base.session().map(str::to_owned));
    close_checkpoints(parts, old, None).await;
    parts.rewind.prev = Some(Checkpoint {
        base,
        before: message_id.to_owned(),
        answers: Vec::new(),
    });
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
/// of the session as it stands, where the agent can fork and close sessions. Called while the
/// lane is idle, before its next job; none while a message waits (`waiting`) or another lane's
/// fork runs (that turn is then taken back by a replay).
pub(super) async fn take_checkpoint(parts: &mut LaneParts, waiting: bool) {
    if !std::mem::take(&mut parts.rewind.due) || waiting {
        return;
    }
    if !parts.session.can_checkpoint().await {
        return;
    }
    let Ok(permit) = parts.env.forks.try_acquire() else {
        return;
    };
    let (forked, late) = parts.session.fork_current(&mut parts.events).await;
    drop(permit);
    let stale = std::mem::replace(&mut parts.rewind.next, forked);
    close_checkpoints(parts, stale, None).await;
    for ev in late.into_events() {
        parts.idle_event(ev).await;
    }
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
    let base = parts.rewind.prev.as_ref().map(|c| c.base.clone());
    let prelude = match base {
        Some(Base::Replay) => replay::prelude(parts, before).await,
        _ => Ok(None),
    };
    let from = base.as_ref().and_then(Base::session);
    parts.session.rewind_to(from, &mut parts.events).await?;
    parts.rewind.prelude = match prelude {
        Ok(text) => text,
        Err(why) => {
            parts.out.system(why).await;
            None
        }
    };
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
    parts.rewind.prelude = None;
    let prev = parts
        .rewind
        .prev
        .take()
        .and_then(|c| c.base.session().map(str::to_owned));
    close_checkpoints(parts, next, prev).await;
}

async fn close_checkpoints(parts: &LaneParts, a: Option<String>, b: Option<String>) {
    for id in a.iter().chain(b.iter()) {
        parts.session.close_checkpoint(id).await;
    }
}
