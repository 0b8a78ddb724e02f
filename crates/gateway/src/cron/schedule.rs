//! Schedules: what `/cron add` accepts, how a schedule is stored, and when it runs next.
//!
//! Four forms, all evaluated in the configured time zone where a wall-clock time matters:
//! a standard 5-field cron expression (`0 9 * * 1-5`, or `@daily` and friends), a fixed
//! interval (`every 30m`), a delay (`in 20m`, one run) and an ISO-8601 time (one run).

use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, TimeZone};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};

/// The accepted forms, for error messages and help.
pub const ACCEPTED_FORMS: &str = "a 5-field cron expression in quotes, e.g. \"0 9 * * 1-5\" \
(minute hour day-of-month month day-of-week; @hourly, @daily, @weekly and @monthly work too), \
every 30m / every 2h / every 1d, in 20m (once), or an ISO-8601 time such as 2030-06-01T09:00 (once)";

/// A schedule that could not be read; the message says why, for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ScheduleError(pub String);

fn invalid(msg: impl Into<String>) -> ScheduleError {
    ScheduleError(msg.into())
}

/// When a job runs.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// A cron expression: runs at every matching minute in the configured time zone.
    Cron {
        /// The expression as given (whitespace normalized).
        text: String,
        /// The parsed pattern.
        cron: Box<croner::Cron>,
    },
    /// Runs every `secs` seconds, counted from the job's creation.
    Every {
        /// The interval.
        secs: u64,
    },
    /// Runs once, at this unix time in milliseconds.
    Once {
        /// The time.
        at_ms: i64,
    },
}

/// Shortest interval of `every`.
const MIN_INTERVAL: u64 = 60;
/// Longest interval or delay.
const MAX_INTERVAL: u64 = 366 * 86_400;

impl Schedule {
    /// Reads a schedule as typed by the user; `now_ms` anchors `in 20m`.
    pub fn parse(text: &str, tz: Tz, now_ms: i64) -> Result<Schedule, ScheduleError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(invalid("The schedule is missing."));
        }
        let lower = text.to_lowercase();
        if let Some(rest) = strip_word(&lower, "every") {
            let secs = parse_duration(rest)?;
            if secs < MIN_INTERVAL {
                return Err(invalid("The shortest interval is 1 minute (every 1m)."));
            }
            return Ok(Schedule::Every { secs });
        }
        if let Some(rest) = strip_word(&lower, "in") {
            let secs = parse_duration(rest)?;
            let at_ms = now_ms.saturating_add(i64::try_from(secs * 1000).unwrap_or(i64::MAX));
            return Ok(Schedule::Once { at_ms });
        }
        if let Some(rest) = strip_word(text, "at").or_else(|| strip_word(text, "At")) {
            return parse_time(rest, tz, now_ms);
        }
        if looks_like_date(text) {
            return parse_time(text, tz, now_ms);
        }
        parse_cron(text, tz, now_ms)
    }

    /// Reads a schedule back from the store's `kind` and `spec`.
    pub fn from_stored(kind: &str, spec: &str) -> Result<Schedule, ScheduleError> {
        let bad = || invalid(format!("stored schedule {kind} {spec:?} is unreadable"));
        match kind {
            "cron" => Ok(Schedule::Cron {
                text: spec.to_owned(),
                cron: Box::new(cron_parser().parse(spec).map_err(|_| bad())?),
            }),
            "every" => Ok(Schedule::Every {
                secs: spec.parse().map_err(|_| bad())?,
            }),
            "once" => Ok(Schedule::Once {
                at_ms: spec.parse().map_err(|_| bad())?,
            }),
            _ => Err(bad()),
        }
    }

    /// The store's `kind` and `spec` of this schedule.
    pub fn stored(&self) -> (&'static str, String) {
        match self {
            Schedule::Cron { text, .. } => ("cron", text.clone()),
            Schedule::Every { secs } => ("every", secs.to_string()),
            Schedule::Once { at_ms } => ("once", at_ms.to_string()),
        }
    }

    /// Whether the job runs only once.
    pub fn is_once(&self) -> bool {
        matches!(self, Schedule::Once { .. })
    }

    /// The first run of a job created at `created_ms`.
    pub fn first_run(&self, created_ms: i64, tz: Tz) -> Option<i64> {
        match self {
            Schedule::Once { at_ms } => Some(*at_ms),
            _ => self.next_after(created_ms, created_ms, tz),
        }
    }

    /// The first run strictly after `t_ms`; `anchor_ms` (the job's creation) sets the phase of
    /// intervals. `None` when there is none (a one-shot whose time has passed).
    pub fn next_after(&self, t_ms: i64, anchor_ms: i64, tz: Tz) -> Option<i64> {
        match self {
            Schedule::Cron { cron, .. } => {
                // The pattern has minute resolution: search from the whole second.
                let start = tz
                    .timestamp_millis_opt(t_ms.div_euclid(1000) * 1000)
                    .single()?;
                cron.find_next_occurrence(&start, false)
                    .ok()
                    .map(|d| d.timestamp_millis())
            }
            Schedule::Every { secs } => {
                let step = i64::try_from(secs * 1000).ok()?.max(1);
                let k = if t_ms < anchor_ms {
                    1
                } else {
                    (t_ms - anchor_ms) / step + 1
                };
                anchor_ms.checked_add(k.checked_mul(step)?)
            }
            Schedule::Once { at_ms } => (*at_ms > t_ms).then_some(*at_ms),
        }
    }

    /// How the schedule reads in `/cron list`.
    pub fn describe(&self, tz: Tz) -> String {
        match self {
            Schedule::Cron { text, .. } => format!("{text} ({tz})"),
            Schedule::Every { secs } => format!("every {}", short_duration(*secs)),
            Schedule::Once { at_ms } => format!("once at {}", format_time(*at_ms, tz)),
        }
    }
}

