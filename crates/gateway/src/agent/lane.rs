//! A lane's actor: one task per (chat, thread) that owns the lane's ACP session, runs one turn at
//! a time, queues what arrives meanwhile, and answers the lane's pickers.
//!
//! The gateway never sends a second `session/prompt` into a running turn: messages that arrive
//! while the lane is busy wait in the lane's queue. The one exception is steering through an
//! agent's own `/steer` command, which the agent handles inside the running turn.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use iris_acp::{
    ContentBlock, PermissionResponder, RequestPermissionRequest, SessionModelState, SessionUpdate,
};
use iris_protocol::Empty;
use iris_protocol::{
    AgentBusy, BusyReason, ChannelRenamed, Choice, Header, Message, ModelEntry, ModelProvider,
    Notification, PickerApproval, PickerChoice, PickerClarify, PickerModel, ReadReceiptEvent, Role,
    ServerFrame,
};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant as TokioInstant;

use super::host::{AgentHost, Instance, LaneEvent};
use super::turn::{Ending, Out, TurnConfig, TurnMapper};
use super::Agents;
use crate::handlers::{to_stored, Lane, WireError};
use crate::ids::{new_id, now_ms};
use crate::state::{append_filed, append_frame, Origin, Shared};

mod drive;
use drive::{Driven, Ended, Mode, Stopping};
mod scheduled;

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
}

/// A gateway command for the lane.
#[derive(Debug)]
pub struct CommandJob {
    /// Command name with its slash, resolved from aliases.
    pub name: &'static str,
    /// Everything after the name, trimmed.
    pub args: String,
    /// Connection that sent it.
    pub origin_conn: u64,
    /// The stored user message of the command.
    pub message_id: String,
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
        /// The result.
        reply: oneshot::Sender<Result<(), WireError>>,
    },
    /// The lane is being deleted or the gateway stops: end the running turn and exit.
    Close,
    /// Run (or queue) a scheduled job.
    Cron(crate::cron::CronRun),
}

enum Job {
    Prompt(PromptJob),
    Command(CommandJob),
    Cron(crate::cron::CronRun),
}

enum Pending {
    Approval {
        responder: PermissionResponder,
        options: Vec<String>,
        deadline: Instant,
    },
    Model {
        models: Vec<String>,
    },
    Reasoning,
}

struct Session {
    id: String,
    generation: u64,
    models: Option<SessionModelState>,
}

pub(super) struct LaneActor {
    shared: Arc<Shared>,
    agents: Arc<Agents>,
    host: Arc<AgentHost>,
    lane: Lane,
    rx: mpsc::UnboundedReceiver<LaneCmd>,
    ev_tx: mpsc::UnboundedSender<LaneEvent>,
    ev_rx: mpsc::UnboundedReceiver<LaneEvent>,
    session: Option<Session>,
    stored_session: Option<String>,
    show_reasoning: bool,
    queue: VecDeque<Job>,
    pickers: HashMap<String, Pending>,
    closing: bool,
    /// Set when the lane's channel was deleted: nothing more is written for it.
    deleted: Arc<AtomicBool>,
}

impl LaneActor {
    pub(super) fn new(
        shared: Arc<Shared>,
        agents: Arc<Agents>,
        lane: Lane,
        rx: mpsc::UnboundedReceiver<LaneCmd>,
        deleted: Arc<AtomicBool>,
    ) -> Self {
        let (ev_tx, ev_rx) = mpsc::unbounded_channel();
        let host = agents.host.clone();
        LaneActor {
            shared,
            agents,
            host,
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
            deleted,
        }
    }

    pub(super) async fn run(mut self) {
        self.stored_session = self
            .shared
            .store
            .lane_session(&self.lane.chat_id, self.lane.thread_id.as_deref())
            .await
            .ok()
            .flatten();
        loop {
            if self.closing {
                break;
            }
            if let Some(job) = self.queue.pop_front() {
                match job {
                    Job::Prompt(p) => self.run_turn(p).await,
                    Job::Command(c) => self.command(c).await,
                    Job::Cron(c) => self.run_cron(c).await,
                }
                continue;
            }
            let expiry = self.next_picker_deadline();
            tokio::select! {
                cmd = self.rx.recv() => match cmd {
                    None => break,
                    Some(cmd) => self.idle_cmd(cmd).await,
                },
                Some(ev) = self.ev_rx.recv() => self.idle_event(ev).await,
                _ = sleep_until(expiry) => self.expire_pickers().await,
            }
        }
        if let Some(s) = &self.session {
            self.host.remove_route(&s.id);
        }
        self.agents.forget_pickers(self.pickers.keys());
    }

