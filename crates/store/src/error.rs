//! The single error type returned by every store operation.

/// Everything that can go wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The addressed row (message, channel, device, `before` id...) does not exist.
    #[error("not found")]
    NotFound,
    /// The request breaks a rule of the store (for example deleting the default channel).
    #[error("invalid: {0}")]
    Invalid(String),
    /// SQLite reported an error while running the job's own statements.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The store was closed before the request could be served.
    #[error("the store is closed")]
    Closed,
    /// The job itself succeeded but its batch transaction could not be committed,
    /// so nothing the job wrote is durable and none of its frames were published.
    #[error("transaction aborted: {0}")]
    Aborted(String),
    /// A job panicked or the store hit a state it does not expect.
    #[error("internal error: {0}")]
    Internal(String),
    /// A read was stopped: it ran past its time budget, or its caller went away.
    #[error("interrupted: over its time budget or no longer awaited")]
    Interrupted,
    /// Starting a store thread or probing the file system failed.
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
}
