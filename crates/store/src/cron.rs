//! Scheduled prompts ("cron jobs") and their run state.
//!
//! The store keeps what a job is (its lane, name, schedule and prompt) and where it stands (next
//! run, last run, last status, run count); it knows nothing about schedule syntax: `kind` and
//! `spec` are opaque text that the gateway writes and reads back. A job belongs to a lane: when
//! its channel or thread row is deleted, a trigger of the schema deletes the job in the same
//! transaction, so [`crate::WriteTx::delete_channel`] cascades without knowing about jobs.

use rusqlite::{Connection, OptionalExtension, Row};

use crate::queries::{to_i64, to_u64};
use crate::{Store, StoreError, WriteTx};

/// A scheduled job as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CronJobRow {
    /// Small, never reused number (the id users type).
    pub job_id: u64,
    /// The lane's channel.
    pub chat_id: String,
    /// The lane's thread, `None` for the channel's flat lane.
    pub thread_id: Option<String>,
    /// Short name, used as the notification title.
    pub name: String,
    /// Schedule kind, opaque to the store (`cron`, `every`, `once`).
    pub kind: String,
    /// Schedule details, opaque to the store.
    pub spec: String,
    /// The prompt sent to the agent on each run.
    pub prompt: String,
    /// A paused job does not run.
    pub paused: bool,
    /// Creation time, unix ms (the phase of interval schedules).
    pub created_at: i64,
    /// When it runs next, unix ms; `None` once a one-shot job has run.
    pub next_run: Option<i64>,
    /// When it last ran (or was skipped), unix ms.
    pub last_run: Option<i64>,
    /// Outcome of the last run, opaque to the store (`ok`, `silent`, `error`…).
    pub last_status: Option<String>,
    /// Runs so far.
    pub run_count: u64,
}

/// A job to insert.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewCronJob {
    /// The lane's channel; must exist.
    pub chat_id: String,
    /// The lane's thread; must exist in that channel when given.
    pub thread_id: Option<String>,
    /// Short name.
    pub name: String,
    /// Schedule kind.
    pub kind: String,
    /// Schedule details.
    pub spec: String,
    /// The prompt.
    pub prompt: String,
    /// Creation time, unix ms.
    pub created_at: i64,
    /// First run, unix ms.
    pub next_run: Option<i64>,
}

/// What one run (or a skipped run) leaves behind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CronRunRecord {
    /// When it ran, unix ms.
    pub at: i64,
    /// Its outcome.
    pub status: String,
    /// The next run, unix ms (`None`: no further run).
    pub next_run: Option<i64>,
    /// Whether it counts as a run (a skipped run does not).
    pub counted: bool,
}

const COLUMNS: &str = "seq, chat_id, thread_id, name, kind, spec, prompt, paused, created_at, \
                       next_run, last_run, last_status, run_count";

fn row_to_job(r: &Row<'_>) -> rusqlite::Result<CronJobRow> {
    Ok(CronJobRow {
        job_id: to_u64(r.get(0)?),
        chat_id: r.get(1)?,
        thread_id: r.get(2)?,
        name: r.get(3)?,
        kind: r.get(4)?,
        spec: r.get(5)?,
        prompt: r.get(6)?,
        paused: r.get(7)?,
        created_at: r.get(8)?,
        next_run: r.get(9)?,
        last_run: r.get(10)?,
        last_status: r.get(11)?,
        run_count: to_u64(r.get(12)?),
    })
}

pub(crate) fn list_jobs(conn: &Connection) -> Result<Vec<CronJobRow>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM cron_jobs ORDER BY seq");
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map([], row_to_job)?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

pub(crate) fn get_job(conn: &Connection, job_id: u64) -> Result<Option<CronJobRow>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM cron_jobs WHERE seq = ?1");
    Ok(conn
        .prepare_cached(&sql)?
        .query_row([to_i64(job_id)], row_to_job)
        .optional()?)
}

