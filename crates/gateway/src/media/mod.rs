//! Media: uploads from devices, pulls to devices, files the agent produces, and their expiry.
//!
//! - [`files`]: the content-addressed file store under `<data_dir>/media/`.
//! - [`upload`]: a connection's upload state machine (`media.upload.start` → binary frames →
//!   `media.upload.end`) and its pulls (`media.pull`, served one at a time from disk).
//! - [`agent`]: attachments in prompts, and files in the agent's answers (ACP image/resource
//!   content and `MEDIA:<path>` lines), announced with `media.offer`.
//!
//! Names given by the app or the agent are display names only: every file on disk is named by
//! the hash of its content, so no name ever becomes a path.

pub mod agent;
pub mod files;
pub mod pull;
pub mod upload;

use std::path::PathBuf;
use std::sync::Arc;

use iris_protocol::MediaInfo;
use iris_store::{MediaRow, Store, StoreError};
use tokio_util::sync::CancellationToken;

use crate::config::{Config, MediaConfig};
use crate::wire::WireError;

pub use files::MediaFiles;
pub use upload::ConnMedia;

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

/// The wire description of a stored media row.
pub fn info(row: &MediaRow) -> MediaInfo {
    MediaInfo {
        media_id: row.media_id.clone(),
        kind: row.kind.clone(),
        mime: row.mime.clone(),
        size: row.size,
        filename: row.filename.clone(),
    }
}

/// Longest display name kept, in bytes.
const MAX_NAME: usize = 255;

/// A display name from whatever the app or the agent called a file: the last path component,
/// without control characters, at most 255 bytes (keeping a short extension), never empty, `.`
/// or `..`. It is only ever shown, never used as a path.
pub fn display_name(raw: &str, fallback: &str) -> String {
    let last = raw.rsplit(['/', '\\']).next().unwrap_or("");
    let cleaned: String = last.chars().filter(|c| !c.is_control()).collect();
    let cleaned = cleaned.trim();
    if cleaned.is_empty() || cleaned.chars().all(|c| c == '.') {
        return fallback.to_owned();
    }
    if cleaned.len() <= MAX_NAME {
        return cleaned.to_owned();
    }
    let ext = cleaned
        .rsplit_once('.')
        .map(|(_, e)| e)
        .filter(|e| !e.is_empty() && e.len() <= 16);
    let keep = MAX_NAME - ext.map_or(0, |e| e.len() + 1);
    let mut stem_end = keep.min(cleaned.len());
    while !cleaned.is_char_boundary(stem_end) {
        stem_end -= 1;
    }
    let stem = &cleaned[..stem_end];
    match ext {
        Some(e) => format!("{stem}.{e}"),
        None => stem.to_owned(),
    }
}

/// A MIME type as given, when it looks like one (`type/subtype`, visible ASCII), else
/// `application/octet-stream`.
pub fn clean_mime(raw: &str) -> String {
    let m = raw.trim().to_ascii_lowercase();
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    let ok = m.len() <= 127 && m.split_once('/').is_some_and(|(t, s)| token(t) && token(s));
    if ok {
        m
    } else {
        "application/octet-stream".into()
    }
}

/// `image`, `video`, `audio` or `file`: the given kind when it is one of those, else derived
/// from the MIME type.
pub fn clean_kind(raw: &str, mime: &str) -> String {
    match raw {
        "image" | "video" | "audio" | "file" => raw.to_owned(),
        _ => kind_of(mime).to_owned(),
    }
}

/// The kind a MIME type implies.
pub fn kind_of(mime: &str) -> &'static str {
    match mime.split('/').next().unwrap_or("") {
        "image" => "image",
        "video" => "video",
        "audio" => "audio",
        _ => "file",
    }
}

/// A MIME type guessed from a file name's extension.
pub fn mime_from_name(name: &str) -> &'static str {
    let ext = name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "heic" => "image/heic",
        "svg" => "image/svg+xml",
        "mp4" | "m4v" => "video/mp4",
        "mov" => "video/quicktime",
        "webm" => "video/webm",
        "mp3" => "audio/mpeg",
        "m4a" => "audio/mp4",
        "ogg" | "oga" | "opus" => "audio/ogg",
        "wav" => "audio/wav",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "json" => "application/json",
        "txt" | "log" => "text/plain",
        "md" => "text/markdown",
        "csv" => "text/csv",
        "html" | "htm" => "text/html",
        _ => "application/octet-stream",
    }
}

