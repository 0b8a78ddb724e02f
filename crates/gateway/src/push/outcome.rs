//! What a push backend's HTTP answer means: one classification for FCM, ntfy and Web Push.
//!
//! Every backend reads an answer the same way, in this order:
//!
//! 1. 2xx: [`Outcome::Delivered`];
//! 2. the registration is gone, [`Outcome::Unregistered`]: the body carries an error code the
//!    backend calls gone, or the status is one it calls gone, or one it calls gone when the body
//!    names the registration as what was refused;
//! 3. 429, 5xx, and the statuses the backend retries: [`Outcome::Retry`], honouring
//!    `Retry-After`;
//! 4. anything else: [`Outcome::Rejected`].
//!
//! A request that got no answer (connection, timeout, TLS) is an [`Outcome::Retry`].
//!
//! What differs between the backends is data, in their [`Rules`]: which statuses and error codes
//! mean the registration is gone, which statuses besides 429 and 5xx are worth retrying, and how
//! their error bodies are read.

use std::time::Duration;

use reqwest::header::{HeaderMap, RETRY_AFTER};
use reqwest::StatusCode;
use serde_json::Value;

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

/// What the body of an error answer says, as far as the classification cares.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct ErrorBody {
    /// The service's error code or short reason: matched against [`Rules::gone_codes`] and
    /// shown in the log. Never a token or content.
    pub code: String,
    /// The body names the registration (the token) as what was refused.
    pub names_registration: bool,
}

/// The part of the classification that is a backend's own.
#[derive(Debug)]
pub(crate) struct Rules {
    /// Names the service in log reasons ("FCM answered 503 …", "ntfy unreachable: …").
    pub service: &'static str,
    /// Statuses that mean the registration is gone, whatever the body says.
    pub gone: &'static [u16],
    /// Error codes in the body that mean the registration is gone, whatever the status.
    pub gone_codes: &'static [&'static str],
    /// Statuses that mean the registration is gone when the body names it as what was refused.
    pub gone_if_named: &'static [u16],
    /// Statuses retried besides 429 and 5xx.
    pub retry: &'static [u16],
    /// Every failure that does not mean the registration is gone is retried (an answer that
    /// says nothing about the push itself).
    pub retry_every_failure: bool,
    /// Reads an error body; `None` when the backend's error bodies are not read.
    pub read_body: Option<fn(&Value) -> ErrorBody>,
}

/// Classifies an answer: its status, its headers, and its body (`Value::Null` when it was not
/// read or is not JSON).
pub(crate) fn classify(
    status: StatusCode,
    headers: &HeaderMap,
    body: &Value,
    rules: &Rules,
) -> Outcome {
    if status.is_success() {
        return Outcome::Delivered;
    }
    let said = rules.read_body.map(|read| read(body)).unwrap_or_default();
    let code = status.as_u16();
    let gone = rules.gone_codes.contains(&said.code.as_str())
        || rules.gone.contains(&code)
        || (said.names_registration && rules.gone_if_named.contains(&code));
    if gone {
        return Outcome::Unregistered;
    }
    let mut reason = format!("{} answered {status}", rules.service);
    if !said.code.is_empty() {
        reason.push_str(&format!(" ({})", said.code));
    }
    if code == 429
        || status.is_server_error()
        || rules.retry.contains(&code)
        || rules.retry_every_failure
    {
        Outcome::Retry {
            after: retry_after(headers),
            reason,
        }
    } else {
        Outcome::Rejected(reason)
    }
}

/// Classifies a response, reading its body only when it is an error the backend reads.
pub(crate) async fn classify_response(response: reqwest::Response, rules: &Rules) -> Outcome {
    let status = response.status();
    if status.is_success() || rules.read_body.is_none() {
        return classify(status, response.headers(), &Value::Null, rules);
    }
    let headers = response.headers().clone();
    let body = response.json::<Value>().await.unwrap_or(Value::Null);
    classify(status, &headers, &body, rules)
}

/// A request that got no answer (connection refused, timeout, TLS): always worth retrying.
pub(crate) fn transport_error(rules: &Rules, e: reqwest::Error) -> Outcome {
    Outcome::Retry {
        after: None,
        reason: format!("{} unreachable: {}", rules.service, without_url(e)),
    }
}

/// A request error without its URL: the ntfy URL carries the topic and a Web Push endpoint is a
/// capability, both secrets.
pub(crate) fn without_url(e: reqwest::Error) -> String {
    e.without_url().to_string()
}