impl WriteTx<'_> {
    /// Inserts a job in an existing lane and returns it with its id. An unknown channel, or a
    /// thread that is not in that channel, is [`StoreError::NotFound`].
    pub fn insert_cron_job(&mut self, job: &NewCronJob) -> Result<CronJobRow, StoreError> {
        let channel = self
            .get_channel(&job.chat_id)?
            .ok_or(StoreError::NotFound)?;
        if channel.kind == "thread" {
            return Err(StoreError::Invalid(
                "a job's chat_id must be a channel".into(),
            ));
        }
        if let Some(thread) = &job.thread_id {
            let row = self.get_channel(thread)?.ok_or(StoreError::NotFound)?;
            if row.parent_chat_id.as_deref() != Some(job.chat_id.as_str()) {
                return Err(StoreError::NotFound);
            }
        }
        self.conn
            .prepare_cached(
                "INSERT INTO cron_jobs (chat_id, thread_id, name, kind, spec, prompt, created_at, next_run) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?
            .execute((
                &job.chat_id,
                &job.thread_id,
                &job.name,
                &job.kind,
                &job.spec,
                &job.prompt,
                job.created_at,
                job.next_run,
            ))?;
        let id = to_u64(self.conn.last_insert_rowid());
        get_job(self.conn, id)?.ok_or_else(|| StoreError::Internal("inserted job vanished".into()))
    }

    /// Adds a job made by a device (`created_by`), like [`WriteTx::insert_cron_job`]; the job
    /// is counted against that device and deleted with it ([`WriteTx::delete_cron_jobs_of`]).
    pub fn insert_cron_job_by(
        &mut self,
        job: &NewCronJob,
        created_by: Option<&str>,
    ) -> Result<CronJobRow, StoreError> {
        let row = self.insert_cron_job(job)?;
        self.conn
            .prepare_cached("UPDATE cron_jobs SET created_by = ?2 WHERE seq = ?1")?
            .execute((i64::try_from(row.job_id).unwrap_or(i64::MAX), created_by))?;
        Ok(row)
    }

    /// How many jobs a device made.
    pub fn count_cron_jobs_by(&self, device_id: &str) -> Result<u64, StoreError> {
        let n: i64 = self
            .conn
            .prepare_cached("SELECT count(*) FROM cron_jobs WHERE created_by = ?1")?
            .query_row([device_id], |r| r.get(0))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Deletes every job a device made; returns how many there were.
    pub fn delete_cron_jobs_of(&mut self, device_id: &str) -> Result<usize, StoreError> {
        Ok(self
            .conn
            .prepare_cached("DELETE FROM cron_jobs WHERE created_by = ?1")?
            .execute([device_id])?)
    }

    /// The job with this id as seen inside this transaction.
    pub fn get_cron_job(&self, job_id: u64) -> Result<Option<CronJobRow>, StoreError> {
        get_job(self.conn, job_id)
    }

    /// Deletes a job; false when there was none.
    pub fn delete_cron_job(&mut self, job_id: u64) -> Result<bool, StoreError> {
        let n = self
            .conn
            .prepare_cached("DELETE FROM cron_jobs WHERE seq = ?1")?
            .execute([to_i64(job_id)])?;
        Ok(n > 0)
    }

    /// Pauses or resumes a job and sets its next run; false when there is no such job.
    pub fn set_cron_paused(
        &mut self,
        job_id: u64,
        paused: bool,
        next_run: Option<i64>,
    ) -> Result<bool, StoreError> {
        let n = self
            .conn
            .prepare_cached("UPDATE cron_jobs SET paused = ?2, next_run = ?3 WHERE seq = ?1")?
            .execute((to_i64(job_id), paused, next_run))?;
        Ok(n > 0)
    }

    /// Records a run (or a skipped run) and the next one; false when there is no such job.
    pub fn record_cron_run(
        &mut self,
        job_id: u64,
        record: &CronRunRecord,
    ) -> Result<bool, StoreError> {
        let n = self
            .conn
            .prepare_cached(
                "UPDATE cron_jobs SET last_run = ?2, last_status = ?3, next_run = ?4, \
                 run_count = run_count + ?5 WHERE seq = ?1",
            )?
            .execute((
                to_i64(job_id),
                record.at,
                &record.status,
                record.next_run,
                i64::from(record.counted),
            ))?;
        Ok(n > 0)
    }
}

impl Store {
    /// Every job, oldest first.
    pub async fn list_cron_jobs(&self) -> Result<Vec<CronJobRow>, StoreError> {
        self.read(|c| list_jobs(c)).await
    }

    /// The job with this id, if it exists.
    pub async fn get_cron_job(&self, job_id: u64) -> Result<Option<CronJobRow>, StoreError> {
        self.read(move |c| get_job(c, job_id)).await
    }
}
