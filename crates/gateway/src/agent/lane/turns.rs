//! A user's turn: the prompt with its attachments built, a [`TurnRun`] driven to its end, and
//! the answer finished with what the lane says about how it ended; steering that runs as a turn
//! of its own. Functions over the lane's parts, its mailbox and its queue.

use std::sync::Arc;
use std::time::Instant;

use iris_acp::ContentBlock;
use iris_protocol::{BusyReason, Role, MAX_TURN_FILES, MAX_TURN_TEXT, MAX_TURN_TOOLS};

use super::super::error::AgentError;
use super::super::host::Instance;
use super::super::turn::{Ending, TurnConfig, TurnMapper};
use super::inbox::Inbox;
use super::parts::LaneParts;
use super::queue::{LaneQueue, PromptJob, Slot, Steering};
use super::rewind;
use super::run::{shows_text, Driven, Ended, TurnRun};
use super::voice::{self, Voice};
use crate::ids::new_id;

/// Runs a user's message as the lane's turn.
pub(super) async fn run(
    parts: &mut LaneParts,
    inbox: &mut Inbox,
    queue: &mut LaneQueue,
    mut job: PromptJob,
) {
    // The turn's place in the lane's queue, freed before `agent.idle` tells devices so.
    let slot = job.slot.take();
    if let Some(notice) = parts.env.take_notice() {
        parts.out.system(notice).await;
    }
    let rewound = rewind_job(parts, &mut job).await;
    // What a replayed take-back carries over belongs to this job's prompt only.
    let prelude = parts.rewind.prelude.take();
    let instance = match parts.ensure_session().await {
        Ok(i) => i,
        Err(e) => {
            let why = format!("The agent is not available: {e}");
            return unanswered(parts, &job, slot, why).await;
        }
    };
    let transcribed = match voice::note(parts, &inbox.close, &mut job).await {
        Voice::Ready => false,
        Voice::Transcribed => true,
        Voice::Failed => return voice::failed(parts, &job, slot).await,
        // The note stays queued: the next start transcribes it.
        Voice::Closed => return,
    };
    let session_id = parts
        .session
        .current()
        .map(|s| s.id.clone())
        .unwrap_or_default();
    let rewind = rewound || checkpoint_for(parts, &job.message_id).await;
    parts.out.read_receipt(job.origin_conn, &job.message_id);
    let turn_started = Instant::now();
    // Committed before the prompt goes out: this `agent.busy` takes the message out of the
    // durable queue (`queued` → `running`), so a crash after the agent got the prompt never
    // hands it over again (exactly once, `super::super::requeue`). A message sent to an idle
    // lane had it stored with it already.
    if !job.busy_stored {
        parts.out.busy(BusyReason::Processing).await;
    }
    let mapper = answer_mapper(parts, &job.message_id, rewind);
    let blocks = prompt_blocks(parts, &instance, &mut job, transcribed, prelude).await;
    let driven = TurnRun::live(parts, inbox, queue, instance, session_id, mapper)
        .drive(blocks)
        .await;
    finish(parts, queue, &job, slot, driven, turn_started).await;
}

/// The prompt of a job: its text (after the conversation a replayed take-back carries over),
/// and its attachments as the agent takes them.
async fn prompt_blocks(
    parts: &LaneParts,
    instance: &Arc<Instance>,
    job: &mut PromptJob,
    transcribed: bool,
    prelude: Option<String>,
) -> Vec<ContentBlock> {
    // A message of attachments only has no text block of its own.
    let text = match job.text.is_empty() && !job.blocks.is_empty() {
        true => None,
        false => Some(job.text.as_str()),
    };
    let mut blocks = match (prelude, text) {
        (Some(p), Some(t)) => vec![ContentBlock::text(p + t)],
        (Some(p), None) => vec![ContentBlock::text(p)],
        (None, Some(t)) => vec![ContentBlock::text(t.to_owned())],
        (None, None) => Vec::new(),
    };
    let takes = &instance.caps.prompt_capabilities;
    let audio = takes.audio && parts.env.media.voice().send_audio;
    if transcribed && !audio {
        job.blocks.clear();
    }
    let agent = parts.host().name.clone();
    let attachments = std::mem::take(&mut job.blocks);
    blocks.extend(
        parts
            .env
            .media
            .prompt_blocks(attachments, &agent, takes.image, audio)
            .await,
    );
    blocks
}

