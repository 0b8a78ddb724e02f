//! Push notifications to devices without a live connection: FCM HTTP v1, ntfy and Web Push.
//!
//! # How a frame becomes a push
//!
//! Live delivery never waits for push. The store's commit hook only pokes a [`PushWaker`] (a
//! `Notify`, after the hub has been fed) when a committed frame is of a type that may want the
//! user's attention. The push worker ([`worker`]) then, on its own task:
//!
//! 1. **scans** the outbox from its persisted scan position with [`iris_store::Store::replay`],
//!    asks the [`policy`] which frames want attention (a final assistant message, a cron result,
//!    an approval / clarify / choice picker, a `notification`), and queues each such frame for
//!    every device that has a push registration, has no live connection at that moment and has
//!    not confirmed receiving the frame. The queued rows and the new scan position are written
//!    in one store job, so a frame is queued exactly once, also across crashes (frames committed
//!    but not yet scanned are scanned after the restart);
//! 2. **coalesces**: a device is due once its oldest queued frame has waited the coalescing
//!    window; everything queued for it by then becomes one push that carries the highest cursor;
//! 3. **sends** through the device's backend, recording the attempt first (see below), and on
//!    success removes the pushed rows and raises the device's `last_pushed_cursor` in one job.
//!
//! # Crash semantics: record, then send, idempotently
//!
//! Before each HTTP request the attempt is recorded durably (attempt count and the earliest time
//! of the next attempt). A crash before the request leaves the rows queued: they are pushed after
//! the restart. A crash after the backend accepted the push but before the success was recorded
//! makes the restarted gateway send the same push again; that resend is idempotent on the device:
//! every push of a lane carries the same FCM `collapse_key` and Android notification `tag`, the
//! same ntfy sequence id, and the same Web Push `Topic` and notification `tag`, so the device
//! replaces the notification it shows instead of adding a second one, and the `cursor` in the push
//! lets the app drop a push it has already handled. So a frame wakes the user exactly once; at the
//! transport level delivery is at least once.
//!
//! # Failures
//!
//! 429, 5xx, network errors and token-endpoint failures are retried with exponential backoff
//! (honouring `Retry-After`), up to `max_attempts`; then the queued frames are dropped (the app
//! still gets them by `sync`). A token FCM reports as unregistered (404 `UNREGISTERED`, or 400
//! `INVALID_ARGUMENT` about the token) is removed from the device, and the push falls back to its
//! next registration (ntfy, then Web Push) when the device has one; a Web Push subscription the
//! push service answers 404 or 410 for is removed likewise. Other 4xx answers drop the push. A
//! dead backend only delays pushes: every request has a timeout, and sends to different devices
//! run concurrently.

pub mod fcm;
pub mod ntfy;
pub mod policy;
pub mod webpush;
mod worker;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use iris_store::Committed;
use serde::Deserialize;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::ConfigError;
use crate::state::Shared;

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
}

