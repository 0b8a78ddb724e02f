//! A running turn as a value: [`TurnRun`] borrows the lane's parts, its mailbox and its queue,
//! owns the turn's mapper and its running state, and drives one `session/prompt` to its end,
//! whether the user is watching it stream (a live turn, [`super::turns`]) or not (a scheduled
//! run, [`super::scheduled`]).
//!
//! While the prompt runs, the loop takes the agent's updates, the lane's commands (stop, steer,
//! pickers; anything else is queued), the rate-limited `message.update` flush, the idle and
//! cancel deadlines and picker expiry. When the prompt answers, it waits for the updates the agent
//! sent before its answer ([`Instance::fence`]) and takes them too.

use std::sync::Arc;
use std::time::Instant;

use iris_acp::{
    AcpError, ContentBlock, CreateElicitationRequest, ElicitationResponder, Form,
    PermissionResponder, PromptResponse, RequestPermissionRequest, SessionUpdate, StopReason,
};
use iris_protocol::{BusyReason, EphemeralFrame};
use tokio::time::Instant as TokioInstant;

use super::super::error::AgentError;
use super::super::host::{event_channel, EventRx, Instance, LaneEvent};
use super::super::turn::{Out, TurnMapper};
use super::commands;
use super::inbox::Inbox;
use super::parts::LaneParts;
use super::queue::{Job, LaneCmd, LaneQueue};
use super::titles::AGENT_TITLES_PER_TURN;
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

/// The outcome of [`TurnRun::drive`].
pub(super) struct Driven {
    pub ended: Ended,
    /// The turn's mapper, to finish its answer.
    pub mapper: TurnMapper,
    /// The turn was cancelled because the agent sent nothing for too long.
    pub timed_out: bool,
    /// The turn was cancelled because the agent wrote more than a turn may hold.
    pub runaway: bool,
    /// Steering handed to the agent, and how many tool calls the turn had finished by then.
    pub steered: Option<(String, usize)>,
}

/// How the prompt's loop ended.
enum Prompted {
    /// The agent answered the prompt, or failed it.
    Answered(Result<PromptResponse, AcpError>),
    /// The agent process died before it answered.
    Died,
    /// The lane ends and the turn is left open for the next start (see [`TurnRun::close_run`]).
    LeftOpen,
}

/// A running turn's cancellation state.
#[derive(Default)]
struct Stopping {
    /// `session/cancel` was sent at this time.
    since: Option<Instant>,
    /// The agent did not end the cancelled turn in time and was killed.
    killed: bool,
}

/// One prompt of a lane, from `session/prompt` to its answer.
pub(super) struct TurnRun<'a> {
    parts: &'a mut LaneParts,
    inbox: &'a mut Inbox,
    queue: &'a mut LaneQueue,
    mode: Mode,
    instance: Arc<Instance>,
    session_id: String,
    /// The events of the prompt's session: a scheduled run's own; a live turn takes the lane's
    /// from its parts while it runs.
    rx: EventRx,
    mapper: TurnMapper,
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