/// The end of a driven turn: its answer finished with how it ended, the note that says why it
/// failed, steering the agent never saw queued as the next turn, and the lane idle again.
async fn finish(
    parts: &mut LaneParts,
    queue: &mut LaneQueue,
    job: &PromptJob,
    slot: Option<Slot>,
    driven: Driven,
    turn_started: Instant,
) {
    let Driven {
        ended,
        mut mapper,
        steered,
        timed_out,
        runaway,
    } = driven;
    if matches!(ended, Ended::ShutDown) {
        // What devices were shown stays in the store; the next start closes the turn.
        parts.checkpoints.save(&mapper).await;
        return;
    }
    let turn_id = mapper.message_id().to_owned();
    // The answer's `MEDIA:` lines count among the files a turn may hold.
    mapper.end_text();
    let idle_limit = parts.host().timeouts.turn_idle;
    let (mut ending, mut notice) = ending_of(
        ended,
        timed_out.then_some(idle_limit),
        runaway || mapper.runaway(),
    );
    parts.collect_files(&mut mapper).await;
    if mapper.said_nothing() && !ending.failed && !ending.cancelled {
        ending.failed = true;
        notice = Some("The agent ended its turn without an answer.".to_owned());
    }
    if ending.failed {
        log_unanswered(parts, notice.as_deref().unwrap_or("the turn failed"));
    }
    // Hermes adds steering to the result of the tool batch that ends next (a tool running
    // when it came, or a later one); a turn in which no tool call finished after the steer
    // never saw it, so it runs as the next turn.
    if let Some((text, closed_then)) = steered {
        if mapper.tools_closed() == closed_then && !ending.failed {
            queue.steer_next(text, true);
        }
    }
    let shown = parts.checkpoints.shown(&mapper);
    let outs = mapper.finish(&ending, Instant::now());
    let shown = shows_text(&outs).then_some(shown).flatten();
    parts.out.emit(outs, &turn_id, shown).await;
    parts
        .env
        .shared
        .metrics
        .observe_turn(turn_started.elapsed());
    rewind::ended(parts, &job.message_id, Some(&turn_id));
    if let Some(n) = notice {
        parts.out.system(n).await;
    }
    drop(slot);
    parts.out.idle().await;
}

/// The mapper of an answer to the user message `message_id`.
fn answer_mapper(parts: &LaneParts, message_id: &str, rewind: bool) -> TurnMapper {
    let mut mapper = TurnMapper::new(TurnConfig {
        message_id: new_id("m_"),
        role: Role::Assistant,
        model: parts.session.current_model(),
        agent: Some(parts.host().name.clone()),
        cwd: crate::config::home_relative(&parts.host().cwd),
        workdir: parts.host().cwd.clone(),
        show_reasoning: parts.show_reasoning,
        update_interval: parts.env.settings.update_interval,
        rewind,
    });
    mapper.answering(message_id);
    mapper
}

/// A turn that could not reach the agent: the message is taken out of the queue and answered
/// as failed (devices offer Retry on the answer), with a note of why, on every device; the
/// gateway logs it.
async fn unanswered(parts: &mut LaneParts, job: &PromptJob, slot: Option<Slot>, why: String) {
    parts.out.read_receipt(job.origin_conn, &job.message_id);
    if !job.busy_stored {
        parts.out.busy(BusyReason::Processing).await;
    }
    let mapper = answer_mapper(parts, &job.message_id, false);
    let turn_id = mapper.message_id().to_owned();
    let failed = Ending {
        failed: true,
        ..Ending::default()
    };
    parts
        .out
        .emit(mapper.finish(&failed, Instant::now()), &turn_id, None)
        .await;
    log_unanswered(parts, &why);
    parts.out.system(why).await;
    drop(slot);
    parts.out.idle().await;
}

