//! How a backup or an export reaches the store and the disk: one read-only snapshot of the
//! store, output files only the owner may read, and what can go wrong on the way.

use std::path::Path;

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
    pub(super) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ArchiveError + '_ {
        move |source| ArchiveError::Io {
            path: path.display().to_string(),
            source,
        }
    }
}

/// Opens the snapshot of the store in `data_dir`.
pub(super) fn open_snapshot(data_dir: &Path) -> Result<iris_store::Snapshot, ArchiveError> {
    iris_store::Snapshot::open(&data_dir.join(crate::config::DB_FILE)).map_err(|e| match e {
        iris_store::StoreError::NotFound => ArchiveError::NoStore(data_dir.display().to_string()),
        other => ArchiveError::Store(other),
    })
}

/// Creates a file only the owner may read (0600), failing if it exists.
pub(super) fn create_private(path: &Path) -> Result<std::fs::File, ArchiveError> {
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
