//! Driving one `session/prompt` to its end: the single loop every turn of a lane runs, whether
//! the user is watching it stream (a live turn) or not (a scheduled run).
//!
//! While the prompt runs, the loop takes the agent's updates, the lane's commands (stop, steer,
//! pickers; anything else is queued), the rate-limited `message.update` flush, the idle and
//! cancel deadlines and picker expiry. When the prompt answers, it waits for the updates the agent
//! sent before its answer ([`Instance::fence`]) and takes them too.

use std::sync::Arc;
use std::time::Instant;

use iris_acp::{AcpError, ContentBlock, PromptResponse, SessionUpdate, StopReason};
use iris_protocol::{BusyReason, EphemeralFrame};
use tokio::time::Instant as TokioInstant;

use super::super::error::AgentError;
use super::super::host::{EventRx, Instance, LaneEvent};
use super::super::turn::{Out, TurnMapper};
use super::queue::{Job, LaneCmd};
use super::{short, sleep_until, LaneActor};
use crate::command::Command;

/// Who sees the turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// A user's turn: it streams, asks for approvals and can be steered.
    Live,
    /// A scheduled run: only the whole answer is kept; nobody answers approvals.
    Scheduled,
}

/// How the prompt ended.
#[derive(Debug)]
pub(super) enum Ended {
    /// The agent answered (`cancelled` when the turn was stopped or the agent says so).
    Answered {
        cancelled: bool,
        tokens: Option<u64>,
    },
    /// The turn was stopped and the agent failed it or did not end it; the agent was restarted.
    Stopped,
    /// The agent process died.
    Crashed(String),
    /// The agent answered the prompt with an error.
    Failed(String),
    /// The gateway is shutting down: the turn is left open (with its last checkpoint) for the
    /// next start to close as cut off, as after a crash.
    ShutDown,
}

/// The outcome of [`LaneActor::drive`].
pub(super) struct Driven {
    pub ended: Ended,
    /// The turn was cancelled because the agent sent nothing for too long.
    pub timed_out: bool,
    /// The turn was cancelled because the agent wrote more than a turn may hold.
    pub runaway: bool,
    /// Steering handed to the agent, and how many tool calls the turn had finished by then.
    pub steered: Option<(String, usize)>,
}

/// A running prompt's state, shared by the loop and the handlers of what arrives meanwhile.
struct Running<'a> {
    mode: Mode,
    instance: &'a Arc<Instance>,
    session_id: &'a str,
    turn_id: String,
    stopping: Stopping,
    /// Approvals the agent asked for in this turn.
    turn_pickers: Vec<String>,
    crashed: Option<String>,
    last_activity: Instant,
    timed_out: bool,
    runaway: bool,
    steered: Option<(String, usize)>,
}

impl Running<'_> {
    fn live(&self) -> bool {
        self.mode == Mode::Live
    }
}

/// A running turn's cancellation state.
#[derive(Default)]
pub(super) struct Stopping {
    /// `session/cancel` was sent at this time.
    pub since: Option<Instant>,
    /// The agent did not end the cancelled turn in time and was killed.
    pub killed: bool,
}

