//! The clock scheduled work reads: the system's wall clock in production, a clock that moves only
//! when told in tests, so that a job due in two hours runs without anyone waiting two hours.
//!
//! Ground floor: imports nothing of the gateway but [`crate::ids`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

/// A source of wall-clock time for the scheduler.
pub trait TimeSource: Send + Sync + 'static {
    /// Unix time in milliseconds.
    fn now_ms(&self) -> i64;

    /// A receiver that changes whenever the time jumps, for clocks that do not move by
    /// themselves; `None` for a clock that simply runs.
    fn jumps(&self) -> Option<watch::Receiver<i64>> {
        None
    }
}

/// The clock the scheduler reads, shared and cheap to clone.
#[derive(Clone)]
pub struct Clock(Arc<dyn TimeSource>);

impl Clock {
    /// The system's wall clock.
    pub fn system() -> Clock {
        Clock(Arc::new(SystemTime))
    }

    /// A clock backed by any time source.
    pub fn new(source: Arc<dyn TimeSource>) -> Clock {
        Clock(source)
    }

    /// Unix time in milliseconds.
    pub fn now_ms(&self) -> i64 {
        self.0.now_ms()
    }

    /// See [`TimeSource::jumps`].
    pub fn jumps(&self) -> Option<watch::Receiver<i64>> {
        self.0.jumps()
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::system()
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Clock").field(&self.now_ms()).finish()
    }
}

struct SystemTime;

impl TimeSource for SystemTime {
    fn now_ms(&self) -> i64 {
        crate::ids::now_ms()
    }
}

/// A clock that stands still until it is advanced or set, and tells the scheduler when it moves.
#[derive(Debug)]
pub struct ManualClock {
    now: watch::Sender<i64>,
}

impl ManualClock {
    /// A clock standing at `start_ms` (unix milliseconds).
    pub fn new(start_ms: i64) -> Arc<ManualClock> {
        Arc::new(ManualClock {
            now: watch::channel(start_ms).0,
        })
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        let by = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.now.send_modify(|t| *t = t.saturating_add(by));
    }

    /// Sets the clock to this time.
    pub fn set(&self, at_ms: i64) {
        self.now.send_replace(at_ms);
    }

    /// This clock as the scheduler's [`Clock`].
    pub fn clock(self: &Arc<Self>) -> Clock {
        Clock(self.clone())
    }
}

impl TimeSource for ManualClock {
    fn now_ms(&self) -> i64 {
        *self.now.borrow()
    }

    fn jumps(&self) -> Option<watch::Receiver<i64>> {
        Some(self.now.subscribe())
    }
}
