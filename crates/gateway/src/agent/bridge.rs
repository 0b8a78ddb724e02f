//! The bridge between requests and lane actors: it starts a lane's actor on its first command,
//! hands commands to it through a bounded mailbox, remembers which lane each open picker belongs
//! to, and ends actors when their lanes are deleted or the gateway stops.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use iris_protocol::{CommandInfo, ErrorCode};
use tokio::sync::mpsc::{self, error::TrySendError};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::choice::{AgentChoice, Roster};
use super::host::AgentHost;
use super::lane::{LaneActor, LaneCmd};
use crate::cron::{Cron, DueRuns};
use crate::media::Media;
use crate::outbox::{self, Lane, Origin};
use crate::state::Shared;
use crate::wire::WireError;

/// Turns and gateway commands a lane holds, running or waiting, before further messages for it
/// are refused with `rate_limited` (and not stored). A person queues far fewer while a turn runs.
pub const LANE_QUEUE: usize = 32;

/// How long a channel's agent switch waits for each idle lane to follow it.
const FOLLOW_WAIT: Duration = Duration::from_secs(10);

/// Requests that act on a lane at once (stop, steer, picker answers) its mailbox holds beyond
/// its queued turns; more are refused with `rate_limited`.
const LANE_CONTROL: usize = 64;

/// A place in a lane's queue, taken before a message is stored and freed when its turn or
/// command is done (dropped).
#[derive(Debug)]
pub struct Slot {
    /// The lane's count, or none without an agent (nothing ever waits then).
    queued: Option<Arc<AtomicUsize>>,
    /// The lane held no other turn or command when this place was taken.
    first: bool,
}