    async fn idle_cmd(&mut self, cmd: LaneCmd) {
        match cmd {
            LaneCmd::Prompt(p) => self.queue.push_back(Job::Prompt(p)),
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
                reply,
            } => {
                let result = self.answer_picker(&picker_id, &value).await;
                let _ = reply.send(result);
            }
            LaneCmd::Close => self.closing = true,
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
        frames: Vec<ServerFrame>,
        message_id: Option<String>,
        final_message: Option<Message>,
    ) {
        if frames.is_empty() || self.is_deleted() {
            return;
        }
        let header = self.header();
        let lane = self.lane.clone();
        let result = self
            .shared
            .store
            .write(move |tx| {
                // A lane deleted meanwhile gets nothing more: checked in the same transaction.
                if tx
                    .get_channel(lane.thread_id.as_deref().unwrap_or(&lane.chat_id))?
                    .is_none()
                {
                    return Ok(());
                }
                if let Some(m) = &final_message {
                    tx.upsert_message(&to_stored(&lane.chat_id, lane.thread_id.as_deref(), m))?;
                }
                super::recovery::track(tx, &lane, &frames)?;
                for f in &frames {
                    append_frame(tx, &header, f, message_id.as_deref(), &Origin::none())?;
                }
                Ok(())
            })
            .await;
        if let Err(e) = result {
            tracing::error!(error = %e, "could not store agent frames");
        }
    }

