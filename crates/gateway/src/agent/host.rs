//! The agent process: spawned on demand, initialized, restarted with backoff when it dies, and
//! its events routed to the lane that owns each ACP session.
//!
//! One process per named agent serves every lane that uses it (an agent like Hermes costs about
//! 100 MiB a process); each agent has its own host, so one crashing never touches the others' lanes.
//! The process is disposable: when it dies, every lane with a session on it is told, and lanes
//! resume on the next process with `session/load`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use iris_acp::rpc::METHOD_NOT_FOUND;
use iris_acp::{
    AgentCapabilities, AgentClient, AgentEvent, AgentSpec, AvailableCommand, ContentBlock,
    CreateElicitationRequest, ElicitationResponder, Implementation, PermissionResponder,
    RequestPermissionRequest, SessionUpdate,
};
use tokio::sync::{mpsc, oneshot};

use super::choice::{without_gateway_env, AgentChoice};
use super::error::AgentError;
use super::spare::{Spare, SpareSession, OPEN_TIMEOUT as SPARE_TIMEOUT};
use crate::config::AgentTimeouts;

/// Events a lane's queue holds. When it is full the host stops reading the agent's output
/// (merging text chunks for that lane meanwhile), so an agent that writes faster than its lane
/// stores waits for it.
pub const LANE_EVENTS: usize = 64;

/// The most text chunks merged into one held event hold: beyond it the host stops reading.
const MAX_MERGED: usize = 64 * 1024;

/// Where the events of a lane's sessions go.
pub type EventTx = mpsc::Sender<LaneEvent>;
/// Where a lane hears the events of its sessions.
pub type EventRx = mpsc::Receiver<LaneEvent>;

/// A new channel for a lane's events.
pub fn event_channel() -> (EventTx, EventRx) {
    mpsc::channel(LANE_EVENTS)
}

/// An event waiting for room in its lane's queue.
struct Held {
    tx: EventTx,
    session: String,
    event: LaneEvent,
}

impl Held {
    /// Takes `update` into the held event when both are plain text of the answer for the same
    /// session (a note that starts with `⏩`, like Hermes' steering acknowledgement, stays
    /// alone); gives it back otherwise.
    fn merge(&mut self, session: &str, update: SessionUpdate) -> Option<SessionUpdate> {
        let LaneEvent::Update(SessionUpdate::AgentMessageChunk(held)) = &mut self.event else {
            return Some(update);
        };
        let (ContentBlock::Text(held), SessionUpdate::AgentMessageChunk(next)) =
            (&mut held.content, &update)
        else {
            return Some(update);
        };
        let Some(text) = next.content.as_text() else {
            return Some(update);
        };
        let note = |t: &str| t.trim_start().starts_with('⏩');
        let full = held.text.len() + text.len() > MAX_MERGED;
        if session != self.session || full || note(&held.text) || note(text) {
            return Some(update);
        }
        held.text.push_str(text);
        None
    }
}

/// What a lane hears from the agent.
#[derive(Debug)]
pub enum LaneEvent {
    /// A `session/update` for the lane's session.
    Update(SessionUpdate),
    /// The agent asks for permission (or, by convention, a clarifying answer).
    Permission(RequestPermissionRequest, PermissionResponder),
    /// The agent asks the user to fill in a form (`elicitation/create`).
    Elicitation(CreateElicitationRequest, ElicitationResponder),
    /// The process serving the lane's session died.
    Exited {
        /// The process generation that died.
        generation: u64,
        /// Its exit status and stderr tail.
        detail: String,
    },
}

/// A running, initialized agent process.
pub struct Instance {
    /// The client.
    pub client: AgentClient,
    /// Increases with every process the host starts.
    pub generation: u64,
    /// What the agent supports.
    pub caps: AgentCapabilities,
    /// Its name and version.
    pub info: Option<Implementation>,
    control: mpsc::Sender<oneshot::Sender<()>>,
}

