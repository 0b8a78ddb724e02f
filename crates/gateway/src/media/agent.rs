//! Media between the gateway and the agent: attachments in prompts, and files in the agent's
//! answers.
//!
//! A prompt carries each attachment as a `resource_link` to the stored file (`file://` URI, name,
//! MIME type, size). When the agent accepts images (`promptCapabilities.image`), image
//! attachments up to [`INLINE_IMAGE_MAX`] go inline as base64 `image` blocks instead.
//!
//! Files come back from the agent as ACP `image` or `resource` content (in message chunks or tool
//! results), `file://` resource links, or `MEDIA:<path>` lines in its text. Paths must lie inside
//! the allowed directories (default: the agent's working directory) and outside the gateway's
//! data directory; `MEDIA:` lines are never shown, whether their file was served or not. Each
//! file is copied into the media store, announced with a durable `media.offer` filed under the
//! answer, and listed in the answer's `media`.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;
use bytes::Bytes;
use iris_acp::{AudioContent, ContentBlock, ResourceLink};
use iris_protocol::{DurableFrame, Header, MediaInfo};
use iris_store::MediaRow;

use super::error::MediaError;
use super::files::{is_sha256, TempBlob};
use super::names::{
    clean_mime, display_name, extension_of, info, is_raster, kind_of, mime_from_name, recognize,
};
use super::service::Media;
use crate::ids::{new_id, now_ms};
use crate::outbox::{self, Origin};

/// Largest image sent inline to the agent; bigger ones go as a `resource_link`.
pub const INLINE_IMAGE_MAX: u64 = 20 * 1024 * 1024;

/// The prefix of a line that shares a file.
const MEDIA_PREFIX: &str = "MEDIA:";

/// Standard base64 that tolerates missing padding, as agents vary.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Something the agent produced that may become media.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentFile {
    /// A path from a `MEDIA:` line or a `file://` resource link.
    Path(String),
    /// Base64 data: an image, or an embedded resource's blob.
    Data {
        /// The base64 text.
        base64: String,
        /// Its MIME type.
        mime: String,
        /// A name, when the agent gave a URI.
        name: Option<String>,
    },
    /// An embedded resource's text.
    Text {
        /// The text.
        text: String,
        /// Its MIME type.
        mime: String,
        /// A name, when the agent gave a URI.
        name: Option<String>,
    },
}

/// The last segment of a URI, as a name.
fn uri_name(uri: &str) -> Option<String> {
    let path = uri.split(['?', '#']).next().unwrap_or(uri);
    let last = path.rsplit('/').next().filter(|s| !s.is_empty())?;
    Some(percent_decode(last))
}

/// The file a content block carries, if it carries one.
pub fn from_block(block: &ContentBlock) -> Option<AgentFile> {
    match block {
        ContentBlock::Image(image) => Some(AgentFile::Data {
            base64: image.data.clone(),
            mime: clean_mime(&image.mime_type),
            name: image.uri.as_deref().and_then(uri_name),
        }),
        ContentBlock::Resource(embedded) => {
            let r = &embedded.resource;
            let name = uri_name(&r.uri);
            let mime = r.mime_type.as_deref().map(clean_mime);
            match (&r.blob, &r.text) {
                (Some(blob), _) => Some(AgentFile::Data {
                    base64: blob.clone(),
                    mime: mime.unwrap_or_else(|| {
                        mime_from_name(name.as_deref().unwrap_or("")).to_owned()
                    }),
                    name,
                }),
                (None, Some(text)) => Some(AgentFile::Text {
                    text: text.clone(),
                    mime: mime.unwrap_or_else(|| "text/plain".into()),
                    name,
                }),
                (None, None) => None,
            }
        }
        ContentBlock::ResourceLink(link) if link.uri.starts_with("file://") => {
            Some(AgentFile::Path(link.uri.clone()))
        }
        _ => None,
    }
}

/// The path of a `MEDIA:` line, if the line is one.
fn media_line(line: &str) -> Option<&str> {
    let rest = line.trim().strip_prefix(MEDIA_PREFIX)?;
    Some(
        rest.trim()
            .trim_matches(|c| c == '`' || c == '"' || c == '\''),
    )
}

