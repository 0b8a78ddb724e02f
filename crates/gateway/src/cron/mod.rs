//! Scheduled prompts: jobs that send a prompt to the agent on a schedule and deliver the answer
//! to the user as a `cron` message with a `cron` notification.
//!
//! - [`schedule`] reads the schedule forms and computes the next run, [`clock`] is the time the
//!   scheduler reads (the system clock, or a manual one in tests), [`command`] is `/cron`.
//! - The store holds every job and its run state; the scheduler keeps no other state than the
//!   jobs it has handed to a lane and not yet seen finish. It sleeps until the earliest next run
//!   (and wakes early when a job is added or changed, or a test clock moves), hands each due job
//!   to its lane as a [`CronRun`], and computes the next run when the lane reports the outcome.
//! - A run is a turn of its lane (it waits behind a running turn) in a fresh agent session; see
//!   `agent/lane/scheduled.rs`. Its outcome and the job's next run are stored in the same
//!   transaction as the delivered frames.
//! - Catch-up: a job whose next run passed while the gateway was down runs once at startup
//!   (its next run is then computed from the current time, so missed ticks do not pile up), or,
//!   with `[cron] catch_up = false`, is skipped with the status `missed`.

pub mod command;
pub mod schedule;

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono_tz::Tz;
use iris_protocol::{DurableFrame, Message, Notification};
use iris_store::{CronJobRow, CronRunRecord, Store, StoreError};
use tokio::sync::{mpsc, watch, Notify};
use tokio_util::sync::CancellationToken;

pub use crate::clock::{Clock, ManualClock, TimeSource};
pub use crate::config::cron::{host_timezone, CronConfig};
use crate::ids::now_ms;
use crate::outbox::{self, Lane, Origin};
use schedule::Schedule;

/// The marker that makes an answer silent: recorded, not delivered.
pub const SILENT: &str = "[SILENT]";

/// The scheduler re-reads the wall clock at least this often, so that a clock step (or a
/// suspended machine) delays a job by at most this much.
const MAX_SLEEP: Duration = Duration::from_secs(60);

struct Inner {
    config: CronConfig,
    store: Store,
    /// Due runs, for the agent bridge to hand to their lanes.
    runs: mpsc::UnboundedSender<(Lane, CronRun)>,
    evaluated: watch::Sender<i64>,
    wake: Notify,
    /// Jobs handed to a lane whose run has not finished.
    in_flight: Mutex<HashSet<u64>>,
    /// Jobs whose run was dropped without running (no agent, lane gone).
    dropped: Mutex<Vec<u64>>,
}

/// The scheduler's handle; cheap to clone.
///
/// The scheduler knows nothing of lanes' actors: it hands each due run, with its lane, to the
/// channel returned by [`Cron::new`], and whoever drives the lanes (the agent bridge) takes them
/// from there and reports back through [`Cron::finish`].
#[derive(Clone)]
pub struct Cron {
    inner: Arc<Inner>,
}

/// Where the scheduler hands due runs: `(lane, run)` in the order they fell due.
pub type DueRuns = mpsc::UnboundedReceiver<(Lane, CronRun)>;

impl Cron {
    /// A scheduler with these settings over this store, and the channel its due runs arrive on
    /// (unbounded, but holding at most one run per job: a job is not handed out again while its
    /// run is in flight). [`Cron::spawn`] starts it.
    pub fn new(config: CronConfig, store: Store) -> (Cron, DueRuns) {
        let (runs, due) = mpsc::unbounded_channel();
        let cron = Cron {
            inner: Arc::new(Inner {
                config,
                store,
                runs,
                evaluated: watch::channel(i64::MIN).0,
                wake: Notify::new(),
                in_flight: Mutex::default(),
                dropped: Mutex::default(),
            }),
        };
        (cron, due)
    }

    /// The scheduler's current time, unix ms.
    pub fn now_ms(&self) -> i64 {
        self.inner.config.clock.now_ms()
    }

    /// The configured time zone.
    pub fn timezone(&self) -> Tz {
        self.inner.config.timezone
    }

    fn store(&self) -> &Store {
        &self.inner.store
    }

    /// Makes the scheduler look at the jobs again (one was added, changed or removed).
    pub fn wake(&self) {
        self.inner.wake.notify_one();
    }

    /// Whether the job has been handed to its lane and not finished yet.
    pub fn is_running(&self, job_id: u64) -> bool {
        self.inner
            .in_flight
            .lock()
            .expect("cron lock")
            .contains(&job_id)
    }