impl Slot {
    /// Whether the lane held no other turn or command when this place was taken: the message
    /// runs next unless a scheduled job got there first (see [`super::lane::PromptJob`]).
    pub fn first(&self) -> bool {
        self.first
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(queued) = &self.queued {
            queued.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Settings of the agent bridge (each agent's timeouts are its own, see [`AgentHost`]).
#[derive(Debug, Clone)]
pub struct BridgeConfig {
    /// Minimum spacing of `message.update` frames.
    pub update_interval: Duration,
}

/// What `/metrics` and `/status` report of one agent.
#[derive(Debug, Clone)]
pub struct AgentReport {
    /// Its name.
    pub name: String,
    /// Processes started after its first.
    pub restarts: u64,
    /// How long its last start took, once it started.
    pub last_start: Option<Duration>,
    /// Whether a process of it runs now.
    pub running: bool,
}

/// A lane actor's mailbox and task, the flag that silences it when its lane is deleted, and the
/// signal that ends it.
struct LaneHandle {
    tx: mpsc::Sender<LaneCmd>,
    task: JoinHandle<()>,
    deleted: Arc<AtomicBool>,
    close: CancellationToken,
}

/// What every lane actor shares: the state of the gateway it writes to, the agent process, the
/// services it uses, and the bridge's registries.
pub(crate) struct Bridge {
    pub(crate) shared: Arc<Shared>,
    pub(crate) media: Arc<Media>,
    pub(crate) cron: Cron,
    /// One host per agent, in the roster's order; never empty.
    hosts: Vec<Arc<AgentHost>>,
    /// The name of the agent of chats that chose none.
    default: String,
    pub(crate) settings: BridgeConfig,
    disabled: bool,
    lanes: Mutex<HashMap<Lane, LaneHandle>>,
    /// Turns and commands each lane holds (see [`Slot`]).
    queued: Mutex<HashMap<Lane, Arc<AtomicUsize>>>,
    pickers: Mutex<HashMap<String, Lane>>,
    notice: Mutex<Option<String>>,
    warmed: watch::Sender<bool>,
    /// Raised whenever a channel changes its agent: a lane actor that sees it move re-reads its
    /// channel's agent before its next job.
    pub(crate) agent_epoch: AtomicU64,
}

/// The agent bridge's handle; cheap to clone.
#[derive(Clone)]
pub struct Agents {
    bridge: Arc<Bridge>,
}

impl Agents {
    /// The handle of a bridge (for a lane actor that hands work to the bridge).
    pub(crate) fn of(bridge: Arc<Bridge>) -> Agents {
        Agents { bridge }
    }

    /// The shared state the bridge writes to.
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.bridge.shared
    }

    /// The bridge for these agents, writing to `shared` and using `media` and `cron`.
    pub fn new(
        roster: Roster,
        settings: BridgeConfig,
        shared: Arc<Shared>,
        media: Arc<Media>,
        cron: Cron,
    ) -> Agents {
        let notice = roster
            .agents
            .iter()
            .find(|a| a.name == roster.default)
            .and_then(|a| a.notice.clone());
        if let Some(n) = &notice {
            tracing::warn!("{n}");
        }
        let disabled = roster.agents.iter().all(|a| a.disabled);
        let mut hosts: Vec<Arc<AgentHost>> =
            roster.agents.into_iter().map(AgentHost::new).collect();
        if hosts.is_empty() {
            hosts.push(AgentHost::new(AgentChoice {
                name: roster.default.clone(),
                timeouts: Default::default(),
                spec: iris_acp::AgentSpec::new("none"),
                label: "no agent".into(),
                is_demo: false,
                disabled: true,
                notice: None,
            }));
        }
        Agents {
            bridge: Arc::new(Bridge {
                shared,
                media,
                cron,
                hosts,
                default: roster.default,
                settings,
                disabled,
                lanes: Mutex::default(),
                queued: Mutex::default(),
                pickers: Mutex::default(),
                notice: Mutex::new(notice),
                warmed: watch::channel(false).0,
                agent_epoch: AtomicU64::new(0),
            }),
        }
    }

    /// Takes a place in the lane's queue for a message about to be stored and run; refused with
    /// `rate_limited` when the lane already holds [`LANE_QUEUE`] turns and commands.
    pub fn reserve(&self, lane: &Lane) -> Result<Slot, WireError> {
        if self.bridge.disabled {
            return Ok(Slot {
                queued: None,
                first: false,
            });
        }
        let queued = self
            .bridge
            .queued
            .lock()
            .expect("queued lock")
            .entry(lane.clone())
            .or_default()
            .clone();
        let taken = queued.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < LANE_QUEUE).then_some(n + 1)
        });
        match taken {
            Ok(before) => Ok(Slot {
                queued: Some(queued),
                first: before == 0,
            }),
            Err(_) => Err(WireError::new(
                ErrorCode::RateLimited,
                format!(
                    "{LANE_QUEUE} messages are already waiting in this chat; try again when the agent has caught up"
                ),
            )),
        }
    }

