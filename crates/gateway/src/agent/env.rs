//! What a lane actor may use of the gateway: the shared state it writes to, media, the
//! scheduler, the hosts of the named agents, the bridge's settings, the index of open pickers,
//! the one-time notice and the agent epoch. The bridge builds one and hands it to every lane;
//! nothing here knows of the bridge or of lane actors, so lanes never reach back into the bridge.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use super::choice::{AgentChoice, Roster};
use super::host::AgentHost;
use crate::cron::Cron;
use crate::media::Media;
use crate::outbox::Lane;
use crate::state::Shared;

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

/// The hosts of the named agents, and which one is the default.
pub(crate) struct Hosts {
    /// One host per agent, in the roster's order; never empty.
    list: Vec<Arc<AgentHost>>,
    /// The name of the agent of chats that chose none.
    default: String,
    /// The gateway runs without an agent (`--agent none`).
    disabled: bool,
}

impl Hosts {
    /// The hosts of a roster, and the notice about its default agent (for the first turn).
    pub(crate) fn new(roster: Roster) -> (Hosts, Option<String>) {
        let notice = roster
            .agents
            .iter()
            .find(|a| a.name == roster.default)
            .and_then(|a| a.notice.clone());
        let disabled = roster.agents.iter().all(|a| a.disabled);
        let mut list: Vec<Arc<AgentHost>> = roster.agents.into_iter().map(AgentHost::new).collect();
        if list.is_empty() {
            list.push(AgentHost::new(AgentChoice::nobody(roster.default.clone())));
        }
        let hosts = Hosts {
            list,
            default: roster.default,
            disabled,
        };
        (hosts, notice)
    }

    /// Whether the gateway runs without an agent.
    pub(crate) fn disabled(&self) -> bool {
        self.disabled
    }

    /// Every host, in the roster's order.
    pub(crate) fn all(&self) -> &[Arc<AgentHost>] {
        &self.list
    }

    /// The default agent's name.
    pub(crate) fn default_name(&self) -> &str {
        &self.default
    }

    /// The host of the agent of this name; the default agent's when there is none of that name
    /// (a chat whose agent was taken out of the configuration).
    pub(crate) fn host(&self, name: Option<&str>) -> &Arc<AgentHost> {
        name.and_then(|n| self.list.iter().find(|h| h.name == n))
            .unwrap_or_else(|| self.default_host())
    }

    /// The default agent's host.
    pub(crate) fn default_host(&self) -> &Arc<AgentHost> {
        self.list
            .iter()
            .find(|h| h.name == self.default)
            .unwrap_or(&self.list[0])
    }

    /// The names of the agents a chat can use, the default first.
    pub(crate) fn names(&self) -> Vec<String> {
        if self.disabled {
            return Vec::new();
        }
        let mut names: Vec<String> = self.list.iter().map(|h| h.name.clone()).collect();
        names.sort_by_key(|n| *n != self.default);
        names
    }

    /// Whether a chat can use an agent of this name.
    pub(crate) fn knows(&self, name: &str) -> bool {
        !self.disabled && self.list.iter().any(|h| h.name == name)
    }

    /// Restarts, start time and state of every agent.
    pub(crate) fn reports(&self) -> Vec<AgentReport> {
        if self.disabled {
            return Vec::new();
        }
        self.list
            .iter()
            .map(|h| AgentReport {
                name: h.name.clone(),
                restarts: h.restarts.load(Ordering::Relaxed),
                last_start: h.last_start(),
                running: h.is_running(),
            })
            .collect()
    }
}

/// Which lane owns each open picker, for answers that name only the picker.
#[derive(Default)]
pub(crate) struct PickerIndex {
    lanes: Mutex<HashMap<String, Lane>>,
}

impl PickerIndex {
    /// The lane a pending picker belongs to.
    pub(crate) fn lane_of(&self, picker_id: &str) -> Option<Lane> {
        self.lock().get(picker_id).cloned()
    }

    pub(crate) fn remember(&self, picker_id: &str, lane: &Lane) {
        self.lock().insert(picker_id.to_owned(), lane.clone());
    }

    pub(crate) fn forget<'a>(&self, ids: impl Iterator<Item = &'a String>) {
        let mut map = self.lock();
        for id in ids {
            map.remove(id);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Lane>> {
        self.lanes.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What every lane actor shares.
pub(crate) struct LaneEnv {
    pub(crate) shared: Arc<Shared>,
    pub(crate) media: Arc<Media>,
    pub(crate) cron: Cron,
    pub(crate) hosts: Hosts,
    pub(crate) settings: BridgeConfig,
    pub(crate) pickers: Arc<PickerIndex>,
    /// Per idle lane that can take its newest turn back, the user message of that turn (see
    /// `lane::rewind`); read by the handlers to refuse a regenerate or an edit before storing.
    pub(crate) rewinds: Mutex<HashMap<Lane, String>>,
    /// Checkpoint forks are made one at a time across the gateway (see `lane::rewind`): a lane
    /// that finds another fork running makes none.
    pub(crate) forks: tokio::sync::Semaphore,
    notice: Mutex<Option<String>>,
    /// Raised whenever a channel changes its agent: a lane that sees it move re-reads its
    /// channel's agent (an idle lane at once, a busy one before its next job).
    epoch: watch::Sender<u64>,
}

impl LaneEnv {
    pub(crate) fn new(
        shared: Arc<Shared>,
        media: Arc<Media>,
        cron: Cron,
        roster: Roster,
        settings: BridgeConfig,
    ) -> LaneEnv {
        let (hosts, notice) = Hosts::new(roster);
        if let Some(n) = &notice {
            tracing::warn!("{n}");
        }
        LaneEnv {
            shared,
            media,
            cron,
            hosts,
            settings,
            pickers: Arc::default(),
            rewinds: Mutex::default(),
            forks: tokio::sync::Semaphore::new(1),
            notice: Mutex::new(notice),
            epoch: watch::channel(0).0,
        }
    }

    /// Whether `lane` is idle and can take its turn for `message_id` back.
    pub(crate) fn can_rewind(&self, lane: &Lane, message_id: &str) -> bool {
        let map = self.rewinds.lock().unwrap_or_else(|e| e.into_inner());
        map.get(lane).is_some_and(|m| m == message_id)
    }

    /// Says which turn of `lane` can be taken back now (none while a turn runs).
    pub(crate) fn set_rewind(&self, lane: &Lane, message_id: Option<&str>) {
        let mut map = self.rewinds.lock().unwrap_or_else(|e| e.into_inner());
        match message_id {
            Some(m) => map.insert(lane.clone(), m.to_owned()),
            None => map.remove(lane),
        };
    }

    /// The one-time notice about the agent choice, for the first turn.
    pub(crate) fn take_notice(&self) -> Option<String> {
        self.notice.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Some channel changed its agent: every lane re-reads its own.
    pub(crate) fn bump_epoch(&self) {
        self.epoch.send_modify(|e| *e += 1);
    }

    /// The agent epoch, watched.
    pub(crate) fn epoch(&self) -> watch::Receiver<u64> {
        self.epoch.subscribe()
    }
}
