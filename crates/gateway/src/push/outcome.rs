//! What a push backend's HTTP answer means.

use std::time::Duration;

use reqwest::header::{HeaderMap, RETRY_AFTER};

/// What a backend answered to one push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Accepted.
    Delivered,
    /// Try again later, not before `after` when the backend said so.
    Retry {
        /// The backend's `Retry-After`.
        after: Option<Duration>,
        /// For the log (never contains tokens or content).
        reason: String,
    },
    /// The device's registration is no longer valid and must be removed.
    Unregistered,
    /// Refused for good; retrying would not help.
    Rejected(String),
}

/// Parses a `Retry-After` header given in seconds (the HTTP-date form is not used by these
/// backends).
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let v = headers.get(RETRY_AFTER)?.to_str().ok()?;
    v.trim().parse::<u64>().ok().map(Duration::from_secs)
}
