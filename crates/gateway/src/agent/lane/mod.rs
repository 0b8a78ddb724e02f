//! A lane's actor: one task per (chat, thread) that owns the lane's ACP session, runs one turn at
//! a time, queues what arrives meanwhile, and answers the lane's pickers.
//!
//! The gateway never sends a second `session/prompt` into a running turn: messages that arrive
//! while the lane is busy wait in the lane's queue. The one exception is steering through an
//! agent's own `/steer` command, which the agent handles inside the running turn.
//!
//! The actor is small and owns its parts, each with its own state and tests: [`output`] (every
//! frame the lane sends), [`pickers`] (the picker book), [`session`] (the session slot),
//! [`checkpoint`] (a streaming answer's checkpoints) and [`queue`] (the mailbox's commands and
//! the jobs waiting). It sees the gateway only through its [`LaneEnv`]. What it does is spread
//! over rooms of `impl LaneActor`: [`turns`] (a user's turn, stop and steer), [`voice`] (a voice
//! note's transcription, the first step of its turn), [`drive`] (the loop
//! every prompt runs in), [`scheduled`] (a cron run), [`commands`] (the gateway's slash
//! commands) and [`titles`] (naming chats and threads). This file holds the actor, its idle loop
//! and what it does with the picker book.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use iris_acp::{
    CreateElicitationRequest, ElicitationResponder, Form, PermissionResponder,
    RequestPermissionRequest, SessionUpdate,
};
use iris_protocol::DurableFrame;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant as TokioInstant;
use tokio_util::sync::CancellationToken;

use super::env::LaneEnv;
use super::error::AgentError;
use super::host::{event_channel, AgentHost, EventRx, LaneEvent};
use super::turn::TurnMapper;
use crate::outbox::Lane;

mod asker;
mod branch;
mod checkpoint;
mod commands;
mod drive;
mod output;
mod pickers;
mod queue;
mod rewind;
mod scheduled;
mod session;
mod titles;
mod turns;
mod voice;

pub(crate) use queue::{CommandJob, LaneCmd, PromptJob, Slot};

/// Titles the agent may give a thread from the start of one turn to the start of the next
/// (while it is idle as well); later ones are ignored.
const AGENT_TITLES_PER_TURN: u8 = 3;

/// What arrives at a lane besides the agent's events: its mailbox, the signal that ends it, and
/// the agent epoch it follows.
pub(crate) struct Inbox {
    rx: mpsc::Receiver<LaneCmd>,
    /// Cancelled when the lane is deleted or the gateway stops: end the running turn and exit.
    close: CancellationToken,
    /// The lane is ending (closed, or its mailbox ended).
    closing: bool,
    epoch: watch::Receiver<u64>,
}

impl Inbox {
    pub(crate) fn new(
        rx: mpsc::Receiver<LaneCmd>,
        close: CancellationToken,
        epoch: watch::Receiver<u64>,
    ) -> Inbox {
        Inbox {
            rx,
            close,
            closing: false,
            epoch,
        }
    }

    fn ending(&self) -> bool {
        self.closing || self.close.is_cancelled()
    }

    fn epoch(&self) -> u64 {
        *self.epoch.borrow()
    }
}

pub(crate) struct LaneActor {
    env: Arc<LaneEnv>,
    inbox: Inbox,
    events: EventRx,
    out: output::Output,
    pickers: pickers::PickerBook,
    session: session::SessionSlot,
    checkpoints: checkpoint::Checkpoints,
    queue: queue::LaneQueue,
    rewind: branch::Rewind,
    show_reasoning: bool,
    /// Titles the agent may still give the thread before the next turn starts
    /// ([`AGENT_TITLES_PER_TURN`]).
    agent_titles_left: u8,
}