impl Instance {
    /// Waits until every event the agent sent before this call has been routed to its lane.
    /// A lane calls this after `session/load`, whose replayed history it then discards.
    pub async fn fence(&self) {
        let (tx, rx) = oneshot::channel();
        if self.control.send(tx).await.is_ok() {
            let _ = rx.await;
        }
    }

    /// Ends a session the gateway no longer needs with `session/close`, where the agent
    /// advertises it; a failure or a slow answer is only logged (the session then lives on in
    /// the agent until it exits).
    pub async fn close_session(&self, session_id: &str) {
        if !self.caps.session_capability("close") {
            return;
        }
        match tokio::time::timeout(CLOSE_TIMEOUT, self.client.close_session(session_id)).await {
            Ok(Ok(())) => tracing::debug!(session = session_id, "agent session closed"),
            Ok(Err(e)) => tracing::info!(session = session_id, error = %e, "session/close failed"),
            Err(_) => tracing::info!(
                session = session_id,
                "session/close was not answered in time"
            ),
        }
    }
}

struct Route {
    generation: u64,
    tx: EventTx,
}

#[derive(Default)]
struct State {
    current: Option<Arc<Instance>>,
    generation: u64,
    failures: u32,
    last_failure: Option<Instant>,
}

/// The host of one named agent: its process, restarts and backoff are its own.
pub struct AgentHost {
    /// The agent's name, as chats and `/agent` call it.
    pub name: String,
    /// Its timeouts.
    pub timeouts: AgentTimeouts,
    spec: AgentSpec,
    /// Human name for messages ("Hermes", "demo agent", or the command).
    pub label: String,
    /// The agent's working directory.
    pub cwd: PathBuf,
    state: tokio::sync::Mutex<State>,
    routes: Mutex<HashMap<String, Route>>,
    commands: Mutex<Vec<AvailableCommand>>,
    info: Mutex<Option<String>>,
    /// Processes started after the first (crashes, hangs, wedges).
    pub restarts: AtomicU64,
    /// How long the last process took from spawn to its `initialize` answer.
    last_start: Mutex<Option<Duration>>,
    /// Set when the gateway shuts down: the agent's exit is then expected.
    stopping: AtomicBool,
    /// Whether a process runs now.
    running: AtomicBool,
    /// Whether its last process said it takes audio in prompts (`promptCapabilities.audio`).
    audio: AtomicBool,
    /// The session opened ahead for the next lane that needs one.
    pub(crate) spare: Spare,
}

/// How long an agent has at shutdown to exit after its input ends, and again after SIGTERM,
/// before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// Time an agent has to answer `session/close`.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest wait between restart attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Time an agent has to start and answer `initialize`.
const START_TIMEOUT: Duration = Duration::from_secs(60);

impl AgentHost {
    /// A host for this agent.
    pub fn new(choice: AgentChoice) -> Arc<AgentHost> {
        Arc::new(AgentHost {
            name: choice.name,
            timeouts: choice.timeouts,
            cwd: choice
                .spec
                .cwd
                .clone()
                .unwrap_or_else(|| PathBuf::from(".")),
            spec: choice.spec,
            label: choice.label,
            state: tokio::sync::Mutex::default(),
            routes: Mutex::default(),
            commands: Mutex::default(),
            info: Mutex::default(),
            restarts: AtomicU64::new(0),
            last_start: Mutex::default(),
            stopping: AtomicBool::new(false),
            running: AtomicBool::new(false),
            audio: AtomicBool::new(false),
            spare: Spare::new(choice.spare_session && !choice.disabled),
        })
    }

