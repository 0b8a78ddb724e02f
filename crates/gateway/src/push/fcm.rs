//! FCM HTTP v1: the service account, OAuth2 access tokens through the JWT bearer grant (RS256),
//! cached until shortly before they expire, and `messages:send` with its error answers.

use std::fmt;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::sync::Mutex;

use super::error::PushError;
use super::outcome::Outcome;
use super::outcome::{classify_response, transport_error, without_url, ErrorBody, Rules};
use super::policy::PushContent;
use crate::config::push::{FcmConfig, GOOGLE_TOKEN_URL};

/// The OAuth2 scope of FCM sends.
pub const SCOPE: &str = "https://www.googleapis.com/auth/firebase.messaging";
/// The JWT bearer grant type.
pub const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// Lifetime of the signed assertion (Google accepts at most an hour).
const ASSERTION_SECS: u64 = 3600;
/// A token is renewed this long before it expires (or at half its lifetime, if that is shorter),
/// so that a request never carries a token that expires on the way.
const RENEW_MARGIN: Duration = Duration::from_secs(60);

/// How FCM's answers to `messages:send` are read. A token is gone when the error code says
/// `UNREGISTERED` (FCM sends it with 404), or when a 400 `INVALID_ARGUMENT` names the token. A
/// 401 is retried: the access token was revoked or expired early, and a new one is fetched.
pub(crate) const SEND: Rules = Rules {
    service: "FCM",
    gone: &[],
    gone_codes: &["UNREGISTERED"],
    gone_if_named: &[400],
    retry: &[401],
    retry_every_failure: false,
    read_body: Some(fcm_error),
};

/// How the token endpoint's answers are read: a failure to get an access token says nothing
/// about the push or the device, so every failure is retried.
pub(crate) const TOKEN: Rules = Rules {
    service: "token endpoint",
    gone: &[],
    gone_codes: &[],
    gone_if_named: &[],
    retry: &[],
    retry_every_failure: true,
    read_body: Some(oauth_error),
};

/// The fields of a Google service-account key file that the JWT bearer grant needs.
#[derive(Deserialize)]
struct ServiceAccount {
    client_email: String,
    private_key: String,
    #[serde(default)]
    private_key_id: Option<String>,
    #[serde(default)]
    project_id: Option<String>,
    #[serde(default)]
    token_uri: Option<String>,
}

#[derive(Serialize)]
struct Claims<'a> {
    iss: &'a str,
    scope: &'a str,
    aud: &'a str,
    iat: u64,
    exp: u64,
}

#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
}

struct CachedToken {
    value: String,
    renew_at: Instant,
}

/// When a token obtained at `obtained` that lives `expires_in` must be renewed.
pub fn renew_at(obtained: Instant, expires_in: Duration) -> Instant {
    obtained + expires_in - RENEW_MARGIN.min(expires_in / 2)
}

/// The FCM backend: one project, one service account, one cached access token.
pub struct Fcm {
    http: reqwest::Client,
    send_url: String,
    token_url: String,
    client_email: String,
    key_id: Option<String>,
    key: EncodingKey,
    token: Mutex<Option<CachedToken>>,
}

// The key and the cached token stay out of logs.
impl fmt::Debug for Fcm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fcm")
            .field("send_url", &self.send_url)
            .field("token_url", &self.token_url)
            .finish_non_exhaustive()
    }
}

impl Fcm {
    /// Reads the service account and prepares the endpoints.
    pub(crate) fn load(cfg: &FcmConfig, http: reqwest::Client) -> Result<Fcm, PushError> {
        let path = &cfg.service_account;
        let text =
            std::fs::read_to_string(path).map_err(|source| PushError::ReadServiceAccount {
                path: path.clone(),
                source,
            })?;
        let invalid = |message: String| PushError::InvalidServiceAccount {
            path: path.clone(),
            message,
        };
        // serde's message names the missing field and never echoes the key.
        let account: ServiceAccount =
            serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        let key = EncodingKey::from_rsa_pem(account.private_key.as_bytes())
            .map_err(|e| invalid(format!("private_key is not an RSA key in PEM form ({e})")))?;
        let project = cfg
            .project_id
            .clone()
            .or(account.project_id)
            .ok_or_else(|| invalid("no project_id: set push.fcm.project_id".into()))?;
        let token_url = cfg
            .token_url
            .clone()
            .or(account.token_uri)
            .unwrap_or_else(|| GOOGLE_TOKEN_URL.into());
        Ok(Fcm {
            http,
            send_url: format!("{}/v1/projects/{project}/messages:send", cfg.base_url),
            token_url,
            client_email: account.client_email,
            key_id: account.private_key_id,
            key,
            token: Mutex::new(None),
        })
    }

