//! Data the owner takes away: `iris-gateway backup` (one tar file a new data dir is restored
//! from) and `iris-gateway export` (conversations as Markdown or JSON).
//!
//! Both read the store through [`iris_store::Snapshot`], one read transaction on a read-only
//! connection, so they run next to a live gateway without stopping it and without seeing a
//! half-written turn. Neither ever writes to the data dir.

mod backup;
mod export;
mod markdown;

use std::path::Path;

pub use backup::{backup, BackupSummary};
pub use export::{export, ExportFormat, ExportRequest, ExportSummary, EXPORT_VERSION};

/// What can stop a backup or an export.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The data dir holds no database.
    #[error("no gateway store in {0} (has the gateway ever run with this data dir?)")]
    NoStore(String),
    /// `--chat` named nothing.
    #[error("no chat with id {0} (see the chat list in the app, or export --all)")]
    NoChat(String),
    /// The output exists and would be overwritten.
    #[error("{0} already exists; choose a new name")]
    Exists(String),
    /// Reading the store failed.
    #[error("store: {0}")]
    Store(iris_store::StoreError),
    /// Reading or writing files failed.
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

impl ArchiveError {
    fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ArchiveError + '_ {
        move |source| ArchiveError::Io {
            path: path.display().to_string(),
            source,
        }
    }
}

/// Opens the snapshot of the store in `data_dir`.
fn open_snapshot(data_dir: &Path) -> Result<iris_store::Snapshot, ArchiveError> {
    iris_store::Snapshot::open(&data_dir.join(crate::config::DB_FILE)).map_err(|e| match e {
        iris_store::StoreError::NotFound => ArchiveError::NoStore(data_dir.display().to_string()),
        other => ArchiveError::Store(other),
    })
}

/// Creates a file only the owner may read (0600), failing if it exists.
fn create_private(path: &Path) -> Result<std::fs::File, ArchiveError> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => ArchiveError::Exists(path.display().to_string()),
            _ => ArchiveError::io(path)(e),
        })
}
