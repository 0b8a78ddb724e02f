//! `/cron`: adding, listing, pausing, resuming and removing scheduled jobs. Every reply is the
//! text of a system message in the lane the command was sent in.

use std::time::Duration;

use iris_store::{CronJobRow, NewCronJob, StoreError};

use super::schedule::{format_time, human_delay, job_name, split_add, Schedule, ACCEPTED_FORMS};
use super::Cron;
use crate::outbox::Lane;

/// The usage text of `/cron`.
pub fn usage() -> String {
    format!(
        "Scheduled prompts:\n\
         /cron add <schedule> <prompt> — run the prompt on a schedule in this chat\n\
         /cron list [all] — the jobs of this chat (or of every chat)\n\
         /cron pause <id>, /cron resume <id>, /cron remove <id>\n\
         Schedules: {ACCEPTED_FORMS}.\n\
         Example: /cron add \"0 9 * * 1-5\" Morning report\n\
         An answer starting with [SILENT] is recorded but not delivered."
    )
}

/// Jobs one device may have at once.
pub const MAX_JOBS_PER_DEVICE: u64 = 20;

/// Runs `/cron <args>` for a lane, sent by `device` (when known), and returns the reply.
pub async fn run(cron: &Cron, lane: &Lane, device: Option<&str>, args: &str) -> String {
    let args = args.trim();
    let (sub, rest) = args.split_once(char::is_whitespace).unwrap_or((args, ""));
    let rest = rest.trim();
    let result = match sub.to_lowercase().as_str() {
        "add" | "new" => add(cron, lane, device, rest).await,
        "list" | "ls" => list(cron, lane, rest.eq_ignore_ascii_case("all")).await,
        "remove" | "rm" | "delete" => change(cron, rest, Change::Remove).await,
        "pause" => change(cron, rest, Change::Pause).await,
        "resume" => change(cron, rest, Change::Resume).await,
        _ => Ok(usage()),
    };
    result.unwrap_or_else(|e| {
        tracing::error!(error = %e, "/cron failed");
        "The scheduled jobs could not be read or saved; see the gateway log.".into()
    })
}

async fn add(
    cron: &Cron,
    lane: &Lane,
    device: Option<&str>,
    args: &str,
) -> Result<String, StoreError> {
    let (text, prompt) = split_add(args);
    if text.is_empty() {
        return Ok(format!(
            "Usage: /cron add <schedule> <prompt>\nSchedules: {ACCEPTED_FORMS}."
        ));
    }
    let (now, tz) = (cron.now_ms(), cron.timezone());
    let schedule = match Schedule::parse(&text, tz, now) {
        Ok(s) => s,
        Err(e) => {
            return Ok(format!(
                "{e}\nAccepted schedules: {ACCEPTED_FORMS}.\nExample: /cron add \"0 9 * * 1-5\" Morning report"
            ))
        }
    };
    if prompt.is_empty() {
        return Ok(
            "What should the job ask the agent? Usage: /cron add <schedule> <prompt>".into(),
        );
    }
    let (kind, spec) = schedule.stored();
    let job = NewCronJob {
        chat_id: lane.chat_id.clone(),
        thread_id: lane.thread_id.clone(),
        name: job_name(&prompt),
        kind: kind.into(),
        spec,
        prompt,
        created_at: now,
        next_run: schedule.first_run(now, tz),
    };
    let by = device.map(str::to_owned);
    let row = cron
        .store()
        .write(move |tx| {
            let by = by.as_deref();
            if let Some(device) = by {
                if tx.count_cron_jobs_by(device)? >= MAX_JOBS_PER_DEVICE {
                    return Ok(None);
                }
            }
            tx.insert_cron_job_by(&job, by).map(Some)
        })
        .await?;
    let Some(row) = row else {
        return Ok(format!(
            "This device already has {MAX_JOBS_PER_DEVICE} scheduled jobs; remove one first (/cron list all, /cron remove <id>)."
        ));
    };
    cron.wake();
    Ok(format!(
        "Scheduled job {} “{}”: {}. Next run: {}.",
        row.job_id,
        row.name,
        schedule.describe(tz),
        next_text(cron, &row)
    ))
}

/// When the job runs next, as `/cron list` and the replies say it.
fn next_text(cron: &Cron, job: &CronJobRow) -> String {
    if job.paused {
        return "paused".into();
    }
    if cron.is_running(job.job_id) {
        return "running now (or waiting for the chat's current turn)".into();
    }
    match job.next_run {
        None => "none (done)".into(),
        Some(at) => {
            let now = cron.now_ms();
            let delay = if at > now {
                format!(
                    " (in {})",
                    human_delay(Duration::from_millis((at - now) as u64))
                )
            } else {
                " (due now)".into()
            };
            format!("{}{delay}", format_time(at, cron.timezone()))
        }
    }
}

