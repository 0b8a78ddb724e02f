//! Why push could not be set up.

use std::path::PathBuf;

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