/// Splits `MEDIA:` lines off a text: the text without them, and their paths.
pub fn split_media_lines(text: &str) -> (String, Vec<String>) {
    if !text.contains(MEDIA_PREFIX) {
        return (text.to_owned(), Vec::new());
    }
    let mut paths = Vec::new();
    let kept: Vec<&str> = text
        .split('\n')
        .filter(|line| match media_line(line) {
            Some(path) => {
                if !path.is_empty() {
                    paths.push(path.to_owned());
                }
                false
            }
            None => true,
        })
        .collect();
    (kept.join("\n"), paths)
}

/// Text as shown while it streams: without `MEDIA:` lines, including one still being written.
pub fn display_text(text: &str) -> String {
    if !text.contains(MEDIA_PREFIX) {
        return text.to_owned();
    }
    split_media_lines(text).0
}

/// A `file://` URI for a local path (bytes outside the unreserved set are percent-encoded).
pub fn file_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::from("file://");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = |b: u8| (b as char).to_digit(16);
            if let (Some(hi), Some(lo)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((hi * 16 + lo) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

// ----- prompts ------------------------------------------------------------------------------

/// The answer that files from the agent are added to (the turn being mapped).
pub trait Answer {
    /// The answer's message id: its files are filed under it.
    fn answer_id(&self) -> &str;
    /// Whether a file with this content is already in the answer.
    fn has_media(&self, sha256: &str) -> bool;
    /// Adds a stored file to the answer's `media`.
    fn add_media(&mut self, info: MediaInfo, sha256: String);
}

impl Media {
    /// Attachments as `resource_link` blocks to the stored files.
    pub fn prompt_links(&self, rows: &[MediaRow]) -> Vec<ContentBlock> {
        rows.iter()
            .map(|row| {
                ContentBlock::ResourceLink(ResourceLink {
                    uri: file_uri(&self.files.blob_path(&row.sha256)),
                    name: row.filename.clone(),
                    mime_type: Some(row.mime.clone()),
                    size: Some(row.size),
                    title: None,
                    description: None,
                })
            })
            .collect()
    }

    /// The blocks of a prompt as the agent `agent` gets them: each link to a stored file is made
    /// readable to that agent alone and points there ([`super::attached`]); links to stored
    /// images become inline `image` blocks when the agent accepts images, and links to stored
    /// audio up to `[voice] max_bytes` inline `audio` blocks when `audio` (the agent accepts
    /// audio and `[voice] send_audio`).
    pub async fn prompt_blocks(
        &self,
        blocks: Vec<ContentBlock>,
        agent: &str,
        images: bool,
        audio: bool,
    ) -> Vec<ContentBlock> {
        let audio_max = self.voice().max_bytes;
        let prefix = format!("{}/", file_uri(self.files.root()));
        let mut out = Vec::with_capacity(blocks.len());
        for block in blocks {
            let ContentBlock::ResourceLink(mut link) = block else {
                out.push(block);
                continue;
            };
            let sha = match link.uri.starts_with(&prefix) {
                true => link.uri.rsplit('/').next().filter(|s| is_sha256(s)),
                false => None,
            };
            let Some(sha) = sha.map(str::to_owned) else {
                out.push(ContentBlock::ResourceLink(link));
                continue;
            };
            let mime = link.mime_type.clone().unwrap_or_default();
            let inline = match () {
                _ if audio
                    && mime.starts_with("audio/")
                    && link.size.is_some_and(|s| s <= audio_max) =>
                {
                    self.inline(&sha, mime, true).await
                }
                _ if images
                    && is_raster(&mime)
                    && link.size.is_some_and(|s| s <= INLINE_IMAGE_MAX) =>
                {
                    self.inline(&sha, mime, false).await
                }
                _ => None,
            };
            if let Some(inline) = inline {
                out.push(inline);
                continue;
            }
            let blob = self.files.blob_path(&sha);
            let dir = super::attached::agent_dir(&self.data_dir, agent);
            match tokio::task::spawn_blocking(move || super::attached::attach(&blob, &dir)).await {
                Ok(Ok(path)) => link.uri = file_uri(&path),
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, agent, "could not attach a file for the agent")
                }
                Err(e) => {
                    tracing::warn!(error = %e, agent, "could not attach a file for the agent")
                }
            }
            out.push(ContentBlock::ResourceLink(link));
        }
        out
    }

    /// A stored file as an inline `image` block, or `audio` one.
    async fn inline(&self, sha: &str, mime: String, audio: bool) -> Option<ContentBlock> {
        let path = self.files.blob_path(sha);
        let encoded = tokio::task::spawn_blocking(move || {
            std::fs::read(path).map(|bytes| BASE64.encode(bytes))
        })
        .await;
        match encoded {
            Ok(Ok(data)) if audio => Some(ContentBlock::Audio(AudioContent {
                data,
                mime_type: mime,
            })),
            Ok(Ok(data)) => Some(ContentBlock::image(data, mime)),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "could not read an attachment; sending a link");
                None
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not encode an attachment; sending a link");
                None
            }
        }
    }
}

