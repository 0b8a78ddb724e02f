//! A read-only view of the store for exports and backups, safe while a gateway writes to it.
//!
//! A [`Snapshot`] holds one read transaction on its own connection: everything it returns
//! comes from the same committed state, whatever the gateway commits meanwhile (WAL readers
//! see the database as of their first read). It never migrates or writes, so it can be opened
//! by another process next to a running gateway.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use crate::queries;
use crate::schema::{self, MIGRATIONS};
use crate::{ChannelRow, MediaRow, StoreError, StoredMessage};

/// One consistent, read-only view of a store file.
pub struct Snapshot {
    conn: Connection,
}

impl Snapshot {
    /// Opens the database at `path` read-only and starts the read transaction. A missing
    /// file is [`StoreError::NotFound`]; a schema newer than this build is `Invalid`.
    pub fn open(path: &Path) -> Result<Snapshot, StoreError> {
        if !path.is_file() {
            return Err(StoreError::NotFound);
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.execute_batch("BEGIN DEFERRED")?;
        let version = schema::schema_version(&conn)?;
        if version as usize > MIGRATIONS.len() {
            return Err(StoreError::Invalid(format!(
                "database schema version {version} is newer than this build supports ({})",
                MIGRATIONS.len()
            )));
        }
        // The first read fixes the snapshot the rest of the transaction sees.
        conn.query_row("SELECT count(*) FROM channels", [], |r| r.get::<_, i64>(0))?;
        Ok(Snapshot { conn })
    }

    /// All channels and threads in creation order.
    pub fn channels(&self) -> Result<Vec<ChannelRow>, StoreError> {
        queries::list_channels(&self.conn)
    }

    /// Every message of the lane `(chat_id, thread_id)`, oldest first.
    pub fn lane_messages(
        &self,
        chat_id: &str,
        thread_id: Option<&str>,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        queries::lane_messages(&self.conn, chat_id, thread_id)
    }

    /// A media row by id.
    pub fn media(&self, media_id: &str) -> Result<Option<MediaRow>, StoreError> {
        crate::media::get_media(&self.conn, media_id)
    }

    /// The content hashes of every media row, each once.
    pub fn media_shas(&self) -> Result<Vec<String>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT DISTINCT sha256 FROM media ORDER BY sha256")?;
        let shas = stmt
            .query_map([], |r| r.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(shas)
    }

    /// Writes a compact, self-contained copy of the database as of this snapshot to `dest`
    /// (`VACUUM INTO`), which must not exist yet or be an empty file (the caller may create it
    /// first with the mode it wants); a link there is refused. The copy has no WAL to go with it, and is
    /// marked as a backup: the first [`crate::Store::open`] of it moves the outbox cursors
    /// forward, so a restored gateway never issues a cursor the original already issued.
    pub fn copy_database(&self, dest: &Path) -> Result<(), StoreError> {
        if let Ok(meta) = dest.symlink_metadata() {
            if !meta.is_file() || meta.len() > 0 {
                return Err(StoreError::Invalid(format!(
                    "{} already exists",
                    dest.display()
                )));
            }
        }
        let dest = dest
            .to_str()
            .ok_or_else(|| StoreError::Invalid("the backup path is not valid UTF-8".into()))?;
        // VACUUM cannot run inside a transaction; it reads its own consistent snapshot.
        self.conn.execute_batch("COMMIT")?;
        let copied = self.conn.execute("VACUUM INTO ?1", [dest]);
        self.conn.execute_batch("BEGIN DEFERRED")?;
        copied?;
        let copy = Connection::open_with_flags(dest, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
        copy.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, '1')",
            [schema::RESTORE_PENDING_KEY],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Store, StoreConfig};
    use std::sync::Arc;

    #[test]
    fn a_missing_file_is_not_found_and_nothing_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("iris.db");
        assert!(matches!(Snapshot::open(&path), Err(StoreError::NotFound)));
        assert!(!path.exists());
    }

    #[test]
    fn the_copy_opens_as_a_store_with_the_same_channels() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("iris.db");
        let store = Store::open(StoreConfig::new(&path), Arc::new(|_| {})).unwrap();
        let snap = Snapshot::open(&path).unwrap();
        let before = snap.channels().unwrap();
        let copy = dir.path().join("copy.db");
        snap.copy_database(&copy).unwrap();
        assert!(snap.copy_database(&copy).is_err(), "never overwrites");
        store.close();
        let again = Snapshot::open(&copy).unwrap();
        assert_eq!(again.channels().unwrap(), before);
    }

    #[test]
    fn a_restored_copy_never_issues_a_cursor_the_original_issued_after_the_backup() {
        use crate::NewFrame;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("iris.db");
        let store = Store::open(StoreConfig::new(&path), Arc::new(|_| {})).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let append = |store: &Store| {
            let f = NewFrame {
                frame_type: "status".into(),
                json: r#"{"state":"online"}"#.into(),
                ..NewFrame::default()
            };
            rt.block_on(store.write(move |tx| tx.append(f))).unwrap()
        };
        append(&store);
        let copy = dir.path().join("copy.db");
        Snapshot::open(&path).unwrap().copy_database(&copy).unwrap();
        let after_backup: Vec<u64> = (0..3).map(|_| append(&store)).collect();
        store.close();
        let restored = Store::open(StoreConfig::new(&copy), Arc::new(|_| {})).unwrap();
        let first = append(&restored);
        assert!(
            first > *after_backup.last().unwrap(),
            "{first} after {after_backup:?}"
        );
        assert!(first < 1 << 53, "exact as a JSON number");
        restored.close();
        // Only the first open moves the sequence: a second open continues from it.
        let again = Store::open(StoreConfig::new(&copy), Arc::new(|_| {})).unwrap();
        assert_eq!(append(&again), first + 1);
    }
}
