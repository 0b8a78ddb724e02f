//! A user's turn: the prompt with its attachments, driven to its end, and the two ways a user
//! changes a running turn, stop and steer.

use std::time::Instant;

use iris_acp::ContentBlock;
use iris_protocol::{BusyReason, Role, MAX_TURN_FILES, MAX_TURN_TEXT, MAX_TURN_TOOLS};

use super::super::error::AgentError;
use super::super::host::{event_channel, Instance};
use super::super::turn::{Ending, TurnConfig, TurnMapper};
use super::drive::{shows_text, Driven, Ended, Mode, Stopping};
use super::queue::{PromptJob, Steering};
use super::voice::Voice;
use super::LaneActor;
use crate::ids::new_id;

impl LaneActor {
    pub(super) async fn run_turn(&mut self, mut job: PromptJob) {
        // The turn's place in the lane's queue, freed before `agent.idle` tells devices so.
        let slot = job.slot.take();
        if let Some(notice) = self.env.take_notice() {
            self.out.system(notice).await;
        }
        let rewound = self.rewind_job(&mut job).await;
        let instance = match self.ensure_session().await {
            Ok(i) => i,
            Err(e) => {
                let why = format!("The agent is not available: {e}");
                return self.unanswered(&job, slot, why).await;
            }
        };
        let transcribed = match self.voice_note(&mut job).await {
            Voice::Ready => false,
            Voice::Transcribed => true,
            Voice::Failed => return self.voice_failed(&job, slot).await,
            // The note stays queued: the next start transcribes it.
            Voice::Closed => return,
        };
        let session_id = self
            .session
            .current()
            .map(|s| s.id.clone())
            .unwrap_or_default();
        let rewind = rewound || self.checkpoint_for(&job.message_id).await;
        self.out.read_receipt(job.origin_conn, &job.message_id);
        let turn_started = Instant::now();
        // Committed before the prompt goes out: this `agent.busy` takes the message out of the
        // durable queue (`queued` → `running`), so a crash after the agent got the prompt never
        // hands it over again (exactly once, `super::super::requeue`). A message sent to an idle
        // lane had it stored with it already.
        if !job.busy_stored {
            self.out.busy(BusyReason::Processing).await;
        }
        let mut mapper = self.answer_mapper(&job.message_id, rewind);
        let turn_id = mapper.message_id().to_owned();
        // A message of attachments only has no text block.
        let mut blocks = match job.text.is_empty() && !job.blocks.is_empty() {
            true => Vec::new(),
            false => vec![ContentBlock::text(job.text.clone())],
        };
        let takes = &instance.caps.prompt_capabilities;
        let audio = takes.audio && self.env.media.voice().send_audio;
        if transcribed && !audio {
            job.blocks.clear();
        }
        let agent = self.host().name.clone();
        blocks.extend(
            self.env
                .media
                .prompt_blocks(job.blocks, &agent, takes.image, audio)
                .await,
        );
        let mut rx = std::mem::replace(&mut self.events, event_channel().1);
        let Driven {
            ended,
            steered,
            timed_out,
            runaway,
        } = self
            .drive(
                Mode::Live,
                &instance,
                &session_id,
                blocks,
                &mut mapper,
                &mut rx,
            )
            .await;
        self.events = rx;
        if matches!(ended, Ended::ShutDown) {
            // What devices were shown stays in the store; the next start closes the turn.
            self.checkpoints.save(&mapper).await;
            return;
        }
        // The answer's `MEDIA:` lines count among the files a turn may hold.
        mapper.end_text();
        let idle_limit = self.host().timeouts.turn_idle;
        let (mut ending, mut notice) = ending_of(
            ended,
            timed_out.then_some(idle_limit),
            runaway || mapper.runaway(),
        );
        self.collect_files(&mut mapper).await;
        if mapper.said_nothing() && !ending.failed && !ending.cancelled {
            ending.failed = true;
            notice = Some("The agent ended its turn without an answer.".to_owned());
        }
        if ending.failed {
            self.log_unanswered(notice.as_deref().unwrap_or("the turn failed"));
        }
        // Hermes adds steering to the result of the tool batch that ends next (a tool running
        // when it came, or a later one); a turn in which no tool call finished after the steer
        // never saw it, so it runs as the next turn.
        if let Some((text, closed_then)) = steered {
            if mapper.tools_closed() == closed_then && !ending.failed {
                self.queue.steer_next(text, true);
            }
        }
        let shown = self.checkpoints.shown(&mapper);
        let outs = mapper.finish(&ending, Instant::now());
        let shown = shows_text(&outs).then_some(shown).flatten();
        self.out.emit(outs, &turn_id, shown).await;
        self.env.shared.metrics.observe_turn(turn_started.elapsed());
        self.rewind_ended(&job.message_id, Some(&turn_id));
        if let Some(n) = notice {
            self.out.system(n).await;
        }
        drop(slot);
        self.out.idle().await;
    }