    /// Sends a command to a lane's actor, starting the actor if needed. A full mailbox is
    /// refused with `rate_limited`; nothing is queued then.
    pub fn send(&self, lane: &Lane, cmd: LaneCmd) -> Result<(), WireError> {
        if self.bridge.disabled {
            self.without_agent(lane, cmd);
            return Ok(());
        }
        let mut lanes = self.bridge.lanes.lock().expect("lanes lock");
        let cmd = match lanes.get(lane).filter(|h| !h.task.is_finished()) {
            Some(handle) => match handle.tx.try_send(cmd) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Full(_)) => {
                    return Err(WireError::new(
                        ErrorCode::RateLimited,
                        "too many requests for this chat at once; try again shortly",
                    ))
                }
                // The actor ended meanwhile: a new one takes the command.
                Err(TrySendError::Closed(cmd)) => cmd,
            },
            None => cmd,
        };
        // Reserved turns never fill the mailbox: it has room for all of them and the controls.
        let (tx, rx) = mpsc::channel(LANE_QUEUE + LANE_CONTROL);
        let deleted = Arc::new(AtomicBool::new(false));
        let close = CancellationToken::new();
        let actor = LaneActor::new(
            self.bridge.clone(),
            lane.clone(),
            rx,
            deleted.clone(),
            close.clone(),
        );
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
            LaneCmd::Steer(_, reply) => {
                drop(reply.send(Err(WireError::not_found("no agent is configured"))))
            }
            LaneCmd::Picker { reply, .. } => {
                drop(reply.send(Err(WireError::not_found("picker unknown or expired"))))
            }
            LaneCmd::Command(c) => {
                let text = format!(
                    "{} needs an agent, and this gateway runs without one (--agent none).",
                    c.command.name().as_str()
                );
                tokio::spawn(self.bridge.clone().post_system(lane.clone(), text));
            }
            LaneCmd::Prepare(done) | LaneCmd::FollowAgent(done) => drop(done.send(())),
            LaneCmd::Prompt(_) | LaneCmd::Cron(_) => {}
        }
    }

    /// Starts the agent now and opens the default channel's session in the background, so that
    /// the first turn after a start costs about what a later one does.
    pub fn warm(&self) {
        if self.bridge.disabled {
            self.bridge.warmed.send_replace(true);
            return;
        }
        let agents = self.clone();
        tokio::spawn(async move {
            if let Err(e) = agents.bridge.default_host().instance().await {
                tracing::warn!(error = %e, "the agent did not start; the first message tries again");
                agents.bridge.warmed.send_replace(true);
                return;
            }
            let default = match agents.bridge.shared.store.list_channels().await {
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
        self.bridge.default_host().last_start()
    }

    /// Hands the scheduler's due runs to their lanes until the scheduler stops.
    pub fn take_due_runs(&self, mut due: DueRuns) {
        let agents = self.clone();
        tokio::spawn(async move {
            while let Some((lane, run)) = due.recv().await {
                // A lane that cannot take the run drops it, and the scheduler records it as
                // not run.
                if let Err(e) = agents.send(&lane, LaneCmd::Cron(run)) {
                    tracing::warn!(error = %e.message, "a scheduled run was not handed to its lane");
                }
            }
        });
    }

    /// The lane a pending picker belongs to.
    pub fn picker_lane(&self, picker_id: &str) -> Option<Lane> {
        self.bridge.picker_lane(picker_id)
    }

    /// The command catalog of chats on this agent (`None`: the default agent): the gateway's
    /// commands, then the agent's.
    pub fn catalog(&self, agent: Option<&str>) -> Vec<CommandInfo> {
        super::catalog::catalog(self.bridge.host(agent))
    }

    /// Whether any agent advertised a command of this name (without its slash).
    pub fn has_command(&self, name: &str) -> bool {
        self.bridge.hosts.iter().any(|h| h.has_command(name))
    }

    /// The default agent's human name.
    pub fn label(&self) -> &str {
        &self.bridge.default_host().label
    }

    /// How often agent processes were restarted, all agents together.
    pub fn restarts(&self) -> u64 {
        self.bridge
            .hosts
            .iter()
            .map(|h| h.restarts.load(Ordering::Relaxed))
            .sum()
    }

    /// The default agent's name.
    pub fn default_agent(&self) -> &str {
        &self.bridge.default
    }

    /// The names of the agents a chat can use, the default first.
    pub fn names(&self) -> Vec<String> {
        if self.bridge.disabled {
            return Vec::new();
        }
        let mut names: Vec<String> = self.bridge.hosts.iter().map(|h| h.name.clone()).collect();
        names.sort_by_key(|n| *n != self.bridge.default);
        names
    }

    /// Whether a chat can use an agent of this name.
    pub fn knows(&self, name: &str) -> bool {
        !self.bridge.disabled && self.bridge.hosts.iter().any(|h| h.name == name)
    }

    /// Restarts, start time and state of every agent.
    pub fn reports(&self) -> Vec<AgentReport> {
        self.bridge.reports()
    }

    /// Tells the lanes of a channel whose agent changed to follow it: an idle lane closes its
    /// session on the old agent and takes the new one now, a busy lane after its running turn
    /// (before its next job). Waits for the idle ones, each at most [`FOLLOW_WAIT`].
    pub(crate) async fn follow_agent(&self, chat_id: &str, skip: Option<&Lane>) {
        self.bridge.agent_epoch.fetch_add(1, Ordering::SeqCst);
        let lanes: Vec<Lane> = {
            let lanes = self.bridge.lanes.lock().expect("lanes lock");
            lanes
                .keys()
                .filter(|l| l.chat_id == chat_id && Some(*l) != skip)
                .cloned()
                .collect()
        };
        for lane in lanes {
            let (done, followed) = oneshot::channel();
            if self.send(&lane, LaneCmd::FollowAgent(done)).is_ok() {
                let _ = tokio::time::timeout(FOLLOW_WAIT, followed).await;
            }
        }
    }

    /// Silences the lanes about to be deleted, so that nothing more is sent for them; returns
    /// their flags so that a failed delete can give them their voice back.
    pub fn silence_lanes(&self, pred: impl Fn(&Lane) -> bool) -> Vec<Arc<AtomicBool>> {
        let lanes = self.bridge.lanes.lock().expect("lanes lock");
        lanes
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
            let mut lanes = self.bridge.lanes.lock().expect("lanes lock");
            let keys: Vec<Lane> = lanes.keys().filter(|l| pred(l)).cloned().collect();
            if deleted {
                let mut queued = self.bridge.queued.lock().expect("queued lock");
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
        self.close_lanes(|_| true, false).await;
        for host in &self.bridge.hosts {
            host.shutdown().await;
        }
    }
}

impl Bridge {
    /// The host of the agent of this name; the default agent's when there is none of that name
    /// (a chat whose agent was taken out of the configuration).
    pub(crate) fn host(&self, name: Option<&str>) -> &Arc<AgentHost> {
        name.and_then(|n| self.hosts.iter().find(|h| h.name == n))
            .unwrap_or_else(|| self.default_host())
    }

    /// The default agent's host.
    pub(crate) fn default_host(&self) -> &Arc<AgentHost> {
        self.hosts
            .iter()
            .find(|h| h.name == self.default)
            .unwrap_or(&self.hosts[0])
    }

    pub(crate) fn reports(&self) -> Vec<AgentReport> {
        if self.disabled {
            return Vec::new();
        }
        self.hosts
            .iter()
            .map(|h| AgentReport {
                name: h.name.clone(),
                restarts: h.restarts.load(Ordering::Relaxed),
                last_start: h.last_start(),
                running: h.is_running(),
            })
            .collect()
    }

    /// The lane a pending picker belongs to.
    pub(crate) fn picker_lane(&self, picker_id: &str) -> Option<Lane> {
        self.pickers
            .lock()
            .expect("pickers lock")
            .get(picker_id)
            .cloned()
    }

    pub(crate) fn remember_picker(&self, picker_id: &str, lane: &Lane) {
        self.pickers
            .lock()
            .expect("pickers lock")
            .insert(picker_id.to_owned(), lane.clone());
    }

    pub(crate) fn forget_pickers<'a>(&self, ids: impl Iterator<Item = &'a String>) {
        let mut map = self.pickers.lock().expect("pickers lock");
        for id in ids {
            map.remove(id);
        }
    }

    /// The one-time notice about the agent choice, for the first turn.
    pub(crate) fn take_notice(&self) -> Option<String> {
        self.notice.lock().expect("notice lock").take()
    }

    /// Appends a system message to a lane, outside any lane actor.
    async fn post_system(self: Arc<Self>, lane: Lane, text: String) {
        let message = outbox::system_message(text);
        let result = self
            .shared
            .store
            .write(move |tx| outbox::post(tx, &lane, message, &Origin::none()))
            .await;
        if let Err(e) = result {
            tracing::warn!(error = %e, "could not store a system message");
        }
    }
}
