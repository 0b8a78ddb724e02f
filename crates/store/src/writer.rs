//! The writer thread: batches queued jobs into one transaction, publishes the batch's
//! frames through the commit hook, then answers the callers.

use std::any::Any;
use std::collections::{HashSet, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::{CommitHook, Committed, StoreError, WriteTx};

/// Upper bound of jobs committed together; it bounds the latency a batch adds to
/// the first job and the size of the hook call.
pub(crate) const MAX_BATCH: usize = 512;

/// How long a lazy job waits for a batch to ride along with before it is committed alone.
pub(crate) const LAZY_DELAY: Duration = Duration::from_millis(200);

pub(crate) enum WriterMsg {
    Job(Box<dyn Job>),
    /// A job that needs no commit of its own: it joins the next batch, or is committed alone
    /// [`LAZY_DELAY`] after it came when nothing else is written meanwhile.
    Lazy(Box<dyn Job>),
    /// A job committed before it is answered, like [`WriterMsg::Job`], but whose commit need
    /// not reach the disk: a batch of only such jobs (and lazy ones) commits with
    /// `synchronous=NORMAL`, which in WAL mode survives a killed process, not a power cut.
    /// The next batch committed with an fsync makes it durable too.
    Light(Box<dyn Job>),
    /// Run what is already queued, then exit.
    Shutdown,
}

/// A type-erased write job together with the channel its answer goes to.
pub(crate) trait Job: Send {
    /// Runs the closure and keeps its result; returns whether it succeeded.
    fn run(&mut self, tx: &mut WriteTx<'_>) -> bool;
    /// Sends the kept result.
    fn deliver(self: Box<Self>);
    /// Sends `err` instead of the kept result.
    fn fail(self: Box<Self>, err: StoreError);
}

pub(crate) struct TypedJob<T, F> {
    f: Option<F>,
    result: Option<Result<T, StoreError>>,
    reply: oneshot::Sender<Result<T, StoreError>>,
}

impl<T, F> TypedJob<T, F> {
    pub(crate) fn new(f: F, reply: oneshot::Sender<Result<T, StoreError>>) -> Self {
        TypedJob {
            f: Some(f),
            result: None,
            reply,
        }
    }
}

impl<T, F> Job for TypedJob<T, F>
where
    T: Send + 'static,
    F: FnOnce(&mut WriteTx<'_>) -> Result<T, StoreError> + Send + 'static,
{
    fn run(&mut self, tx: &mut WriteTx<'_>) -> bool {
        let result = match self.f.take() {
            Some(f) => catch_unwind(AssertUnwindSafe(|| f(tx))).unwrap_or_else(|payload| {
                Err(StoreError::Internal(format!(
                    "write job panicked: {}",
                    panic_message(&*payload)
                )))
            }),
            None => Err(StoreError::Internal("write job ran twice".into())),
        };
        let ok = result.is_ok();
        self.result = Some(result);
        ok
    }

    fn deliver(self: Box<Self>) {
        let result = self
            .result
            .unwrap_or_else(|| Err(StoreError::Internal("write job never ran".into())));
        // The caller may have stopped waiting; the work is committed either way.
        let _ = self.reply.send(result);
    }

    fn fail(self: Box<Self>, err: StoreError) {
        let _ = self.reply.send(Err(err));
    }
}

fn push_lazy(lazy: &mut Vec<Box<dyn Job>>, since: &mut Instant, job: Box<dyn Job>) {
    if lazy.is_empty() {
        *since = Instant::now();
    }
    lazy.push(job);
}

pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

pub(crate) struct Writer {
    pub(crate) conn: Connection,
    pub(crate) rx: Receiver<WriterMsg>,
    pub(crate) hook: CommitHook,
    pub(crate) group_commit: bool,
    /// Raised after every batch that wrote to the channel directory, before its callers are
    /// answered (see [`crate::Store::channel_directory`]).
    pub(crate) channels_gen: Arc<AtomicU64>,
    /// Added before every commit: a slow disk, injected by tests ([`COMMIT_DELAY_VAR`]).
    pub(crate) commit_delay: Duration,
}

/// A fault hook for tests: milliseconds the writer waits before each commit, as a disk whose
/// fsync is slow would make it wait. Read once when the store opens; unset in production.
pub const COMMIT_DELAY_VAR: &str = "IRIS_FAULT_COMMIT_DELAY_MS";

/// The commit delay [`COMMIT_DELAY_VAR`] asks for (none when unset or not a number).
pub(crate) fn commit_delay_from_env() -> Duration {
    std::env::var(COMMIT_DELAY_VAR)
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(Duration::ZERO, Duration::from_millis)
}

impl Writer {
    pub(crate) fn run(mut self) {
        let cap = if self.group_commit { MAX_BATCH } else { 1 };
        let mut open = true;
        // Lazy jobs waiting for a batch, and when the first of them came.
        let mut lazy: Vec<Box<dyn Job>> = Vec::new();
        let mut lazy_since = Instant::now();
        loop {
            // While open, block for the first job (until the lazy ones are due); after shutdown
            // only drain what is queued.
            let first = if open {
                let msg = if lazy.is_empty() {
                    self.rx.recv().map_err(|_| RecvTimeoutError::Disconnected)
                } else {
                    let due = lazy_since + LAZY_DELAY;
                    self.rx
                        .recv_timeout(due.saturating_duration_since(Instant::now()))
                };
                match msg {
                    Ok(WriterMsg::Job(job)) => Some((job, false)),
                    Ok(WriterMsg::Light(job)) => Some((job, true)),
                    Ok(WriterMsg::Lazy(job)) => {
                        push_lazy(&mut lazy, &mut lazy_since, job);
                        continue;
                    }
                    Err(RecvTimeoutError::Timeout) => None,
                    Ok(WriterMsg::Shutdown) | Err(RecvTimeoutError::Disconnected) => {
                        open = false;
                        continue;
                    }
                }
            } else {
                match self.rx.try_recv() {
                    Ok(WriterMsg::Job(job)) => Some((job, false)),
                    Ok(WriterMsg::Light(job)) => Some((job, true)),
                    Ok(WriterMsg::Lazy(job)) => {
                        push_lazy(&mut lazy, &mut lazy_since, job);
                        continue;
                    }
                    Ok(WriterMsg::Shutdown) => continue,
                    Err(_) if lazy.is_empty() => break,
                    Err(_) => None,
                }
            };
            let mut batch = VecDeque::with_capacity(cap.min(64));
            // A batch of light jobs only commits without an fsync; lazy ones alone still wait
            // for the disk as before.
            let mut light = first.as_ref().is_some_and(|(_, light)| *light);
            batch.extend(first.map(|(job, _)| job));
            while batch.len() < cap {
                match self.rx.try_recv() {
                    Ok(WriterMsg::Job(job)) => {
                        light = false;
                        batch.push_back(job)
                    }
                    Ok(WriterMsg::Light(job)) => batch.push_back(job),
                    Ok(WriterMsg::Lazy(job)) => push_lazy(&mut lazy, &mut lazy_since, job),
                    Ok(WriterMsg::Shutdown) => open = false,
                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                }
            }
            // Lazy jobs ride along, after the jobs that were waited for.
            batch.extend(lazy.drain(..));
            if light {
                self.set_synchronous("NORMAL");
            }
            self.run_batch(batch);
            if light {
                self.set_synchronous("FULL");
            }
        }
        tracing::debug!("store writer stopped");
    }

    /// Sets how commits reach the disk (outside a transaction only).
    fn set_synchronous(&self, level: &str) {
        if let Err(e) = self.conn.pragma_update(None, "synchronous", level) {
            tracing::error!(error = %e, level, "could not set synchronous");
        }
    }

    /// Runs jobs in one transaction. If SQLite aborts the transaction midway, the jobs
    /// that ran are failed and the rest continue in a fresh transaction.
    fn run_batch(&mut self, mut queue: VecDeque<Box<dyn Job>>) {
        while !queue.is_empty() {
            if let Err(e) = self.conn.execute_batch("BEGIN IMMEDIATE") {
                let reason = format!("could not begin: {e}");
                tracing::error!(%reason, "store batch failed");
                for job in queue.drain(..) {
                    job.fail(StoreError::Aborted(reason.clone()));
                }
                return;
            }
            let mut done: Vec<Box<dyn Job>> = Vec::with_capacity(queue.len());
            let mut frames: Vec<Committed> = Vec::new();
            let mut aborted = None;
            let mut channels_changed = false;
            while let Some(mut job) = queue.pop_front() {
                let outcome = self.run_job(&mut *job, &mut frames, &mut channels_changed);
                done.push(job);
                if let Err(reason) = outcome {
                    aborted = Some(reason);
                    break;
                }
            }
            if !self.commit_delay.is_zero() {
                std::thread::sleep(self.commit_delay);
            }
            let result = match aborted {
                Some(reason) => Err(reason),
                None => self
                    .conn
                    .execute_batch("COMMIT")
                    .map_err(|e| format!("commit failed: {e}")),
            };
            // After the commit (a copy read before it must not pass for a new one), before
            // anyone is answered.
            if channels_changed {
                self.channels_gen.fetch_add(1, Ordering::AcqRel);
            }
            match result {
                Ok(()) => {
                    if !frames.is_empty() {
                        let hook = &self.hook;
                        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| hook(&frames))) {
                            tracing::error!(panic = %panic_message(&*payload), "commit hook panicked");
                        }
                    }
                    for job in done {
                        job.deliver();
                    }
                }
                Err(reason) => {
                    tracing::error!(%reason, jobs = done.len(), "store batch rolled back");
                    if !self.conn.is_autocommit() {
                        if let Err(e) = self.conn.execute_batch("ROLLBACK") {
                            tracing::error!(error = %e, "rollback failed");
                        }
                    }
                    for job in done {
                        job.fail(StoreError::Aborted(reason.clone()));
                    }
                }
            }
        }
    }

    /// Runs one job inside its own savepoint. `Err` means the batch transaction is
    /// unusable; a job that merely failed is rolled back to its savepoint and is `Ok`.
    fn run_job(
        &mut self,
        job: &mut dyn Job,
        frames: &mut Vec<Committed>,
        channels_changed: &mut bool,
    ) -> Result<(), String> {
        let conn = &self.conn;
        let exec = |sql: &str| -> Result<(), String> {
            conn.prepare_cached(sql)
                .and_then(|mut s| s.execute([]))
                .map(|_| ())
                .map_err(|e| format!("{sql}: {e}"))
        };
        exec("SAVEPOINT job")?;
        let mark = frames.len();
        let mut tx = WriteTx::new(conn, frames);
        let ok = job.run(&mut tx);
        *channels_changed |= tx.channels_changed;
        let removed = std::mem::take(&mut tx.removed);
        let removed_upto = tx.removed_upto;
        if conn.is_autocommit() {
            // Some errors (disk full, I/O) make SQLite roll back the whole transaction,
            // taking the earlier jobs of the batch with it.
            return Err("sqlite rolled back the transaction".into());
        }
        if ok {
            exec("RELEASE job")?;
            if !removed.is_empty() || removed_upto > 0 {
                let removed: HashSet<u64> = removed.into_iter().collect();
                frames.retain(|c| c.cursor > removed_upto && !removed.contains(&c.cursor));
            }
        } else {
            frames.truncate(mark);
            exec("ROLLBACK TO job")?;
            exec("RELEASE job")?;
        }
        Ok(())
    }
}