async fn list(cron: &Cron, lane: &Lane, all: bool) -> Result<String, StoreError> {
    let tz = cron.timezone();
    let jobs: Vec<CronJobRow> = cron
        .store()
        .list_cron_jobs()
        .await?
        .into_iter()
        .filter(|j| all || (j.chat_id == lane.chat_id && j.thread_id == lane.thread_id))
        .collect();
    if jobs.is_empty() {
        let scope = if all { "" } else { " in this chat" };
        return Ok(format!(
            "No scheduled jobs{scope}. Add one with /cron add <schedule> <prompt>, e.g. /cron add every 2h Check the build."
        ));
    }
    let channels = if all {
        cron.store().list_channels().await?
    } else {
        Vec::new()
    };
    let mut out = format!(
        "Scheduled jobs{} (times in {tz}):",
        if all { "" } else { " in this chat" }
    );
    for job in &jobs {
        let schedule = Schedule::from_stored(&job.kind, &job.spec)
            .map(|s| s.describe(tz))
            .unwrap_or_else(|e| e.0);
        let place = if all {
            let chat = job.thread_id.as_ref().unwrap_or(&job.chat_id);
            let name = channels
                .iter()
                .find(|c| &c.chat_id == chat)
                .map_or(chat.as_str(), |c| c.name.as_str());
            format!(" in {name}")
        } else {
            String::new()
        };
        let last = match (&job.last_status, job.last_run) {
            (Some(status), Some(at)) => format!("{status} at {}", format_time(at, tz)),
            _ => "never ran".into(),
        };
        out.push_str(&format!(
            "\n{} “{}”{place}: {schedule}\n   next: {} · last: {last} · runs: {}",
            job.job_id,
            job.name,
            next_text(cron, job),
            job.run_count
        ));
    }
    Ok(out)
}

#[derive(Clone, Copy)]
enum Change {
    Remove,
    Pause,
    Resume,
}

enum Changed {
    Unknown,
    Done(Box<CronJobRow>),
    AlreadyPaused,
    NotPaused,
    Finished,
}

async fn change(cron: &Cron, args: &str, change: Change) -> Result<String, StoreError> {
    let verb = match change {
        Change::Remove => "remove",
        Change::Pause => "pause",
        Change::Resume => "resume",
    };
    let Some(job_id) = args.trim().trim_start_matches('#').parse::<u64>().ok() else {
        return Ok(format!(
            "Usage: /cron {verb} <id> (the number /cron list shows)"
        ));
    };
    let (now, tz) = (cron.now_ms(), cron.timezone());
    let changed = cron
        .store()
        .write(move |tx| {
            let Some(job) = tx.get_cron_job(job_id)? else {
                return Ok(Changed::Unknown);
            };
            match change {
                Change::Remove => {
                    tx.delete_cron_job(job_id)?;
                }
                Change::Pause if job.paused => return Ok(Changed::AlreadyPaused),
                Change::Pause => {
                    tx.set_cron_paused(job_id, true, job.next_run)?;
                }
                Change::Resume if !job.paused => return Ok(Changed::NotPaused),
                Change::Resume => {
                    let schedule = Schedule::from_stored(&job.kind, &job.spec).ok();
                    // Runs missed while paused are skipped; a one-shot whose time passed runs now.
                    let next = match &schedule {
                        Some(s) if s.is_once() => job.next_run,
                        Some(s) => s.next_after(now, job.created_at, tz),
                        None => None,
                    };
                    if next.is_none() {
                        return Ok(Changed::Finished);
                    }
                    tx.set_cron_paused(job_id, false, next)?;
                }
            }
            Ok(Changed::Done(Box::new(
                tx.get_cron_job(job_id)?.unwrap_or(job),
            )))
        })
        .await?;
    cron.wake();
    Ok(match changed {
        Changed::Unknown => format!("No scheduled job {job_id}. /cron list shows the jobs."),
        Changed::AlreadyPaused => format!("Job {job_id} is already paused."),
        Changed::NotPaused => format!("Job {job_id} is not paused."),
        Changed::Finished => {
            format!("Job {job_id} has already run and has nothing left to resume.")
        }
        Changed::Done(job) => match change {
            Change::Remove => format!("Removed job {job_id} “{}”.", job.name),
            Change::Pause => format!(
                "Paused job {job_id} “{}”. /cron resume {job_id} starts it again.",
                job.name
            ),
            Change::Resume => format!(
                "Resumed job {job_id} “{}”. Next run: {}.",
                job.name,
                next_text(cron, &job)
            ),
        },
    })
}