impl LaneActor {
    /// Runs `blocks` as a prompt of `session_id` until it ends. `rx` carries the session's events.
    pub(super) async fn drive(
        &mut self,
        mode: Mode,
        instance: &Arc<Instance>,
        session_id: &str,
        blocks: Vec<ContentBlock>,
        mapper: &mut TurnMapper,
        rx: &mut EventRx,
    ) -> Driven {
        let mut run = Running {
            mode,
            instance,
            session_id,
            turn_id: mapper.message_id().to_owned(),
            stopping: Stopping::default(),
            turn_pickers: Vec::new(),
            crashed: None,
            last_activity: Instant::now(),
            timed_out: false,
            runaway: false,
            steered: None,
        };
        self.checkpoints.start(Instant::now());
        self.agent_titles_left = super::AGENT_TITLES_PER_TURN;
        let client = instance.client.clone();
        let sid = session_id.to_owned();
        let prompt = async move { client.prompt(&sid, blocks).await };
        tokio::pin!(prompt);
        let result: Option<Result<PromptResponse, AcpError>> = loop {
            self.flush_closed(Some(&mut *mapper)).await;
            let flush_at = if run.live() {
                mapper.next_flush().map(TokioInstant::from_std)
            } else {
                None
            };
            let cancel_deadline = run
                .stopping
                .since
                .filter(|_| !run.stopping.killed)
                .map(|t| TokioInstant::from_std(t + self.host().timeouts.cancel_grace));
            // Waiting for the user is not the agent hanging.
            let waiting_for_user = self.pickers.waiting_for_user();
            let idle_deadline = (run.stopping.since.is_none() && !waiting_for_user).then(|| {
                TokioInstant::from_std(run.last_activity + self.host().timeouts.turn_idle)
            });
            let expiry = self.pickers.next_deadline().map(TokioInstant::from_std);
            let checkpoint_at = run
                .live()
                .then(|| self.checkpoints.next_due(mapper, Instant::now()))
                .flatten()
                .map(TokioInstant::from_std);
            let close = self.inbox.close.clone();
            let closing = self.inbox.closing;
            tokio::select! {
                res = &mut prompt => break Some(res),
                Some(ev) = rx.recv() => {
                    if self.on_event(&mut run, ev, mapper).await {
                        break None;
                    }
                }
                // A scheduled run has a session of its own; the lane's session may still speak.
                Some(ev) = self.events.recv(), if !run.live() => self.idle_event(ev).await,
                _ = close.cancelled(), if !closing => {
                    if self.close_run(&mut run) {
                        return self.shut_down(run);
                    }
                }
                cmd = self.inbox.rx.recv(), if !closing => match cmd {
                    None => {
                        if self.close_run(&mut run) {
                            return self.shut_down(run);
                        }
                    }
                    Some(cmd) => self.on_cmd(&mut run, cmd, mapper).await,
                },
                _ = sleep_until(flush_at) => {
                    if let Some(out) = mapper.flush_due(Instant::now()) {
                        let shown = self.checkpoints.shown(mapper);
                        self.out.emit(vec![out], &run.turn_id, shown).await;
                    }
                }
                _ = sleep_until(checkpoint_at) => self.checkpoints.write_due(mapper),
                _ = sleep_until(idle_deadline) => {
                    tracing::warn!(lane = ?self.lane(), "the agent sent nothing for too long; cancelling the turn");
                    run.timed_out = true;
                    self.cancel_run(&mut run);
                }
                _ = sleep_until(cancel_deadline) => {
                    tracing::warn!(lane = ?self.lane(), "the agent did not end a cancelled turn; restarting it");
                    run.stopping.killed = true;
                    self.host().kill(instance.generation).await;
                }
                _ = sleep_until(expiry) => self.expire_pickers().await,
            }
        };
        self.finish_prompt(run, result, mapper, rx).await
    }

    /// The lane ends (its lane deleted, or the gateway stopping). A deleted lane's turn is
    /// cancelled and leaves no frames; a user's turn at a graceful shutdown is left open, as a
    /// crash leaves it, for the next start to close as cut off (returns true then).
    fn close_run(&mut self, run: &mut Running<'_>) -> bool {
        self.inbox.closing = true;
        if run.live() && !self.out.is_deleted() {
            return true;
        }
        self.cancel_run(run);
        false
    }

    /// The outcome of a turn left open at shutdown.
    fn shut_down(&mut self, run: Running<'_>) -> Driven {
        Driven {
            ended: Ended::ShutDown,
            timed_out: false,
            runaway: run.runaway,
            steered: run.steered,
        }
    }

    fn cancel_run(&mut self, run: &mut Running<'_>) {
        self.cancel_turn(
            run.instance,
            run.session_id,
            &mut run.stopping,
            &run.turn_pickers,
        );
    }

