//! A lane's actor: one task per (chat, thread) that owns the lane's ACP session, runs one turn at
//! a time, queues what arrives meanwhile, and answers the lane's pickers.
//!
//! The gateway never sends a second `session/prompt` into a running turn: messages that arrive
//! while the lane is busy wait in the lane's queue. The one exception is steering through an
//! agent's own `/steer` command, which the agent handles inside the running turn.
//!
//! The actor's rooms: [`session`] (creating and restoring the ACP session), [`turns`] (a user's
//! turn, stop and steer), [`drive`] (the loop every prompt runs in), [`scheduled`] (a cron run),
//! [`pickers`] (approvals and choices), [`commands`] (the gateway's slash commands) and
//! [`titles`] (naming chats and threads). This file holds the actor itself, its mailbox and how
//! it writes frames.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use iris_acp::{ContentBlock, PermissionResponder, SessionModelState, SessionUpdate};
use iris_protocol::{
    AgentBusy, BusyReason, Choice, DurableFrame, EphemeralFrame, Header, Message, PickerClosed,
};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant as TokioInstant;
use tokio_util::sync::CancellationToken;

use super::bridge::{Bridge, Slot};
use super::host::{AgentHost, LaneEvent};
use super::turn::Out;
use super::usage::UsageMeter;
use crate::command::Command;
use crate::cron::CronRun;
use crate::outbox::{self, Lane, Origin};
use crate::wire::WireError;

mod checkpoint;
mod commands;
mod drive;
mod pickers;
mod scheduled;
mod session;
mod titles;
mod turns;

/// A user message for the agent.
#[derive(Debug)]
pub struct PromptJob {
    /// The text.
    pub text: String,
    /// Extra content blocks (attachments).
    pub blocks: Vec<ContentBlock>,
    /// Connection that sent it (gets the `read.receipt`), 0 for none.
    pub origin_conn: u64,
    /// The stored user message.
    pub message_id: String,
    /// Its place in the lane's queue (none for steering text run as a turn).
    pub slot: Option<Slot>,
    /// For a retry (`message.retry`): told whether the lane took it. A lane that is running a
    /// turn refuses a retry instead of queueing it.
    pub retry: Option<oneshot::Sender<Result<(), WireError>>>,
    /// `agent.busy` was stored with the message (the lane was idle then,
    /// [`crate::agent::recovery::busy_with_message`]). It stands for this turn only if the lane
    /// ran nothing else in between; otherwise the turn announces its own.
    pub busy_stored: bool,
}

impl PromptJob {
    /// A retry is taken by an idle lane: it runs next.
    fn take_retry(&mut self) {
        if let Some(reply) = self.retry.take() {
            let _ = reply.send(Ok(()));
        }
    }

    /// A retry is refused by a lane that is running a turn; returns whether it was one.
    fn refuse_retry(&mut self) -> bool {
        let Some(reply) = self.retry.take() else {
            return false;
        };
        let _ = reply.send(Err(WireError::new(
            iris_protocol::ErrorCode::RateLimited,
            "a turn is running in this chat; retry when it has ended",
        )));
        true
    }
}

/// A gateway command for the lane.
#[derive(Debug)]
pub struct CommandJob {
    /// The command with its arguments.
    pub command: Command,
    /// Connection that sent it.
    pub origin_conn: u64,
    /// The stored user message of the command.
    pub message_id: String,
    /// Its place in the lane's queue.
    pub slot: Option<Slot>,
}

/// What a lane is asked to do.
#[derive(Debug)]
pub enum LaneCmd {
    /// Run (or queue) a turn.
    Prompt(PromptJob),
    /// Run a gateway command.
    Command(CommandJob),
    /// Stop the running turn; answers whether one was running.
    Stop(oneshot::Sender<bool>),
    /// Redirect the running turn.
    Steer(String, oneshot::Sender<Result<(), WireError>>),
    /// Answer a picker.
    Picker {
        /// The picker.
        picker_id: String,
        /// The chosen value.
        value: String,
        /// The device that answered.
        device: Option<String>,
        /// The result.
        reply: oneshot::Sender<Result<(), WireError>>,
    },
    /// Run (or queue) a scheduled job.
    Cron(CronRun),
    /// Open (or restore) the lane's agent session ahead of its first turn; answers when done.
    Prepare(oneshot::Sender<()>),
    /// The lane's channel changed its agent: follow it (when idle; a busy lane follows before
    /// its next job). Answers when done.
    FollowAgent(oneshot::Sender<()>),
}

enum Job {
    Prompt(PromptJob),
    /// Steering text run as a turn of its own.
    Steer(Steering),
    Command(CommandJob),
    Cron(CronRun),
}

/// Steering text waiting to run as a turn.
struct Steering {
    text: String,
    /// Its steering message is stored already (the agent was given it inside the turn before).
    stored: bool,
}

