//! Why a media operation failed inside the gateway.

use iris_store::StoreError;

use crate::wire::WireError;

/// Why a media operation failed inside the gateway.
#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    /// Disk IO failed.
    #[error("media io: {0}")]
    Io(#[from] std::io::Error),
    /// The store failed.
    #[error("media store: {0}")]
    Store(#[from] StoreError),
    /// A blocking task died.
    #[error("media task: {0}")]
    Join(#[from] tokio::task::JoinError),
    /// A value that cannot be used.
    #[error("media: {0}")]
    Invalid(String),
}

impl From<MediaError> for WireError {
    fn from(e: MediaError) -> Self {
        WireError::internal(e)
    }
}
