//! `iris-gateway export`: conversations as Markdown or JSON files, one per chat.
//!
//! A channel (or the default chat) is one file with its threads after its own messages; a
//! thread named with `--chat` is a file of its own. Files are named `<name>-<chat id>.md` (or
//! `.json`) with the name cut to a safe slug. With `media`, every attached file is copied to
//! `media/<media id>-<file name>` next to them and the documents link to it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use iris_protocol::{ChatExport, ExportedLane, Message, EXPORT_FORMAT};
use iris_store::{ChannelRow, Snapshot};

pub use iris_protocol::EXPORT_VERSION;

use super::access::{create_private, open_snapshot, ArchiveError};
use super::markdown;
use crate::media::files::is_sha256;
use crate::media::MediaFiles;
use crate::outbox::from_stored;

/// The file format of an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// Readable Markdown.
    Markdown,
    /// The documented JSON ([`ChatExport`]).
    Json,
}

impl ExportFormat {
    fn extension(self) -> &'static str {
        match self {
            ExportFormat::Markdown => "md",
            ExportFormat::Json => "json",
        }
    }
}

/// What to export, and where.
#[derive(Debug, Clone)]
pub struct ExportRequest {
    /// One chat (a channel with its threads, or one thread); `None` exports every chat.
    pub chat: Option<String>,
    /// Markdown or JSON.
    pub format: ExportFormat,
    /// The directory the files go into (created if missing).
    pub out: PathBuf,
    /// Copy attached media files next to the documents.
    pub media: bool,
}

/// What an export wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportSummary {
    /// The documents, one per chat.
    pub files: Vec<PathBuf>,
    /// Messages written, all chats together.
    pub messages: usize,
    /// Media files copied.
    pub media_files: usize,
}

/// Exports from the data dir `data_dir` as `req` says.
pub fn export(
    data_dir: &Path,
    req: &ExportRequest,
    now_ms: i64,
) -> Result<ExportSummary, ArchiveError> {
    let snapshot = open_snapshot(data_dir)?;
    let channels = snapshot.channels().map_err(ArchiveError::Store)?;
    let roots: Vec<&ChannelRow> = match &req.chat {
        Some(id) => vec![channels
            .iter()
            .find(|c| &c.chat_id == id)
            .ok_or_else(|| ArchiveError::NoChat(id.clone()))?],
        None => channels.iter().filter(|c| c.kind != "thread").collect(),
    };
    std::fs::create_dir_all(&req.out).map_err(ArchiveError::io(&req.out))?;
    let mut summary = ExportSummary::default();
    for root in roots {
        let mut doc = chat_export(&snapshot, &channels, root, now_ms)?;
        if req.media {
            summary.media_files += copy_media(data_dir, &snapshot, &mut doc, &req.out)?;
        }
        summary.messages +=
            doc.chat.messages.len() + doc.threads.iter().map(|t| t.messages.len()).sum::<usize>();
        let text = match req.format {
            ExportFormat::Markdown => markdown::render(&doc),
            ExportFormat::Json => doc.to_json(),
        };
        let path = req.out.join(format!(
            "{}-{}.{}",
            slug(&root.name),
            slug(&root.chat_id),
            req.format.extension()
        ));
        let mut file = create_private(&path)?;
        std::io::Write::write_all(&mut file, text.as_bytes()).map_err(ArchiveError::io(&path))?;
        summary.files.push(path);
    }
    Ok(summary)
}

/// The document of one chat: its own lane, then (for a channel) each of its threads.
fn chat_export(
    snapshot: &Snapshot,
    channels: &[ChannelRow],
    root: &ChannelRow,
    now_ms: i64,
) -> Result<ChatExport, ArchiveError> {
    let (chat, threads) = if root.kind == "thread" {
        let parent = root.parent_chat_id.as_deref().unwrap_or_default();
        (
            lane(snapshot, root, parent, Some(&root.chat_id))?,
            Vec::new(),
        )
    } else {
        let threads = channels
            .iter()
            .filter(|c| c.parent_chat_id.as_deref() == Some(root.chat_id.as_str()))
            .map(|t| lane(snapshot, t, &root.chat_id, Some(&t.chat_id)))
            .collect::<Result<Vec<_>, _>>()?;
        (lane(snapshot, root, &root.chat_id, None)?, threads)
    };
    Ok(ChatExport {
        format: EXPORT_FORMAT.to_owned(),
        version: EXPORT_VERSION,
        exported_at: now_ms,
        chat,
        threads,
        media_files: BTreeMap::new(),
    })
}