/// A time as users read it: `Mon 2030-06-03 09:00 CEST`.
pub fn format_time(ms: i64, tz: Tz) -> String {
    match tz.timestamp_millis_opt(ms).single() {
        Some(t) => t.format("%a %Y-%m-%d %H:%M %Z").to_string(),
        None => format!("{ms} ms"),
    }
}

/// `30m`, `2h`, `1d`, `90m`.
fn short_duration(secs: u64) -> String {
    if secs.is_multiple_of(86_400) {
        format!("{}d", secs / 86_400)
    } else if secs.is_multiple_of(3600) {
        format!("{}h", secs / 3600)
    } else if secs.is_multiple_of(60) {
        format!("{}m", secs / 60)
    } else {
        format!("{secs}s")
    }
}

fn cron_parser() -> CronParser {
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
}

fn parse_cron(text: &str, tz: Tz, now_ms: i64) -> Result<Schedule, ScheduleError> {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let fields = text.split(' ').count();
    if !text.starts_with('@') && fields != 5 {
        return Err(invalid(format!(
            "“{text}” is not a schedule: a cron expression has exactly 5 fields (minute hour day-of-month month day-of-week), this has {fields}."
        )));
    }
    let cron = cron_parser()
        .parse(&text)
        .map_err(|e| invalid(format!("“{text}” is not a valid cron expression ({e}).")))?;
    let schedule = Schedule::Cron {
        text: text.clone(),
        cron: Box::new(cron),
    };
    if schedule.next_after(now_ms, now_ms, tz).is_none() {
        return Err(invalid(format!("“{text}” never matches a date.")));
    }
    Ok(schedule)
}

/// `30m`, `2h`, `1d`, `30 minutes`, `2 hours` → seconds.
fn parse_duration(text: &str) -> Result<u64, ScheduleError> {
    let text = text.trim();
    let bad = || invalid(format!("“{text}” is not a duration like 30m, 2h or 1d."));
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (num, unit) = text.split_at(digits);
    let n: u64 = num.parse().map_err(|_| bad())?;
    let unit_secs = match unit.trim() {
        "m" | "min" | "mins" | "minute" | "minutes" => 60,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3600,
        "d" | "day" | "days" => 86_400,
        _ => return Err(bad()),
    };
    let secs = n
        .checked_mul(unit_secs)
        .filter(|s| *s > 0)
        .ok_or_else(bad)?;
    if secs > MAX_INTERVAL {
        return Err(invalid("Durations are limited to 366 days."));
    }
    Ok(secs)
}

