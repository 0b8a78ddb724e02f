//! `[push]`: the push backends' settings, as read from the file and as resolved.
//!
//! Ground floor: imports nothing of the gateway above `config`.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::error::ConfigError;

/// The VAPID `sub` claim when `[push.webpush] subject` is not set.
pub const DEFAULT_SUBJECT: &str = "mailto:admin@localhost";

/// Google's OAuth2 token endpoint.
pub const GOOGLE_TOKEN_URL: &str = "https://oauth2.googleapis.com/token";
/// The FCM HTTP v1 API.
pub const FCM_BASE_URL: &str = "https://fcm.googleapis.com";
/// The public ntfy server.
pub const NTFY_SERVER: &str = "https://ntfy.sh";

/// `[push]` in the config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PushFileConfig {
    /// Put a short excerpt of the content into the push (default true). Off, pushes say only
    /// what happened ("Hermes replied in Reports").
    pub previews: Option<bool>,
    /// `"full"` or `"private"`: whether a push carries the conversation's text. Private pushes
    /// name the channel and the kind of event only. Default: full for Web Push (its payload is
    /// encrypted for the browser alone), private for FCM and ntfy (their payloads pass through
    /// Google's or the ntfy server's hands).
    pub content: Option<String>,
    /// Frames for one device within this many milliseconds become one push (default 2000).
    pub coalesce_ms: Option<u64>,
    /// First retry delay in milliseconds, doubled per attempt (default 1000).
    pub retry_initial_ms: Option<u64>,
    /// Longest retry delay in seconds (default 600).
    pub retry_max_secs: Option<u64>,
    /// Attempts before a push is given up (default 12).
    pub max_attempts: Option<u32>,
    /// `[push.fcm]`: Firebase Cloud Messaging (HTTP v1).
    pub fcm: Option<FcmFileConfig>,
    /// `[push.ntfy]`: an ntfy server.
    pub ntfy: Option<NtfyFileConfig>,
    /// `[push.webpush]`: Web Push to browsers. On without this table too.
    pub webpush: Option<WebPushFileConfig>,
}

/// `[push.webpush]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebPushFileConfig {
    /// `false` turns Web Push off (default on: it needs no account).
    pub enabled: Option<bool>,
    /// The contact push services see in the VAPID token, a `mailto:` or `https:` URI (default
    /// `mailto:admin@localhost`, which Apple's push service refuses).
    pub subject: Option<String>,
    /// How long a push service keeps a push for a browser that is offline, in seconds (default
    /// 86400, at most 2419200).
    pub ttl_secs: Option<u64>,
    /// Accept subscriptions whose endpoint is a private, loopback or link-local address (and
    /// plain `http` to one), e.g. a push service on the LAN (default false).
    pub allow_private_endpoints: Option<bool>,
}

/// `[push.fcm]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FcmFileConfig {
    /// Path of the Google service-account JSON key file.
    pub service_account: PathBuf,
    /// Firebase project id (default: the service account's `project_id`).
    pub project_id: Option<String>,
    /// OAuth2 token endpoint (default: the service account's `token_uri`, else Google's).
    pub token_url: Option<String>,
    /// Base URL of the FCM API (default `https://fcm.googleapis.com`).
    pub base_url: Option<String>,
}

/// `[push.ntfy]`.
#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NtfyFileConfig {
    /// Server URL (default `https://ntfy.sh`).
    pub server: Option<String>,
    /// Access token sent as `Authorization: Bearer …`, for protected topics.
    pub token: Option<String>,
}

impl fmt::Debug for NtfyFileConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NtfyFileConfig")
            .field("server", &self.server)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// Push settings, resolved.
#[derive(Debug, Clone)]
pub struct PushConfig {
    /// Content excerpts in pushes.
    pub previews: bool,
    /// `[push] content`: `Some(true)` private for every backend, `Some(false)` full for every
    /// backend, `None` the default of each (see [`PushConfig::private_for`]).
    pub private: Option<bool>,
    /// The coalescing window.
    pub coalesce: Duration,
    /// First retry delay.
    pub retry_initial: Duration,
    /// Longest retry delay.
    pub retry_max: Duration,
    /// Attempts before a push is given up.
    pub max_attempts: u32,
    /// FCM, when configured.
    pub fcm: Option<FcmConfig>,
    /// ntfy, when configured.
    pub ntfy: Option<NtfyConfig>,
    /// Web Push, when on. The config file turns it on unless `[push.webpush] enabled = false`;
    /// [`PushConfig::default`] leaves it off.
    pub webpush: Option<WebPushConfig>,
}

impl Default for PushConfig {
    fn default() -> Self {
        PushConfig {
            previews: true,
            private: None,
            coalesce: Duration::from_millis(2000),
            retry_initial: Duration::from_millis(1000),
            retry_max: Duration::from_secs(600),
            max_attempts: 12,
            fcm: None,
            ntfy: None,
            webpush: None,
        }
    }
}

/// Web Push settings, resolved.
#[derive(Debug, Clone)]
pub struct WebPushConfig {
    /// The VAPID `sub` claim.
    pub subject: String,
    /// The `TTL` of each push.
    pub ttl: Duration,
    /// The VAPID public key offered in `hello.ack`: not a setting, filled in at start from
    /// `<data-dir>/vapid.pem`.
    pub public_key: Option<String>,
    /// Endpoints at internal addresses are accepted (and sent to).
    pub allow_private_endpoints: bool,
}

impl Default for WebPushConfig {
    fn default() -> Self {
        WebPushConfig {
            subject: DEFAULT_SUBJECT.into(),
            ttl: Duration::from_secs(86_400),
            public_key: None,
            allow_private_endpoints: false,
        }
    }
}

