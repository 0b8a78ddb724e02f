//! `[cron]`: the scheduler's settings.

use chrono_tz::Tz;

use crate::clock::Clock;

/// Settings of the scheduler.
#[derive(Debug, Clone)]
pub struct CronConfig {
    /// The zone of cron expressions and of times without an offset (default: the host's).
    pub timezone: Tz,
    /// Run jobs missed while the gateway was down once at startup (default true).
    pub catch_up: bool,
    /// The clock the scheduler reads.
    pub clock: Clock,
}

impl Default for CronConfig {
    fn default() -> Self {
        CronConfig {
            timezone: host_timezone(),
            catch_up: true,
            clock: Clock::system(),
        }
    }
}

/// The host's time zone: `TZ` when it names an IANA zone, else the system's zone
/// (`/etc/localtime`), else UTC.
pub fn host_timezone() -> Tz {
    let from_env = std::env::var("TZ")
        .ok()
        .and_then(|v| v.trim_start_matches(':').parse::<Tz>().ok());
    from_env
        .or_else(|| {
            iana_time_zone::get_timezone()
                .ok()
                .and_then(|name| name.parse::<Tz>().ok())
        })
        .unwrap_or(chrono_tz::UTC)
}
