//! The read budget of a connection: how many bytes its socket may still read.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Waker;

/// How many bytes a connection may still read. Unlimited at first (the header timeout and
/// hyper's buffer cap bound the request); the WebSocket upgrade limits it until `hello`
/// succeeds, so that a stranger cannot make the gateway buffer a large frame.
#[derive(Debug, Clone)]
pub struct ReadBudget(Arc<BudgetState>);

#[derive(Debug)]
struct BudgetState {
    read: AtomicU64,
    limit: AtomicU64,
    /// Whether the device said `hello` (the limit was lifted).
    lifted: AtomicBool,
    /// Raised by one when the limit is lifted: the listener's count of connections that
    /// authenticated.
    authenticated: Option<Arc<AtomicUsize>>,
    /// The connection is to close (it waited longest without a device; see the listener): its
    /// next read fails.
    evicted: AtomicBool,
    /// Who waits for the socket to read, until `hello` (woken by an eviction).
    reader: Mutex<Option<Waker>>,
}

impl Default for ReadBudget {
    fn default() -> Self {
        ReadBudget::counted(None)
    }
}

impl ReadBudget {
    /// A budget whose lifting raises `authenticated` by one.
    pub fn counted(authenticated: Option<Arc<AtomicUsize>>) -> ReadBudget {
        ReadBudget(Arc::new(BudgetState {
            read: AtomicU64::new(0),
            limit: AtomicU64::new(u64::MAX),
            lifted: AtomicBool::new(false),
            authenticated,
            evicted: AtomicBool::new(false),
            reader: Mutex::new(None),
        }))
    }

    /// Whether the limit was lifted: the device on this connection said `hello`.
    pub fn lifted(&self) -> bool {
        self.0.lifted.load(Ordering::SeqCst)
    }

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
        if !self.0.lifted.swap(true, Ordering::SeqCst) {
            if let Some(count) = &self.0.authenticated {
                count.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    /// Counts bytes read.
    pub(crate) fn count(&self, bytes: usize) {
        self.0.read.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// True when the connection read past its limit (and its reads now fail).
    pub fn exceeded(&self) -> bool {
        self.0.read.load(Ordering::Relaxed) > self.0.limit.load(Ordering::Relaxed)
    }

    /// Closes a connection that has no device yet: its reads fail from now on, and a read that
    /// waits is woken to fail. Nothing happens once the device said `hello`.
    pub fn evict(&self) -> bool {
        if self.lifted() || self.0.evicted.swap(true, Ordering::SeqCst) {
            return false;
        }
        let waiting = self
            .0
            .reader
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(waker) = waiting {
            waker.wake();
        }
        true
    }

    /// Whether the connection was evicted (or closed), so reads fail.
    pub fn evicted(&self) -> bool {
        self.0.evicted.load(Ordering::SeqCst)
    }

    /// Remembers who waits for the socket to read, while the connection has no device (an
    /// eviction wakes it).
    pub(crate) fn park(&self, waker: &Waker) {
        if self.lifted() {
            return;
        }
        let mut reader = self.0.reader.lock().unwrap_or_else(|e| e.into_inner());
        if !reader.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *reader = Some(waker.clone());
        }
    }
}
