//! Schema migrations and connection setup.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use crate::StoreError;

/// Schema steps; entry `i` moves `PRAGMA user_version` from `i` to `i + 1`.
/// Entries are append-only: a released step is never edited, a change is a new step.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: the initial schema.
    r#"
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT
);

CREATE TABLE outbox (
    cursor     INTEGER PRIMARY KEY AUTOINCREMENT,
    ts         INTEGER NOT NULL,
    frame_type TEXT,
    chat_id    TEXT,
    thread_id  TEXT,
    message_id TEXT,
    json       TEXT NOT NULL
);
CREATE INDEX outbox_message_id ON outbox(message_id);
CREATE INDEX outbox_chat_id ON outbox(chat_id);
CREATE INDEX outbox_thread_id ON outbox(thread_id);
CREATE INDEX outbox_ts ON outbox(ts);

CREATE TABLE messages (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id TEXT NOT NULL UNIQUE,
    chat_id    TEXT NOT NULL,
    thread_id  TEXT,
    role       TEXT NOT NULL,
    text       TEXT NOT NULL,
    ts         INTEGER NOT NULL,
    extra      TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX messages_lane ON messages(chat_id, thread_id, seq);
CREATE INDEX messages_thread ON messages(thread_id);

CREATE VIRTUAL TABLE messages_fts USING fts5(
    text,
    content = 'messages',
    content_rowid = 'seq',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, text) VALUES (new.seq, new.text);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, text) VALUES ('delete', old.seq, old.text);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF text ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, text) VALUES ('delete', old.seq, old.text);
    INSERT INTO messages_fts(rowid, text) VALUES (new.seq, new.text);
END;

CREATE TABLE channels (
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,
    chat_id          TEXT NOT NULL UNIQUE,
    name             TEXT NOT NULL,
    kind             TEXT NOT NULL CHECK (kind IN ('default', 'channel', 'thread')),
    parent_chat_id   TEXT,
    is_default       INTEGER NOT NULL DEFAULT 0,
    name_set_by_user INTEGER NOT NULL DEFAULT 0,
    created_at       INTEGER NOT NULL
);
CREATE INDEX channels_parent ON channels(parent_chat_id);
CREATE UNIQUE INDEX channels_single_default ON channels(is_default) WHERE is_default = 1;
INSERT INTO channels (chat_id, name, kind, is_default, created_at)
    VALUES ('default', 'Default', 'default', 1, CAST(strftime('%s', 'now') AS INTEGER) * 1000);

CREATE TABLE devices (
    device_id          TEXT PRIMARY KEY,
    name               TEXT NOT NULL,
    caps               TEXT NOT NULL DEFAULT '{}',
    fcm_token          TEXT,
    ntfy_topic         TEXT,
    confirmed_cursor   INTEGER NOT NULL DEFAULT 0,
    last_pushed_cursor INTEGER NOT NULL DEFAULT 0,
    created_at         INTEGER NOT NULL,
    last_seen          INTEGER NOT NULL
);

CREATE TABLE read_state (
    message_id TEXT NOT NULL,
    device_id  TEXT NOT NULL,
    chat_id    TEXT,
    ts         INTEGER,
    PRIMARY KEY (message_id, device_id)
) WITHOUT ROWID;
CREATE INDEX read_state_chat ON read_state(chat_id);

CREATE TABLE lane_sessions (
    chat_id          TEXT NOT NULL,
    thread_key       TEXT NOT NULL,
    agent_session_id TEXT NOT NULL,
    updated_at       INTEGER NOT NULL,
    PRIMARY KEY (chat_id, thread_key)
) WITHOUT ROWID;
"#,
    // 2: media: content-addressed files (by sha256), their metadata, and which messages use them.
    r#"
CREATE TABLE media (
    media_id   TEXT PRIMARY KEY,
    sha256     TEXT NOT NULL,
    kind       TEXT NOT NULL,
    mime       TEXT NOT NULL,
    size       INTEGER NOT NULL,
    filename   TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    device_id  TEXT,
    media_ref  TEXT
);
CREATE INDEX media_sha256 ON media(sha256);
CREATE INDEX media_created ON media(created_at);
CREATE UNIQUE INDEX media_upload_ref ON media(device_id, media_ref) WHERE media_ref IS NOT NULL;

CREATE TABLE message_media (
    message_id TEXT NOT NULL,
    media_id   TEXT NOT NULL,
    position   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (message_id, media_id)
) WITHOUT ROWID;
CREATE INDEX message_media_media ON message_media(media_id);
"#,
    // 3: scheduled prompts (cron jobs) and their run state; a job goes with its channel or thread.
    r#"