impl LaneActor {
    pub(crate) fn new(
        env: Arc<LaneEnv>,
        lane: Lane,
        inbox: Inbox,
        deleted: Arc<AtomicBool>,
    ) -> Self {
        let (ev_tx, events) = event_channel();
        let store = env.shared.store.clone();
        LaneActor {
            out: output::Output::new(env.shared.clone(), lane.clone(), deleted),
            pickers: pickers::PickerBook::new(lane.clone(), env.pickers.clone()),
            session: session::SessionSlot::new(
                env.hosts.host(None).clone(),
                ev_tx,
                store.clone(),
                lane.clone(),
            ),
            checkpoints: checkpoint::Checkpoints::new(store, lane),
            queue: queue::LaneQueue::default(),
            rewind: branch::Rewind::default(),
            show_reasoning: true,
            agent_titles_left: AGENT_TITLES_PER_TURN,
            inbox,
            events,
            env,
        }
    }

    fn host(&self) -> &Arc<AgentHost> {
        self.session.host()
    }

    fn lane(&self) -> &Lane {
        self.out.lane()
    }

    pub(crate) async fn run(mut self) {
        self.follow_agent().await;
        self.session.load_stored().await;
        loop {
            if self.inbox.ending() {
                break;
            }
            // The checkpoint of the next turn, made before that turn can start.
            self.take_checkpoint().await;
            if let Some(job) = self.queue.pop() {
                self.follow_agent().await;
                self.run_job(job).await;
                continue;
            }
            // Idle: the spare session this lane used is opened again now, not during its turn.
            self.session.refill_spare();
            let expiry = self.pickers.next_deadline().map(TokioInstant::from_std);
            let close = self.inbox.close.clone();
            tokio::select! {
                _ = close.cancelled() => break,
                cmd = self.inbox.rx.recv() => match cmd {
                    None => break,
                    Some(cmd) => self.idle_cmd(cmd).await,
                },
                Some(ev) = self.events.recv() => self.idle_event(ev).await,
                Ok(()) = self.inbox.epoch.changed() => self.follow_agent().await,
                _ = sleep_until(expiry) => self.expire_pickers().await,
            }
            self.flush_closed(None).await;
        }
        self.session.release(self.out.is_deleted()).await;
        self.pickers.forget_all();
    }

    async fn run_job(&mut self, job: queue::Job) {
        match job {
            queue::Job::Prompt(p) => self.run_turn(p).await,
            queue::Job::Steer(s) => self.run_steer(s).await,
            queue::Job::Command(c) => self.command(c).await,
            queue::Job::Cron(c) => self.run_cron(c).await,
        }
    }

    async fn idle_cmd(&mut self, cmd: LaneCmd) {
        match cmd {
            LaneCmd::Prompt(mut p) => {
                // A regenerate needs the checkpoint before its message; refused without one.
                let refused = p.rewind.as_deref().is_some_and(|b| !self.can_rewind(b));
                match p.retry.take() {
                    Some(reply) if refused => drop(reply.send(Err(AgentError::NoCheckpoint))),
                    reply => {
                        p.retry = reply;
                        self.queue.prompt_when_idle(p);
                    }
                }
            }
            LaneCmd::Command(c) => self.queue.push(queue::Job::Command(c)),
            LaneCmd::Cron(c) => self.queue.push(queue::Job::Cron(c)),
            LaneCmd::Stop(reply) => drop(reply.send(false)),
            LaneCmd::Steer(_, reply) => drop(reply.send(Err(AgentError::NoTurn))),
            LaneCmd::Picker {
                picker_id,
                value,
                device,
                reply,
            } => {
                // A form's next question belongs to a turn; none runs, so it is not asked.
                let result = self.answer_picker(&picker_id, &value, device).await;
                if let Ok(Some(next)) = &result {
                    self.pickers.cancel(std::slice::from_ref(&next.id));
                }
                let _ = reply.send(result.map(drop));
            }
            LaneCmd::FollowAgent(done) => {
                self.follow_agent().await;
                let _ = done.send(());
            }
            LaneCmd::Prepare(done) => {
                if let Err(e) = self.ensure_session().await {
                    tracing::warn!(lane = ?self.lane(), error = %e, "could not prepare the agent session");
                }
                let _ = done.send(());
            }
        }
    }

    async fn idle_event(&mut self, ev: LaneEvent) {
        match ev {
            LaneEvent::Update(SessionUpdate::SessionInfoUpdate(info)) => {
                if let Some(title) = info.title {
                    self.agent_title(&title).await;
                }
            }
            LaneEvent::Update(_) => {}
            LaneEvent::Permission(_, responder) => responder.cancel(),
            LaneEvent::Elicitation(_, responder) => responder.cancel(),
            LaneEvent::Exited { generation, .. } => self.session.exited(generation),
        }
    }

