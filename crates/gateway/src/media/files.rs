//! The content-addressed file store under `<data_dir>/media/`: `<sha[0..2]>/<sha256>` holds each
//! distinct content once, `tmp/` holds files being written.
//!
//! A file only leaves `tmp/` once its hash is known, by a rename onto its hash's name (or, when
//! that content is already stored, by being deleted). Placing a file together with inserting its
//! row, and removing a file once no row names its hash, both happen under one lock, so a file is
//! never removed while a row that needs it is being written.

use std::fs::{DirBuilder, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use iris_store::{MediaRow, Store, StoreError, WriteTx};
use sha2::{Digest, Sha256};

use super::error::MediaError;

/// The file store.
#[derive(Debug)]
pub struct MediaFiles {
    root: PathBuf,
    tmp: PathBuf,
    /// `<data_dir>/attached`: each agent's links to the files attached to its prompts.
    attached: PathBuf,
    /// Temporary files older than this belong to an earlier run of the gateway.
    started: SystemTime,
    lock: tokio::sync::Mutex<()>,
}

/// Whether `s` is a lowercase hex SHA-256, the only thing ever turned into a file name here.
pub fn is_sha256(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl MediaFiles {
    /// The store for a data directory; nothing is touched on disk until first use.
    pub fn new(data_dir: &Path) -> MediaFiles {
        let root = data_dir.join("media");
        MediaFiles {
            tmp: root.join("tmp"),
            attached: data_dir.join(super::attached::ATTACHED_DIR),
            root,
            started: SystemTime::now(),
            lock: tokio::sync::Mutex::new(()),
        }
    }

    /// `<data_dir>/media`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<data_dir>/attached`, where each agent's attachments are linked.
    pub fn attached_root(&self) -> &Path {
        &self.attached
    }

    /// `<data_dir>/media/tmp`, where files are written before they have a name.
    pub fn tmp_dir(&self) -> &Path {
        &self.tmp
    }

    /// Where the content with this hash is stored. The hash must be valid ([`is_sha256`]).
    pub fn blob_path(&self, sha256: &str) -> PathBuf {
        debug_assert!(is_sha256(sha256));
        self.root.join(&sha256[..2]).join(sha256)
    }

    /// A new, empty temporary file.
    pub async fn temp(&self) -> Result<TempBlob, MediaError> {
        let dir = self.tmp.clone();
        let name = format!("{}.part", crate::ids::new_id("up_"));
        let path = dir.join(name);
        let open = path.clone();
        let file = tokio::task::spawn_blocking(move || {
            private_dirs(&dir)?;
            // The owner's alone whatever the umask, like every file of the data dir.
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&open)
        })
        .await??;
        Ok(TempBlob {
            path: Some(path),
            inner: Some((file, Sha256::new())),
            len: 0,
            head: Vec::new(),
        })
    }

    /// Moves a finished temporary file to its content's place (or drops it when that content is
    /// already stored) and inserts `row` together with whatever `then` writes, in one
    /// transaction. On failure nothing is kept.
    pub async fn place<F>(
        &self,
        store: &Store,
        mut temp: TempBlob,
        row: MediaRow,
        then: F,
    ) -> Result<MediaRow, MediaError>
    where
        F: FnOnce(&mut WriteTx<'_>, &MediaRow) -> Result<(), StoreError> + Send + 'static,
    {
        if !is_sha256(&row.sha256) {
            return Err(MediaError::Invalid("not a sha256".into()));
        }
        let src = temp
            .path
            .take()
            .ok_or_else(|| MediaError::Invalid("temporary file already used".into()))?;
        let dest = self.blob_path(&row.sha256);
        let _guard = self.lock.lock().await;
        let placed = tokio::task::spawn_blocking(move || place_file(&src, &dest)).await??;
        let inserted = row.clone();
        let result = store
            .write(move |tx| {
                tx.insert_media(&inserted)?;
                then(tx, &inserted)
            })
            .await;
        match result {
            Ok(()) => Ok(row),
            Err(e) => {
                if placed && !store.media_sha_in_use(&row.sha256).await.unwrap_or(true) {
                    remove_quietly(self.blob_path(&row.sha256)).await;
                }
                Err(e.into())
            }
        }
    }

    /// Removes the files of these hashes that no media row names any more.
    pub async fn remove_unused(&self, store: &Store, shas: Vec<String>) {
        if shas.is_empty() {
            return;
        }
        let _guard = self.lock.lock().await;
        for sha in shas.into_iter().filter(|s| is_sha256(s)) {
            match store.media_sha_in_use(&sha).await {
                Ok(false) => {
                    remove_quietly(self.blob_path(&sha)).await;
                    let root = self.attached.clone();
                    let _ = tokio::task::spawn_blocking(move || {
                        super::attached::forget(&root, None, Some(&sha))
                    })
                    .await;
                }
                Ok(true) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "could not check whether a media file is still used")
                }
            }
        }
    }

    /// Expiry: deletes media no message uses that is older than `ttl`, then every stored file no
    /// row names (left by a crash between placing a file and recording it), then temporary files
    /// of earlier runs. Returns how many files were removed.
    pub async fn sweep(&self, store: &Store, ttl: Duration) -> Result<usize, MediaError> {
        let cutoff = crate::ids::now_ms() - i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        let expired = store.write(move |tx| tx.expire_media(cutoff)).await?;
        let _guard = self.lock.lock().await;
        let known = store.media_shas().await?;
        let root = self.root.clone();
        let tmp = self.tmp.clone();
        let attached = self.attached.clone();
        let started = self.started;
        let removed = tokio::task::spawn_blocking(move || {
            let kept = |sha: &str| known.contains(sha);
            let mut removed = super::attached::forget(&attached, Some(&kept), None);
            for path in stored_files(&root)? {
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                if is_sha256(name) && !known.contains(name) && std::fs::remove_file(&path).is_ok() {
                    removed += 1;
                }
            }
            if let Ok(entries) = std::fs::read_dir(&tmp) {
                for entry in entries.flatten() {
                    let stale = entry
                        .metadata()
                        .and_then(|m| m.modified())
                        .is_ok_and(|t| t < started);
                    if stale && std::fs::remove_file(entry.path()).is_ok() {
                        removed += 1;
                    }
                }
            }
            Ok::<_, std::io::Error>(removed)
        })
        .await??;
        if !expired.is_empty() {
            tracing::debug!(count = expired.len(), "expired unreferenced media");
        }
        Ok(removed)
    }
}