/// An ISO-8601 time; without an offset it is a wall-clock time in `tz`.
fn parse_time(text: &str, tz: Tz, now_ms: i64) -> Result<Schedule, ScheduleError> {
    let raw = text.trim();
    let bad = || {
        invalid(format!(
            "“{raw}” is not an ISO-8601 time like 2030-06-01T09:00 or 2030-06-01T09:00:00+02:00."
        ))
    };
    // `2030-06-01 09:00` reads like `2030-06-01T09:00`; `Z` is the UTC offset.
    let mut t = raw.replacen(' ', "T", 1);
    if t.ends_with(['Z', 'z']) {
        t.pop();
        t.push_str("+00:00");
    }
    let with_offset = [
        "%Y-%m-%dT%H:%M:%S%.f%:z",
        "%Y-%m-%dT%H:%M:%S%:z",
        "%Y-%m-%dT%H:%M%:z",
        "%Y-%m-%dT%H:%M:%S%.f%z",
        "%Y-%m-%dT%H:%M%z",
    ];
    let at_ms = if let Some(dt) = with_offset
        .iter()
        .find_map(|f| DateTime::parse_from_str(&t, f).ok())
    {
        dt.timestamp_millis()
    } else {
        let local = [
            "%Y-%m-%dT%H:%M:%S%.f",
            "%Y-%m-%dT%H:%M:%S",
            "%Y-%m-%dT%H:%M",
        ];
        let naive = local
            .iter()
            .find_map(|f| NaiveDateTime::parse_from_str(&t, f).ok())
            .ok_or_else(bad)?;
        match tz.from_local_datetime(&naive).earliest() {
            Some(dt) => dt.timestamp_millis(),
            None => {
                return Err(invalid(format!(
                    "{raw} does not exist in {tz} (the clocks skip it)."
                )))
            }
        }
    };
    if at_ms <= now_ms {
        return Err(invalid(format!(
            "{} is in the past.",
            format_time(at_ms, tz)
        )));
    }
    Ok(Schedule::Once { at_ms })
}

/// The rest of `text` after a leading `word` and whitespace.
fn strip_word<'a>(text: &'a str, word: &str) -> Option<&'a str> {
    let rest = text.strip_prefix(word)?;
    rest.starts_with(char::is_whitespace)
        .then(|| rest.trim_start())
}

fn looks_like_date(t: &str) -> bool {
    let b = t.as_bytes();
    b.len() >= 10 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-'
}

fn looks_like_clock(t: &str) -> bool {
    t.starts_with(|c: char| c.is_ascii_digit()) && t.contains(':')
}

/// Splits the arguments of `/cron add` into the schedule and the prompt.
///
/// The schedule may be quoted (`"0 9 * * 1-5" Morning report`, also with typographic quotes as
/// phone keyboards type them); unquoted, its extent follows from its first word: `every 30m`,
/// `in 20m`, `at <time>`, an ISO-8601 time (a date and a time may be two words), `@daily`, or
/// else the five fields of a cron expression.
pub fn split_add(args: &str) -> (String, String) {
    let args = args.trim();
    for (open, close) in [
        ('"', '"'),
        ('\'', '\''),
        ('“', '”'),
        ('„', '“'),
        ('‘', '’'),
        ('«', '»'),
    ] {
        if let Some(rest) = args.strip_prefix(open) {
            if let Some(end) = rest.find(close) {
                return (
                    rest[..end].trim().to_owned(),
                    rest[end + close.len_utf8()..].trim().to_owned(),
                );
            }
        }
    }
    let words: Vec<&str> = args.split_whitespace().take(6).collect();
    let word = |i: usize| words.get(i).copied().unwrap_or("");
    let first = word(0).to_lowercase();
    let date_time = |i: usize| {
        if looks_like_date(word(i)) && !word(i).contains(':') && looks_like_clock(word(i + 1)) {
            2
        } else {
            1
        }
    };
    let n = match first.as_str() {
        "every" | "in" => {
            let spaced_unit = word(1).chars().all(|c| c.is_ascii_digit())
                && parse_duration(&format!("1{}", word(2))).is_ok();
            if spaced_unit {
                3
            } else {
                2
            }
        }
        "at" => 1 + date_time(1),
        f if f.starts_with('@') => 1,
        f if looks_like_date(f) => date_time(0),
        _ => 5,
    };
    take_words(args, n)
}

