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

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;
    use serde_json::json;

    use super::*;
    use crate::push::{fcm, ntfy, webpush};

    /// The outcome of `status` with `body`, for the table.
    fn kind(rules: &Rules, status: u16, body: &Value) -> &'static str {
        let status = StatusCode::from_u16(status).expect("a status");
        match classify(status, &HeaderMap::new(), body, rules) {
            Outcome::Delivered => "delivered",
            Outcome::Retry { .. } => "retry",
            Outcome::Unregistered => "gone",
            Outcome::Rejected(_) => "rejected",
        }
    }

    #[test]
    fn each_status_class_per_backend() {
        let backends = [&fcm::SEND, &fcm::TOKEN, &ntfy::RULES, &webpush::RULES];
        // Status, then the outcome for FCM, its token endpoint, ntfy and Web Push, when the body
        // says nothing.
        let table: &[(u16, [&str; 4])] = &[
            (200, ["delivered"; 4]),
            (201, ["delivered"; 4]),
            (204, ["delivered"; 4]),
            (102, ["rejected", "retry", "rejected", "rejected"]),
            (301, ["rejected", "retry", "rejected", "rejected"]),
            (400, ["rejected", "retry", "rejected", "rejected"]),
            (401, ["retry", "retry", "rejected", "rejected"]),
            (403, ["rejected", "retry", "rejected", "rejected"]),
            (404, ["rejected", "retry", "rejected", "gone"]),
            (408, ["rejected", "retry", "rejected", "rejected"]),
            (410, ["rejected", "retry", "rejected", "gone"]),
            (413, ["rejected", "retry", "rejected", "rejected"]),
            (429, ["retry"; 4]),
            (500, ["retry"; 4]),
            (502, ["retry"; 4]),
            (503, ["retry"; 4]),
            (599, ["retry"; 4]),
        ];
        for (status, want) in table {
            for (rules, want) in backends.iter().zip(want) {
                for body in [Value::Null, json!({}), json!({"error": "x"})] {
                    assert_eq!(
                        kind(rules, *status, &body),
                        *want,
                        "{} answering {status} with {body}",
                        rules.service
                    );
                }
            }
        }
    }

    #[test]
    fn fcm_error_bodies_decide_whether_a_token_is_gone() {
        let code = |code: &str| {
            json!({"error": {"status": "NOT_FOUND", "details": [
                {"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": code}
            ]}})
        };
        let violation = |field: &str| {
            json!({"error": {"status": "INVALID_ARGUMENT", "details": [
                {"@type": "type.googleapis.com/google.rpc.BadRequest",
                 "fieldViolations": [{"field": field, "description": "invalid"}]}
            ]}})
        };
        let message = json!({"error": {"status": "INVALID_ARGUMENT",
            "message": "The registration token is not a valid FCM registration token"}});
        let cases = [
            (404, code("UNREGISTERED"), "gone"),
            // The error code decides whatever the status.
            (400, code("UNREGISTERED"), "gone"),
            (503, code("UNREGISTERED"), "gone"),
            (404, code("SENDER_ID_MISMATCH"), "rejected"),
            (503, code("UNAVAILABLE"), "retry"),
            (429, code("QUOTA_EXCEEDED"), "retry"),
            // A 400 is about the token only when it says so.
            (400, violation("message.token"), "gone"),
            (400, message.clone(), "gone"),
            (400, violation("message.android.ttl"), "rejected"),
            (403, violation("message.token"), "rejected"),
            (500, message, "retry"),
        ];
        for (status, body, want) in cases {
            assert_eq!(kind(&fcm::SEND, status, &body), want, "{status} {body}");
        }
        // Other backends have no such codes.
        for rules in [&fcm::TOKEN, &ntfy::RULES, &webpush::RULES] {
            assert_ne!(kind(rules, 400, &code("UNREGISTERED")), "gone");
            assert_ne!(kind(rules, 400, &violation("message.token")), "gone");
        }
    }

    #[test]
    fn reasons_name_the_service_the_status_and_what_the_body_says() {
        let reason = |rules: &Rules, status: u16, body: Value| {
            let status = StatusCode::from_u16(status).expect("a status");
            match classify(status, &HeaderMap::new(), &body, rules) {
                Outcome::Retry { reason, .. } | Outcome::Rejected(reason) => reason,
                other => panic!("no reason in {other:?}"),
            }
        };
        let unavailable =
            json!({"error": {"details": [{"errorCode": "UNAVAILABLE"}], "message": "try later"}});
        assert_eq!(
            reason(&fcm::SEND, 503, unavailable),
            "FCM answered 503 Service Unavailable (UNAVAILABLE)"
        );
        assert_eq!(
            reason(
                &fcm::SEND,
                401,
                json!({"error": {"status": "UNAUTHENTICATED"}})
            ),
            "FCM answered 401 Unauthorized"
        );
        assert_eq!(
            reason(&fcm::TOKEN, 400, json!({"error": "invalid_grant"})),
            "token endpoint answered 400 Bad Request (invalid_grant)"
        );
        // ntfy's error bodies are not read.
        assert_eq!(
            reason(&ntfy::RULES, 403, json!({"error": "forbidden"})),
            "ntfy answered 403 Forbidden"
        );
        assert_eq!(
            reason(&webpush::RULES, 403, json!({"reason": "BadJwtToken"})),
            "push service answered 403 Forbidden (BadJwtToken)"
        );
        let long = reason(&webpush::RULES, 413, json!({"message": "x".repeat(500)}));
        assert!(long.ends_with("…)"), "a long reason is cut: {long}");
        assert_eq!(
            long.chars().count(),
            "push service answered 413 Payload Too Large ()"
                .chars()
                .count()
                + 120
        );
    }

    #[test]
    fn retry_after_in_seconds_is_honoured_on_retries_only() {
        let after = |rules: &Rules, status: u16, value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(RETRY_AFTER, HeaderValue::from_str(value).expect("a value"));
            let status = StatusCode::from_u16(status).expect("a status");
            match classify(status, &headers, &Value::Null, rules) {
                Outcome::Retry { after, .. } => after,
                _ => None,
            }
        };
        for rules in [&fcm::SEND, &fcm::TOKEN, &ntfy::RULES, &webpush::RULES] {
            assert_eq!(after(rules, 429, "30"), Some(Duration::from_secs(30)));
            assert_eq!(after(rules, 503, " 7 "), Some(Duration::from_secs(7)));
            // The HTTP-date form is not understood: backoff decides.
            assert_eq!(after(rules, 503, "Wed, 21 Oct 2015 07:28:00 GMT"), None);
        }
        assert_eq!(after(&fcm::SEND, 401, "5"), Some(Duration::from_secs(5)));
        assert_eq!(after(&fcm::TOKEN, 400, "5"), Some(Duration::from_secs(5)));
        assert_eq!(
            classify(
                StatusCode::BAD_REQUEST,
                &HeaderMap::from_iter([(RETRY_AFTER, HeaderValue::from_static("5"))]),
                &Value::Null,
                &ntfy::RULES
            ),
            Outcome::Rejected("ntfy answered 400 Bad Request".into()),
            "a refusal is not retried, whatever it asks"
        );
    }

    #[tokio::test]
    async fn responses_are_read_only_when_the_backend_reads_them() {
        let response = |status: u16, body: &str| {
            let answer = axum::http::Response::builder()
                .status(status)
                .header("retry-after", "3")
                .body(body.to_owned())
                .expect("a response");
            reqwest::Response::from(answer)
        };
        let unregistered = r#"{"error": {"details": [{"errorCode": "UNREGISTERED"}]}}"#;
        assert_eq!(
            classify_response(response(404, unregistered), &fcm::SEND).await,
            Outcome::Unregistered
        );
        assert_eq!(
            classify_response(response(404, "not json"), &fcm::SEND).await,
            Outcome::Rejected("FCM answered 404 Not Found".into())
        );
        assert_eq!(
            classify_response(response(200, "not json"), &fcm::SEND).await,
            Outcome::Delivered
        );
        assert_eq!(
            classify_response(response(503, r#"{"error": "busy"}"#), &ntfy::RULES).await,
            Outcome::Retry {
                after: Some(Duration::from_secs(3)),
                reason: "ntfy answered 503 Service Unavailable".into()
            }
        );
        assert_eq!(
            classify_response(response(429, r#"{"reason": "TooMany"}"#), &webpush::RULES).await,
            Outcome::Retry {
                after: Some(Duration::from_secs(3)),
                reason: "push service answered 429 Too Many Requests (TooMany)".into()
            }
        );
        assert_eq!(
            classify_response(response(410, ""), &webpush::RULES).await,
            Outcome::Unregistered
        );
    }

    #[tokio::test]
    async fn no_answer_is_retried_and_logged_without_the_url() {
        // Nothing listens on port 1 of this machine.
        let err = reqwest::Client::new()
            .post("http://127.0.0.1:1/secret-topic")
            .send()
            .await
            .expect_err("refused");
        match transport_error(&ntfy::RULES, err) {
            Outcome::Retry { after, reason } => {
                assert_eq!(after, None);
                assert!(reason.starts_with("ntfy unreachable: "), "{reason}");
                assert!(!reason.contains("secret-topic"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }
}
