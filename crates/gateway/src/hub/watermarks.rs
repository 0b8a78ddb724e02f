//! Delivery watermarks on their way to the store.
//!
//! A connection that gets a Pong records the cursor it proves in memory ([`Watermarks::confirm`])
//! and goes on writing; one background task ([`spawn_writer`]) stores what was recorded, the
//! latest cursor per device, all devices in one lazy write job (it rides along with the store's
//! next commit, or is committed alone 200 ms later, so it never costs a turn an fsync of its
//! own), and then announces each stored watermark on the hub. So a stored watermark may lag what
//! a device confirmed by one batch (a device that reconnects within it is told the in-memory
//! value, see [`Watermarks::unstored`]; after a crash it is replayed frames it already has, and
//! drops them by id), but it never runs ahead of a Pong. At shutdown the task stores what is left
//! before the store closes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use iris_store::Store;
use tokio::sync::{broadcast, Notify};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Watermarks confirmed by devices and not yet stored.
#[derive(Debug, Default)]
pub struct Watermarks {
    state: Mutex<Pending>,
    ready: Notify,
}

#[derive(Debug, Default)]
struct Pending {
    /// Confirmed since the writer last took them: the highest cursor per device.
    waiting: HashMap<String, u64>,
    /// Taken by the writer and being stored.
    storing: HashMap<String, u64>,
}

impl Watermarks {
    /// Records that `device_id` proved receipt of every durable frame up to `cursor`.
    pub fn confirm(&self, device_id: &str, cursor: u64) {
        let mut st = self.state.lock().expect("watermarks lock");
        match st.waiting.get_mut(device_id) {
            Some(c) => *c = (*c).max(cursor),
            None => {
                st.waiting.insert(device_id.to_owned(), cursor);
            }
        }
        drop(st);
        self.ready.notify_one();
    }

    /// The highest watermark of `device_id` confirmed but not stored yet, if any.
    pub fn unstored(&self, device_id: &str) -> Option<u64> {
        let st = self.state.lock().expect("watermarks lock");
        let (a, b) = (st.waiting.get(device_id), st.storing.get(device_id));
        a.max(b).copied()
    }

    /// Moves what waits to `storing` and returns it.
    fn take(&self) -> Vec<(String, u64)> {
        let mut st = self.state.lock().expect("watermarks lock");
        let batch: Vec<(String, u64)> = st.waiting.iter().map(|(d, c)| (d.clone(), *c)).collect();
        st.storing = std::mem::take(&mut st.waiting);
        batch
    }

    /// The batch taken last is stored (or given up).
    fn taken_done(&self) {
        self.state.lock().expect("watermarks lock").storing.clear();
    }
}

/// The task that stores the watermarks confirmed in `pending` until `stop` is cancelled, then
/// stores what is left and ends, announcing each stored one on `stored`. Await the handle before
/// closing the store.
pub fn spawn_writer(
    pending: Arc<Watermarks>,
    stored: broadcast::Sender<(String, u64)>,
    store: Store,
    stop: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let stopping = tokio::select! {
                biased;
                _ = pending.ready.notified() => false,
                _ = stop.cancelled() => true,
            };
            // The last batch is stored at once: nothing else will be written to ride along with.
            store_batch(&pending, &stored, &store, !stopping).await;
            if stopping {
                return;
            }
        }
    })
}

async fn store_batch(
    pending: &Watermarks,
    announce: &broadcast::Sender<(String, u64)>,
    store: &Store,
    lazy: bool,
) {
    let batch = pending.take();
    if batch.is_empty() {
        return;
    }
    let job = move |tx: &mut iris_store::WriteTx<'_>| tx.confirm_cursors(&batch);
    let stored = match lazy {
        true => store.write_lazy(job).await,
        false => store.write(job).await,
    };
    pending.taken_done();
    match stored {
        Ok(stored) => {
            for (device, cursor) in stored {
                let _ = announce.send((device, cursor));
            }
        }
        Err(e) => tracing::warn!(error = %e, "could not store delivery watermarks"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_confirmation_per_device_waits_until_taken() {
        let w = Watermarks::default();
        w.confirm("a", 5);
        w.confirm("a", 3);
        w.confirm("b", 1);
        assert_eq!(w.unstored("a"), Some(5), "never backwards");
        let mut batch = w.take();
        batch.sort();
        assert_eq!(batch, vec![("a".into(), 5), ("b".into(), 1)]);
        assert_eq!(w.unstored("a"), Some(5), "still known while being stored");
        w.confirm("a", 7);
        assert_eq!(w.unstored("a"), Some(7));
        w.taken_done();
        assert_eq!(w.unstored("a"), Some(7));
        assert_eq!(w.unstored("b"), None);
        assert_eq!(w.take(), vec![("a".into(), 7)]);
    }
}
