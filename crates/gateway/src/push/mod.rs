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

mod backends;
pub mod endpoint;
mod error;
pub mod fcm;
pub mod ntfy;
mod outcome;
pub mod policy;
mod status;
pub mod webpush;
mod worker;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use iris_protocol::PushStatus;
use iris_store::{Committed, StoreError};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use crate::config::push::*;
use crate::state::Shared;
use backends::Backends;
pub use error::PushError;
pub use outcome::Outcome;
pub use status::TEST_INTERVAL;

/// The push service of one gateway: its backends and its wake-up signal. Built before the store
/// opens, so that the commit hook can hold a [`PushWaker`].
#[derive(Clone)]
pub struct Push {
    backends: Arc<Backends>,
    wake: Arc<Notify>,
    /// When each device last asked for a test notification (`push.test`).
    tests: Arc<std::sync::Mutex<status::TestTimes>>,
}

impl Push {
    /// Loads the backends: reads the FCM service account, and the VAPID key in `data_dir` (made
    /// there on the first start).
    pub fn new(config: &PushConfig, data_dir: &Path) -> Result<Push, PushError> {
        let builder = || {
            reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(10))
                .timeout(Duration::from_secs(30))
                .user_agent(concat!("iris-gateway/", env!("CARGO_PKG_VERSION")))
        };
        let http = builder()
            .build()
            .map_err(|e| PushError::Http(e.to_string()))?;
        // Web Push goes where devices say: no redirects, and host names resolve to public
        // addresses only (see `endpoint`).
        let webpush_http = match config.webpush.as_ref() {
            Some(w) if !w.allow_private_endpoints => builder()
                .redirect(reqwest::redirect::Policy::none())
                .dns_resolver(Arc::new(endpoint::PublicOnly))
                .build(),
            _ => builder()
                .redirect(reqwest::redirect::Policy::none())
                .build(),
        }
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
            .map(|c| webpush::WebPush::load(c, data_dir, webpush_http))
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
            tests: Arc::default(),
        })
    }

    /// This device's push registrations, its route and how its last pushes ended (`push.status`).
    pub async fn status(&self, shared: &Shared, device_id: &str) -> Result<PushStatus, StoreError> {
        status::status(&self.backends, shared, device_id).await
    }

    /// Whether the device may have a test notification now (one per [`TEST_INTERVAL`]); counts
    /// it when it may.
    pub fn take_test(&self, device_id: &str) -> bool {
        self.tests
            .lock()
            .expect("test times lock")
            .take(device_id, std::time::Instant::now())
    }

    /// Sends the device a test notification now and answers its push status (`push.test`).
    pub async fn test(&self, shared: &Shared, device_id: &str) -> Result<PushStatus, StoreError> {
        status::test(&self.backends, shared, device_id).await
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
    pub fn spawn(&self, shared: Arc<Shared>, agent_label: String) -> PushWorker {
        let stop = CancellationToken::new();
        let worker = worker::Worker::new(
            shared,
            agent_label,
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
    fn pushes_through_third_parties_are_private_unless_content_is_full() {
        let cfg = resolve("").expect("defaults");
        assert_eq!(
            ["fcm", "ntfy", "webpush"].map(|b| cfg.private_for(b)),
            [true, true, false]
        );
        let cfg = resolve("content = \"full\"\n").expect("full");
        assert!(!cfg.private_for("fcm") && !cfg.private_for("webpush"));
        let cfg = resolve("content = \"private\"\n").expect("private");
        assert!(cfg.private_for("webpush") && cfg.private_for("ntfy"));
        let cfg = resolve("content = \"full\"\npreviews = false\n").expect("both");
        assert!(cfg.private_for("webpush"), "previews = false wins");
        let err = resolve("content = \"some\"\n").expect_err("not a mode");
        assert!(err.contains("push.content"), "{err}");
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