// ----- files from the agent -----------------------------------------------------------------

/// Why a file from the agent is not served.
#[derive(Debug, thiserror::Error)]
enum Refused {
    #[error("it is not a readable file")]
    NotAFile,
    #[error("it is outside the allowed directories")]
    Outside,
    #[error("it has another name on the data dir's file system (a hard link)")]
    HardLink,
    #[error("it is larger than the upload limit")]
    TooLarge,
    #[error("its data is not valid base64")]
    BadData,
    #[error(transparent)]
    Failed(#[from] MediaError),
}

impl Media {
    /// Stores every file the agent produced, announces each with `media.offer` (filed under the
    /// answer, so deleting the answer removes it) and adds it to the answer's `media`. Paths are
    /// resolved against the agent's working directory `cwd`.
    pub async fn collect(
        &self,
        lane: &Header,
        cwd: &Path,
        files: Vec<AgentFile>,
        answer: &mut impl Answer,
    ) {
        for file in files {
            let what = match &file {
                AgentFile::Path(_) => "path",
                AgentFile::Data { .. } => "data",
                AgentFile::Text { .. } => "text",
            };
            match self.store_file(lane, cwd, answer, file).await {
                Ok(()) => {}
                Err(e) => {
                    tracing::warn!(reason = %e, kind = what, "a file from the agent was not served")
                }
            }
        }
    }