    /// A valid access token: the cached one, or a new one from the token endpoint.
    async fn access_token(&self) -> Result<String, Outcome> {
        let mut cached = self.token.lock().await;
        if let Some(t) = cached.as_ref().filter(|t| Instant::now() < t.renew_at) {
            return Ok(t.value.clone());
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let claims = Claims {
            iss: &self.client_email,
            scope: SCOPE,
            aud: &self.token_url,
            iat: now,
            exp: now + ASSERTION_SECS,
        };
        let mut header = Header::new(Algorithm::RS256);
        header.kid = self.key_id.clone();
        let assertion = jsonwebtoken::encode(&header, &claims, &self.key)
            .map_err(|e| Outcome::Rejected(format!("cannot sign the token request: {e}")))?;
        let obtained = Instant::now();
        let response = self
            .http
            .post(&self.token_url)
            .form(&[
                ("grant_type", GRANT_TYPE),
                ("assertion", assertion.as_str()),
            ])
            .send()
            .await
            .map_err(|e| transport_error(&TOKEN, e))?;
        if !response.status().is_success() {
            return Err(classify_response(response, &TOKEN).await);
        }
        let token: TokenResponse = response.json().await.map_err(|e| Outcome::Retry {
            after: None,
            reason: format!("unreadable token response: {}", without_url(e)),
        })?;
        let lifetime = Duration::from_secs(token.expires_in.unwrap_or(ASSERTION_SECS));
        *cached = Some(CachedToken {
            value: token.access_token.clone(),
            renew_at: renew_at(obtained, lifetime),
        });
        tracing::debug!(
            expires_in = lifetime.as_secs(),
            "obtained an FCM access token"
        );
        Ok(token.access_token)
    }

    /// Sends one push to one registration token.
    pub(crate) async fn send(&self, registration: &str, push: &PushContent) -> Outcome {
        let access = match self.access_token().await {
            Ok(t) => t,
            Err(outcome) => return outcome,
        };
        let response = match self
            .http
            .post(&self.send_url)
            .bearer_auth(access)
            .json(&message(registration, push))
            .send()
            .await
        {
            Ok(r) => r,
            Err(e) => return transport_error(&SEND, e),
        };
        let status = response.status();
        let outcome = classify_response(response, &SEND).await;
        if status == reqwest::StatusCode::UNAUTHORIZED && matches!(outcome, Outcome::Retry { .. }) {
            // The access token was revoked or expired early: fetch a new one next time.
            *self.token.lock().await = None;
        }
        outcome
    }
}

/// What an FCM error body says: the `errorCode` of its FCM details, and whether it is about the
/// registration token (a field violation of `message.token`, or a message that names it).
fn fcm_error(body: &Value) -> ErrorBody {
    let error = &body["error"];
    let details = || error["details"].as_array().into_iter().flatten();
    let code = details()
        .find_map(|d| d.get("errorCode").and_then(Value::as_str))
        .unwrap_or_default();
    let about_token = details().any(|d| {
        d["fieldViolations"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|v| v["field"].as_str() == Some("message.token"))
    }) || error["message"]
        .as_str()
        .is_some_and(|m| m.contains("registration token"));
    ErrorBody {
        code: code.to_owned(),
        names_registration: about_token,
    }
}

/// What a Google OAuth error body says: its `error` (`invalid_grant`, …), which names the problem
/// without secrets.
fn oauth_error(body: &Value) -> ErrorBody {
    ErrorBody {
        code: body
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        names_registration: false,
    }
}

/// The `messages:send` body: the notification, and [`PushContent::payload`] as `data`.
fn message(registration: &str, push: &PushContent) -> Value {
    json!({
        "message": {
            "token": registration,
            "notification": { "title": push.title, "body": push.body },
            "data": push.payload().fcm_data(),
            "android": {
                "priority": "HIGH",
                "collapse_key": push.collapse_key,
                "notification": { "tag": push.collapse_key },
            },
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_renewed_shortly_before_they_expire() {
        let t0 = Instant::now();
        assert_eq!(
            renew_at(t0, Duration::from_secs(3600)),
            t0 + Duration::from_secs(3540)
        );
        // A short-lived token is renewed halfway, never after it expired.
        assert_eq!(
            renew_at(t0, Duration::from_secs(10)),
            t0 + Duration::from_secs(5)
        );
        assert_eq!(renew_at(t0, Duration::ZERO), t0);
    }
}