fn lane(
    snapshot: &Snapshot,
    row: &ChannelRow,
    chat_id: &str,
    thread_id: Option<&str>,
) -> Result<ExportedLane, ArchiveError> {
    let messages: Vec<Message> = snapshot
        .lane_messages(chat_id, thread_id)
        .map_err(ArchiveError::Store)?
        .iter()
        .map(from_stored)
        .collect();
    Ok(ExportedLane {
        chat_id: row.chat_id.clone(),
        name: row.name.clone(),
        kind: row.kind.clone(),
        created_at: row.created_at,
        messages,
    })
}

/// Copies the files of every attachment in `doc` to `<out>/media/` and records them in
/// `doc.media_files`. A file already copied (for another chat) is linked, not copied again;
/// one gone from disk is left out.
fn copy_media(
    data_dir: &Path,
    snapshot: &Snapshot,
    doc: &mut ChatExport,
    out: &Path,
) -> Result<usize, ArchiveError> {
    let dir = out.join("media");
    let files = MediaFiles::new(data_dir);
    let mut copied = 0;
    let lanes = std::iter::once(&doc.chat).chain(doc.threads.iter());
    let infos: Vec<_> = lanes
        .flat_map(|l| l.messages.iter().flat_map(|m| m.media.iter()))
        .cloned()
        .collect();
    for info in infos {
        if doc.media_files.contains_key(&info.media_id) {
            continue;
        }
        let Some(row) = snapshot
            .media(&info.media_id)
            .map_err(ArchiveError::Store)?
        else {
            continue;
        };
        if !is_sha256(&row.sha256) {
            continue;
        }
        let source = files.blob_path(&row.sha256);
        if !source.is_file() {
            continue;
        }
        let name = format!(
            "{}-{}",
            slug(&info.media_id),
            safe_file_name(&info.filename)
        );
        let target = dir.join(&name);
        match target.symlink_metadata() {
            // Copied already, for another chat of this export.
            Ok(meta) if meta.is_file() => {}
            // Never through a link (or into anything else) someone placed there.
            Ok(_) => return Err(ArchiveError::Exists(target.display().to_string())),
            Err(_) => {
                media_dir(&dir)?;
                let mut from = std::fs::File::open(&source).map_err(ArchiveError::io(&source))?;
                let mut to = create_private(&target)?;
                std::io::copy(&mut from, &mut to).map_err(ArchiveError::io(&target))?;
                copied += 1;
            }
        }
        doc.media_files
            .insert(info.media_id.clone(), format!("media/{name}"));
    }
    Ok(copied)
}

/// Creates the media folder if missing; a link in its place is refused.
fn media_dir(dir: &Path) -> Result<(), ArchiveError> {
    match dir.symlink_metadata() {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(ArchiveError::Exists(dir.display().to_string())),
        Err(_) => std::fs::create_dir(dir).map_err(ArchiveError::io(dir)),
    }
}

/// Lowercase letters, digits and `-`, at most 40 characters; `chat` when nothing is left.
fn slug(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c);
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
        if out.len() >= 40 {
            break;
        }
    }
    let out = out.trim_end_matches('-').to_owned();
    if out.is_empty() {
        "chat".to_owned()
    } else {
        out
    }
}

/// A file name that stays inside the media folder: no separators, no leading dot, no control
/// characters, at most 100 characters.
fn safe_file_name(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c == '/' || c == '\\' || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .take(100)
        .collect();
    let cleaned = cleaned.trim_start_matches('.').trim();
    if cleaned.is_empty() {
        "file".to_owned()
    } else {
        cleaned.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_keep_only_safe_characters() {
        assert_eq!(slug("Trip to Lisbon!"), "trip-to-lisbon");
        assert_eq!(slug("../../etc"), "etc");
        assert_eq!(slug("日本"), "chat");
        assert_eq!(slug(&"a".repeat(99)).len(), 40);
    }

    #[test]
    fn file_names_cannot_leave_the_media_folder() {
        assert_eq!(safe_file_name("../../x.png"), "_.._x.png");
        assert_eq!(safe_file_name(".bashrc"), "bashrc");
        assert_eq!(safe_file_name("a\nb.txt"), "a_b.txt");
        assert_eq!(safe_file_name(""), "file");
    }
}
