//! `iris-gateway backup FILE`: one tar archive from which a data dir is restored.
//!
//! The archive holds, at its top level, what a data dir holds:
//! - `iris.db`: a consistent copy of the store (`VACUUM INTO` from one read snapshot, so a turn
//!   the gateway is writing is either in it whole or not at all), without WAL files;
//! - `media/<aa>/<sha256>`: every media file the copied store refers to (media are content-addressed
//!   and never change, so copying them after the database is consistent; a file expired in
//!   between is skipped and counted);
//! - `token`, `vapid.pem` and `endpoint.key` when present: the credential devices hold, the Web
//!   Push key their subscriptions are bound to and the key of the endpoint id they dial through
//!   a relay, so a restored gateway is the same gateway to them.
//!
//! Restoring is unpacking it into an empty data dir (`tar -xf FILE -C DIR`) and starting the
//! gateway there. The archive and the database copy it is made from are written into a fresh
//! directory next to FILE that only the owner can enter (0700, random name; both files 0600:
//! they hold the token and every conversation); the archive is linked into place only when
//! complete, and the directory is removed whether the backup succeeds or fails.

use std::fs::File;
use std::path::{Path, PathBuf};

use super::access::{create_private, open_snapshot, ArchiveError};
use crate::config::reach::ENDPOINT_KEY_FILE;
use crate::config::{DB_FILE, TOKEN_FILE};
use crate::media::files::is_sha256;
use crate::media::MediaFiles;
use crate::push::webpush::VAPID_FILE;

/// What a backup wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupSummary {
    /// The archive.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// Media files copied.
    pub media_files: usize,
    /// Media the store refers to whose files were gone (expired while the backup ran).
    pub media_missing: usize,
}

/// Writes a backup of the data dir `data_dir` to `dest`, which must not exist.
pub fn backup(data_dir: &Path, dest: &Path) -> Result<BackupSummary, ArchiveError> {
    if dest.exists() {
        return Err(ArchiveError::Exists(dest.display().to_string()));
    }
    let snapshot = open_snapshot(data_dir)?;
    // Everything written before the archive is complete goes into a fresh directory of the
    // owner's alone (0700, a random name, created with `mkdir`, which never follows a link), and
    // the directory goes with whatever is in it whether the backup succeeds or fails.
    let work = private_dir(dest)?;
    let partial = work.join("partial.tar");
    let written = write_archive(data_dir, &snapshot, &partial, &work.join(DB_FILE));
    let result = written.and_then(|counts| {
        // A hard link never replaces a file that appeared at `dest` meanwhile, where rename would.
        std::fs::hard_link(&partial, dest).map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => ArchiveError::Exists(dest.display().to_string()),
            _ => ArchiveError::io(dest)(e),
        })?;
        Ok(counts)
    });
    let _ = std::fs::remove_dir_all(&work);
    let (media_files, media_missing) = result?;
    let bytes = std::fs::metadata(dest)
        .map_err(ArchiveError::io(dest))?
        .len();
    Ok(BackupSummary {
        path: dest.to_owned(),
        bytes,
        media_files,
        media_missing,
    })
}

/// A new directory `.<name>.<random>.tmp` next to `dest`, mode 0700.
fn private_dir(dest: &Path) -> Result<PathBuf, ArchiveError> {
    use std::os::unix::fs::DirBuilderExt;
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "backup".to_owned());
    let suffix: u64 = rand::random();
    let dir = dest.with_file_name(format!(".{name}.{suffix:016x}.tmp"));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(ArchiveError::io(&dir))?;
    Ok(dir)
}

fn write_archive(
    data_dir: &Path,
    snapshot: &iris_store::Snapshot,
    partial: &Path,
    db_copy: &Path,
) -> Result<(usize, usize), ArchiveError> {
    // The copy starts as an empty file of mode 0600 (`VACUUM INTO` fills an empty file and
    // keeps its mode).
    drop(create_private(db_copy)?);
    snapshot
        .copy_database(db_copy)
        .map_err(ArchiveError::Store)?;
    // The media list comes from the copy itself, so the archive is whole by its own measure.
    let shas = iris_store::Snapshot::open(db_copy)
        .and_then(|copy| copy.media_shas())
        .map_err(ArchiveError::Store)?;
    let file = create_private(partial)?;
    let mut tar = tar::Builder::new(file);
    tar.mode(tar::HeaderMode::Deterministic);
    append_file(&mut tar, db_copy, DB_FILE, partial)?;
    for name in [TOKEN_FILE, VAPID_FILE, ENDPOINT_KEY_FILE] {
        let path = data_dir.join(name);
        if path.is_file() {
            append_file(&mut tar, &path, name, partial)?;
        }
    }
    let media = MediaFiles::new(data_dir);
    let mut copied = 0;
    let mut missing = 0;
    for sha in shas.iter().filter(|s| is_sha256(s)) {
        let path = media.blob_path(sha);
        if path.is_file() {
            let name = path
                .strip_prefix(data_dir)
                .unwrap_or(&path)
                .to_string_lossy();
            append_file(&mut tar, &path, &name, partial)?;
            copied += 1;
        } else {
            missing += 1;
        }
    }
    let file = tar.into_inner().map_err(ArchiveError::io(partial))?;
    file.sync_all().map_err(ArchiveError::io(partial))?;
    Ok((copied, missing))
}

/// Adds one file, owner-only (0600) whatever its mode on disk.
fn append_file(
    tar: &mut tar::Builder<File>,
    path: &Path,
    name: &str,
    archive: &Path,
) -> Result<(), ArchiveError> {
    let mut file = File::open(path).map_err(ArchiveError::io(path))?;
    let len = file.metadata().map_err(ArchiveError::io(path))?.len();
    let mut header = tar::Header::new_gnu();
    header.set_size(len);
    header.set_mode(0o600);
    header.set_entry_type(tar::EntryType::Regular);
    tar.append_data(&mut header, name, &mut file)
        .map_err(ArchiveError::io(archive))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_dir_without_a_store_is_a_clear_error_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("backup.tar");
        let err = backup(&dir.path().join("data"), &dest).unwrap_err();
        assert!(matches!(err, ArchiveError::NoStore(_)), "{err}");
        assert!(!dest.exists());
    }

    #[test]
    fn an_existing_destination_is_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("backup.tar");
        std::fs::write(&dest, b"keep me").unwrap();
        let err = backup(dir.path(), &dest).unwrap_err();
        assert!(matches!(err, ArchiveError::Exists(_)), "{err}");
        assert_eq!(std::fs::read(&dest).unwrap(), b"keep me");
    }
}
