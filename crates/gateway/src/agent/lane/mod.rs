//! A lane's actor: one task per (chat, thread) that owns the lane's ACP session, runs one turn at
//! a time, queues what arrives meanwhile, and answers the lane's pickers.
//!
//! The gateway never sends a second `session/prompt` into a running turn: messages that arrive
//! while the lane is busy wait in the lane's queue. The one exception is steering through an
//! agent's own `/steer` command, which the agent handles inside the running turn.
//!
//! The actor is small: its [`inbox`] (mailbox, end, agent epoch), its [`queue`] of jobs waiting,
//! and its [`parts`], each with its own state and tests: [`output`] (every frame the lane sends),
//! [`pickers`] (the picker book), [`session`] (the session slot), [`checkpoint`] (a streaming
//! answer's checkpoints) and [`rewind`] (taking a turn back). It sees the gateway only through
//! its [`LaneEnv`]. A job runs as a function over those: a user's turn ([`turns`], whose voice
//! note is transcribed first by [`voice`]) and a scheduled run ([`scheduled`]) each build a
//! [`run::TurnRun`], the running turn that borrows the parts and drives the prompt to its end;
//! the gateway's slash commands are [`commands`]. No file of the lane imports the actor: this
//! file holds it and its idle loop.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use tokio::time::Instant as TokioInstant;

use super::env::LaneEnv;
use super::error::AgentError;
use crate::outbox::Lane;

mod asker;
mod branch;
mod checkpoint;
mod commands;
mod inbox;
mod output;
mod parts;
mod pickers;
mod queue;
mod replay;
mod rewind;
mod run;
mod scheduled;
mod session;
mod titles;
mod turns;
mod voice;

pub(crate) use inbox::Inbox;
pub(crate) use queue::{CommandJob, LaneCmd, PromptJob, Slot};

use parts::LaneParts;
use queue::{Job, LaneQueue};
use run::sleep_until;

/// One lane's task: its mailbox, the jobs waiting, and the parts a job borrows.
pub(crate) struct LaneActor {
    inbox: Inbox,
    queue: LaneQueue,
    parts: LaneParts,
}

impl LaneActor {
    pub(crate) fn new(
        env: Arc<LaneEnv>,
        lane: Lane,
        inbox: Inbox,
        deleted: Arc<AtomicBool>,
    ) -> Self {
        LaneActor {
            inbox,
            queue: LaneQueue::default(),
            parts: LaneParts::new(env, lane, deleted),
        }
    }

    pub(crate) async fn run(mut self) {
        self.follow_agent().await;
        self.parts.session.load_stored().await;
        loop {
            if self.inbox.ending() {
                break;
            }
            // The checkpoint of the next turn, made before that turn can start, unless a
            // message waits already.
            let waiting = !self.queue.is_empty() || !self.inbox.rx.is_empty();
            rewind::take_checkpoint(&mut self.parts, waiting).await;
            if let Some(job) = self.queue.pop() {
                self.follow_agent().await;
                self.run_job(job).await;
                continue;
            }
            // Idle: the spare session this lane used is opened again now, not during its turn.
            self.parts.session.refill_spare();
            let expiry = self
                .parts
                .pickers
                .next_deadline()
                .map(TokioInstant::from_std);
            let close = self.inbox.close.clone();
            tokio::select! {
                _ = close.cancelled() => break,
                cmd = self.inbox.rx.recv() => match cmd {
                    None => break,
                    Some(cmd) => self.idle_cmd(cmd).await,
                },
                Some(ev) = self.parts.events.recv() => self.parts.idle_event(ev).await,
                Ok(()) = self.inbox.epoch.changed() => self.follow_agent().await,
                _ = sleep_until(expiry) => self.parts.expire_pickers().await,
            }
            self.parts.flush_closed(None).await;
        }
        let deleted = self.parts.out.is_deleted();
        self.parts.session.release(deleted).await;
        self.parts.pickers.forget_all();
    }

    async fn run_job(&mut self, job: Job) {
        let (parts, inbox, queue) = (&mut self.parts, &mut self.inbox, &mut self.queue);
        match job {
            Job::Prompt(p) => turns::run(parts, inbox, queue, p).await,
            Job::Steer(s) => turns::steer(parts, inbox, queue, s).await,
            Job::Command(c) => commands::run(parts, queue.len(), c).await,
            Job::Cron(c) => scheduled::run(parts, inbox, queue, c).await,
        }
    }

    async fn idle_cmd(&mut self, cmd: LaneCmd) {
        match cmd {
            LaneCmd::Prompt(mut p) => {
                // A regenerate needs the checkpoint before its message; refused without one.
                let refused = p
                    .rewind
                    .as_deref()
                    .is_some_and(|b| !rewind::can_rewind(&self.parts, b));
                match p.retry.take() {
                    Some(reply) if refused => drop(reply.send(Err(AgentError::NoCheckpoint))),
                    reply => {
                        p.retry = reply;
                        self.queue.prompt_when_idle(p);
                    }
                }
            }
            LaneCmd::Command(c) => self.queue.push(Job::Command(c)),
            LaneCmd::Cron(c) => self.queue.push(Job::Cron(c)),
            LaneCmd::Stop(reply) => drop(reply.send(false)),
            LaneCmd::Steer(_, reply) => drop(reply.send(Err(AgentError::NoTurn))),
            LaneCmd::Picker {
                picker_id,
                value,
                device,
                reply,
            } => {
                // A form's next question belongs to a turn; none runs, so it is not asked.
                let result =
                    commands::answer_picker(&mut self.parts, &picker_id, &value, device).await;
                if let Ok(Some(next)) = &result {
                    self.parts.pickers.cancel(std::slice::from_ref(&next.id));
                }
                let _ = reply.send(result.map(drop));
            }
            LaneCmd::FollowAgent(done) => {
                self.follow_agent().await;
                let _ = done.send(());
            }
            LaneCmd::Prepare(done) => {
                if let Err(e) = self.parts.ensure_session().await {
                    tracing::warn!(lane = ?self.parts.lane(), error = %e, "could not prepare the agent session");
                }
                let _ = done.send(());
            }
        }
    }

    /// Takes the agent of the lane's channel when some channel changed its agent.
    async fn follow_agent(&mut self) {
        let epoch = self.inbox.epoch();
        if self
            .parts
            .session
            .follow(&self.parts.env.hosts, epoch)
            .await
        {
            rewind::drop_checkpoints(&mut self.parts).await;
        }
    }
}
