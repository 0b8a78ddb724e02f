//! Media rows: metadata of content-addressed files, the upload references devices name them by,
//! and the messages that use them. The files themselves live outside the database; the store
//! only reports which content hashes are no longer used by any row so the caller can remove them.

use std::collections::BTreeSet;

use rusqlite::{Connection, OptionalExtension, Row};

use crate::queries::{to_i64, to_u64};
use crate::{Store, StoreError, WriteTx};

/// One media item: a file's metadata and the hash that names its content on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MediaRow {
    pub media_id: String,
    /// Lowercase hex SHA-256 of the content.
    pub sha256: String,
    /// `image`, `video`, `audio` or `file`.
    pub kind: String,
    pub mime: String,
    pub size: u64,
    /// Display name only.
    pub filename: String,
    pub created_at: i64,
    /// For uploads: the device that uploaded it.
    pub device_id: Option<String>,
    /// For uploads: the device's own reference, usable in `media_refs` until attached or expired.
    pub media_ref: Option<String>,
    /// For uploads: recorded as a voice note.
    pub voice: bool,
}

const MEDIA_COLUMNS: &str =
    "media_id, sha256, kind, mime, size, filename, created_at, device_id, media_ref, voice";

fn media_from_row(row: &Row<'_>) -> rusqlite::Result<MediaRow> {
    Ok(MediaRow {
        media_id: row.get(0)?,
        sha256: row.get(1)?,
        kind: row.get(2)?,
        mime: row.get(3)?,
        size: to_u64(row.get(4)?),
        filename: row.get(5)?,
        created_at: row.get(6)?,
        device_id: row.get(7)?,
        media_ref: row.get(8)?,
        voice: row.get(9)?,
    })
}

pub(crate) fn get_media(conn: &Connection, media_id: &str) -> Result<Option<MediaRow>, StoreError> {
    let sql = format!("SELECT {MEDIA_COLUMNS} FROM media WHERE media_id = ?1");
    Ok(conn
        .prepare_cached(&sql)?
        .query_row([media_id], media_from_row)
        .optional()?)
}

fn media_by_ref(
    conn: &Connection,
    device_id: &str,
    media_ref: &str,
) -> Result<Option<MediaRow>, StoreError> {
    let sql = format!("SELECT {MEDIA_COLUMNS} FROM media WHERE device_id = ?1 AND media_ref = ?2");
    Ok(conn
        .prepare_cached(&sql)?
        .query_row((device_id, media_ref), media_from_row)
        .optional()?)
}

fn sha_in_use(conn: &Connection, sha256: &str) -> Result<bool, StoreError> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM media WHERE sha256 = ?1 LIMIT 1")?
        .query_row([sha256], |_| Ok(()))
        .optional()?
        .is_some())
}

/// Whether a media row is used by a message that exists. Links to a message that was never
/// stored (a turn that ended without an answer) do not count.
const REFERENCED: &str = "EXISTS (SELECT 1 FROM message_media mm JOIN messages m \
     ON m.message_id = mm.message_id WHERE mm.media_id = media.media_id)";