CREATE TABLE cron_jobs (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    chat_id     TEXT NOT NULL,
    thread_id   TEXT,
    name        TEXT NOT NULL,
    kind        TEXT NOT NULL,
    spec        TEXT NOT NULL,
    prompt      TEXT NOT NULL,
    paused      INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL,
    next_run    INTEGER,
    last_run    INTEGER,
    last_status TEXT,
    run_count   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX cron_jobs_chat ON cron_jobs(chat_id);
CREATE INDEX cron_jobs_thread ON cron_jobs(thread_id);
CREATE TRIGGER cron_jobs_channel_delete AFTER DELETE ON channels BEGIN
    DELETE FROM cron_jobs WHERE chat_id = old.chat_id OR thread_id = old.chat_id;
END;
"#,
    // 4: push notifications: how far the push policy has read the outbox, the frames waiting to be
    // pushed to each device, and each device's retry state. The scan position of an existing
    // database starts at its outbox head, so an upgrade never pushes old frames.
    r#"
CREATE TABLE push_scan (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    cursor INTEGER NOT NULL
);
INSERT INTO push_scan (id, cursor)
    VALUES (1, COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'outbox'), 0));

CREATE TABLE push_queue (
    device_id  TEXT NOT NULL REFERENCES devices(device_id) ON DELETE CASCADE,
    cursor     INTEGER NOT NULL,
    frame_type TEXT NOT NULL,
    kind       TEXT NOT NULL,
    chat_id    TEXT,
    thread_id  TEXT,
    message_id TEXT,
    title      TEXT NOT NULL,
    preview    TEXT NOT NULL,
    queued_at  INTEGER NOT NULL,
    PRIMARY KEY (device_id, cursor)
) WITHOUT ROWID;

CREATE TABLE push_retry (
    device_id TEXT PRIMARY KEY REFERENCES devices(device_id) ON DELETE CASCADE,
    attempts  INTEGER NOT NULL,
    next_at   INTEGER NOT NULL
) WITHOUT ROWID;
"#,
    // 5: a device's Web Push subscription (push resource URL and the keys its payloads are
    // encrypted for); it lives in the device row, so it goes when the device is revoked.
    r#"
ALTER TABLE devices ADD COLUMN webpush_endpoint TEXT;
ALTER TABLE devices ADD COLUMN webpush_p256dh TEXT;
ALTER TABLE devices ADD COLUMN webpush_auth TEXT;
"#,
    // 6: credentials: one-time pairing codes and per-device tokens, both kept only as hashes, and
    // the address each device last connected from.
    r#"
CREATE TABLE pairing_codes (
    code_hash  TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    spent_at   INTEGER,
    spent_by   TEXT
) WITHOUT ROWID;
CREATE TABLE device_tokens (
    token_hash TEXT PRIMARY KEY,
    device_id  TEXT NOT NULL,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX device_tokens_by_device ON device_tokens(device_id);
CREATE TABLE device_addresses (
    device_id TEXT PRIMARY KEY REFERENCES devices(device_id) ON DELETE CASCADE,
    addr      TEXT NOT NULL,
    at        INTEGER NOT NULL
) WITHOUT ROWID;
"#,
    // 7: the agent a channel talks to (NULL: the gateway's default agent); threads use their
    // channel's.
    r#"
ALTER TABLE channels ADD COLUMN agent TEXT;
"#,
    // 8: pairing codes belong to whoever made them (NULL: the owner's command line), so a device's
    // codes are capped per device and die with it when it is revoked.
    r#"
ALTER TABLE pairing_codes ADD COLUMN created_by TEXT;
CREATE INDEX pairing_codes_by_creator ON pairing_codes(created_by);
"#,
    // 9: scheduled jobs belong to the device that added them (NULL: made before this, or by the
    // gateway), so a device's jobs are capped and go when it is revoked.
    r#"
ALTER TABLE cron_jobs ADD COLUMN created_by TEXT;
CREATE INDEX cron_jobs_by_creator ON cron_jobs(created_by);
"#,
    // 10: where a user message stands with the agent (NULL for other messages), and the requests
    // a device named with its own id (`client_id`), so that the same id is never taken twice.
    r#"
ALTER TABLE messages ADD COLUMN state TEXT;
CREATE INDEX messages_state ON messages(state, seq) WHERE state IS NOT NULL;
CREATE TABLE client_requests (
    device_id  TEXT NOT NULL,
    client_id  TEXT NOT NULL,
    digest     TEXT NOT NULL,
    message_id TEXT,
    cursor     INTEGER,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (device_id, client_id)
) WITHOUT ROWID;
"#,
    // 11: the last push to each device through each backend and how it ended, so that the owner
    // can see whether pushes arrive; it goes with its device.
    r#"
CREATE TABLE push_log (
    device_id TEXT NOT NULL REFERENCES devices(device_id) ON DELETE CASCADE,
    backend   TEXT NOT NULL,
    result    TEXT NOT NULL,
    detail    TEXT,
    at        INTEGER NOT NULL,
    test      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (device_id, backend)
) WITHOUT ROWID;
"#,
    // 12: a chat created without a name carries a placeholder until its first message names it;
    // any rename ends the wait.
    r#"
ALTER TABLE channels ADD COLUMN awaiting_title INTEGER NOT NULL DEFAULT 0;
"#,
    // 13: voice notes. An upload remembers it was recorded as one; a message's transcript (kept in
    // `extra`, opaque to the store but for this column) is searchable like its text.
    r#"
ALTER TABLE media ADD COLUMN voice INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN transcript TEXT GENERATED ALWAYS AS (
    CASE WHEN json_valid(extra) THEN json_extract(extra, '$.transcript.text') END
) VIRTUAL;
DROP TRIGGER messages_fts_insert;
DROP TRIGGER messages_fts_delete;
DROP TRIGGER messages_fts_update;
DROP TABLE messages_fts;
CREATE VIRTUAL TABLE messages_fts USING fts5(
    text,
    transcript,
    content = 'messages',
    content_rowid = 'seq',
    tokenize = 'unicode61 remove_diacritics 2'
);
INSERT INTO messages_fts(messages_fts) VALUES ('rebuild');
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, text, transcript) VALUES (new.seq, new.text, new.transcript);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, text, transcript)
        VALUES ('delete', old.seq, old.text, old.transcript);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF text, extra ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, text, transcript)
        VALUES ('delete', old.seq, old.text, old.transcript);
    INSERT INTO messages_fts(rowid, text, transcript) VALUES (new.seq, new.text, new.transcript);
