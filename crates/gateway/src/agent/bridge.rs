//! The bridge between requests and lane actors: it starts a lane's actor on its first command,
//! hands commands to it through a bounded mailbox, remembers which lane each open picker belongs
//! to, and ends actors when their lanes are deleted or the gateway stops.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use iris_protocol::CommandInfo;
use tokio::sync::mpsc::{self, error::TrySendError};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::choice::Roster;
use super::env::{AgentReport, BridgeConfig, LaneEnv};
use super::error::AgentError;
use super::lane::{Inbox, LaneActor, LaneCmd, Slot};
use crate::cron::{Cron, DueRuns};
use crate::media::Media;
use crate::outbox::{self, Lane, Origin};
use crate::state::Shared;

/// Turns and gateway commands a lane holds, running or waiting, before further messages for it
/// are refused with `rate_limited` (and not stored). A person queues far fewer while a turn runs.
pub const LANE_QUEUE: usize = 32;

/// How long a channel's agent switch waits for each idle lane to follow it.
const FOLLOW_WAIT: Duration = Duration::from_secs(10);

/// Requests that act on a lane at once (stop, steer, picker answers) its mailbox holds beyond
/// its queued turns; more are refused with `rate_limited`.
const LANE_CONTROL: usize = 64;

/// A lane actor's mailbox and task, the flag that silences it when its lane is deleted, and the
/// signal that ends it.
struct LaneHandle {
    tx: mpsc::Sender<LaneCmd>,
    task: JoinHandle<()>,
    deleted: Arc<AtomicBool>,
    close: CancellationToken,
}

/// The lanes' actors and what they share.
struct Bridge {
    env: Arc<LaneEnv>,
    lanes: Mutex<HashMap<Lane, LaneHandle>>,
    /// Turns and commands each lane holds (see [`Slot`]).
    queued: Mutex<HashMap<Lane, Arc<AtomicUsize>>>,
    warmed: watch::Sender<bool>,
    /// Set (under the `lanes` lock) when the gateway begins to stop: no lane takes new work,
    /// and no lane actor starts again after its lane was closed.
    stopping: AtomicBool,
    /// Per lane, held by a `message.send` from taking its place to handing the stored message
    /// over (see [`Agents::handoff`]).
    handoffs: Mutex<HashMap<Lane, Arc<tokio::sync::Mutex<()>>>>,
}

impl Bridge {
    fn lanes(&self) -> MutexGuard<'_, HashMap<Lane, LaneHandle>> {
        self.lanes.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The agent bridge's handle; cheap to clone.
#[derive(Clone)]
pub struct Agents {
    bridge: Arc<Bridge>,
}

impl Agents {
    /// What the lanes share.
    pub(crate) fn env(&self) -> &Arc<LaneEnv> {
        &self.bridge.env
    }

    /// The shared state the bridge writes to.
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.bridge.env.shared
    }

    fn disabled(&self) -> bool {
        self.bridge.env.hosts.disabled()
    }

    /// The bridge for these agents, writing to `shared` and using `media` and `cron`.
    pub fn new(
        roster: Roster,
        settings: BridgeConfig,
        shared: Arc<Shared>,
        media: Arc<Media>,
        cron: Cron,
    ) -> Agents {
        let env = LaneEnv::new(shared, media, cron, roster, settings);
        Agents {
            bridge: Arc::new(Bridge {
                env: Arc::new(env),
                lanes: Mutex::default(),
                queued: Mutex::default(),
                warmed: watch::channel(false).0,
                stopping: AtomicBool::new(false),
                handoffs: Mutex::default(),
            }),
        }
    }

