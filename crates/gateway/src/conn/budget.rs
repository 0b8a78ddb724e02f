//! The read budget of a connection: how many bytes its socket may still read.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// How many bytes a connection may still read. Unlimited at first (the header timeout and
/// hyper's buffer cap bound the request); the WebSocket upgrade limits it until `hello`
/// succeeds, so that a stranger cannot make the gateway buffer a large frame.
#[derive(Debug, Clone)]
pub struct ReadBudget(Arc<BudgetState>);

#[derive(Debug)]
struct BudgetState {
    read: AtomicU64,
    limit: AtomicU64,
}

impl Default for ReadBudget {
    fn default() -> Self {
        ReadBudget(Arc::new(BudgetState {
            read: AtomicU64::new(0),
            limit: AtomicU64::new(u64::MAX),
        }))
    }
}

impl ReadBudget {
    /// From now on, at most `bytes` more may be read.
    pub fn limit_to(&self, bytes: u64) {
        let read = self.0.read.load(Ordering::Relaxed);
        self.0
            .limit
            .store(read.saturating_add(bytes), Ordering::Relaxed);
    }

    /// No more limit (the device said `hello`).
    pub fn lift(&self) {
        self.0.limit.store(u64::MAX, Ordering::Relaxed);
    }

    /// Counts bytes read.
    pub(crate) fn count(&self, bytes: usize) {
        self.0.read.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// True when the connection read past its limit (and its reads now fail).
    pub fn exceeded(&self) -> bool {
        self.0.read.load(Ordering::Relaxed) > self.0.limit.load(Ordering::Relaxed)
    }
}