    /// Waits until the scheduler has looked at the jobs at a clock time of at least `at_ms`, so
    /// that every job due by then has been handed to its lane.
    pub async fn settled(&self, at_ms: i64) {
        let mut rx = self.inner.evaluated.subscribe();
        let _ = rx.wait_for(|t| *t >= at_ms).await;
    }
}

/// A due job, handed to its lane.
pub struct CronRun {
    /// The job.
    pub job_id: u64,
    /// Its name (the notification title).
    pub name: String,
    /// The prompt.
    pub prompt: String,
    ticket: Ticket,
}

impl fmt::Debug for CronRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The prompt is user text: not for logs.
        f.debug_struct("CronRun")
            .field("job_id", &self.job_id)
            .finish_non_exhaustive()
    }
}

/// Tells the scheduler that a run is over when dropped, whether it finished or was dropped
/// unrun (a lane that closed, a gateway without an agent).
struct Ticket {
    job_id: u64,
    inner: Arc<Inner>,
    finished: bool,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.inner
            .in_flight
            .lock()
            .expect("cron lock")
            .remove(&self.job_id);
        if !self.finished {
            self.inner
                .dropped
                .lock()
                .expect("cron lock")
                .push(self.job_id);
        }
        self.inner.wake.notify_one();
    }
}

/// How a run ended.
#[derive(Debug)]
pub enum Outcome {
    /// The agent answered (a `cron` message, not yet checked for the silent marker).
    Answer(Box<Message>),
    /// The agent said nothing.
    Empty,
    /// The user stopped the run.
    Cancelled,
    /// The agent was unavailable or failed; the reason is for the user.
    Failed(String),
}

impl Cron {
    /// Whether a queued run should still start: its job may have been removed or paused while it
    /// waited for the lane.
    pub async fn still_wanted(&self, run: &CronRun) -> bool {
        matches!(self.store().get_cron_job(run.job_id).await, Ok(Some(job)) if !job.paused)
    }

    /// Stores the outcome of a run, the job's next run, and (unless silent) the frames that
    /// deliver it, in one transaction. Nothing is delivered when the job was removed during the
    /// run.
    pub async fn finish(&self, lane: &Lane, mut run: CronRun, outcome: Outcome) {
        let now = self.now_ms();
        let tz = self.timezone();
        let lane = lane.clone();
        let (job_id, name) = (run.job_id, run.name.clone());
        let result = self
            .store()
            .write(move |tx| {
                let Some(job) = tx.get_cron_job(job_id)? else {
                    return Ok(None);
                };
                let next_run = next_run_after(&job, now, tz);
                let (status, delivery): (&str, Option<(Message, String)>) = match outcome {
                    Outcome::Answer(m) if m.text.trim_start().starts_with(SILENT) => {
                        ("silent", None)
                    }
                    Outcome::Answer(m) => {
                        let body = preview(&m.text);
                        ("ok", Some((*m, body)))
                    }
                    Outcome::Empty => ("empty", None),
                    Outcome::Cancelled => ("cancelled", None),
                    Outcome::Failed(reason) => {
                        let m = outbox::system_message(format!(
                            "Scheduled job {job_id} “{name}” failed: {reason}"
                        ));
                        ("error", Some((m, format!("Failed: {reason}"))))
                    }
                };
                if let Some((message, body)) = delivery {
                    let id = message.message_id.clone();
                    outbox::post(tx, &lane, message, &Origin::none())?;
                    let note = Notification {
                        kind: "cron".into(),
                        title: name.clone(),
                        body: Some(body),
                        ts: now_ms(),
                    };
                    outbox::append(
                        tx,
                        &lane.header(),
                        DurableFrame::Notification(note),
                        Some(&id),
                        &Origin::none(),
                    )?;
                }
                let record = CronRunRecord {
                    at: now,
                    status: status.into(),
                    next_run,
                    counted: true,
                };
                tx.record_cron_run(job_id, &record)?;
                Ok(Some(status))
            })
            .await;
        match result {
            Ok(Some(status)) => tracing::info!(job_id, status, "scheduled job ran"),
            Ok(None) => tracing::info!(job_id, "scheduled job was removed while it ran"),
            Err(e) => tracing::error!(job_id, error = %e, "could not store a scheduled job's run"),
        }
        run.ticket.finished = true;
    }

    /// Starts the scheduler; it ends when `shutdown` is cancelled or the store closes.
    pub fn spawn(&self, shutdown: CancellationToken) {
        tokio::spawn(scheduler(self.clone(), shutdown));
    }
}