    /// One event of the prompt's session. Returns true when the agent process died.
    async fn on_event(
        &mut self,
        run: &mut Running<'_>,
        ev: LaneEvent,
        mapper: &mut TurnMapper,
    ) -> bool {
        match ev {
            LaneEvent::Update(update) => {
                run.last_activity = Instant::now();
                let steered = run.steered.is_some();
                self.take_update(run.mode, update, mapper, &run.turn_id, steered)
                    .await;
                if mapper.runaway() && !run.runaway {
                    tracing::warn!(lane = ?self.lane(), "the agent wrote more than a turn may hold; cancelling the turn");
                    run.runaway = true;
                    self.cancel_run(run);
                }
            }
            LaneEvent::Permission(request, responder) => {
                if !run.live() || run.stopping.since.is_some() || self.pickers.approvals_full() {
                    responder.cancel();
                } else if let Some(id) = self.open_permission(request, responder, mapper).await {
                    run.turn_pickers.push(id);
                }
            }
            LaneEvent::Elicitation(request, responder) => {
                if !run.live() || run.stopping.since.is_some() || self.pickers.approvals_full() {
                    responder.cancel();
                } else if let Some(id) = self.open_elicitation(request, responder, mapper).await {
                    run.turn_pickers.push(id);
                }
            }
            LaneEvent::Exited { generation, detail } => {
                if generation == run.instance.generation {
                    run.crashed = Some(detail);
                    return true;
                }
            }
        }
        false
    }

    /// A command for the lane while the prompt runs: stop, steer and pickers act on the turn,
    /// the gateway's own quick commands run at once, and everything else waits its turn.
    async fn on_cmd(&mut self, run: &mut Running<'_>, cmd: LaneCmd, mapper: &mut TurnMapper) {
        match cmd {
            LaneCmd::Stop(reply) => {
                self.cancel_run(run);
                let _ = reply.send(true);
            }
            LaneCmd::Steer(text, reply) if run.live() => {
                let result = self.steer(
                    run.instance,
                    run.session_id,
                    text,
                    &mut run.stopping,
                    &run.turn_pickers,
                );
                if let Ok(Some(text)) = &result {
                    self.out.steering_message(text).await;
                    run.steered = Some((text.clone(), mapper.tools_closed()));
                }
                let _ = reply.send(result.map(|_| ()));
            }
            LaneCmd::Steer(_, reply) => drop(reply.send(Err(AgentError::ScheduledRunning))),
            LaneCmd::Prompt(p) => self.queue.prompt_when_busy(p),
            LaneCmd::Command(c) if c.command == Command::Stop => {
                self.out.read_receipt(c.origin_conn, &c.message_id);
                self.cancel_run(run);
            }
            LaneCmd::Command(c) if c.command.runs_during_turn() => self.command(c).await,
            LaneCmd::Command(c) => self.queue.push(Job::Command(c)),
            LaneCmd::Cron(c) => self.queue.push(Job::Cron(c)),
            // The session is open: a turn is running in it.
            LaneCmd::Prepare(done) => drop(done.send(())),
            // The lane follows its channel's new agent before its next job.
            LaneCmd::FollowAgent(done) => drop(done.send(())),
            LaneCmd::Picker {
                picker_id,
                value,
                device,
                reply,
            } => {
                let result = match self.answer_picker(&picker_id, &value, device).await {
                    Ok(Some(next)) => {
                        // The answered question closes before the next one shows.
                        self.flush_closed(Some(&mut *mapper)).await;
                        mapper.picker_opened(&next.id, next.kind, &next.title, &next.changes);
                        self.out.durable(next.frames, None, None).await;
                        run.turn_pickers.push(next.id);
                        Ok(())
                    }
                    other => other.map(drop),
                };
                if run.live() && result.is_ok() && !self.pickers.waiting_for_user() {
                    let reason = if mapper.tool_open() {
                        BusyReason::Tool
                    } else {
                        BusyReason::Processing
                    };
                    self.out.busy(reason).await;
                }
                let _ = reply.send(result);
            }
        }
    }