    /// Takes the agent of the lane's channel when some channel changed its agent.
    async fn follow_agent(&mut self) {
        let epoch = self.inbox.epoch();
        if self.session.follow(&self.env.hosts, epoch).await {
            self.drop_checkpoints().await;
        }
    }

    /// The agent process and this lane's session on it (see [`session::SessionSlot::ensure`]).
    async fn ensure_session(&mut self) -> Result<Arc<super::host::Instance>, AgentError> {
        let (instance, fresh) = self.session.ensure(&mut self.events).await?;
        if fresh {
            self.out.system("The agent restarted and could not restore this conversation; it continues in a fresh session.").await;
        }
        Ok(instance)
    }

    // ----- pickers ---------------------------------------------------------------------------

    async fn expire_pickers(&mut self) {
        let expired = self.pickers.expire(Instant::now());
        for _ in 0..expired {
            self.out
                .system("The approval request expired without an answer and was cancelled.")
                .await;
        }
    }

    /// Sends `picker.closed` for the pickers closed since the last call (one transaction), and
    /// records their outcomes in the running turn's steps.
    async fn flush_closed(&mut self, mapper: Option<&mut TurnMapper>) {
        let closed = self.pickers.take_closed();
        if closed.is_empty() {
            return;
        }
        if let Some(mapper) = mapper {
            for (c, label) in &closed {
                mapper.picker_closed(c, label.clone());
            }
        }
        let frames = closed
            .into_iter()
            .map(|(c, _)| DurableFrame::PickerClosed(c))
            .collect();
        self.out.durable(frames, None, None).await;
    }

    /// Shows the agent's permission request to the devices; returns the picker's id.
    async fn open_permission(
        &mut self,
        request: RequestPermissionRequest,
        responder: PermissionResponder,
        mapper: &mut TurnMapper,
    ) -> Option<String> {
        let deadline = Instant::now() + self.host().timeouts.approval;
        let content = request.tool_call.content.as_deref().unwrap_or_default();
        let changes = mapper.changes_in(content);
        let opened = self
            .pickers
            .open_permission(request, responder, deadline, changes)?;
        mapper.picker_opened(&opened.id, opened.kind, &opened.title, &opened.changes);
        self.out.durable(opened.frames, None, None).await;
        Some(opened.id)
    }

    /// Opens the agent's form as a question picker; a form that cannot be shown as one question
    /// (or a URL to visit) is declined at once and a system message says so.
    async fn open_elicitation(
        &mut self,
        request: CreateElicitationRequest,
        responder: ElicitationResponder,
        mapper: &mut TurnMapper,
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
                self.out.system(text).await;
                return None;
            }
        };
        let timeout = self.host().timeouts.approval;
        let opened = self.pickers.open_form(form, responder, timeout);
        mapper.picker_opened(&opened.id, opened.kind, &opened.title, &opened.changes);
        self.out.durable(opened.frames, None, None).await;
        Some(opened.id)
    }

    /// Takes a device's answer to a picker; a form's next question comes back, to be shown by
    /// the running turn.
    async fn answer_picker(
        &mut self,
        picker_id: &str,
        value: &str,
        device: Option<String>,
    ) -> Result<Option<Box<pickers::Opened>>, AgentError> {
        let find = |models: &[String], value: &str| {
            session::find_model(models.iter().map(String::as_str), value)
        };
        match self.pickers.answer(picker_id, value, device, find)? {
            pickers::Answer::Approved => {}
            pickers::Answer::Next(opened) => return Ok(Some(opened)),
            pickers::Answer::Model(model) => self.set_model(&model).await,
            pickers::Answer::Reasoning(show) => self.set_reasoning(show).await,
            pickers::Answer::Agent(name) => self.switch_agent(&name).await,
        }
        Ok(None)
    }
}

fn short(s: &str) -> String {
    crate::text::tail(s.trim(), 300)
}

async fn sleep_until(at: Option<TokioInstant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