impl<'a> TurnRun<'a> {
    /// A user's turn in the lane's session.
    pub(super) fn live(
        parts: &'a mut LaneParts,
        inbox: &'a mut Inbox,
        queue: &'a mut LaneQueue,
        instance: Arc<Instance>,
        session_id: String,
        mapper: TurnMapper,
    ) -> TurnRun<'a> {
        let rx = std::mem::replace(&mut parts.events, event_channel().1);
        Self::new(
            Mode::Live,
            (parts, inbox, queue),
            instance,
            session_id,
            rx,
            mapper,
        )
    }

    /// A scheduled run in a session of its own, whose events come on `rx`.
    pub(super) fn scheduled(
        parts: &'a mut LaneParts,
        inbox: &'a mut Inbox,
        queue: &'a mut LaneQueue,
        instance: Arc<Instance>,
        session_id: String,
        rx: EventRx,
        mapper: TurnMapper,
    ) -> TurnRun<'a> {
        Self::new(
            Mode::Scheduled,
            (parts, inbox, queue),
            instance,
            session_id,
            rx,
            mapper,
        )
    }

    fn new(
        mode: Mode,
        (parts, inbox, queue): (&'a mut LaneParts, &'a mut Inbox, &'a mut LaneQueue),
        instance: Arc<Instance>,
        session_id: String,
        rx: EventRx,
        mapper: TurnMapper,
    ) -> TurnRun<'a> {
        TurnRun {
            parts,
            inbox,
            queue,
            mode,
            instance,
            session_id,
            rx,
            turn_id: mapper.message_id().to_owned(),
            mapper,
            stopping: Stopping::default(),
            turn_pickers: Vec::new(),
            crashed: None,
            last_activity: Instant::now(),
            timed_out: false,
            runaway: false,
            steered: None,
        }
    }

    fn live_mode(&self) -> bool {
        self.mode == Mode::Live
    }

    /// Runs `blocks` as the prompt until it ends. A live turn gives the lane's events back.
    pub(super) async fn drive(mut self, blocks: Vec<ContentBlock>) -> Driven {
        let ended = match self.prompt(blocks).await {
            Prompted::Answered(result) => self.finish_prompt(Some(result)).await,
            Prompted::Died => self.finish_prompt(None).await,
            Prompted::LeftOpen => Ended::ShutDown,
        };
        if self.live_mode() {
            std::mem::swap(&mut self.parts.events, &mut self.rx);
        }
        Driven {
            ended,
            // Also when the agent ended the turn before the gateway could stop it.
            runaway: self.runaway || self.mapper.runaway(),
            mapper: self.mapper,
            timed_out: self.timed_out,
            steered: self.steered,
        }
    }

    /// The loop of the running prompt, until the agent answers or dies, or the turn is left
    /// open at shutdown.
    async fn prompt(&mut self, blocks: Vec<ContentBlock>) -> Prompted {
        self.parts.checkpoints.start(Instant::now());
        self.parts.agent_titles_left = AGENT_TITLES_PER_TURN;
        let client = self.instance.client.clone();
        let sid = self.session_id.clone();
        let prompt = async move { client.prompt(&sid, blocks).await };
        tokio::pin!(prompt);
        loop {
            self.parts.flush_closed(Some(&mut self.mapper)).await;
            let timeouts = &self.parts.host().timeouts;
            let flush_at = if self.live_mode() {
                self.mapper.next_flush().map(TokioInstant::from_std)
            } else {
                None
            };
            let cancel_deadline = self
                .stopping
                .since
                .filter(|_| !self.stopping.killed)
                .map(|t| TokioInstant::from_std(t + timeouts.cancel_grace));
            // Waiting for the user is not the agent hanging.
            let waiting_for_user = self.parts.pickers.waiting_for_user();
            let idle_deadline = (self.stopping.since.is_none() && !waiting_for_user)
                .then(|| TokioInstant::from_std(self.last_activity + timeouts.turn_idle));
            let expiry = self
                .parts
                .pickers
                .next_deadline()
                .map(TokioInstant::from_std);
            let checkpoint_at = self
                .live_mode()
                .then(|| {
                    self.parts
                        .checkpoints
                        .next_due(&self.mapper, Instant::now())
                })
                .flatten()
                .map(TokioInstant::from_std);
            let close = self.inbox.close.clone();
            let closing = self.inbox.closing;
            let live = self.live_mode();
            tokio::select! {
                res = &mut prompt => return Prompted::Answered(res),
                Some(ev) = self.rx.recv() => {
                    if self.on_event(ev).await {
                        return Prompted::Died;
                    }
                }
                // A scheduled run has a session of its own; the lane's session may still speak.
                Some(ev) = self.parts.events.recv(), if !live => self.parts.idle_event(ev).await,
                _ = close.cancelled(), if !closing => {
                    if self.close_run() {
                        return Prompted::LeftOpen;
                    }
                }
                cmd = self.inbox.rx.recv(), if !closing => match cmd {
                    None => {
                        if self.close_run() {
                            return Prompted::LeftOpen;
                        }
                    }
                    Some(cmd) => self.on_cmd(cmd).await,
                },
                _ = sleep_until(flush_at) => {
                    if let Some(out) = self.mapper.flush_due(Instant::now()) {
                        let shown = self.parts.checkpoints.shown(&self.mapper);
                        self.parts.out.emit(vec![out], &self.turn_id, shown).await;
                    }
                }
                _ = sleep_until(checkpoint_at) => self.parts.checkpoints.write_due(&self.mapper),
                _ = sleep_until(idle_deadline) => {
                    tracing::warn!(lane = ?self.parts.lane(), "the agent sent nothing for too long; cancelling the turn");
                    self.timed_out = true;
                    self.cancel();
                }
                _ = sleep_until(cancel_deadline) => {
                    tracing::warn!(lane = ?self.parts.lane(), "the agent did not end a cancelled turn; restarting it");
                    self.stopping.killed = true;
                    self.parts.host().kill(self.instance.generation).await;
                }
                _ = sleep_until(expiry) => self.parts.expire_pickers().await,
            }
        }
    }

    /// The lane ends (its lane deleted, or the gateway stopping). A deleted lane's turn is
    /// cancelled and leaves no frames; a user's turn at a graceful shutdown is left open, as a
    /// crash leaves it, for the next start to close as cut off (returns true then).
    fn close_run(&mut self) -> bool {
        self.inbox.closing = true;
        if self.live_mode() && !self.parts.out.is_deleted() {
            return true;
        }
        self.cancel();
        false
    }

    /// Cancels the turn: `session/cancel` once, and the turn's pickers answered.
    fn cancel(&mut self) {
        if self.stopping.since.is_none() {
            self.stopping.since = Some(Instant::now());
            if let Err(e) = self.instance.client.cancel(&self.session_id) {
                tracing::warn!(error = %e, "session/cancel failed");
            }
        }
        // The agent may not release a pending permission on cancel: answer it ourselves.
        self.parts.pickers.cancel(&self.turn_pickers);
    }

    /// Redirects the running turn. With an agent that has its own `steer` command the text goes
    /// to it (returned, so the turn can check the agent had a chance to apply it); otherwise the
    /// turn is stopped and the text runs next.
    fn steer(&mut self, text: String) -> Result<Option<String>, AgentError> {
        if text.trim().is_empty() {
            return Err(AgentError::EmptySteer);
        }
        if self.stopping.since.is_none() && self.parts.host().has_command("steer") {
            // The agent steers its own running turn; the answer to this prompt comes at once.
            let client = self.instance.client.clone();
            let sid = self.session_id.clone();
            let line = format!("/steer {text}");
            tokio::spawn(async move {
                if let Err(e) = client.prompt(&sid, vec![ContentBlock::text(line)]).await {
                    tracing::warn!(error = %e, "steer prompt failed");
                }
            });
            return Ok(Some(text));
        }
        self.cancel();
        self.queue.steer_next(text, false);
        Ok(None)
    }

    /// One event of the prompt's session. Returns true when the agent process died.
    async fn on_event(&mut self, ev: LaneEvent) -> bool {
        match ev {
            LaneEvent::Update(update) => {
                self.last_activity = Instant::now();
                self.take_update(update).await;
                if self.mapper.runaway() && !self.runaway {
                    tracing::warn!(lane = ?self.parts.lane(), "the agent wrote more than a turn may hold; cancelling the turn");
                    self.runaway = true;
                    self.cancel();
                }
            }
            LaneEvent::Permission(request, responder) => {
                if self.refuses_pickers() {
                    responder.cancel();
                } else if let Some(id) = self.open_permission(request, responder).await {
                    self.turn_pickers.push(id);
                }
            }
            LaneEvent::Elicitation(request, responder) => {
                if self.refuses_pickers() {
                    responder.cancel();
                } else if let Some(id) = self.open_elicitation(request, responder).await {
                    self.turn_pickers.push(id);
                }
            }
            LaneEvent::Exited { generation, detail } => {
                if generation == self.instance.generation {
                    self.crashed = Some(detail);
                    return true;
                }
            }
        }
        false
    }

    /// Nobody answers a scheduled run's pickers, nor those of a turn being stopped, nor more
    /// than the book holds.
    fn refuses_pickers(&self) -> bool {
        !self.live_mode() || self.stopping.since.is_some() || self.parts.pickers.approvals_full()
    }

    /// A command for the lane while the prompt runs: stop, steer and pickers act on the turn,
    /// the gateway's own quick commands run at once, and everything else waits its turn.
    async fn on_cmd(&mut self, cmd: LaneCmd) {
        match cmd {
            LaneCmd::Stop(reply) => {
                self.cancel();
                let _ = reply.send(true);
            }
            LaneCmd::Steer(text, reply) if self.live_mode() => {
                let result = self.steer(text);
                if let Ok(Some(text)) = &result {
                    self.parts.out.steering_message(text).await;
                    self.steered = Some((text.clone(), self.mapper.tools_closed()));
                }
                let _ = reply.send(result.map(|_| ()));
            }
            LaneCmd::Steer(_, reply) => drop(reply.send(Err(AgentError::ScheduledRunning))),
            LaneCmd::Prompt(p) => self.queue.prompt_when_busy(p),
            LaneCmd::Command(c) if c.command == Command::Stop => {
                self.parts.out.read_receipt(c.origin_conn, &c.message_id);
                self.cancel();
            }
            LaneCmd::Command(c) if c.command.runs_during_turn() => {
                commands::run(self.parts, self.queue.len(), c).await
            }
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
                let result = self.answer_picker(&picker_id, &value, device).await;
                let _ = reply.send(result);
            }
        }
    }

    /// A device's answer to a picker while the turn runs: a form's next question shows at
    /// once, and the turn is busy again once nothing waits for the user.
    async fn answer_picker(
        &mut self,
        picker_id: &str,
        value: &str,
        device: Option<String>,
    ) -> Result<(), AgentError> {
        let result = match commands::answer_picker(self.parts, picker_id, value, device).await {
            Ok(Some(next)) => {
                // The answered question closes before the next one shows.
                self.parts.flush_closed(Some(&mut self.mapper)).await;
                let m = &mut self.mapper;
                m.picker_opened(&next.id, next.kind, &next.title, &next.changes);
                self.parts.out.durable(next.frames, None, None).await;
                self.turn_pickers.push(next.id);
                Ok(())
            }
            other => other.map(drop),
        };
        if self.live_mode() && result.is_ok() && !self.parts.pickers.waiting_for_user() {
            let reason = if self.mapper.tool_open() {
                BusyReason::Tool
            } else {
                BusyReason::Processing
            };
            self.parts.out.busy(reason).await;
        }
        result
    }

    /// Shows the agent's permission request to the devices; returns the picker's id.
    async fn open_permission(
        &mut self,
        request: RequestPermissionRequest,
        responder: PermissionResponder,
    ) -> Option<String> {
        let deadline = Instant::now() + self.parts.host().timeouts.approval;
        let content = request.tool_call.content.as_deref().unwrap_or_default();
        let changes = self.mapper.changes_in(content);
        let opened = self
            .parts
            .pickers
            .open_permission(request, responder, deadline, changes)?;
        let m = &mut self.mapper;
        m.picker_opened(&opened.id, opened.kind, &opened.title, &opened.changes);
        self.parts.out.durable(opened.frames, None, None).await;
        Some(opened.id)
    }

    /// Opens the agent's form as a question picker; a form that cannot be shown as one question
    /// (or a URL to visit) is declined at once and a system message says so.
    async fn open_elicitation(
        &mut self,
        request: CreateElicitationRequest,
        responder: ElicitationResponder,
    ) -> Option<String> {
        let form = if request.mode == "form" {
            Form::from_schema(&request.message, &request.requested_schema).map_err(|u| u.0)
        } else {
            Err("it asks to visit a link".to_owned())
        };
        let form = match form {
            Ok(form) => form,
            Err(why) => {
                responder.decline();
                let text = format!(
                    "The agent asked a question Iris cannot show ({why}); it was declined."
                );
                self.parts.out.system(text).await;
                return None;
            }
        };
        let timeout = self.parts.host().timeouts.approval;
        let opened = self.parts.pickers.open_form(form, responder, timeout);
        let m = &mut self.mapper;
        m.picker_opened(&opened.id, opened.kind, &opened.title, &opened.changes);
        self.parts.out.durable(opened.frames, None, None).await;
        Some(opened.id)
    }

    /// After the prompt answered (or the agent died): the updates still on their way, pickers
    /// that can no longer be answered, and how the prompt ended.
    async fn finish_prompt(&mut self, result: Option<Result<PromptResponse, AcpError>>) -> Ended {
        if result.is_some() {
            // The agent's last updates may still be on their way to this lane when its answer
            // arrives: take them until everything it sent before has been routed.
            let instance = self.instance.clone();
            let fence = instance.fence();
            tokio::pin!(fence);
            loop {
                tokio::select! {
                    biased;
                    Some(ev) = self.rx.recv() => self.late_event(ev).await,
                    _ = &mut fence => break,
                }
            }
            while let Ok(ev) = self.rx.try_recv() {
                self.late_event(ev).await;
            }
        }
        // Whatever is still pending belongs to this turn and cannot be answered any more.
        self.parts.pickers.cancel(&self.turn_pickers);
        self.parts.flush_closed(Some(&mut self.mapper)).await;
        let cancelled = self.stopping.since.is_some();
        let generation = self.instance.generation;
        let ended = match result {
            Some(Ok(resp)) => {
                self.parts.host().mark_healthy(generation).await;
                let tokens = self
                    .parts
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
                self.parts.host().kill(generation).await;
                Ended::Stopped
            }
            // A process killed because it did not end a stopped turn ended as the user asked.
            None if self.stopping.killed => Ended::Stopped,
            Some(Err(e)) if e.is_closed() => Ended::Crashed(short(&e.to_string())),
            Some(Err(e)) => Ended::Failed(short(&e.to_string())),
            None => Ended::Crashed(short(&self.crashed.take().unwrap_or_default())),
        };
        if matches!(ended, Ended::Stopped | Ended::Crashed(_)) {
            self.parts.session.drop_current();
        }
        ended
    }

    /// An event that arrived after the prompt answered: its updates still belong to the turn.
    async fn late_event(&mut self, ev: LaneEvent) {
        match ev {
            LaneEvent::Update(update) => self.take_update(update).await,
            LaneEvent::Permission(_, responder) => responder.cancel(),
            LaneEvent::Elicitation(_, responder) => responder.cancel(),
            other => self.parts.idle_event(other).await,
        }
    }

    /// One update of the running prompt: streamed to the devices in a live turn, only collected
    /// for the final answer in a scheduled one.
    async fn take_update(&mut self, update: SessionUpdate) {
        match (self.mode, update) {
            (Mode::Live, SessionUpdate::SessionInfoUpdate(info)) => {
                if let Some(title) = info.title {
                    self.parts.agent_title(&title).await;
                }
            }
            (Mode::Live, update) => {
                if self.steered.is_some() && is_steer_ack(&update) {
                    return;
                }
                let outs = self.mapper.on_update(&update, Instant::now());
                let shown = shows_text(&outs)
                    .then(|| self.parts.checkpoints.shown(&self.mapper))
                    .flatten();
                self.parts.out.emit(outs, &self.turn_id, shown).await;
                self.parts.checkpoints.write_due(&self.mapper);
                self.parts.collect_files(&mut self.mapper).await;
            }
            (Mode::Scheduled, update) => drop(self.mapper.on_update(&update, Instant::now())),
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

/// An error's text as a note shows it: its last 300 characters.
pub(super) fn short(s: &str) -> String {
    crate::text::tail(s.trim(), 300)
}

/// Sleeps until `at`, or for ever without one (a `select!` branch that never fires).
pub(super) async fn sleep_until(at: Option<TokioInstant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