/// The notification body: the start of the answer.
fn preview(text: &str) -> String {
    const MAX: usize = 200;
    let text = text.trim();
    if text.chars().count() <= MAX {
        return text.to_owned();
    }
    format!("{}…", text.chars().take(MAX - 1).collect::<String>())
}

fn next_run_after(job: &CronJobRow, now: i64, tz: Tz) -> Option<i64> {
    match Schedule::from_stored(&job.kind, &job.spec) {
        Ok(s) => s.next_after(now, job.created_at, tz),
        Err(e) => {
            tracing::warn!(job_id = job.job_id, error = %e, "unreadable schedule; the job will not run again");
            None
        }
    }
}

async fn scheduler(cron: Cron, shutdown: CancellationToken) {
    let mut jumps = cron.inner.config.clock.jumps();
    let mut first = true;
    loop {
        let dropped: HashSet<u64> =
            std::mem::take(&mut *cron.inner.dropped.lock().expect("cron lock"))
                .into_iter()
                .collect();
        let now = cron.now_ms();
        let next_wake = match cron.store().list_cron_jobs().await {
            Ok(jobs) => {
                let next = pass(&cron, jobs, now, first, &dropped).await;
                first = false;
                cron.inner.evaluated.send_replace(now);
                next
            }
            Err(StoreError::Closed) => return,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the scheduled jobs; retrying");
                Some(now + 5_000)
            }
        };
        let wait = next_wake.map_or(MAX_SLEEP, |at| {
            Duration::from_millis(at.saturating_sub(now).max(0) as u64).min(MAX_SLEEP)
        });
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = cron.inner.wake.notified() => {}
            _ = clock_jump(&mut jumps) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}

/// One look at the jobs: hands the due ones to their lanes and returns the earliest next run.
async fn pass(
    cron: &Cron,
    jobs: Vec<CronJobRow>,
    now: i64,
    first: bool,
    dropped: &HashSet<u64>,
) -> Option<i64> {
    let mut next_wake: Option<i64> = None;
    for job in jobs {
        let Some(at) = job
            .next_run
            .filter(|_| !job.paused && !cron.is_running(job.job_id))
        else {
            continue;
        };
        if at > now {
            next_wake = Some(next_wake.map_or(at, |w| w.min(at)));
            continue;
        }
        let skip = if dropped.contains(&job.job_id) {
            // Handed to a lane that could not run it: do not hand it over again and again.
            Some("not run")
        } else if first && !cron.inner.config.catch_up {
            Some("missed")
        } else {
            None
        };
        match skip {
            Some(status) => {
                if let Some(next) = skip_run(cron, &job, now, status).await {
                    next_wake = Some(next_wake.map_or(next, |w| w.min(next)));
                }
            }
            None => dispatch(cron, job),
        }
    }
    next_wake
}

/// Records a run that did not happen and moves the job to its next run.
async fn skip_run(cron: &Cron, job: &CronJobRow, now: i64, status: &'static str) -> Option<i64> {
    let next_run = next_run_after(job, now, cron.timezone());
    let job_id = job.job_id;
    let record = CronRunRecord {
        at: now,
        status: status.into(),
        next_run,
        counted: false,
    };
    if let Err(e) = cron
        .store()
        .write(move |tx| tx.record_cron_run(job_id, &record))
        .await
    {
        tracing::warn!(job_id, error = %e, "could not record a skipped run");
    }
    tracing::info!(job_id, status, "scheduled run skipped");
    next_run
}

fn dispatch(cron: &Cron, job: CronJobRow) {
    cron.inner
        .in_flight
        .lock()
        .expect("cron lock")
        .insert(job.job_id);
    let ticket = Ticket {
        job_id: job.job_id,
        inner: cron.inner.clone(),
        finished: false,
    };
    let run = CronRun {
        job_id: job.job_id,
        name: job.name,
        prompt: job.prompt,
        ticket,
    };
    let lane = Lane {
        chat_id: job.chat_id,
        thread_id: job.thread_id,
    };
    tracing::info!(job_id = job.job_id, "scheduled job is due");
    // Nobody takes runs (no agent bridge any more): the run's ticket marks it as not run.
    let _ = cron.inner.runs.send((lane, run));
}

async fn clock_jump(jumps: &mut Option<watch::Receiver<i64>>) {
    match jumps {
        Some(rx) => {
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending().await,
    }
}