    /// Whether the gateway is shutting this agent down.
    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Whether a process of this agent runs now.
    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::SeqCst)
    }

    /// How long the agent's last start took (spawn to `initialize` answered), once it started.
    pub fn last_start(&self) -> Option<Duration> {
        *self.last_start.lock().expect("start lock")
    }

    /// The agent's name and version, once it has started.
    pub fn info(&self) -> Option<String> {
        self.info.lock().expect("info lock").clone()
    }

    /// The commands the agent advertised last.
    pub fn agent_commands(&self) -> Vec<AvailableCommand> {
        self.commands.lock().expect("commands lock").clone()
    }

    /// Whether the agent's last process said it takes audio in prompts (false before it
    /// started).
    pub fn takes_audio(&self) -> bool {
        self.audio.load(Ordering::Relaxed)
    }

    /// Whether the agent advertises a command of this name (without slash).
    pub fn has_command(&self, name: &str) -> bool {
        self.commands
            .lock()
            .expect("commands lock")
            .iter()
            .any(|c| c.name == name)
    }

    /// The running process, if there is one (none is started).
    pub async fn running(&self) -> Option<Arc<Instance>> {
        let st = self.state.lock().await;
        st.current
            .as_ref()
            .filter(|c| !c.client.connection().is_closed())
            .cloned()
    }

    /// The running process, starting one if needed (after a backoff when the last one failed).
    pub async fn instance(self: &Arc<Self>) -> Result<Arc<Instance>, AgentError> {
        let mut st = self.state.lock().await;
        if let Some(current) = &st.current {
            if !current.client.connection().is_closed() {
                return Ok(current.clone());
            }
            st.current = None;
        }
        if let Some(last) = st.last_failure {
            let backoff = Duration::from_millis(250 * 2u64.saturating_pow(st.failures.min(8)))
                .min(MAX_BACKOFF);
            let wait = (last + backoff).saturating_duration_since(Instant::now());
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
        }
        st.generation += 1;
        if st.generation > 1 {
            self.restarts.fetch_add(1, Ordering::Relaxed);
        }
        let generation = st.generation;
        let started = Instant::now();
        match tokio::time::timeout(START_TIMEOUT, self.start(generation)).await {
            Ok(Ok(instance)) => {
                let took = started.elapsed();
                *self.last_start.lock().expect("start lock") = Some(took);
                tracing::info!(agent = %self.label, generation, ms = took.as_millis() as u64, "agent ready");
                st.current = Some(instance.clone());
                self.running.store(true, Ordering::SeqCst);
                Ok(instance)
            }
            Ok(Err(e)) => {
                st.failures += 1;
                st.last_failure = Some(Instant::now());
                Err(e)
            }
            Err(_) => {
                st.failures += 1;
                st.last_failure = Some(Instant::now());
                Err(AgentError::Unavailable(format!(
                    "{} did not start within {} s",
                    self.label,
                    START_TIMEOUT.as_secs()
                )))
            }
        }
    }

    async fn start(self: &Arc<Self>, generation: u64) -> Result<Arc<Instance>, AgentError> {
        let (client, events) = AgentClient::spawn(&without_gateway_env(&self.spec))
            .map_err(|e| AgentError::Unavailable(format!("cannot start {}: {e}", self.label)))?;
        let init = match client.initialize().await {
            Ok(init) => init,
            Err(e) => {
                let tail = client
                    .process()
                    .map(|p| p.stderr_tail())
                    .unwrap_or_default();
                return Err(AgentError::Unavailable(format!(
                    "{} failed to initialize: {e}{}",
                    self.label,
                    stderr_suffix(&tail)
                )));
            }
        };
        if let Some(info) = &init.agent_info {
            *self.info.lock().expect("info lock") =
                Some(format!("{} {}", info.name, info.version).trim().to_owned());
        }
        tracing::info!(agent = %self.label, generation, pid = client.process().map(|p| p.pid()), "agent started");
        self.audio.store(
            init.agent_capabilities.prompt_capabilities.audio,
            Ordering::Relaxed,
        );
        // One fence per lane at a time at most; lanes wait for room beyond that.
        let (control, control_rx) = mpsc::channel(LANE_EVENTS);
        let instance = Arc::new(Instance {
            client,
            generation,
            caps: init.agent_capabilities,
            info: init.agent_info,
            control,
        });
        tokio::spawn(
            self.clone()
                .route_events(instance.clone(), events, control_rx),
        );
        Ok(instance)
    }

    /// Delivers the agent's events to lanes until the process ends, then tells every lane on it.
    async fn route_events(
        self: Arc<Self>,
        instance: Arc<Instance>,
        mut events: iris_acp::AgentEvents,
        mut control: mpsc::Receiver<oneshot::Sender<()>>,
    ) {
        // An event waiting for room in its lane's queue: the agent's output is not read further
        // meanwhile, except text for the same lane, which is merged into it. A fence is answered
        // only when nothing is held, so that everything before it has reached its lane.
        let mut held: Option<Held> = None;
        loop {
            let Some(mut waiting) = held.take() else {
                tokio::select! {
                    biased;
                    event = events.recv() => match event {
                        Some(event) => held = self.route(event),
                        None => break,
                    },
                    Some(fence) = control.recv() => {
                        let _ = fence.send(());
                    }
                }
                continue;
            };
            let tx = waiting.tx.clone();
            tokio::select! {
                biased;
                permit = tx.reserve() => {
                    if let Ok(permit) = permit {
                        permit.send(waiting.event);
                    }
                }
                event = events.recv() => match event {
                    Some(AgentEvent::Update(n)) => match waiting.merge(&n.session_id, n.update) {
                        None => held = Some(waiting),
                        Some(update) => {
                            let _ = waiting.tx.send(waiting.event).await;
                            let n = iris_acp::SessionNotification { update, ..n };
                            held = self.route(AgentEvent::Update(n));
                        }
                    },
                    Some(other) => {
                        let _ = waiting.tx.send(waiting.event).await;
                        held = self.route(other);
                    }
                    None => {
                        let _ = waiting.tx.send(waiting.event).await;
                        break;
                    }
                },
            }
        }
        let detail = match instance.client.process() {
            Some(p) => p.wait_exit().await.to_string(),
            None => "connection closed".to_owned(),
        };
        if self.stopping.load(Ordering::SeqCst) {
            tracing::info!(agent = %self.label, generation = instance.generation, %detail, "agent stopped");
        } else {
            tracing::warn!(agent = %self.label, generation = instance.generation, %detail, "agent exited");
        }
        {
            let mut st = self.state.lock().await;
            if st
                .current
                .as_ref()
                .is_some_and(|c| c.generation == instance.generation)
            {
                st.current = None;
                st.failures += 1;
                st.last_failure = Some(Instant::now());
            }
            self.running.store(st.current.is_some(), Ordering::SeqCst);
        }
        let routes: Vec<EventTx> = {
            let mut map = self.routes.lock().expect("routes lock");
            let dead: Vec<String> = map
                .iter()
                .filter(|(_, r)| r.generation == instance.generation)
                .map(|(k, _)| k.clone())
                .collect();
            dead.iter()
                .filter_map(|k| map.remove(k))
                .map(|r| r.tx)
                .collect()
        };
        for tx in routes {
            let exited = LaneEvent::Exited {
                generation: instance.generation,
                detail: detail.clone(),
            };
            let _ = tx.send(exited).await;
        }
        while let Ok(fence) = control.try_recv() {
            let _ = fence.send(());
        }
    }

    /// Hands an event to its lane; returns it when the lane's queue is full.
    fn route(&self, event: AgentEvent) -> Option<Held> {
        let (session, event) = match event {
            AgentEvent::Update(n) => {
                if let SessionUpdate::AvailableCommandsUpdate(cmds) = &n.update {
                    *self.commands.lock().expect("commands lock") =
                        super::catalog::bounded(&cmds.available_commands);
                }
                (n.session_id, LaneEvent::Update(n.update))
            }
            AgentEvent::Permission { request, responder } => (
                request.session_id.clone(),
                LaneEvent::Permission(request, responder),
            ),
            AgentEvent::Elicitation { request, responder } => (
                request.session_id.clone(),
                LaneEvent::Elicitation(request, responder),
            ),
            AgentEvent::Request {
                method, responder, ..
            } => {
                tracing::debug!(%method, "agent asked for a method this client does not offer");
                responder.error(
                    METHOD_NOT_FOUND,
                    format!("{method} is not supported by this client"),
                );
                return None;
            }
            AgentEvent::Notification { .. } => return None,
        };
        let tx = self
            .routes
            .lock()
            .expect("routes lock")
            .get(&session)
            .map(|r| r.tx.clone());
        // Without a route, a permission request (or elicitation) is answered `cancelled` as it
        // drops.
        let tx = tx?;
        match tx.try_send(event) {
            Ok(()) => None,
            Err(mpsc::error::TrySendError::Full(event)) => Some(Held { tx, session, event }),
            Err(mpsc::error::TrySendError::Closed(_)) => None,
        }
    }

    /// Records that the agent completed a turn: the restart backoff starts over.
    pub async fn mark_healthy(&self, generation: u64) {
        let mut st = self.state.lock().await;
        if st
            .current
            .as_ref()
            .is_some_and(|c| c.generation == generation)
        {
            st.failures = 0;
            st.last_failure = None;
        }
    }

    /// Sends the events of a session to a lane.
    pub fn add_route(&self, session_id: &str, generation: u64, tx: EventTx) {
        self.routes
            .lock()
            .expect("routes lock")
            .insert(session_id.to_owned(), Route { generation, tx });
    }

    /// Opens a spare session on `instance` in the background, unless there is one or one is
    /// being opened (see `agent/spare.rs`).
    pub(crate) fn refill_spare(self: &Arc<Self>, instance: &Arc<Instance>) {
        if self.is_stopping() {
            return;
        }
        let Some(mut slot) = self.spare.begin(instance.generation) else {
            return;
        };
        let host = self.clone();
        let instance = instance.clone();
        tokio::spawn(async move {
            let opening = instance.client.new_session(&host.cwd);
            match tokio::time::timeout(SPARE_TIMEOUT, opening).await {
                Ok(Ok(resp)) if host.is_stopping() => {
                    drop(slot);
                    instance.close_session(&resp.session_id).await;
                }
                Ok(Ok(resp)) => {
                    tracing::debug!(agent = %host.label, session = %resp.session_id, "spare session ready");
                    *slot = Some(SpareSession {
                        id: resp.session_id,
                        generation: instance.generation,
                        models: resp.models,
                    });
                }
                Ok(Err(e)) => {
                    tracing::info!(agent = %host.label, error = %e, "could not open a spare session")
                }
                Err(_) => tracing::info!(
                    agent = %host.label,
                    "the agent did not open a spare session within {} s",
                    SPARE_TIMEOUT.as_secs()
                ),
            }
        });
    }

    /// Stops routing a session.
    pub fn remove_route(&self, session_id: &str) {
        self.routes.lock().expect("routes lock").remove(session_id);
    }

    /// Kills the process of this generation (a wedged or hanging agent); lanes hear `Exited`.
    pub async fn kill(&self, generation: u64) {
        let mut st = self.state.lock().await;
        // Taken out first: a deliberate kill is no failure (no backoff), and no turn may be handed
        // the dying process.
        if st
            .current
            .as_ref()
            .is_some_and(|c| c.generation == generation)
        {
            let current = st.current.take().expect("checked above");
            tracing::warn!(agent = %self.label, generation, "killing the agent process");
            if let Some(p) = current.client.process() {
                p.kill();
            }
        }
    }

    /// Ends the process for good (gateway shutdown): end of input, then SIGTERM, then SIGKILL,
    /// each after a grace period (see [`iris_acp::AgentProcess::terminate`]).
    pub async fn shutdown(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        let mut st = self.state.lock().await;
        if let Some(current) = st.current.take() {
            if let Some(spare) = self
                .spare
                .take_now()
                .filter(|s| s.generation == current.generation)
            {
                current.close_session(&spare.id).await;
            }
            if let Some(p) = current.client.process() {
                let exit = p.terminate(STOP_GRACE).await;
                tracing::debug!(agent = %self.label, %exit, "agent process ended");
            }
        }
    }
}

fn stderr_suffix(tail: &str) -> String {
    let tail = tail.trim();
    if tail.is_empty() {
        String::new()
    } else {
        format!(" (stderr: {})", crate::text::tail(tail, 500))
    }
}