    /// The lane's handoff: held from taking a place in the lane's queue, through storing the
    /// message, to handing it to the lane, so that messages sent at once on several connections
    /// reach the lane in the order they are stored (the order the queue runs in after a
    /// restart, and the order receipts assume).
    pub async fn handoff(&self, lane: &Lane) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = self
            .bridge
            .handoffs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(lane.clone())
            .or_default()
            .clone();
        lock.lock_owned().await
    }

    /// Takes a place in the lane's queue for a message about to be stored and run; refused when
    /// the lane already holds [`LANE_QUEUE`] turns and commands.
    pub(crate) fn take_slot(&self, lane: &Lane) -> Result<Slot, AgentError> {
        if self.disabled() {
            return Ok(Slot::none());
        }
        if self.bridge.stopping.load(Ordering::SeqCst) {
            return Err(AgentError::ShuttingDown);
        }
        let queued = self
            .bridge
            .queued
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(lane.clone())
            .or_default()
            .clone();
        Slot::take(&queued, LANE_QUEUE).ok_or(AgentError::QueueFull(LANE_QUEUE))
    }

    /// Sends a command to a lane's actor, starting the actor if needed. A full mailbox is
    /// refused; nothing is queued then.
    pub(crate) fn send(&self, lane: &Lane, cmd: LaneCmd) -> Result<(), AgentError> {
        if self.disabled() {
            self.without_agent(lane, cmd);
            return Ok(());
        }
        let mut lanes = self.bridge.lanes();
        if self.bridge.stopping.load(Ordering::SeqCst) {
            // The lanes are closing or closed: a new actor would run this after its lane ended.
            return Err(AgentError::ShuttingDown);
        }
        let cmd = match lanes.get(lane).filter(|h| !h.task.is_finished()) {
            Some(handle) => match handle.tx.try_send(cmd) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Full(_)) => return Err(AgentError::MailboxFull),
                // The actor ended meanwhile: a new one takes the command.
                Err(TrySendError::Closed(cmd)) => cmd,
            },
            None => cmd,
        };
        // Reserved turns never fill the mailbox: it has room for all of them and the controls.
        let (tx, rx) = mpsc::channel(LANE_QUEUE + LANE_CONTROL);
        let deleted = Arc::new(AtomicBool::new(false));
        let close = CancellationToken::new();
        let env = self.bridge.env.clone();
        let inbox = Inbox::new(rx, close.clone(), env.epoch());
        let actor = LaneActor::new(env, lane.clone(), inbox, deleted.clone());
        let task = tokio::spawn(actor.run());
        // A new mailbox has room for its first command.
        let _ = tx.try_send(cmd);
        lanes.insert(
            lane.clone(),
            LaneHandle {
                tx,
                task,
                deleted,
                close,
            },
        );
        Ok(())
    }

    /// Without an agent, messages are stored and synced; there is nothing to run or stop.
    fn without_agent(&self, lane: &Lane, cmd: LaneCmd) {
        match cmd {
            LaneCmd::Stop(reply) => drop(reply.send(false)),
            LaneCmd::Steer(_, reply) => drop(reply.send(Err(AgentError::NoAgent))),
            LaneCmd::Picker { reply, .. } => drop(reply.send(Err(AgentError::PickerUnknown))),
            LaneCmd::Command(c) => {
                let text = format!(
                    "{} needs an agent, and this gateway runs without one (--agent none).",
                    c.command.name().as_str()
                );
                tokio::spawn(post_system(self.shared().clone(), lane.clone(), text));
            }
            LaneCmd::Prepare(done) | LaneCmd::FollowAgent(done) => drop(done.send(())),
            LaneCmd::Prompt(_) | LaneCmd::Cron(_) => {}
        }
    }

    /// Starts the agent now and opens the default channel's session in the background, so that
    /// the first turn after a start costs about what a later one does.
    pub fn warm(&self) {
        if self.disabled() {
            self.bridge.warmed.send_replace(true);
            return;
        }
        let agents = self.clone();
        tokio::spawn(async move {
            let env = agents.env();
            if let Err(e) = env.hosts.default_host().instance().await {
                tracing::warn!(error = %e, "the agent did not start; the first message tries again");
                agents.bridge.warmed.send_replace(true);
                return;
            }
            let default = match env.shared.store.list_channels().await {
                Ok(channels) => channels.into_iter().find(|c| c.is_default),
                Err(e) => {
                    tracing::warn!(error = %e, "could not read the channels to prepare a session");
                    None
                }
            };
            if let Some(channel) = default {
                let lane = Lane {
                    chat_id: channel.chat_id,
                    thread_id: None,
                };
                let (done, prepared) = oneshot::channel();
                if agents.send(&lane, LaneCmd::Prepare(done)).is_ok() {
                    let _ = prepared.await;
                }
            }
            agents.bridge.warmed.send_replace(true);
        });
    }

    /// Completes once the start-up warm-up is over: the agent started and the default channel's
    /// session is open (or either failed, which the log says).
    pub async fn warmed(&self) {
        let mut rx = self.bridge.warmed.subscribe();
        let _ = rx.wait_for(|done| *done).await;
    }

    /// How long the default agent's last start took, once it started.
    pub fn last_start(&self) -> Option<Duration> {
        self.env().hosts.default_host().last_start()
    }

    /// Hands the scheduler's due runs to their lanes until the scheduler stops.
    pub fn take_due_runs(&self, mut due: DueRuns) {
        let agents = self.clone();
        tokio::spawn(async move {
            while let Some((lane, run)) = due.recv().await {
                // A lane that cannot take the run drops it, and the scheduler records it as
                // not run.
                if let Err(e) = agents.send(&lane, LaneCmd::Cron(run)) {
                    tracing::warn!(error = %e, "a scheduled run was not handed to its lane");
                }
            }
        });
    }

    /// The command catalog of chats on this agent (`None`: the default agent): the gateway's
    /// commands, then the agent's.
    pub fn catalog(&self, agent: Option<&str>) -> Vec<CommandInfo> {
        super::catalog::catalog(self.env().hosts.host(agent).agent_commands())
    }

    /// Whether any agent advertised a command of this name (without its slash).
    pub fn has_command(&self, name: &str) -> bool {
        self.env().hosts.all().iter().any(|h| h.has_command(name))
    }

    /// Whether voice notes are accepted: the gateway transcribes them, or (with `[voice]
    /// send_audio`) an agent that started says it takes audio.
    pub fn voice_on(&self) -> bool {
        if self.names().is_empty() {
            return false;
        }
        let voice = self.env().media.voice();
        voice.transcribes()
            || (voice.send_audio && self.env().hosts.all().iter().any(|h| h.takes_audio()))
    }

    /// The default agent's human name.
    pub fn label(&self) -> &str {
        &self.env().hosts.default_host().label
    }

    /// How often agent processes were restarted, all agents together.
    pub fn restarts(&self) -> u64 {
        self.env()
            .hosts
            .all()
            .iter()
            .map(|h| h.restarts.load(Ordering::Relaxed))
            .sum()
    }

    /// The default agent's name.
    pub fn default_agent(&self) -> &str {
        self.env().hosts.default_name()
    }

    /// The names of the agents a chat can use, the default first.
    pub fn names(&self) -> Vec<String> {
        self.env().hosts.names()
    }

    /// Whether a chat can use an agent of this name.
    pub fn knows(&self, name: &str) -> bool {
        self.env().hosts.knows(name)
    }

    /// Restarts, start time and state of every agent.
    pub fn reports(&self) -> Vec<AgentReport> {
        self.env().hosts.reports()
    }

    /// Tells the lanes of a channel whose agent changed to follow it: an idle lane closes its
    /// session on the old agent and takes the new one now, a busy lane after its running turn
    /// (before its next job). Waits for the idle ones, each at most [`FOLLOW_WAIT`].
    pub(crate) async fn follow_agent(&self, chat_id: &str) {
        self.env().bump_epoch();
        let lanes: Vec<Lane> = self
            .bridge
            .lanes()
            .keys()
            .filter(|l| l.chat_id == chat_id)
            .cloned()
            .collect();
        for lane in lanes {
            let (done, followed) = oneshot::channel();
            if self.send(&lane, LaneCmd::FollowAgent(done)).is_ok() {
                let _ = tokio::time::timeout(FOLLOW_WAIT, followed).await;
            }
        }
    }

    /// Moves the channel `chat_id` (and its threads) to `agent`, and its lanes with it (see
    /// [`super::switch`]).
    pub async fn switch_channel(
        &self,
        chat_id: &str,
        agent: &str,
        origin: &Origin,
    ) -> Result<(), AgentError> {
        if super::switch::switch_channel(self.env(), chat_id, agent, origin).await? {
            self.follow_agent(chat_id).await;
        }
        Ok(())
    }

    /// Silences the lanes about to be deleted, so that nothing more is sent for them; returns
    /// their flags so that a failed delete can give them their voice back.
    pub fn silence_lanes(&self, pred: impl Fn(&Lane) -> bool) -> Vec<Arc<AtomicBool>> {
        self.bridge
            .lanes()
            .iter()
            .filter(|(l, _)| pred(l))
            .map(|(_, h)| {
                h.deleted.store(true, Ordering::SeqCst);
                h.deleted.clone()
            })
            .collect()
    }

    /// Ends the actors of deleted lanes and waits for them. A turn still running there is
    /// cancelled and leaves no frames: the lane no longer exists.
    pub async fn delete_lanes(&self, pred: impl Fn(&Lane) -> bool) {
        self.close_lanes(pred, true).await
    }

    /// Ends the actors of the lanes `pred` picks; `deleted` silences them (and has them close
    /// their agent sessions, which nothing will use again).
    async fn close_lanes(&self, pred: impl Fn(&Lane) -> bool, deleted: bool) {
        let closing: Vec<JoinHandle<()>> = {
            let mut lanes = self.bridge.lanes();
            let keys: Vec<Lane> = lanes.keys().filter(|l| pred(l)).cloned().collect();
            if deleted {
                let mut queued = self.bridge.queued.lock().unwrap_or_else(|e| e.into_inner());
                queued.retain(|l, _| !pred(l));
            }
            keys.into_iter()
                .filter_map(|k| lanes.remove(&k))
                .map(|h| {
                    h.deleted.store(deleted, Ordering::SeqCst);
                    h.close.cancel();
                    h.task
                })
                .collect()
        };
        for task in closing {
            let _ = task.await;
        }
    }

    /// Ends every lane (running turns are cancelled and closed with `message.stop`), then the
    /// agent process.
    pub async fn shutdown(&self) {
        {
            // Under the lock that `send` holds: a command either reached a lane about to be
            // closed, or is refused.
            let _lanes = self.bridge.lanes();
            self.bridge.stopping.store(true, Ordering::SeqCst);
        }
        self.close_lanes(|_| true, false).await;
        for host in self.env().hosts.all() {
            host.shutdown().await;
        }
    }
}

/// Appends a system message to a lane, outside any lane actor.
async fn post_system(shared: Arc<Shared>, lane: Lane, text: String) {
    let message = outbox::system_message(text);
    let result = shared
        .store
        .write(move |tx| outbox::post(tx, &lane, message, &Origin::none()))
        .await;
    if let Err(e) = result {
        tracing::warn!(error = %e, "could not store a system message");
    }
}