    fn is_deleted(&self) -> bool {
        self.deleted.load(std::sync::atomic::Ordering::SeqCst)
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
                    self.shared.broadcast_ephemeral(
                        &self.header(),
                        &f,
                        Some(Arc::from(key.as_str())),
                    );
                }
            }
        }
        self.durable(batch, Some(message_id.to_owned()), final_message)
            .await;
    }

    async fn busy(&self, reason: BusyReason) {
        self.durable(
            vec![ServerFrame::AgentBusy(AgentBusy { reason })],
            None,
            None,
        )
        .await;
    }

    async fn idle(&self) {
        self.durable(vec![ServerFrame::AgentIdle(Empty {})], None, None)
            .await;
    }

    /// A system message in this lane, stored and delivered like any message.
    pub(super) async fn system(&self, text: impl Into<String>) {
        let message = Message {
            message_id: new_id("m_"),
            role: Role::System,
            text: text.into(),
            ts: now_ms(),
            ..Message::default()
        };
        let id = message.message_id.clone();
        self.durable(
            vec![ServerFrame::Message(message.clone())],
            Some(id),
            Some(message),
        )
        .await;
    }

    fn read_receipt(&self, conn: u64, message_id: &str) {
        if conn == 0 {
            return;
        }
        let frame = ServerFrame::ReadReceipt(ReadReceiptEvent {
            message_id: message_id.to_owned(),
            device_id: None,
        });
        self.shared
            .hub
            .send_to(conn, iris_protocol::encode(&self.header(), &frame).into());
    }

    // ----- sessions -------------------------------------------------------------------------

    /// The agent process and this lane's session on it, creating or restoring the session.
    async fn ensure_session(&mut self) -> Result<Arc<Instance>, String> {
        let instance = self.host.instance().await?;
        if self
            .session
            .as_ref()
            .is_some_and(|s| s.generation == instance.generation)
        {
            return Ok(instance);
        }
        if let Some(old) = self.session.take() {
            self.host.remove_route(&old.id);
        }
        let cwd = self.host.cwd.clone();
        if let Some(id) = self.stored_session.clone() {
            if instance.caps.load_session {
                self.host
                    .add_route(&id, instance.generation, self.ev_tx.clone());
                match instance.client.load_session(&id, &cwd).await {
                    Ok(resp) => {
                        // The agent replays the session's history before answering; drop it.
                        instance.fence().await;
                        self.drain_replay().await;
                        self.session = Some(Session {
                            id,
                            generation: instance.generation,
                            models: resp.models,
                        });
                        return Ok(instance);
                    }
                    Err(e) => {
                        self.host.remove_route(&id);
                        tracing::warn!(error = %e, "session/load failed; starting a fresh session");
                    }
                }
            }
        }
        let resp = instance
            .client
            .new_session(&cwd)
            .await
            .map_err(|e| format!("{} could not open a session: {e}", self.host.label))?;
        self.host
            .add_route(&resp.session_id, instance.generation, self.ev_tx.clone());
        let had_one = self.stored_session.is_some();
        self.set_stored_session(Some(resp.session_id.clone())).await;
        self.session = Some(Session {
            id: resp.session_id,
            generation: instance.generation,
            models: resp.models,
        });
        if had_one {
            self.system("The agent restarted and could not restore this conversation; it continues in a fresh session.").await;
        }
        Ok(instance)
    }

    async fn drain_replay(&mut self) {
        while let Ok(ev) = self.ev_rx.try_recv() {
            match ev {
                LaneEvent::Update(_) => {}
                other => self.idle_event(other).await,
            }
        }
    }

    async fn set_stored_session(&mut self, id: Option<String>) {
        self.stored_session = id.clone();
        let lane = self.lane.clone();
        let result = self
            .shared
            .store
            .write(move |tx| {
                tx.set_lane_session(&lane.chat_id, lane.thread_id.as_deref(), id.as_deref())
            })
            .await;
        if let Err(e) = result {
            tracing::warn!(error = %e, "could not store the lane's session id");
        }
    }

    fn current_model(&self) -> Option<String> {
        self.session
            .as_ref()
            .and_then(|s| s.models.as_ref())
            .map(|m| m.current_model_id.clone())
    }

    // ----- turns ----------------------------------------------------------------------------

    async fn run_turn(&mut self, job: PromptJob) {
        if let Some(notice) = self.agents.take_notice() {
            self.system(notice).await;
        }
        let instance = match self.ensure_session().await {
            Ok(i) => i,
            Err(e) => {
                self.read_receipt(job.origin_conn, &job.message_id);
                self.system(format!("The agent is not available: {e}"))
                    .await;
                return;
            }
        };
        let session_id = self
            .session
            .as_ref()
            .map(|s| s.id.clone())
            .unwrap_or_default();
        self.read_receipt(job.origin_conn, &job.message_id);
        let turn_started = Instant::now();
        self.busy(BusyReason::Processing).await;
        let mut mapper = TurnMapper::new(TurnConfig {
            message_id: new_id("m_"),
            role: Role::Assistant,
            model: self.current_model(),
            cwd: self.agents.cwd_display.clone(),
            show_reasoning: self.show_reasoning,
            update_interval: self.agents.update_interval,
        });
        let turn_id = mapper.message_id().to_owned();
        // A message of attachments only has no text block.
        let mut blocks = match job.text.is_empty() && !job.blocks.is_empty() {
            true => Vec::new(),
            false => vec![ContentBlock::text(job.text.clone())],
        };
        let images = instance.caps.prompt_capabilities.image;
        blocks.extend(crate::media::agent::prompt_blocks(&self.shared, job.blocks, images).await);
        let mut rx = std::mem::replace(&mut self.ev_rx, mpsc::unbounded_channel().1);
        let Driven { ended, steered, .. } = self
            .drive(
                Mode::Live,
                &instance,
                &session_id,
                blocks,
                &mut mapper,
                &mut rx,
            )
            .await;
        self.ev_rx = rx;
        let mut ending = Ending::default();
        let notice = match ended {
            Ended::Answered { cancelled, tokens } => {
                ending.cancelled = cancelled;
                ending.tokens = tokens;
                None
            }
            Ended::Stopped => {
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
        mapper.end_text();
        crate::media::agent::collect(&self.shared, &self.header(), &mut mapper).await;
        // Hermes applies steering at the next tool boundary; a turn that ended without one never
        // saw it, so it runs as the next turn.
        if let Some((text, tools_then)) = steered {
            if mapper.tool_count() == tools_then && !ending.failed {
                self.queue.push_front(Job::Prompt(steer_job(text)));
            }
        }
        let outs = mapper.finish(&ending, Instant::now());
        self.emit(outs, &turn_id).await;
        self.shared.metrics.observe_turn(turn_started.elapsed());
        if let Some(n) = notice {
            self.system(n).await;
        }
        self.idle().await;
    }

    fn cancel_turn(
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
        for id in turn_pickers {
            if let Some(Pending::Approval { responder, .. }) = self.pickers.remove(id) {
                responder.cancel();
            }
        }
    }

    /// Redirects the running turn. With an agent that has its own `steer` command the text goes
    /// to it (returned, so the turn can check the agent had a chance to apply it); otherwise the
    /// turn is stopped and the text runs next.
    fn steer(
        &mut self,
        instance: &Instance,
        session_id: &str,
        text: String,
        stopping: &mut Stopping,
        turn_pickers: &[String],
    ) -> Result<Option<String>, WireError> {
        if text.trim().is_empty() {
            return Err(WireError::bad_request("steering text is empty"));
        }
        if stopping.since.is_none() && self.host.has_command("steer") {
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
        // No user message stands behind a steer, so nothing gets a read receipt.
        self.queue.push_front(Job::Prompt(steer_job(text)));
        Ok(None)
    }

    // ----- pickers --------------------------------------------------------------------------

    fn next_picker_deadline(&self) -> Option<TokioInstant> {
        self.pickers
            .values()
            .filter_map(|p| match p {
                Pending::Approval { deadline, .. } => Some(TokioInstant::from_std(*deadline)),
                _ => None,
            })
            .min()
    }

    async fn expire_pickers(&mut self) {
        let now = Instant::now();
        let expired: Vec<String> = self
            .pickers
            .iter()
            .filter(|(_, p)| matches!(p, Pending::Approval { deadline, .. } if *deadline <= now))
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            if let Some(Pending::Approval { responder, .. }) = self.pickers.remove(&id) {
                responder.cancel();
            }
            self.agents.forget_pickers(std::iter::once(&id));
            self.system("The approval request expired without an answer and was cancelled.")
                .await;
        }
    }

    fn register_picker(&mut self, pending: Pending) -> String {
        let id = new_id("p_");
        self.pickers.insert(id.clone(), pending);
        self.agents.remember_picker(&id, &self.lane);
        id
    }

    async fn open_permission(
        &mut self,
        request: RequestPermissionRequest,
        responder: PermissionResponder,
    ) -> Option<String> {
        let options: Vec<String> = request
            .options
            .iter()
            .map(|o| o.option_id.clone())
            .collect();
        let choices: Vec<Choice> = request
            .options
            .iter()
            .map(|o| Choice {
                value: o.option_id.clone(),
                label: o.name.clone(),
                is_current: false,
            })
            .collect();
        let deadline = Instant::now() + self.agents.picker_timeout;
        let question = request.clarify_question().map(str::to_owned);
        let id = self.register_picker(Pending::Approval {
            responder,
            options,
            deadline,
        });
        let (frame, kind, title) = match question {
            Some(q) => (
                ServerFrame::PickerClarify(PickerClarify {
                    picker_id: id.clone(),
                    title: q.clone(),
                    choices,
                }),
                "clarify",
                q,
            ),
            None => {
                let title = request
                    .tool_call
                    .title
                    .clone()
                    .unwrap_or_else(|| "The agent asks for permission".into());
                let preview = request
                    .tool_call
                    .content
                    .as_deref()
                    .and_then(permission_preview)
                    .or_else(|| {
                        request
                            .tool_call
                            .raw_input
                            .as_ref()
                            .map(|v| super::turn::tail(&v.to_string(), 2000))
                    });
                (
                    ServerFrame::PickerApproval(PickerApproval {
                        picker_id: id.clone(),
                        title: title.clone(),
                        preview,
                        choices,
                    }),
                    "approval",
                    title,
                )
            }
        };
        let note = ServerFrame::Notification(Notification {
            kind: kind.into(),
            title: if kind == "clarify" {
                "Question from the agent".into()
            } else {
                "Approval needed".into()
            },
            body: Some(super::turn::tail(&title, 200)),
            ts: now_ms(),
        });
        self.durable(
            vec![
                frame,
                note,
                ServerFrame::AgentBusy(AgentBusy {
                    reason: BusyReason::WaitingInput,
                }),
            ],
            None,
            None,
        )
        .await;
        Some(id)
    }

    async fn answer_picker(&mut self, picker_id: &str, value: &str) -> Result<(), WireError> {
        let Some(pending) = self.pickers.remove(picker_id) else {
            return Err(WireError::not_found("picker unknown or expired"));
        };
        self.agents
            .forget_pickers(std::iter::once(&picker_id.to_owned()));
        match pending {
            Pending::Approval {
                responder,
                options,
                deadline,
            } => {
                if !options.iter().any(|o| o == value) {
                    self.pickers.insert(
                        picker_id.to_owned(),
                        Pending::Approval {
                            responder,
                            options,
                            deadline,
                        },
                    );
                    self.agents.remember_picker(picker_id, &self.lane);
                    return Err(WireError::bad_request(
                        "value is not one of the picker's choices",
                    ));
                }
                responder.select(value);
                Ok(())
            }
            Pending::Model { models } => {
                if !models.iter().any(|m| m == value) {
                    self.pickers
                        .insert(picker_id.to_owned(), Pending::Model { models });
                    self.agents.remember_picker(picker_id, &self.lane);
                    return Err(WireError::bad_request(
                        "value is not one of the offered models",
                    ));
                }
                self.set_model(value).await;
                Ok(())
            }
            Pending::Reasoning => match value {
                "show" | "hide" => {
                    self.set_reasoning(value == "show").await;
                    Ok(())
                }
                _ => Err(WireError::bad_request("value must be show or hide")),
            },
        }
    }

    // ----- gateway commands -----------------------------------------------------------------

    async fn command(&mut self, c: CommandJob) {
        self.read_receipt(c.origin_conn, &c.message_id);
        match c.name {
            "/new" => {
                if let Some(old) = self.session.take() {
                    self.host.remove_route(&old.id);
                }
                self.set_stored_session(None).await;
                match self.ensure_session().await {
                    Ok(_) => self.system("Started a new session.").await,
                    Err(e) => {
                        self.system(format!("Could not start a new session: {e}"))
                            .await
                    }
                }
            }
            "/stop" => self.system("Nothing is running in this chat.").await,
            "/status" => {
                let text = self.status_text();
                self.system(text).await;
            }
            "/help" => {
                let mut text = String::from("Commands:");
                for cmd in super::catalog(&self.host) {
                    let aliases = if cmd.aliases.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", cmd.aliases.join(", "))
                    };
                    let hint = if cmd.args_hint.is_empty() {
                        String::new()
                    } else {
                        format!(" {}", cmd.args_hint)
                    };
                    text.push_str(&format!(
                        "\n{}{hint}{aliases} — {}",
                        cmd.name, cmd.description
                    ));
                }
                self.system(text).await;
            }
            "/reasoning" => match c.args.as_str() {
                "show" | "on" => self.set_reasoning(true).await,
                "hide" | "off" => self.set_reasoning(false).await,
                "" => {
                    let id = self.register_picker(Pending::Reasoning);
                    let choices = vec![
                        Choice {
                            value: "show".into(),
                            label: "Show reasoning".into(),
                            is_current: self.show_reasoning,
                        },
                        Choice {
                            value: "hide".into(),
                            label: "Hide reasoning".into(),
                            is_current: !self.show_reasoning,
                        },
                    ];
                    let frame = ServerFrame::PickerChoice(PickerChoice {
                        picker_id: id,
                        title: "Reasoning".into(),
                        choices,
                    });
                    self.durable(vec![frame], None, None).await;
                }
                other => {
                    self.system(format!(
                        "Unknown option {other:?}: use /reasoning show or /reasoning hide."
                    ))
                    .await
                }
            },
            "/cron" => {
                let text = crate::cron::command::run(&self.shared, &self.lane, &c.args).await;
                self.system(text).await;
            }
            "/title" => {
                if c.args.is_empty() {
                    self.system("Usage: /title <new name>").await;
                } else {
                    self.user_title(&c.args).await;
                }
            }
            "/model" => {
                if let Err(e) = self.ensure_session().await {
                    self.system(format!("The agent is not available: {e}"))
                        .await;
                    return;
                }
                if c.args.is_empty() {
                    self.model_picker().await;
                } else {
                    let wanted = c.args.clone();
                    let models = self.session.as_ref().and_then(|s| s.models.as_ref());
                    let found = models.and_then(|m| {
                        m.available_models
                            .iter()
                            .find(|x| x.model_id == wanted)
                            .or_else(|| {
                                m.available_models
                                    .iter()
                                    .find(|x| super::turn::bare_model(&x.model_id) == wanted)
                            })
                            .map(|x| x.model_id.clone())
                    });
                    match found {
                        Some(id) => self.set_model(&id).await,
                        None => {
                            let list = models
                                .map(|m| {
                                    m.available_models
                                        .iter()
                                        .map(|x| x.model_id.clone())
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                })
                                .unwrap_or_default();
                            self.system(format!("Unknown model {wanted:?}. Available: {list}"))
                                .await;
                        }
                    }
                }
            }
            other => self.system(format!("{other} is not available here.")).await,
        }
    }

    fn status_text(&self) -> String {
        let agent = match self.agents.agent_info() {
            Some(info) => format!("{} ({info})", self.host.label),
            None => self.host.label.clone(),
        };
        let model = self
            .current_model()
            .unwrap_or_else(|| "unknown until the first message".into());
        let session = self
            .session
            .as_ref()
            .map(|s| s.id.as_str())
            .or(self.stored_session.as_deref())
            .unwrap_or("none yet");
        format!(
            "Agent: {agent}\nModel: {model}\nSession: {session}\nReasoning: {}\nQueued messages: {}\nWorking directory: {}",
            if self.show_reasoning { "shown" } else { "hidden" },
            self.queue.len(),
            self.agents.cwd_display,
        )
    }

    async fn model_picker(&mut self) {
        let Some(models) = self.session.as_ref().and_then(|s| s.models.clone()) else {
            self.system("This agent does not offer a choice of models.")
                .await;
            return;
        };
        let mut providers: Vec<ModelProvider> = Vec::new();
        for m in &models.available_models {
            let provider = m
                .model_id
                .split_once(':')
                .map(|(p, _)| p.to_owned())
                .unwrap_or_else(|| "default".into());
            let entry = ModelEntry {
                id: m.model_id.clone(),
                label: m.name.clone(),
            };
            match providers.iter_mut().find(|p| p.id == provider) {
                Some(p) => p.models.push(entry),
                None => providers.push(ModelProvider {
                    label: provider.clone(),
                    id: provider,
                    models: vec![entry],
                }),
            }
        }
        let current = models.current_model_id.clone();
        let id = self.register_picker(Pending::Model {
            models: models
                .available_models
                .iter()
                .map(|m| m.model_id.clone())
                .collect(),
        });
        let frame = ServerFrame::PickerModel(PickerModel {
            picker_id: id,
            current_provider: current.split_once(':').map(|(p, _)| p.to_owned()),
            current_model: Some(current),
            providers,
        });
        self.durable(vec![frame], None, None).await;
    }

    async fn set_model(&mut self, model_id: &str) {
        let Some(session) = self.session.as_mut() else {
            self.system("The agent is not running; send a message first.")
                .await;
            return;
        };
        let instance = match self.host.instance().await {
            Ok(i) if i.generation == session.generation => i,
            _ => {
                self.system("The agent restarted; try again.").await;
                return;
            }
        };
        match instance.client.set_model(&session.id, model_id).await {
            Ok(()) => {
                if let Some(m) = session.models.as_mut() {
                    m.current_model_id = model_id.to_owned();
                }
                self.system(format!("Model switched to {model_id}.")).await;
            }
            Err(e) => {
                self.system(format!(
                    "Could not switch the model: {}",
                    short(&e.to_string())
                ))
                .await
            }
        }
    }

    async fn set_reasoning(&mut self, show: bool) {
        self.show_reasoning = show;
        self.system(if show {
            "Reasoning will be shown."
        } else {
            "Reasoning will be hidden."
        })
        .await;
    }

    /// Renames this lane's thread (or channel) at the user's request.
    async fn user_title(&mut self, title: &str) {
        let Some(name) = clean_title(title) else {
            self.system("A title needs 1-100 characters.").await;
            return;
        };
        let target = self
            .lane
            .thread_id
            .clone()
            .unwrap_or_else(|| self.lane.chat_id.clone());
        self.rename(&target, &name, true).await;
        self.system(format!("Renamed to {name}.")).await;
    }

    /// The agent named the session: rename the thread unless the user named it.
    async fn agent_title(&mut self, title: &str) {
        let (Some(thread), Some(name)) = (self.lane.thread_id.clone(), clean_title(title)) else {
            return;
        };
        self.rename(&thread, &name, false).await;
    }

    async fn rename(&self, chat_id: &str, name: &str, by_user: bool) {
        let (chat, name) = (chat_id.to_owned(), name.to_owned());
        let parent = self.lane.chat_id.clone();
        let is_thread = self.lane.thread_id.as_deref() == Some(chat_id);
        let result = self
            .shared
            .store
            .write(move |tx| {
                if !tx.rename_channel(&chat, &name, by_user)? {
                    return Ok(false);
                }
                let filed = if is_thread {
                    (Some(parent.as_str()), Some(chat.as_str()))
                } else {
                    (Some(chat.as_str()), None)
                };
                let renamed = ServerFrame::ChannelRenamed(ChannelRenamed {
                    chat_id: chat.clone(),
                    name: name.clone(),
                });
                append_filed(
                    tx,
                    &Header::default(),
                    &renamed,
                    filed,
                    None,
                    &Origin::none(),
                )?;
                if !by_user {
                    let note = ServerFrame::Notification(Notification {
                        kind: "channel_renamed".into(),
                        title: name.clone(),
                        body: Some(format!("Renamed topic to {name}")),
                        ts: now_ms(),
                    });
                    append_filed(
                        tx,
                        &Header::lane(parent.clone(), is_thread.then(|| chat.clone())),
                        &note,
                        filed,
                        None,
                        &Origin::none(),
                    )?;
                }
                Ok(true)
            })
            .await;
        if let Err(e) = result {
            tracing::warn!(error = %e, "rename failed");
        }
    }
}