    async fn store_file(
        &self,
        lane: &Header,
        cwd: &Path,
        answer: &mut impl Answer,
        file: AgentFile,
    ) -> Result<(), Refused> {
        let limit = self.config.max_upload_bytes;
        let mut temp = self.files.temp().await?;
        let (mime, filename) = match file {
            AgentFile::Path(raw) => {
                let path = self.allowed_path(cwd, raw).await?;
                if temp.copy_from(path.clone(), limit).await?.is_none() {
                    return Err(Refused::TooLarge);
                }
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                (
                    mime_from_name(&name).to_owned(),
                    display_name(&name, "file"),
                )
            }
            AgentFile::Data { base64, mime, name } => {
                if (base64.len() as u64 / 4).saturating_mul(3) > limit {
                    return Err(Refused::TooLarge);
                }
                let bytes = tokio::task::spawn_blocking(move || {
                    let compact: String = base64
                        .chars()
                        .filter(|c| !c.is_ascii_whitespace())
                        .collect();
                    BASE64.decode(compact)
                })
                .await
                .map_err(MediaError::from)?
                .map_err(|_| Refused::BadData)?;
                write(&mut temp, bytes, limit).await?;
                (mime.clone(), named(name, &mime))
            }
            AgentFile::Text { text, mime, name } => {
                write(&mut temp, text.into_bytes(), limit).await?;
                (mime.clone(), named(name, &mime))
            }
        };
        let sha = temp.finish().await?;
        if answer.has_media(&sha) {
            // The same content again in this turn (a tool result repeated in its update): one offer.
            temp.discard().await;
            return Ok(());
        }
        // Like an upload: the bytes, not the agent's word, say what the file is.
        let (kind, mime) = recognize(&mime, temp.head());
        let row = MediaRow {
            media_id: new_id("md_"),
            sha256: sha.clone(),
            kind: kind.to_owned(),
            mime,
            size: temp.len(),
            filename,
            created_at: now_ms(),
            device_id: None,
            media_ref: None,
            voice: false,
        };
        let answer_id = answer.answer_id().to_owned();
        let header = lane.clone();
        let row = self
            .files
            .place(&self.store, temp, row, move |tx, row| {
                tx.attach_media(&answer_id, std::slice::from_ref(&row.media_id))?;
                let offer = DurableFrame::MediaOffer(info(row));
                outbox::append(tx, &header, offer, Some(&answer_id), &Origin::none()).map(drop)
            })
            .await?;
        tracing::debug!(size = row.size, kind = %row.kind, "file from the agent offered");
        answer.add_media(info(&row), sha);
        Ok(())
    }
}

fn named(name: Option<String>, mime: &str) -> String {
    let fallback = format!("{}.{}", kind_of(mime), extension_of(mime));
    display_name(name.as_deref().unwrap_or(""), &fallback)
}

async fn write(temp: &mut TempBlob, bytes: Vec<u8>, limit: u64) -> Result<(), Refused> {
    if bytes.len() as u64 > limit {
        return Err(Refused::TooLarge);
    }
    temp.write(Bytes::from(bytes)).await?;
    Ok(())
}

impl Media {
    /// Resolves a path the agent named (absolute, `~/…`, relative to its working directory, or a
    /// `file://` URI) to a regular file inside the allowed directories and outside the data dir.
    async fn allowed_path(&self, cwd: &Path, raw: String) -> Result<PathBuf, Refused> {
        let cwd = cwd.to_path_buf();
        let allowed = match self.config.allowed_dirs.is_empty() {
            true => vec![cwd.clone()],
            false => self.config.allowed_dirs.clone(),
        };
        let data_dir = self.data_dir.clone();
        let limit = self.config.max_upload_bytes;
        tokio::task::spawn_blocking(move || {
            let text = match raw.strip_prefix("file://") {
                Some(rest) => percent_decode(rest),
                None => raw,
            };
            let path = match text.strip_prefix("~/") {
                Some(rest) => crate::config::home_dir()
                    .ok_or(Refused::NotAFile)?
                    .join(rest),
                None => PathBuf::from(&text),
            };
            let path = if path.is_absolute() {
                path
            } else {
                cwd.join(path)
            };
            // Canonical paths resolve `..` and symlinks, so a link inside an allowed directory
            // cannot point outside it.
            let real = path.canonicalize().map_err(|_| Refused::NotAFile)?;
            let meta = std::fs::metadata(&real).map_err(|_| Refused::NotAFile)?;
            if !meta.is_file() {
                return Err(Refused::NotAFile);
            }
            let inside = |dir: &Path| dir.canonicalize().is_ok_and(|d| real.starts_with(d));
            if !allowed.iter().any(|d| inside(d)) || inside(&data_dir) {
                return Err(Refused::Outside);
            }
            // A hard link has no path to canonicalize: one in the agent's directory may be the
            // store or the Web Push key. A file with more than one name on the data dir's file
            // system is therefore not sent (a hard link cannot cross file systems).
            if meta.nlink() > 1
                && std::fs::metadata(&data_dir).map_or(true, |d| d.dev() == meta.dev())
            {
                return Err(Refused::HardLink);
            }
            if meta.len() > limit {
                return Err(Refused::TooLarge);
            }
            Ok(real)
        })
        .await
        .map_err(MediaError::from)?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_lines_are_split_off() {
        let (text, paths) =
            split_media_lines("Here it is.\nMEDIA:/tmp/a.png\n  MEDIA: `b c.txt`\nBye");
        assert_eq!(text, "Here it is.\nBye");
        assert_eq!(paths, ["/tmp/a.png", "b c.txt"]);
        assert_eq!(split_media_lines("no media here").0, "no media here");
        assert_eq!(
            split_media_lines("inline MEDIA:/x stays").0,
            "inline MEDIA:/x stays"
        );
        assert_eq!(display_text("Look\nMEDIA:/tmp/pa"), "Look");
    }

    #[test]
    fn file_uris_round_trip() {
        let uri = file_uri(Path::new("/data dir/ü.png"));
        assert_eq!(uri, "file:///data%20dir/%C3%BC.png");
        assert_eq!(
            percent_decode(uri.strip_prefix("file://").unwrap()),
            "/data dir/ü.png"
        );
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(
            uri_name("file:///a/b/c%20d.txt").as_deref(),
            Some("c d.txt")
        );
    }

    #[test]
    fn content_blocks_carry_files() {
        let image = ContentBlock::image("aGk=", "image/png");
        assert!(
            matches!(from_block(&image), Some(AgentFile::Data { ref mime, .. }) if mime == "image/png")
        );
        assert_eq!(from_block(&ContentBlock::text("hi")), None);
        let link = ContentBlock::resource_link("file:///tmp/x.txt", "x.txt");
        assert_eq!(
            from_block(&link),
            Some(AgentFile::Path("file:///tmp/x.txt".into()))
        );
        assert_eq!(
            from_block(&ContentBlock::resource_link("https://example.com/x", "x")),
            None
        );
    }
}