/// The usual file extension of a MIME type, for naming content that came without a name.
pub fn extension_of(mime: &str) -> &'static str {
    match mime {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        "audio/mpeg" => "mp3",
        "audio/wav" => "wav",
        "video/mp4" => "mp4",
        "application/pdf" => "pdf",
        "application/json" => "json",
        "text/plain" => "txt",
        "text/markdown" => "md",
        _ => "bin",
    }
}

/// The media service: the content-addressed files, the store rows that name them, and the
/// settings. Built once by the server and handed to the connections and the agent bridge.
pub struct Media {
    files: MediaFiles,
    store: Store,
    config: MediaConfig,
    data_dir: PathBuf,
}

impl Media {
    /// The media of a gateway with this configuration and store.
    pub fn new(config: &Config, store: Store) -> Arc<Media> {
        Arc::new(Media {
            files: MediaFiles::new(&config.data_dir),
            store,
            config: config.media.clone(),
            data_dir: config.data_dir.clone(),
        })
    }

    /// The file store.
    pub fn files(&self) -> &MediaFiles {
        &self.files
    }

    /// The settings.
    pub fn config(&self) -> &MediaConfig {
        &self.config
    }

    /// The media a device's upload references name, in order; an unknown reference is
    /// `not_found`.
    pub async fn resolve_refs(
        &self,
        device_id: &str,
        refs: &[String],
    ) -> Result<Vec<MediaRow>, WireError> {
        const MAX_REFS: usize = 32;
        if refs.len() > MAX_REFS {
            return Err(WireError::bad_request(format!(
                "at most {MAX_REFS} media_refs per message"
            )));
        }
        let mut rows = Vec::with_capacity(refs.len());
        for r in refs {
            match self.store.media_by_ref(device_id, r).await? {
                Some(row) => rows.push(row),
                None => {
                    return Err(WireError::not_found(format!(
                        "media_ref {:?} unknown",
                        upload::short(r)
                    )))
                }
            }
        }
        Ok(rows)
    }

    /// Removes the files of these hashes once no media row names them; errors are logged.
    pub async fn remove_unused(&self, shas: Vec<String>) {
        self.files.remove_unused(&self.store, shas).await;
    }

    /// Moves a finished upload into the store under its hash and inserts its row.
    pub async fn place(
        &self,
        temp: files::TempBlob,
        row: MediaRow,
    ) -> Result<MediaRow, MediaError> {
        self.files
            .place(&self.store, temp, row, |_, _| Ok(()))
            .await
    }

    /// The media row of this id, if any.
    pub async fn get(&self, media_id: &str) -> Result<Option<MediaRow>, StoreError> {
        self.store.get_media(media_id).await
    }

    /// Runs expiry once now (see [`MediaFiles::sweep`]).
    pub async fn sweep(&self) -> Result<usize, MediaError> {
        self.files
            .sweep(&self.store, self.config.unreferenced_ttl)
            .await
    }

    /// Sweeps expired media at start and then every `sweep_interval` until `shutdown`.
    pub fn spawn_sweeper(self: &Arc<Self>, shutdown: CancellationToken) {
        let media = self.clone();
        let every = self.config.sweep_interval;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = shutdown.cancelled() => return,
                }
                match media.sweep().await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(removed = n, "media expiry"),
                    Err(e) => tracing::warn!(error = %e, "media expiry failed"),
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_never_carry_a_path() {
        assert_eq!(display_name("../../etc/passwd", "file"), "passwd");
        assert_eq!(display_name("C:\\Windows\\win.ini", "file"), "win.ini");
        assert_eq!(display_name("..", "file"), "file");
        assert_eq!(display_name("a/b/", "file"), "file");
        assert_eq!(display_name("nul\u{0}by\nte.txt", "file"), "nulbyte.txt");
        let long = format!("{}.png", "é".repeat(5000));
        let name = display_name(&long, "file");
        assert!(name.len() <= 255 && name.ends_with(".png"), "{name}");
    }

    #[test]
    fn mime_and_kind_are_cleaned() {
        assert_eq!(clean_mime("Image/PNG"), "image/png");
        assert_eq!(
            clean_mime("text/plain; charset=utf-8"),
            "application/octet-stream"
        );
        assert_eq!(clean_mime("nonsense"), "application/octet-stream");
        assert_eq!(clean_kind("", "image/png"), "image");
        assert_eq!(clean_kind("weird", "application/pdf"), "file");
        assert_eq!(clean_kind("video", "application/octet-stream"), "video");
        assert_eq!(mime_from_name("a.JPG"), "image/jpeg");
    }
}