/// Every file in the two-character fan-out directories.
fn stored_files(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e),
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let fan_out = name
            .to_str()
            .is_some_and(|n| n.len() == 2 && n.bytes().all(|b| b.is_ascii_hexdigit()));
        if fan_out && entry.file_type().is_ok_and(|t| t.is_dir()) {
            for file in std::fs::read_dir(entry.path())?.flatten() {
                out.push(file.path());
            }
        }
    }
    Ok(out)
}

/// Renames `src` onto `dest`, or deletes `src` when `dest` already holds that content. Returns
/// whether `src` became `dest`.
fn place_file(src: &Path, dest: &Path) -> std::io::Result<bool> {
    if dest.exists() {
        std::fs::remove_file(src)?;
        return Ok(false);
    }
    let dir = dest
        .parent()
        .ok_or_else(|| std::io::Error::other("blob path without parent"))?;
    private_dirs(dir)?;
    std::fs::rename(src, dest)?;
    // The rename is durable once the directory entry is.
    std::fs::File::open(dir)?.sync_all()?;
    Ok(true)
}

/// Creates a directory and its missing parents with mode 0700.
fn private_dirs(dir: &Path) -> std::io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

async fn remove_quietly(path: PathBuf) {
    match tokio::fs::remove_file(&path).await {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            tracing::warn!(error = %e, path = %path.display(), "could not remove a media file")
        }
    }
}