    /// The mapper of an answer to the user message `message_id`.
    fn answer_mapper(&self, message_id: &str, rewind: bool) -> TurnMapper {
        let mut mapper = TurnMapper::new(TurnConfig {
            message_id: new_id("m_"),
            role: Role::Assistant,
            model: self.session.current_model(),
            agent: Some(self.host().name.clone()),
            cwd: crate::config::home_relative(&self.host().cwd),
            workdir: self.host().cwd.clone(),
            show_reasoning: self.show_reasoning,
            update_interval: self.env.settings.update_interval,
            rewind,
        });
        mapper.answering(message_id);
        mapper
    }

    /// A turn that could not reach the agent: the message is taken out of the queue and
    /// answered as failed (devices offer Retry on the answer), with a note of why, on every
    /// device; the gateway logs it.
    async fn unanswered(&mut self, job: &PromptJob, slot: Option<super::Slot>, why: String) {
        self.out.read_receipt(job.origin_conn, &job.message_id);
        if !job.busy_stored {
            self.out.busy(BusyReason::Processing).await;
        }
        let mapper = self.answer_mapper(&job.message_id, false);
        let turn_id = mapper.message_id().to_owned();
        let failed = Ending {
            failed: true,
            ..Ending::default()
        };
        self.out
            .emit(mapper.finish(&failed, Instant::now()), &turn_id, None)
            .await;
        self.log_unanswered(&why);
        self.out.system(why).await;
        drop(slot);
        self.out.idle().await;
    }

    /// A turn ended without the answer the user waits for: logged with the lane, the agent and
    /// why.
    fn log_unanswered(&self, why: &str) {
        tracing::warn!(lane = ?self.lane(), agent = %self.host().name, cause = why, "a turn ended without an answer");
    }

    /// A regenerate or an edit moves the lane back to the checkpoint before the message it
    /// takes back; returns whether it did. An edit that arrives when that is no longer possible
    /// (another turn ran first) runs as a new message, and the lane says so.
    async fn rewind_job(&mut self, job: &mut PromptJob) -> bool {
        let Some(before) = job.rewind.take() else {
            return false;
        };
        match self.rewind_to(&before, &job.message_id).await {
            Ok(()) => true,
            Err(e) => {
                let text = match e {
                    AgentError::NoCheckpoint => "The conversation could not be taken back to before the edited message (another turn ran first); the edit was sent as a new message.".to_owned(),
                    e => format!("The conversation could not be taken back ({e}); the message runs where the conversation stands."),
                };
                self.out.system(text).await;
                false
            }
        }
    }

    /// Makes the checkpoint before this turn's message the lane's (see `super::rewind`);
    /// returns whether the turn can be taken back.
    async fn checkpoint_for(&mut self, message_id: &str) -> bool {
        let fresh = self
            .session
            .current_mut()
            .map(|s| std::mem::take(&mut s.fresh));
        if message_id.is_empty() || !self.session.can_fork().await {
            self.drop_checkpoints().await;
            return false;
        }
        self.rewind_begin(message_id, fresh == Some(true)).await
    }

    pub(super) fn cancel_turn(
        &mut self,
        instance: &Instance,
        session_id: &str,
        stopping: &mut Stopping,
        turn_pickers: &[String],
    ) {
        if stopping.since.is_none() {
            stopping.since = Some(Instant::now());
            if let Err(e) = instance.client.cancel(session_id) {
                tracing::warn!(error = %e, "session/cancel failed");
            }
        }
        // The agent may not release a pending permission on cancel: answer it ourselves.
        self.pickers.cancel(turn_pickers);
    }

    /// Redirects the running turn. With an agent that has its own `steer` command the text goes
    /// to it (returned, so the turn can check the agent had a chance to apply it); otherwise the
    /// turn is stopped and the text runs next.
    pub(super) fn steer(
        &mut self,
        instance: &Instance,
        session_id: &str,
        text: String,
        stopping: &mut Stopping,
        turn_pickers: &[String],
    ) -> Result<Option<String>, AgentError> {
        if text.trim().is_empty() {
            return Err(AgentError::EmptySteer);
        }
        if stopping.since.is_none() && self.host().has_command("steer") {
            // The agent steers its own running turn; the answer to this prompt comes at once.
            let client = instance.client.clone();
            let sid = session_id.to_owned();
            let line = format!("/steer {text}");
            tokio::spawn(async move {
                if let Err(e) = client.prompt(&sid, vec![ContentBlock::text(line)]).await {
                    tracing::warn!(error = %e, "steer prompt failed");
                }
            });
            return Ok(Some(text));
        }
        self.cancel_turn(instance, session_id, stopping, turn_pickers);
        self.queue.steer_next(text, false);
        Ok(None)
    }

    /// Steering text run as a turn of its own: its steering message comes first (unless the
    /// agent was given the text inside the turn before, when it was stored then).
    pub(super) async fn run_steer(&mut self, steering: Steering) {
        if !steering.stored {
            self.out.steering_message(&steering.text).await;
        }
        self.run_turn(PromptJob::steering(steering.text)).await
    }

    /// Stores the files the agent produced so far in the turn and adds them to its answer.
    pub(super) async fn collect_files(&self, mapper: &mut TurnMapper) {
        let files = mapper.take_files();
        if files.is_empty() {
            return;
        }
        let cwd = self.host().cwd.clone();
        self.env
            .media
            .collect(&self.out.header(), &cwd, files, mapper)
            .await;
    }
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