/// A turn ended without the answer the user waits for: logged with the lane, the agent and why.
fn log_unanswered(parts: &LaneParts, why: &str) {
    tracing::warn!(lane = ?parts.lane(), agent = %parts.host().name, cause = why, "a turn ended without an answer");
}

/// A regenerate or an edit moves the lane back to the checkpoint before the message it takes
/// back; returns whether it did. An edit that arrives when that is no longer possible (another
/// turn ran first) runs as a new message, and the lane says so.
async fn rewind_job(parts: &mut LaneParts, job: &mut PromptJob) -> bool {
    let Some(before) = job.rewind.take() else {
        return false;
    };
    match rewind::rewind_to(parts, &before, &job.message_id).await {
        Ok(()) => true,
        Err(e) => {
            let text = match e {
                AgentError::NoCheckpoint => "The conversation could not be taken back to before the edited message (another turn ran first); the edit was sent as a new message.".to_owned(),
                e => format!("The conversation could not be taken back ({e}); the message runs where the conversation stands."),
            };
            parts.out.system(text).await;
            false
        }
    }
}

/// Makes the checkpoint before this turn's message the lane's (see `super::rewind`); returns
/// whether the turn can be taken back.
async fn checkpoint_for(parts: &mut LaneParts, message_id: &str) -> bool {
    let fresh = parts
        .session
        .current_mut()
        .map(|s| std::mem::take(&mut s.fresh));
    if message_id.is_empty() {
        rewind::drop_checkpoints(parts).await;
        return false;
    }
    rewind::begin(parts, message_id, fresh == Some(true)).await;
    true
}

/// Steering text run as a turn of its own: its steering message comes first (unless the agent
/// was given the text inside the turn before, when it was stored then).
pub(super) async fn steer(
    parts: &mut LaneParts,
    inbox: &mut Inbox,
    queue: &mut LaneQueue,
    steering: Steering,
) {
    if !steering.stored {
        parts.out.steering_message(&steering.text).await;
    }
    run(parts, inbox, queue, PromptJob::steering(steering.text)).await
}

/// How a live turn ended, and what the lane says about it.
fn ending_of(
    ended: Ended,
    timed_out: Option<std::time::Duration>,
    runaway: bool,
) -> (Ending, Option<String>) {
    let mut ending = Ending::default();
    let mut notice = match ended {
        Ended::Answered { cancelled, tokens } => {
            ending.cancelled = cancelled;
            ending.tokens = tokens;
            None
        }
        Ended::Stopped | Ended::ShutDown => {
            ending.cancelled = true;
            None
        }
        Ended::Crashed(detail) => {
            ending.failed = true;
            Some(format!(
                "The agent stopped unexpectedly ({detail}). Your next message will restart it."
            ))
        }
        Ended::Failed(detail) => {
            ending.failed = true;
            Some(format!("The agent reported an error: {detail}"))
        }
    };
    // An agent that went silent for too long, or wrote without end, failed the turn, though it
    // was cancelled.
    ending.failed |= timed_out.is_some() || runaway;
    if let Some(limit) = timed_out {
        notice.get_or_insert_with(|| {
            format!(
                "The agent sent nothing for {} s, so the turn was stopped.",
                limit.as_secs()
            )
        });
    }
    if runaway {
        notice.get_or_insert_with(|| {
            format!(
                "The agent {}, so the turn was stopped. The answer keeps what came before.",
                beyond_bounds()
            )
        });
    }
    (ending, notice)
}

/// What a runaway agent did, as notices name it: more than a turn may hold ends the turn
/// ([`TurnMapper::runaway`]).
pub(super) fn beyond_bounds() -> String {
    format!(
        "wrote more than one answer may hold ({} KiB of text, {} tool calls or {} files)",
        MAX_TURN_TEXT / 1024,
        MAX_TURN_TOOLS,
        MAX_TURN_FILES
    )
}
