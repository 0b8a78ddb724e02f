//! A spare session per agent: opened ahead of need, so that a new channel, a thread or `/new`
//! starts its first turn at once instead of waiting for `session/new` (about 1.3 s with Hermes).
//!
//! The spare is opened in the background once a lane of the agent has a session (so it never
//! competes with the first session the gateway needs), and again each time a lane takes it; in
//! both cases only when that lane's turn is over, since a `session/new` sent alongside a prompt
//! holds up the prompt's first text (measured with Hermes: a new channel's first turn took
//! ≈ 4× a later one while the spare was reopened during it, BENCHMARKS.md §7). A
//! lane that needs a session while the spare is still opening waits for it: it was asked for
//! first, so it is ready first. A spare lives on one agent process: a restart forgets it with the
//! process. At shutdown it is closed (`session/close`, where the agent offers it). Agents for
//! which an idle session is not cheap turn it off with `spare_session = false`.

use std::sync::Arc;
use std::time::Duration;

use iris_acp::SessionModelState;
use tokio::sync::{Mutex, OwnedMutexGuard};

/// Longest wait for the agent to open the spare; a lane waiting for it waits at most this long
/// before it opens a session itself.
pub(crate) const OPEN_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `/status` waits for a spare being opened before it says "opening".
const STATUS_WAIT: Duration = Duration::from_secs(2);

/// A session the agent opened for the next lane that needs one.
pub(crate) struct SpareSession {
    pub id: String,
    /// The agent process it lives on.
    pub generation: u64,
    pub models: Option<SessionModelState>,
}

/// The spare of one agent. The lock is held while the spare is being opened, so taking it waits
/// for an opening in flight.
pub(crate) struct Spare {
    enabled: bool,
    slot: Arc<Mutex<Option<SpareSession>>>,
}

impl Spare {
    pub(crate) fn new(enabled: bool) -> Spare {
        Spare {
            enabled,
            slot: Arc::default(),
        }
    }

    /// The spare on the process of `generation`, taken (an opening in flight is waited for).
    /// `None` when there is none: the caller opens a session itself.
    pub(crate) async fn take(&self, generation: u64) -> Option<SpareSession> {
        if !self.enabled {
            return None;
        }
        let mut slot = tokio::time::timeout(OPEN_TIMEOUT, self.slot.lock())
            .await
            .ok()?;
        match slot.take() {
            Some(spare) if spare.generation == generation => Some(spare),
            // Opened on a process that has since ended: gone with it.
            _ => None,
        }
    }

    /// The slot to open a spare into, on the process of `generation`: `None` when spares are
    /// off, one is being opened, or one is ready there. The caller holds the slot while it opens
    /// one, so that a lane taking the spare meanwhile waits for it.
    pub(crate) fn begin(&self, generation: u64) -> Option<OwnedMutexGuard<Option<SpareSession>>> {
        if !self.enabled {
            return None;
        }
        let mut slot = self.slot.clone().try_lock_owned().ok()?;
        if slot.as_ref().is_some_and(|s| s.generation == generation) {
            return None;
        }
        *slot = None;
        Some(slot)
    }

    /// What `/status` says of the spare on the process of `generation` (waiting briefly for one
    /// being opened).
    pub(crate) async fn describe(&self, generation: Option<u64>) -> String {
        if !self.enabled {
            return "off".into();
        }
        match tokio::time::timeout(STATUS_WAIT, self.slot.lock()).await {
            Err(_) => "opening".into(),
            Ok(slot) => match slot.as_ref() {
                Some(s) if Some(s.generation) == generation => format!("ready ({})", s.id),
                _ => "none".into(),
            },
        }
    }

    /// At shutdown: the ready spare, taken so that it can be closed (one being opened is closed
    /// by its opening, which sees the gateway stopping).
    pub(crate) fn take_now(&self) -> Option<SpareSession> {
        self.slot.try_lock().ok().and_then(|mut slot| slot.take())
    }
}