/// A temporary file being written, hashed as it goes. Dropped unfinished, it is deleted.
#[derive(Debug)]
pub struct TempBlob {
    path: Option<PathBuf>,
    inner: Option<(std::fs::File, Sha256)>,
    len: u64,
    /// The first [`HEAD_LEN`] bytes, for recognizing the content's type.
    head: Vec<u8>,
}

/// How many leading bytes of a file are kept for recognizing its type by its magic bytes.
pub const HEAD_LEN: usize = 8192;

impl TempBlob {
    /// The first bytes written (up to [`HEAD_LEN`]).
    pub fn head(&self) -> &[u8] {
        &self.head
    }

    fn keep_head(&mut self, bytes: &[u8]) {
        let room = HEAD_LEN.saturating_sub(self.head.len());
        self.head.extend_from_slice(&bytes[..room.min(bytes.len())]);
    }
}

impl TempBlob {
    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing was written yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends bytes (on a blocking thread: file IO and hashing stay off the async workers).
    pub async fn write(&mut self, bytes: Bytes) -> Result<(), MediaError> {
        let (mut file, mut hasher) = self
            .inner
            .take()
            .ok_or_else(|| MediaError::Invalid("file already finished".into()))?;
        let n = bytes.len() as u64;
        self.keep_head(&bytes);
        let (file, hasher) = tokio::task::spawn_blocking(move || {
            file.write_all(&bytes)?;
            hasher.update(&bytes);
            Ok::<_, std::io::Error>((file, hasher))
        })
        .await??;
        self.inner = Some((file, hasher));
        self.len += n;
        Ok(())
    }

    /// Copies a whole file into this one with a size limit; `Ok(None)` when it is larger.
    pub async fn copy_from(
        &mut self,
        source: PathBuf,
        limit: u64,
    ) -> Result<Option<()>, MediaError> {
        use std::io::Read;
        let (mut file, mut hasher) = self
            .inner
            .take()
            .ok_or_else(|| MediaError::Invalid("file already finished".into()))?;
        let (file, hasher, n, head) = tokio::task::spawn_blocking(move || {
            let mut src = std::fs::File::open(source)?.take(limit.saturating_add(1));
            let mut buf = vec![0u8; 256 * 1024];
            let mut n = 0u64;
            let mut head = Vec::new();
            loop {
                let read = src.read(&mut buf)?;
                if read == 0 {
                    break;
                }
                if head.len() < HEAD_LEN {
                    head.extend_from_slice(&buf[..read.min(HEAD_LEN - head.len())]);
                }
                file.write_all(&buf[..read])?;
                hasher.update(&buf[..read]);
                n += read as u64;
            }
            Ok::<_, std::io::Error>((file, hasher, n, head))
        })
        .await??;
        self.keep_head(&head);
        self.inner = Some((file, hasher));
        self.len += n;
        Ok((n <= limit).then_some(()))
    }

    /// Flushes the file to disk and returns the hash of everything written.
    pub async fn finish(&mut self) -> Result<String, MediaError> {
        let (file, hasher) = self
            .inner
            .take()
            .ok_or_else(|| MediaError::Invalid("file already finished".into()))?;
        let sha = tokio::task::spawn_blocking(move || {
            file.sync_all()?;
            Ok::<_, std::io::Error>(hex::encode(hasher.finalize()))
        })
        .await??;
        Ok(sha)
    }

    /// Deletes the file now (dropping does the same, in the background).
    pub async fn discard(mut self) {
        self.inner = None;
        if let Some(path) = self.path.take() {
            remove_quietly(path).await;
        }
    }
}

impl Drop for TempBlob {
    fn drop(&mut self) {
        let Some(path) = self.path.take() else { return };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn_blocking(move || {
                    let _ = std::fs::remove_file(path);
                });
            }
            Err(_) => {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}