/// The first `n` whitespace-separated words of `s`, and the rest (its own spacing kept).
fn take_words(s: &str, n: usize) -> (String, String) {
    let mut count = 0;
    let mut in_word = false;
    for (i, c) in s.char_indices() {
        if c.is_whitespace() {
            if in_word {
                count += 1;
                in_word = false;
                if count == n {
                    return (s[..i].trim().to_owned(), s[i..].trim().to_owned());
                }
            }
        } else {
            in_word = true;
        }
    }
    (s.trim().to_owned(), String::new())
}

/// A job's name: the start of its prompt, as a title.
pub fn job_name(prompt: &str) -> String {
    crate::text::instant_title(prompt)
}

/// Hours and minutes for messages (`2h 5m`, `20m`, `45s`).
pub fn human_delay(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, (s % 3600) / 60) {
        (0, 0) => format!("{s}s"),
        (0, m) => format!("{m}m"),
        (h, 0) => format!("{h}h"),
        (h, m) => format!("{h}h {m}m"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BERLIN: Tz = chrono_tz::Europe::Berlin;
    /// Monday 2030-06-03 06:00:00 UTC (08:00 in Berlin, summer time).
    const MON_0600Z: i64 = 1_906_696_800_000;

    #[test]
    fn the_anchor_constant_is_what_it_says() {
        assert_eq!(
            format_time(MON_0600Z, chrono_tz::UTC),
            "Mon 2030-06-03 06:00 UTC"
        );
        assert_eq!(format_time(MON_0600Z, BERLIN), "Mon 2030-06-03 08:00 CEST");
    }

    #[test]
    fn cron_runs_in_the_configured_zone() {
        let s = Schedule::parse("0 9 * * 1-5", BERLIN, MON_0600Z).unwrap();
        let next = s.first_run(MON_0600Z, BERLIN).unwrap();
        assert_eq!(format_time(next, BERLIN), "Mon 2030-06-03 09:00 CEST");
        assert_eq!(
            format_time(s.next_after(next, MON_0600Z, BERLIN).unwrap(), BERLIN),
            "Tue 2030-06-04 09:00 CEST"
        );
        // Just before the minute, the same minute is still ahead.
        assert_eq!(s.next_after(next - 1, MON_0600Z, BERLIN), Some(next));
        let (kind, spec) = s.stored();
        let back = Schedule::from_stored(kind, &spec).unwrap();
        assert_eq!(back.next_after(MON_0600Z, 0, BERLIN), Some(next));
        assert!(Schedule::parse("@daily", BERLIN, MON_0600Z).is_ok());
    }

    #[test]
    fn bad_cron_expressions_say_why() {
        for bad in [
            "0 9 * *",
            "0 0 9 * * 1",
            "61 * * * *",
            "0 9 * * banana",
            "0 0 31 2 *",
        ] {
            let e = Schedule::parse(bad, BERLIN, MON_0600Z).unwrap_err();
            assert!(e.0.contains('“'), "{bad}: {e}");
        }
    }

    #[test]
    fn intervals_keep_their_phase() {
        let s = Schedule::parse("every 30m", BERLIN, MON_0600Z).unwrap();
        let first = s.first_run(MON_0600Z, BERLIN).unwrap();
        assert_eq!(first, MON_0600Z + 1_800_000);
        // Two hours late: the next run is on the grid, after now.
        let late = MON_0600Z + 7_200_000 + 5_000;
        assert_eq!(
            s.next_after(late, MON_0600Z, BERLIN),
            Some(MON_0600Z + 9_000_000)
        );
        assert_eq!(s.describe(BERLIN), "every 30m");
        assert_eq!(
            Schedule::parse("every 2 hours", BERLIN, 0)
                .unwrap()
                .describe(BERLIN),
            "every 2h"
        );
        assert!(Schedule::parse("every 10s", BERLIN, 0).is_err());
        assert!(Schedule::parse("every 0m", BERLIN, 0).is_err());
        assert!(Schedule::parse("every banana", BERLIN, 0).is_err());
    }

    #[test]
    fn one_shots_run_once() {
        let s = Schedule::parse("in 20m", BERLIN, MON_0600Z).unwrap();
        assert_eq!(s.first_run(MON_0600Z, BERLIN), Some(MON_0600Z + 1_200_000));
        assert_eq!(s.next_after(MON_0600Z + 1_200_000, MON_0600Z, BERLIN), None);
        let local = Schedule::parse("2030-06-03T09:30", BERLIN, MON_0600Z).unwrap();
        assert_eq!(local.first_run(0, BERLIN), Some(MON_0600Z + 5_400_000));
        let spaced = Schedule::parse("at 2030-06-03 09:30", BERLIN, MON_0600Z).unwrap();
        assert_eq!(spaced.first_run(0, BERLIN), Some(MON_0600Z + 5_400_000));
        let utc = Schedule::parse("2030-06-03T07:30:00Z", BERLIN, MON_0600Z).unwrap();
        assert_eq!(utc.first_run(0, BERLIN), Some(MON_0600Z + 5_400_000));
        let offset = Schedule::parse("2030-06-03T09:30+02:00", BERLIN, MON_0600Z).unwrap();
        assert_eq!(offset.first_run(0, BERLIN), Some(MON_0600Z + 5_400_000));
        assert!(Schedule::parse("2030-06-03T07:00", BERLIN, MON_0600Z)
            .unwrap_err()
            .0
            .contains("past"));
        assert!(Schedule::parse("2030-13-03T07:00", BERLIN, MON_0600Z).is_err());
    }

    #[test]
    fn add_arguments_split_into_schedule_and_prompt() {
        let split = |s: &str| split_add(s);
        assert_eq!(
            split("\"0 9 * * 1-5\" Morning report"),
            ("0 9 * * 1-5".into(), "Morning report".into())
        );
        assert_eq!(
            split("“0 9 * * 1-5” Morning  report"),
            ("0 9 * * 1-5".into(), "Morning  report".into())
        );
        assert_eq!(
            split("0 9 * * 1-5 Morning report"),
            ("0 9 * * 1-5".into(), "Morning report".into())
        );
        assert_eq!(
            split("every 30m Check the\nbuild"),
            ("every 30m".into(), "Check the\nbuild".into())
        );
        assert_eq!(
            split("every 2 hours Stretch"),
            ("every 2 hours".into(), "Stretch".into())
        );
        assert_eq!(split("in 20m Tea"), ("in 20m".into(), "Tea".into()));
        assert_eq!(
            split("2030-06-03T09:30 Call"),
            ("2030-06-03T09:30".into(), "Call".into())
        );
        assert_eq!(
            split("2030-06-03 09:30 Call"),
            ("2030-06-03 09:30".into(), "Call".into())
        );
        assert_eq!(
            split("at 2030-06-03 09:30 Call"),
            ("at 2030-06-03 09:30".into(), "Call".into())
        );
        assert_eq!(split("@daily Digest"), ("@daily".into(), "Digest".into()));
        assert_eq!(split("every 30m"), ("every 30m".into(), String::new()));
    }

    #[test]
    fn names_are_the_start_of_the_prompt() {
        assert_eq!(job_name("Morning report\nwith details"), "Morning report");
        assert!(job_name(&"word ".repeat(40)).chars().count() <= 48);
    }
}