enum Pending {
    Approval {
        responder: PermissionResponder,
        /// The agent's options: the values a device may answer with, and their labels.
        options: Vec<Choice>,
        deadline: Instant,
    },
    Model {
        models: Vec<String>,
    },
    Reasoning,
    Agent {
        names: Vec<String>,
    },
}

struct Session {
    id: String,
    generation: u64,
    models: Option<SessionModelState>,
    /// Turns the agent's token reports into each turn's own count.
    usage: UsageMeter,
}

/// Titles the agent may give a thread from the start of one turn to the start of the next
/// (while it is idle as well); later ones are ignored.
const AGENT_TITLES_PER_TURN: u8 = 3;

pub(super) struct LaneActor {
    bridge: Arc<Bridge>,
    /// The agent of the lane's channel (read when the actor starts).
    host: Arc<AgentHost>,
    lane: Lane,
    rx: mpsc::Receiver<LaneCmd>,
    ev_tx: mpsc::UnboundedSender<LaneEvent>,
    ev_rx: mpsc::UnboundedReceiver<LaneEvent>,
    session: Option<Session>,
    stored_session: Option<String>,
    show_reasoning: bool,
    queue: VecDeque<Job>,
    pickers: HashMap<String, Pending>,
    closing: bool,
    /// Cancelled when the lane is deleted or the gateway stops: end the running turn and exit.
    close: CancellationToken,
    /// Set when the lane's channel was deleted: nothing more is written for it.
    deleted: Arc<AtomicBool>,
    /// The bridge's agent epoch when the lane last read its channel's agent.
    epoch: u64,
    /// Checkpoints of the running answer's text.
    checkpoints: checkpoint::Checkpoints,
    /// Titles the agent may still give the thread before the next turn starts
    /// ([`AGENT_TITLES_PER_TURN`]).
    agent_titles_left: u8,
    /// Pickers closed since the last [`LaneActor::flush_closed`], with the chosen label.
    closed: Vec<(PickerClosed, Option<String>)>,
}

impl LaneActor {
    pub(super) fn new(
        bridge: Arc<Bridge>,
        lane: Lane,
        rx: mpsc::Receiver<LaneCmd>,
        deleted: Arc<AtomicBool>,
        close: CancellationToken,
    ) -> Self {
        let (ev_tx, ev_rx) = mpsc::unbounded_channel();
        LaneActor {
            host: bridge.host(None).clone(),
            bridge,
            lane,
            rx,
            ev_tx,
            ev_rx,
            session: None,
            stored_session: None,
            show_reasoning: true,
            queue: VecDeque::new(),
            pickers: HashMap::new(),
            closing: false,
            close,
            deleted,
            epoch: u64::MAX,
            checkpoints: checkpoint::Checkpoints::default(),
            agent_titles_left: AGENT_TITLES_PER_TURN,
            closed: Vec::new(),
        }
    }

    fn host(&self) -> &Arc<AgentHost> {
        &self.host
    }

    pub(super) async fn run(mut self) {
        self.follow_agent().await;
        self.stored_session = self
            .bridge
            .shared
            .store
            .lane_session(&self.lane.chat_id, self.lane.thread_id.as_deref())
            .await
            .ok()
            .flatten();
        loop {
            if self.closing || self.close.is_cancelled() {
                break;
            }
            if let Some(job) = self.queue.pop_front() {
                self.follow_agent().await;
                match job {
                    Job::Prompt(p) => self.run_turn(p).await,
                    Job::Steer(s) => self.run_steer(s).await,
                    Job::Command(c) => self.command(c).await,
                    Job::Cron(c) => self.run_cron(c).await,
                }
                continue;
            }
            let expiry = self.next_picker_deadline();
            let close = self.close.clone();
            tokio::select! {
                _ = close.cancelled() => break,
                cmd = self.rx.recv() => match cmd {
                    None => break,
                    Some(cmd) => self.idle_cmd(cmd).await,
                },
                Some(ev) = self.ev_rx.recv() => self.idle_event(ev).await,
                _ = sleep_until(expiry) => self.expire_pickers().await,
            }
            self.flush_closed(None).await;
        }
        if let Some(s) = &self.session {
            self.host().remove_route(&s.id);
            // A deleted lane's session is never used again.
            if self.is_deleted() {
                self.close_session(s).await;
            }
        }
        self.bridge.forget_pickers(self.pickers.keys());
    }