    /// After the prompt answered (or the agent died): the updates still on their way, pickers
    /// that can no longer be answered, and how the prompt ended.
    async fn finish_prompt(
        &mut self,
        run: Running<'_>,
        result: Option<Result<PromptResponse, AcpError>>,
        mapper: &mut TurnMapper,
        rx: &mut EventRx,
    ) -> Driven {
        let instance = run.instance;
        if result.is_some() {
            // The agent's last updates may still be on their way to this lane when its answer
            // arrives: take them until everything it sent before has been routed.
            let fence = instance.fence();
            tokio::pin!(fence);
            loop {
                tokio::select! {
                    biased;
                    Some(ev) = rx.recv() => self.late_event(&run, ev, mapper).await,
                    _ = &mut fence => break,
                }
            }
            while let Ok(ev) = rx.try_recv() {
                self.late_event(&run, ev, mapper).await;
            }
        }
        // Whatever is still pending belongs to this turn and cannot be answered any more.
        self.pickers.cancel(&run.turn_pickers);
        self.flush_closed(Some(&mut *mapper)).await;
        let cancelled = run.stopping.since.is_some();
        let ended = match result {
            Some(Ok(resp)) => {
                self.host().mark_healthy(instance.generation).await;
                let tokens = self
                    .session
                    .current_mut()
                    .and_then(|s| s.usage.turn_tokens(resp.usage.as_ref()));
                Ended::Answered {
                    cancelled: cancelled || resp.stop_reason == StopReason::Cancelled,
                    tokens,
                }
            }
            Some(Err(e)) if cancelled => {
                // Hermes fails a prompt cancelled during a tool or a permission prompt and then
                // queues every later prompt forever: start over with a fresh process.
                tracing::warn!(error = %e, "cancelled turn failed; restarting the agent");
                self.host().kill(instance.generation).await;
                Ended::Stopped
            }
            // A process killed because it did not end a stopped turn ended as the user asked.
            None if run.stopping.killed => Ended::Stopped,
            Some(Err(e)) if e.is_closed() => Ended::Crashed(short(&e.to_string())),
            Some(Err(e)) => Ended::Failed(short(&e.to_string())),
            None => Ended::Crashed(short(&run.crashed.unwrap_or_default())),
        };
        if matches!(ended, Ended::Stopped | Ended::Crashed(_)) {
            self.session.drop_current();
        }
        Driven {
            ended,
            timed_out: run.timed_out,
            // Also when the agent ended the turn before the gateway could stop it.
            runaway: run.runaway || mapper.runaway(),
            steered: run.steered,
        }
    }

    /// An event that arrived after the prompt answered: its updates still belong to the turn.
    async fn late_event(&mut self, run: &Running<'_>, ev: LaneEvent, mapper: &mut TurnMapper) {
        match ev {
            LaneEvent::Update(update) => {
                let steered = run.steered.is_some();
                self.take_update(run.mode, update, mapper, &run.turn_id, steered)
                    .await
            }
            LaneEvent::Permission(_, responder) => responder.cancel(),
            LaneEvent::Elicitation(_, responder) => responder.cancel(),
            other => self.idle_event(other).await,
        }
    }

    /// One update of the running prompt: streamed to the devices in a live turn, only collected
    /// for the final answer in a scheduled one.
    async fn take_update(
        &mut self,
        mode: Mode,
        update: SessionUpdate,
        mapper: &mut TurnMapper,
        turn_id: &str,
        steered: bool,
    ) {
        match (mode, update) {
            (Mode::Live, SessionUpdate::SessionInfoUpdate(info)) => {
                if let Some(title) = info.title {
                    self.agent_title(&title).await;
                }
            }
            (Mode::Live, update) => {
                if steered && is_steer_ack(&update) {
                    return;
                }
                let outs = mapper.on_update(&update, Instant::now());
                let shown = shows_text(&outs)
                    .then(|| self.checkpoints.shown(mapper))
                    .flatten();
                self.out.emit(outs, turn_id, shown).await;
                self.checkpoints.write_due(mapper);
                self.collect_files(mapper).await;
            }
            (Mode::Scheduled, update) => drop(mapper.on_update(&update, Instant::now())),
        }
    }
}

/// Whether the frames show text of the answer (a `message.update`).
pub(super) fn shows_text(outs: &[Out]) -> bool {
    outs.iter()
        .any(|o| matches!(o, Out::Ephemeral(EphemeralFrame::MessageUpdate(_), _)))
}

/// Hermes acknowledges `/steer` inside the running turn's text ("⏩ Steer queued for the active
/// turn: …"); that note is not part of the answer.
fn is_steer_ack(update: &SessionUpdate) -> bool {
    match update {
        SessionUpdate::AgentMessageChunk(c) => c
            .content
            .as_text()
            .is_some_and(|t| t.trim_start().starts_with("⏩ Steer queued")),
        _ => false,
    }
}
