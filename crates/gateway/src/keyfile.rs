//! The gateway's own key files in the data dir (the VAPID key of Web Push, the endpoint key of
//! `reach/`): written private (0600) and whole, and a warning when one found on disk is readable
//! by other users.
//!
//! Ground floor: imports nothing of the gateway.

use std::io::Write;
use std::path::Path;

/// Writes `bytes` to a new private file at `path` (a file already there is replaced), synced.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Warns (once, in the log) when the key file `what` at `path` is readable by other users.
pub fn warn_if_readable_by_others(path: &Path, what: &str) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.permissions().mode() & 0o077 != 0 {
            tracing::warn!(path = %path.display(), "{what} is readable by other users; chmod 600 it");
        }
    }
}