/// A turn for steering text: no stored user message stands behind it, so no read receipt.
fn steer_job(text: String) -> PromptJob {
    PromptJob {
        text,
        blocks: Vec::new(),
        origin_conn: 0,
        message_id: String::new(),
    }
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

fn clean_title(title: &str) -> Option<String> {
    let t: String = title
        .trim()
        .chars()
        .filter(|c| !c.is_control())
        .take(100)
        .collect();
    Some(t).filter(|t| !t.trim().is_empty())
}

fn permission_preview(content: &[iris_acp::ToolCallContent]) -> Option<String> {
    let mut out = String::new();
    for c in content {
        match c {
            iris_acp::ToolCallContent::Content(chunk) => {
                if let Some(t) = chunk.content.as_text() {
                    out.push_str(t);
                    out.push('\n');
                }
            }
            iris_acp::ToolCallContent::Diff(d) => {
                out.push_str(&format!("--- {}\n", d.path));
                if let Some(old) = &d.old_text {
                    for l in old.lines() {
                        out.push_str(&format!("-{l}\n"));
                    }
                }
                for l in d.new_text.lines() {
                    out.push_str(&format!("+{l}\n"));
                }
            }
            _ => {}
        }
    }
    let out = out.trim_end().to_owned();
    Some(super::turn::tail(&out, 4000)).filter(|s| !s.is_empty())
}

fn short(s: &str) -> String {
    super::turn::tail(s.trim(), 300)
}

async fn sleep_until(at: Option<TokioInstant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