impl WriteTx<'_> {
    /// Inserts a media row. An upload reference a device reuses now names the new row; the old
    /// row keeps its content until it expires or its messages are deleted.
    pub fn insert_media(&mut self, row: &MediaRow) -> Result<(), StoreError> {
        if row.media_id.is_empty() || row.sha256.is_empty() {
            return Err(StoreError::Invalid(
                "media_id and sha256 must not be empty".into(),
            ));
        }
        if let (Some(device), Some(media_ref)) = (&row.device_id, &row.media_ref) {
            self.conn
                .prepare_cached(
                    "UPDATE media SET media_ref = NULL WHERE device_id = ?1 AND media_ref = ?2",
                )?
                .execute((device, media_ref))?;
        }
        self.conn
            .prepare_cached(
                "INSERT INTO media \
                 (media_id, sha256, kind, mime, size, filename, created_at, device_id, media_ref, voice) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )?
            .execute((
                &row.media_id,
                &row.sha256,
                &row.kind,
                &row.mime,
                to_i64(row.size),
                &row.filename,
                row.created_at,
                &row.device_id,
                &row.media_ref,
                row.voice,
            ))?;
        Ok(())
    }

    /// The media row with this id as seen inside this transaction.
    pub fn get_media(&self, media_id: &str) -> Result<Option<MediaRow>, StoreError> {
        get_media(self.conn, media_id)
    }

    /// Links media to a message (in the given order). Every id must exist, otherwise
    /// [`StoreError::NotFound`] and nothing is linked.
    pub fn attach_media(
        &mut self,
        message_id: &str,
        media_ids: &[String],
    ) -> Result<(), StoreError> {
        for (position, media_id) in media_ids.iter().enumerate() {
            if get_media(self.conn, media_id)?.is_none() {
                return Err(StoreError::NotFound);
            }
            self.conn
                .prepare_cached(
                    "INSERT INTO message_media (message_id, media_id, position) VALUES (?1, ?2, ?3) \
                     ON CONFLICT (message_id, media_id) DO NOTHING",
                )?
                .execute((message_id, media_id, to_i64(position as u64)))?;
        }
        Ok(())
    }

    /// Unlinks the media of deleted messages and deletes the media rows no existing message
    /// uses any more. Returns the content hashes no media row uses now: their files may go.
    pub fn detach_media(&mut self, message_ids: &[String]) -> Result<Vec<String>, StoreError> {
        let mut candidates = BTreeSet::new();
        for message_id in message_ids {
            let mut stmt = self.conn.prepare_cached(
                "DELETE FROM message_media WHERE message_id = ?1 RETURNING media_id",
            )?;
            let ids = stmt.query_map([message_id], |r| r.get::<_, String>(0))?;
            for id in ids {
                candidates.insert(id?);
            }
        }
        let sql =
            format!("DELETE FROM media WHERE media_id = ?1 AND NOT {REFERENCED} RETURNING sha256");
        let mut shas = BTreeSet::new();
        for media_id in &candidates {
            let sha: Option<String> = self
                .conn
                .prepare_cached(&sql)?
                .query_row([media_id], |r| r.get(0))
                .optional()?;
            shas.extend(sha);
        }
        self.unused_shas(shas)
    }

    /// Deletes media created before `created_before` (unix ms) that no existing message uses,
    /// with their dangling links. Returns the content hashes no media row uses now.
    pub fn expire_media(&mut self, created_before: i64) -> Result<Vec<String>, StoreError> {
        let sql = format!(
            "DELETE FROM media WHERE created_at < ?1 AND NOT {REFERENCED} RETURNING media_id, sha256"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt
            .query_map([created_before], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        drop(stmt);
        let mut shas = BTreeSet::new();
        for (media_id, sha) in rows {
            self.conn
                .prepare_cached("DELETE FROM message_media WHERE media_id = ?1")?
                .execute([&media_id])?;
            shas.insert(sha);
        }
        self.unused_shas(shas)
    }

    fn unused_shas(&self, shas: BTreeSet<String>) -> Result<Vec<String>, StoreError> {
        let mut out = Vec::new();
        for sha in shas {
            if !sha_in_use(self.conn, &sha)? {
                out.push(sha);
            }
        }
        Ok(out)
    }
}

impl Store {
    /// The media row with this id, if it exists.
    pub async fn get_media(&self, media_id: &str) -> Result<Option<MediaRow>, StoreError> {
        let id = media_id.to_string();
        self.read(move |c| get_media(c, &id)).await
    }

    /// The media a device's upload reference currently names, if any.
    pub async fn media_by_ref(
        &self,
        device_id: &str,
        media_ref: &str,
    ) -> Result<Option<MediaRow>, StoreError> {
        let (device, media_ref) = (device_id.to_string(), media_ref.to_string());
        self.read(move |c| media_by_ref(c, &device, &media_ref))
            .await
    }

    /// Whether any media row names this content hash.
    pub async fn media_sha_in_use(&self, sha256: &str) -> Result<bool, StoreError> {
        let sha = sha256.to_string();
        self.read(move |c| sha_in_use(c, &sha)).await
    }

    /// Bytes of uploads no existing message uses yet (open uploads are not rows): of this
    /// device, and of every device.
    pub async fn unused_upload_bytes(&self, device_id: &str) -> Result<(u64, u64), StoreError> {
        let device = device_id.to_string();
        self.read(move |c| {
            let sql = format!(
                "SELECT COALESCE(SUM(CASE WHEN device_id = ?1 THEN size ELSE 0 END), 0), \
                 COALESCE(SUM(size), 0) FROM media WHERE device_id IS NOT NULL AND NOT {REFERENCED}"
            );
            let (mine, all): (i64, i64) = c
                .prepare_cached(&sql)?
                .query_row([&device], |r| Ok((r.get(0)?, r.get(1)?)))?;
            Ok((to_u64(mine), to_u64(all)))
        })
        .await
    }

    /// Every content hash some media row names.
    pub async fn media_shas(&self) -> Result<BTreeSet<String>, StoreError> {
        self.read(|c| {
            let mut stmt = c.prepare_cached("SELECT DISTINCT sha256 FROM media")?;
            let shas = stmt
                .query_map([], |r| r.get::<_, String>(0))?
                .collect::<Result<BTreeSet<_>, _>>()?;
            Ok(shas)
        })
        .await
    }
}