/// FCM settings, resolved.
#[derive(Debug, Clone)]
pub struct FcmConfig {
    /// Path of the service-account JSON.
    pub service_account: PathBuf,
    /// Project id; `None` takes the service account's.
    pub project_id: Option<String>,
    /// Token endpoint; `None` takes the service account's `token_uri`, else Google's.
    pub token_url: Option<String>,
    /// Base URL of the FCM API.
    pub base_url: String,
}

/// ntfy settings, resolved.
#[derive(Clone)]
pub struct NtfyConfig {
    /// Server URL.
    pub server: String,
    /// Access token.
    pub token: Option<String>,
}

impl fmt::Debug for NtfyConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NtfyConfig")
            .field("server", &self.server)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl PushConfig {
    /// Resolves `[push]` of the config file.
    pub fn resolve(file: PushFileConfig) -> Result<PushConfig, ConfigError> {
        let d = PushConfig::default();
        let url = |key: &'static str, value: String| -> Result<String, ConfigError> {
            match reqwest::Url::parse(&value) {
                Ok(u) if matches!(u.scheme(), "http" | "https") => {
                    Ok(value.trim_end_matches('/').to_owned())
                }
                _ => Err(ConfigError::Invalid {
                    key,
                    message: format!("{value:?} is not an http(s) URL"),
                }),
            }
        };
        let fcm = match file.fcm {
            Some(f) => Some(FcmConfig {
                service_account: f.service_account,
                project_id: f.project_id.filter(|p| !p.trim().is_empty()),
                token_url: f
                    .token_url
                    .map(|u| url("push.fcm.token_url", u))
                    .transpose()?,
                base_url: url(
                    "push.fcm.base_url",
                    f.base_url.unwrap_or_else(|| FCM_BASE_URL.into()),
                )?,
            }),
            None => None,
        };
        let ntfy = match file.ntfy {
            Some(n) => Some(NtfyConfig {
                server: url(
                    "push.ntfy.server",
                    n.server.unwrap_or_else(|| NTFY_SERVER.into()),
                )?,
                token: n.token.filter(|t| !t.trim().is_empty()),
            }),
            None => None,
        };
        let webpush = match file.webpush.unwrap_or_default() {
            WebPushFileConfig {
                enabled: Some(false),
                ..
            } => None,
            w => {
                let d = WebPushConfig::default();
                let subject = w.subject.map(|s| s.trim().to_owned()).unwrap_or(d.subject);
                let lower = subject.to_ascii_lowercase();
                let contact = match lower.split_once(':') {
                    Some(("mailto", rest)) => rest.contains('@'),
                    Some(("https", _)) => {
                        reqwest::Url::parse(&subject).is_ok_and(|u| u.host_str().is_some())
                    }
                    _ => false,
                };
                if !contact {
                    return Err(ConfigError::Invalid {
                        key: "push.webpush.subject",
                        message: format!("{subject:?} is not a mailto: or https: contact"),
                    });
                }
                let ttl = w.ttl_secs.map(Duration::from_secs).unwrap_or(d.ttl);
                if ttl > Duration::from_secs(2_419_200) {
                    return Err(ConfigError::Invalid {
                        key: "push.webpush.ttl_secs",
                        message: "at most 2419200 (four weeks)".into(),
                    });
                }
                Some(WebPushConfig {
                    subject,
                    ttl,
                    public_key: None,
                    allow_private_endpoints: w.allow_private_endpoints.unwrap_or(false),
                })
            }
        };
        let max_attempts = file.max_attempts.unwrap_or(d.max_attempts);
        if max_attempts == 0 {
            return Err(ConfigError::Invalid {
                key: "push.max_attempts",
                message: "must be at least 1".into(),
            });
        }
        let private = match file.content.as_deref() {
            None => None,
            Some("full") => Some(false),
            Some("private") => Some(true),
            Some(_) => {
                return Err(ConfigError::Invalid {
                    key: "push.content",
                    message: "must be \"full\" or \"private\"".into(),
                })
            }
        };
        Ok(PushConfig {
            previews: file.previews.unwrap_or(d.previews),
            private,
            coalesce: file
                .coalesce_ms
                .map(Duration::from_millis)
                .unwrap_or(d.coalesce),
            retry_initial: file
                .retry_initial_ms
                .map(Duration::from_millis)
                .unwrap_or(d.retry_initial)
                .max(Duration::from_millis(10)),
            retry_max: file
                .retry_max_secs
                .map(Duration::from_secs)
                .unwrap_or(d.retry_max)
                .max(Duration::from_secs(1)),
            max_attempts,
            fcm,
            ntfy,
            webpush,
        })
    }

    /// Whether pushes through `backend` (`"fcm"`, `"ntfy"`, `"webpush"`) leave out the
    /// conversation's text: always with `previews = false`, else as `content` says, else for
    /// every backend but Web Push.
    pub fn private_for(&self, backend: &str) -> bool {
        !self.previews || self.private.unwrap_or(backend != "webpush")
    }

    /// What `hello.ack` announces as `server_caps.push`: the configured backends, comma-separated
    /// in the order `fcm`, `ntfy`, `webpush`; `None` when push is off.
    pub fn caps(&self) -> Option<String> {
        let on = [
            ("fcm", self.fcm.is_some()),
            ("ntfy", self.ntfy.is_some()),
            ("webpush", self.webpush.is_some()),
        ];
        let names: Vec<&str> = on
            .iter()
            .filter(|(_, on)| *on)
            .map(|(name, _)| *name)
            .collect();
        (!names.is_empty()).then(|| names.join(","))
    }

    /// What `hello.ack` announces as `server_caps.webpush_key`.
    pub fn webpush_key(&self) -> Option<String> {
        self.webpush.as_ref().and_then(|w| w.public_key.clone())
    }
}