END;
"#,
];

/// How long a connection waits for a lock held by another connection before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens the read-write connection with the durability settings the store relies on.
pub(crate) fn open_write_connection(path: &Path) -> Result<Connection, StoreError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    let mode: String = conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Invalid(format!(
            "could not enable WAL mode (got {mode})"
        )));
    }
    // FULL makes every COMMIT fsync the WAL, which is what makes an answered write durable.
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", true)?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}

/// Opens a read-only connection; it must be called after the writer enabled WAL.
pub(crate) fn open_read_connection(path: &Path) -> Result<Connection, StoreError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.set_prepared_statement_cache_capacity(32);
    Ok(conn)
}

/// Applies the missing migrations, each in its own IMMEDIATE transaction so that
/// two processes opening the same file cannot apply a step twice.
pub(crate) fn migrate(conn: &mut Connection) -> Result<u32, StoreError> {
    loop {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let version: u32 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
        let step = version as usize;
        if step > MIGRATIONS.len() {
            return Err(StoreError::Invalid(format!(
                "database schema version {version} is newer than this build supports ({})",
                MIGRATIONS.len()
            )));
        }
        if step == MIGRATIONS.len() {
            tx.commit()?;
            return Ok(version);
        }
        tx.execute_batch(MIGRATIONS[step])?;
        tx.pragma_update(None, "user_version", version + 1)?;
        tx.commit()?;
        tracing::debug!(version = version + 1, "applied store migration");
    }
}

/// The `meta` key a backup copy carries until a store is first opened from it.
pub(crate) const RESTORE_PENDING_KEY: &str = "restore_pending";

/// First open of a restored backup: moves the outbox cursor sequence forward to at least the
/// current time in microseconds, so no cursor the original gateway issued after the backup is
/// ever issued again by the restored one. (Cursors stay far below 2^53, exact in JSON numbers.)
/// A device still holding such a cursor is then below the head and gets every new frame.
pub(crate) fn finish_restore(conn: &mut Connection) -> Result<(), StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let pending = tx.execute("DELETE FROM meta WHERE key = ?1", [RESTORE_PENDING_KEY])?;
    if pending > 0 {
        let now_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        tx.execute(
            "INSERT INTO sqlite_sequence (name, seq) SELECT 'outbox', 0 \
             WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'outbox')",
            [],
        )?;
        tx.execute(
            "UPDATE sqlite_sequence SET seq = max(seq, ?1) WHERE name = 'outbox'",
            [now_us],
        )?;
        tracing::info!(
            cursor = now_us,
            "restored store: cursors continue above the backup's"
        );
    }
    tx.commit()?;
    Ok(())
}

/// The current schema version of an open connection.
pub(crate) fn schema_version(conn: &Connection) -> Result<u32, StoreError> {
    Ok(conn.pragma_query_value(None, "user_version", |r| r.get(0))?)
}