    async fn idle_cmd(&mut self, cmd: LaneCmd) {
        match cmd {
            LaneCmd::Prompt(mut p) => {
                p.take_retry();
                // Something queued runs first and ends with `agent.idle`.
                p.busy_stored &= self.queue.is_empty();
                self.queue.push_back(Job::Prompt(p))
            }
            LaneCmd::Command(c) => self.queue.push_back(Job::Command(c)),
            LaneCmd::Cron(c) => self.queue.push_back(Job::Cron(c)),
            LaneCmd::Stop(reply) => {
                let _ = reply.send(false);
            }
            LaneCmd::Steer(_, reply) => {
                let _ = reply.send(Err(WireError::not_found("no turn is running in this lane")));
            }
            LaneCmd::Picker {
                picker_id,
                value,
                device,
                reply,
            } => {
                let result = self.answer_picker(&picker_id, &value, device).await;
                let _ = reply.send(result);
            }
            LaneCmd::FollowAgent(done) => {
                self.follow_agent().await;
                let _ = done.send(());
            }
            LaneCmd::Prepare(done) => {
                if let Err(e) = self.ensure_session().await {
                    tracing::warn!(lane = ?self.lane, error = %e, "could not prepare the agent session");
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
            LaneEvent::Exited { generation, .. } => {
                if self
                    .session
                    .as_ref()
                    .is_some_and(|s| s.generation == generation)
                {
                    self.session = None;
                }
            }
        }
    }

    // ----- emitting -------------------------------------------------------------------------

    fn header(&self) -> Header {
        self.lane.header()
    }

    /// Appends durable frames of the turn (filed under `message_id`) in one transaction.
    async fn durable(
        &self,
        frames: Vec<DurableFrame>,
        message_id: Option<String>,
        final_message: Option<Message>,
    ) {
        self.queue_durable(frames, message_id, final_message).await
    }

    /// [`Self::durable`], queued to the store at once: the returned future only waits for the
    /// commit (and logs a failure), and what the lane stores later is committed after it.
    fn queue_durable(
        &self,
        frames: Vec<DurableFrame>,
        message_id: Option<String>,
        final_message: Option<Message>,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let queued = (!frames.is_empty() && !self.is_deleted()).then(|| {
            let header = self.header();
            let lane = self.lane.clone();
            self.bridge.shared.store.write_queued(move |tx| {
                // A lane deleted meanwhile gets nothing more: checked in the same transaction.
                if tx.get_channel(lane.row_id())?.is_none() {
                    return Ok(());
                }
                if let Some(m) = &final_message {
                    tx.upsert_message(&outbox::to_stored(
                        &lane.chat_id,
                        lane.thread_id.as_deref(),
                        m,
                    ))?;
                }
                super::recovery::track(tx, &lane, &frames)?;
                for f in frames {
                    outbox::append(tx, &header, f, message_id.as_deref(), &Origin::none())?;
                }
                Ok(())
            })
        });
        async move {
            if let Some(Err(e)) = match queued {
                Some(commit) => Some(commit.await),
                None => None,
            } {
                tracing::error!(error = %e, "could not store agent frames");
            }
        }
    }

    fn is_deleted(&self) -> bool {
        self.deleted.load(Ordering::SeqCst)
    }

    async fn emit(&self, outs: Vec<Out>, message_id: &str) {
        if self.is_deleted() {
            return;
        }
        let mut batch = Vec::new();
        let mut final_message = None;
        for out in outs {
            match out {
                Out::Durable(f) => batch.push(f),
                Out::Final(f, m) => {
                    batch.push(f);
                    final_message = Some(m);
                }
                Out::Ephemeral(f, key) => {
                    self.durable(
                        std::mem::take(&mut batch),
                        Some(message_id.to_owned()),
                        final_message.take(),
                    )
                    .await;
                    self.bridge.shared.hub.broadcast(
                        &self.header(),
                        f,
                        Some(Arc::from(key.as_str())),
                    );
                }
            }
        }
        self.durable(batch, Some(message_id.to_owned()), final_message)
            .await;
    }

    async fn busy(&self, reason: BusyReason) {
        self.queue_busy(reason).await
    }

    /// `agent.busy`, queued to the store; the future waits for its commit.
    fn queue_busy(&self, reason: BusyReason) -> impl std::future::Future<Output = ()> + 'static {
        let frames = vec![DurableFrame::AgentBusy(AgentBusy { reason })];
        self.queue_durable(frames, None, None)
    }

    async fn idle(&self) {
        self.durable(vec![DurableFrame::AgentIdle], None, None)
            .await;
    }

    /// A system message in this lane, stored and delivered like any message.
    pub(super) async fn system(&self, text: impl Into<String>) {
        let message = outbox::system_message(text);
        let id = message.message_id.clone();
        self.durable(
            vec![DurableFrame::Message(message.clone())],
            Some(id),
            Some(message),
        )
        .await;
    }

    /// Tells the sending connection that its message was taken.
    fn read_receipt(&self, conn: u64, message_id: &str) {
        if conn == 0 {
            return;
        }
        let frame = EphemeralFrame::Accepted {
            message_id: message_id.to_owned(),
        };
        self.bridge.shared.hub.send_to(conn, &self.header(), frame);
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