impl Default for WebPushConfig {
    fn default() -> Self {
        WebPushConfig {
            subject: webpush::DEFAULT_SUBJECT.into(),
            ttl: Duration::from_secs(86_400),
            public_key: None,
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
        Ok(PushConfig {
            previews: file.previews.unwrap_or(d.previews),
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

/// Why push could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    /// The service-account file cannot be read.
    #[error("cannot read the FCM service account {path}: {source}")]
    ReadServiceAccount {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The service-account file is not what Google issues.
    #[error("invalid FCM service account {path}: {message}")]
    InvalidServiceAccount {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The HTTP client cannot be built.
    #[error("cannot set up the HTTP client: {0}")]
    Http(String),
    /// The VAPID key file cannot be read, made or understood (it is never replaced: browsers'
    /// subscriptions are bound to it).
    #[error("Web Push key {path}: {message}")]
    VapidKey {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
}

/// The configured backends and settings; cheap to share.
pub(crate) struct Backends {
    pub(crate) config: PushConfig,
    pub(crate) fcm: Option<fcm::Fcm>,
    pub(crate) ntfy: Option<ntfy::Ntfy>,
    pub(crate) webpush: Option<webpush::WebPush>,
}

/// The push service of one gateway: its backends and its wake-up signal. Built before the store
/// opens, so that the commit hook can hold a [`PushWaker`].
pub struct Push {
    backends: Arc<Backends>,
    wake: Arc<Notify>,
}

impl Push {
    /// Loads the backends: reads the FCM service account, and the VAPID key in `data_dir` (made
    /// there on the first start).
    pub fn new(config: &PushConfig, data_dir: &Path) -> Result<Push, PushError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(30))
            .user_agent(concat!("iris-gateway/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| PushError::Http(e.to_string()))?;
        let fcm = config
            .fcm
            .as_ref()
            .map(|c| fcm::Fcm::load(c, http.clone()))
            .transpose()?;
        let ntfy = config
            .ntfy
            .as_ref()
            .map(|c| ntfy::Ntfy::new(c, http.clone()));
        let webpush = config
            .webpush
            .as_ref()
            .map(|c| webpush::WebPush::load(c, data_dir, http.clone()))
            .transpose()?;
        let mut config = config.clone();
        if let (Some(cfg), Some(backend)) = (config.webpush.as_mut(), &webpush) {
            cfg.public_key = Some(backend.public_key().to_owned());
        }
        Ok(Push {
            backends: Arc::new(Backends {
                config,
                fcm,
                ntfy,
                webpush,
            }),
            wake: Arc::new(Notify::new()),
        })
    }

    /// The VAPID public key, when Web Push is on.
    pub fn webpush_key(&self) -> Option<String> {
        self.backends.config.webpush_key()
    }

    /// The handle the commit hook pokes.
    pub fn waker(&self) -> PushWaker {
        PushWaker {
            wake: self.wake.clone(),
        }
    }

    /// Starts the push worker. It runs until [`PushWorker::stop`].
    pub fn spawn(&self, shared: Arc<Shared>) -> PushWorker {
        let stop = CancellationToken::new();
        let worker = worker::Worker::new(
            shared,
            self.backends.clone(),
            self.wake.clone(),
            stop.clone(),
        );
        PushWorker {
            stop,
            task: tokio::spawn(worker.run()),
        }
    }
}

/// Wakes the push worker after a commit; called on the store's writer thread, so it only
/// looks at frame types and signals.
#[derive(Clone)]
pub struct PushWaker {
    wake: Arc<Notify>,
}

impl PushWaker {
    /// Wakes the worker if any of the committed frames may want a push.
    pub fn on_commit(&self, frames: &[Committed]) {
        if frames
            .iter()
            .any(|f| policy::may_want_attention(&f.frame_type))
        {
            self.wake.notify_one();
        }
    }
}

/// The running push worker.
pub struct PushWorker {
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl PushWorker {
    /// Stops the worker. A request in flight is abandoned: its attempt is recorded, so the push is
    /// sent again (idempotently) after the restart.
    pub async fn stop(self) {
        self.stop.cancel();
        if tokio::time::timeout(Duration::from_secs(5), self.task)
            .await
            .is_err()
        {
            tracing::warn!("push worker did not stop in time");
        }
    }
}

mod outcome;
pub use outcome::Outcome;

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(toml_text: &str) -> Result<PushConfig, String> {
        let file: PushFileConfig = toml::from_str(toml_text).map_err(|e| e.message().to_owned())?;
        PushConfig::resolve(file).map_err(|e| e.to_string())
    }

    #[test]
    fn web_push_is_on_by_default_and_other_backends_once_configured() {
        let cfg = resolve("").expect("empty section");
        assert_eq!(
            (cfg.caps().as_deref(), cfg.previews, cfg.coalesce),
            (Some("webpush"), true, Duration::from_secs(2))
        );
        let webpush = cfg.webpush.expect("on by default");
        assert_eq!(
            (webpush.subject.as_str(), webpush.ttl),
            ("mailto:admin@localhost", Duration::from_secs(86_400))
        );
        assert_eq!(
            PushConfig::default().caps(),
            None,
            "built in code, push starts off"
        );
        let cfg = resolve("[webpush]\nenabled = false\n").expect("off");
        assert_eq!(cfg.caps(), None);
        let cfg = resolve("[webpush]\nsubject = \"https://iris.example.com\"\nttl_secs = 60\n")
            .expect("set");
        let webpush = cfg.webpush.expect("on");
        assert_eq!(
            (webpush.subject.as_str(), webpush.ttl),
            ("https://iris.example.com", Duration::from_secs(60))
        );
        let cfg = resolve("[ntfy]\n[webpush]\nenabled = false\n").expect("ntfy with defaults");
        assert_eq!(cfg.caps().as_deref(), Some("ntfy"));
        assert_eq!(cfg.ntfy.expect("ntfy").server, NTFY_SERVER);
        let both = "previews = false\ncoalesce_ms = 500\n\
                    [fcm]\nservice_account = \"/sa.json\"\n\
                    [ntfy]\nserver = \"https://push.example.com/\"\n";
        let cfg = resolve(both).expect("both");
        assert_eq!(cfg.caps().as_deref(), Some("fcm,ntfy,webpush"));
        assert!(!cfg.previews);
        assert_eq!(cfg.coalesce, Duration::from_millis(500));
        assert_eq!(cfg.fcm.expect("fcm").base_url, FCM_BASE_URL);
        assert_eq!(cfg.ntfy.expect("ntfy").server, "https://push.example.com");
    }

    #[test]
    fn bad_push_settings_are_refused() {
        assert!(
            resolve("preview = true\n").is_err(),
            "unknown keys are rejected"
        );
        let err = resolve("[ntfy]\nserver = \"ntfy.sh\"\n").expect_err("not a URL");
        assert!(err.contains("push.ntfy.server"), "{err}");
        assert!(resolve("max_attempts = 0\n").is_err());
        let err = resolve("[webpush]\nsubject = \"admin@example.com\"\n").expect_err("no scheme");
        assert!(err.contains("push.webpush.subject"), "{err}");
        assert!(resolve("[webpush]\nttl_secs = 9999999\n").is_err());
        assert!(
            resolve("[webpush]\nsubjet = \"mailto:a@b.c\"\n").is_err(),
            "unknown keys are rejected"
        );
    }
}
