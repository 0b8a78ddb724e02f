//! Read queries shared by the reader pool and [`crate::WriteTx`].

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::types::Type;
use rusqlite::{Connection, OptionalExtension, Row};

use crate::{
    ChannelActivity, ChannelRow, DeviceRow, HistoryPage, LaneUsage, StoreError, StoredMessage,
};

/// The `meta` key holding the highest cursor removed by retention pruning.
pub(crate) const FLOOR_KEY: &str = "outbox_floor";

/// Wall-clock time in unix milliseconds.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// SQLite integers are signed; cursors above `i64::MAX` cannot exist, so clamping is exact.
pub(crate) fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Negative values never get stored; reading one as 0 keeps a corrupt row from panicking.
pub(crate) fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

pub(crate) fn limit_i64(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

pub(crate) fn outbox_head(conn: &Connection) -> Result<u64, StoreError> {
    let seq: Option<i64> = conn
        .prepare_cached("SELECT seq FROM sqlite_sequence WHERE name = 'outbox'")?
        .query_row([], |r| r.get(0))
        .optional()?;
    Ok(seq.map(to_u64).unwrap_or(0))
}

pub(crate) fn get_meta(conn: &Connection, key: &str) -> Result<Option<String>, StoreError> {
    Ok(conn
        .prepare_cached("SELECT value FROM meta WHERE key = ?1")?
        .query_row([key], |r| r.get::<_, Option<String>>(0))
        .optional()?
        .flatten())
}

pub(crate) fn outbox_floor(conn: &Connection) -> Result<u64, StoreError> {
    Ok(get_meta(conn, FLOOR_KEY)?
        .and_then(|v| v.parse().ok())
        .unwrap_or(0))
}

pub(crate) fn replay(
    conn: &Connection,
    after: u64,
    limit: usize,
    max_bytes: usize,
) -> Result<Vec<(u64, Arc<str>)>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT cursor, json FROM outbox WHERE cursor > ?1 ORDER BY cursor LIMIT ?2",
    )?;
    let mut rows = stmt.query((to_i64(after), limit_i64(limit)))?;
    let mut out = Vec::with_capacity(limit.min(4096));
    let mut bytes = 0usize;
    while let Some(row) = rows.next()? {
        let cursor: i64 = row.get(0)?;
        // Borrowing the text avoids an intermediate String on the hot replay path.
        let json = row
            .get_ref(1)?
            .as_str()
            .map_err(|e| rusqlite::Error::FromSqlConversionFailure(1, Type::Text, Box::new(e)))?;
        bytes = bytes.saturating_add(json.len());
        out.push((to_u64(cursor), Arc::from(json)));
        // A page is bounded in bytes too: at least one frame, then no more past `max_bytes`.
        if bytes >= max_bytes {
            break;
        }
    }
    Ok(out)
}

pub(crate) const MESSAGE_COLUMNS: &str =
    "message_id, chat_id, thread_id, role, text, ts, extra, state";

pub(crate) fn message_from_row(row: &Row<'_>) -> rusqlite::Result<StoredMessage> {
    Ok(StoredMessage {
        message_id: row.get(0)?,
        chat_id: row.get(1)?,
        thread_id: row.get(2)?,
        role: row.get(3)?,
        text: row.get(4)?,
        ts: row.get(5)?,
        extra: row.get(6)?,
        state: row.get(7)?,
    })
}

pub(crate) fn get_message(
    conn: &Connection,
    id: &str,
) -> Result<Option<StoredMessage>, StoreError> {
    let sql = format!("SELECT {MESSAGE_COLUMNS} FROM messages WHERE message_id = ?1");
    Ok(conn
        .prepare_cached(&sql)?
        .query_row([id], message_from_row)
        .optional()?)
}

/// Most bytes of text (and extra fields) one history page holds.
pub const HISTORY_PAGE_BYTES: usize = 2 * 1024 * 1024;

/// Must run inside a read transaction so the two queries see the same snapshot.
pub(crate) fn history(
    conn: &Connection,
    chat_id: &str,
    thread_id: Option<&str>,
    before_message_id: Option<&str>,
    limit: usize,
) -> Result<HistoryPage, StoreError> {
    let before_seq = match before_message_id {
        None => i64::MAX,
        Some(id) => conn
            .prepare_cached(
                "SELECT seq FROM messages WHERE message_id = ?1 AND chat_id = ?2 AND thread_id IS ?3",
            )?
            .query_row((id, chat_id, thread_id), |r| r.get::<_, i64>(0))
            .optional()?
            .ok_or(StoreError::NotFound)?,
    };
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages \
         WHERE chat_id = ?1 AND thread_id IS ?2 AND seq < ?3 ORDER BY seq DESC LIMIT ?4"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    // One extra row tells whether anything older exists without a second query.
    let fetch = limit_i64(limit).saturating_add(1);
    let mut messages = stmt
        .query_map((chat_id, thread_id, before_seq, fetch), message_from_row)?
        .collect::<Result<Vec<_>, _>>()?;
    let mut has_more = messages.len() > limit;
    messages.truncate(limit);
    // A page is bounded in bytes too (at least one message): a device asking for 200 large
    // messages gets the newest that fit, and `has_more`.
    let mut bytes = 0usize;
    if let Some(fit) = messages.iter().position(|m| {
        bytes = bytes.saturating_add(m.text.len() + m.extra.len());
        bytes > HISTORY_PAGE_BYTES
    }) {
        has_more = true;
        messages.truncate(fit.max(1));
    }
    messages.reverse();
    Ok(HistoryPage { messages, has_more })
}

/// The sums over a lane's answers, from the figures each one stored (`extra.tokens`,
/// `extra.runtime.cost`). Reads every answer of the lane once, through the lane index.
pub(crate) fn lane_usage(
    conn: &Connection,
    chat_id: &str,
    thread_id: Option<&str>,
) -> Result<LaneUsage, StoreError> {
    let sql = "SELECT count(*), sum(json_extract(extra, '$.tokens')),                sum(json_extract(extra, '$.runtime.cost')) FROM messages                WHERE chat_id = ?1 AND thread_id IS ?2 AND role IN ('assistant', 'cron')                AND json_valid(extra)";
    Ok(conn
        .prepare_cached(sql)?
        .query_row((chat_id, thread_id), |r| {
            Ok(LaneUsage {
                answers: r.get::<_, i64>(0)?.max(0) as u64,
                tokens: r.get::<_, Option<i64>>(1)?.map(|t| t.max(0) as u64),
                cost: r.get::<_, Option<f64>>(2)?,
            })
        })?)
}

/// Every message of a lane, oldest first (for exports).
pub(crate) fn lane_messages(
    conn: &Connection,
    chat_id: &str,
    thread_id: Option<&str>,
) -> Result<Vec<StoredMessage>, StoreError> {
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages WHERE chat_id = ?1 AND thread_id IS ?2 ORDER BY seq"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let messages = stmt
        .query_map((chat_id, thread_id), message_from_row)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(messages)
}

const CHANNEL_COLUMNS: &str = "chat_id, name, kind, parent_chat_id, is_default, name_set_by_user, \
     created_at, COALESCE(agent, (SELECT p.agent FROM channels p WHERE p.chat_id = channels.parent_chat_id)), \
     awaiting_title";

fn channel_from_row(row: &Row<'_>) -> rusqlite::Result<ChannelRow> {
    Ok(ChannelRow {
        chat_id: row.get(0)?,
        name: row.get(1)?,
        kind: row.get(2)?,
        parent_chat_id: row.get(3)?,
        is_default: row.get(4)?,
        name_set_by_user: row.get(5)?,
        created_at: row.get(6)?,
        agent: row.get(7)?,
        awaiting_title: row.get(8)?,
    })
}

pub(crate) fn get_channel(conn: &Connection, id: &str) -> Result<Option<ChannelRow>, StoreError> {
    let sql = format!("SELECT {CHANNEL_COLUMNS} FROM channels WHERE chat_id = ?1");
    Ok(conn
        .prepare_cached(&sql)?
        .query_row([id], channel_from_row)
        .optional()?)
}

pub(crate) fn list_channels(conn: &Connection) -> Result<Vec<ChannelRow>, StoreError> {
    let sql = format!("SELECT {CHANNEL_COLUMNS} FROM channels ORDER BY seq");
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt
        .query_map([], channel_from_row)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// The lane of each channel and thread, as `messages` files it: a channel's flat lane is
/// (`chat_id`, NULL), a thread's is (its channel, the thread). Both lookups below walk the
/// `messages_lane` index backwards from the lane's newest message.
const LANE_OF_ENTRY: &str = "m.chat_id = COALESCE(c.parent_chat_id, c.chat_id) \
     AND m.thread_id IS (CASE WHEN c.parent_chat_id IS NULL THEN NULL ELSE c.chat_id END)";

/// How many characters of a preview's message are read: enough for one line of it.
const PREVIEW_SOURCE_CHARS: usize = 2000;
/// The messages a lane's preview may show.
const PREVIEWED: &str = "m.role IN ('user', 'assistant') AND trim(m.text) <> ''";

/// Every channel's and thread's latest activity (its newest message's time, or its creation)
/// and the start and id of its newest user or assistant message with text, in one query.
pub(crate) fn channel_activity(conn: &Connection) -> Result<Vec<ChannelActivity>, StoreError> {
    let mut stmt = conn.prepare_cached(&channel_activity_sql())?;
    let rows = stmt
        .query_map([], |r| {
            Ok(ChannelActivity {
                chat_id: r.get(0)?,
                last_activity_at: r.get(1)?,
                latest_text: r.get(2)?,
                latest_id: r.get(3)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

fn channel_activity_sql() -> String {
    format!(
        "SELECT c.chat_id, \
         COALESCE((SELECT m.ts FROM messages m WHERE {LANE_OF_ENTRY} ORDER BY m.seq DESC LIMIT 1), c.created_at), \
         (SELECT substr(m.text, 1, {PREVIEW_SOURCE_CHARS}) FROM messages m WHERE {LANE_OF_ENTRY} \
          AND {PREVIEWED} ORDER BY m.seq DESC LIMIT 1), \
         (SELECT m.message_id FROM messages m WHERE {LANE_OF_ENTRY} \
          AND {PREVIEWED} ORDER BY m.seq DESC LIMIT 1) \
         FROM channels c ORDER BY c.seq"
    )
}

const DEVICE_COLUMNS: &str = "device_id, name, caps, fcm_token, ntfy_topic, confirmed_cursor, \
     last_pushed_cursor, created_at, last_seen, webpush_endpoint, webpush_p256dh, webpush_auth";

fn device_from_row(row: &Row<'_>) -> rusqlite::Result<DeviceRow> {
    Ok(DeviceRow {
        device_id: row.get(0)?,
        name: row.get(1)?,
        caps: row.get(2)?,
        fcm_token: row.get(3)?,
        ntfy_topic: row.get(4)?,
        confirmed_cursor: to_u64(row.get(5)?),
        last_pushed_cursor: to_u64(row.get(6)?),
        created_at: row.get(7)?,
        last_seen: row.get(8)?,
        webpush: match row.get::<_, Option<String>>(9)? {
            Some(endpoint) => Some(crate::WebPushRow {
                endpoint,
                p256dh: row.get::<_, Option<String>>(10)?.unwrap_or_default(),
                auth: row.get::<_, Option<String>>(11)?.unwrap_or_default(),
            }),
            None => None,
        },
    })
}

pub(crate) fn get_device(conn: &Connection, id: &str) -> Result<Option<DeviceRow>, StoreError> {
    let sql = format!("SELECT {DEVICE_COLUMNS} FROM devices WHERE device_id = ?1");
    Ok(conn
        .prepare_cached(&sql)?
        .query_row([id], device_from_row)
        .optional()?)
}

pub(crate) fn list_devices(conn: &Connection) -> Result<Vec<DeviceRow>, StoreError> {
    let sql = format!("SELECT {DEVICE_COLUMNS} FROM devices ORDER BY created_at, device_id");
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt
        .query_map([], device_from_row)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

pub(crate) fn read_by(conn: &Connection, message_id: &str) -> Result<Vec<String>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT device_id FROM read_state WHERE message_id = ?1 ORDER BY ts, device_id",
    )?;
    let rows = stmt
        .query_map([message_id], |r| r.get(0))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// The flat lane is stored under the empty thread key because a primary key column
/// cannot hold NULL reliably.
pub(crate) fn thread_key(thread_id: Option<&str>) -> &str {
    thread_id.unwrap_or("")
}

pub(crate) fn lane_session(
    conn: &Connection,
    chat_id: &str,
    thread_id: Option<&str>,
) -> Result<Option<String>, StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT agent_session_id FROM lane_sessions WHERE chat_id = ?1 AND thread_key = ?2",
        )?
        .query_row((chat_id, thread_key(thread_id)), |r| r.get(0))
        .optional()?)
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    /// `hello` reads the activity of every chat: each lookup must walk the lane's index, never
    /// scan the messages.
    #[test]
    fn channel_activity_walks_the_lane_index() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::schema::migrate(&mut conn).unwrap();
        let sql = format!("EXPLAIN QUERY PLAN {}", super::channel_activity_sql());
        let mut stmt = conn.prepare(&sql).unwrap();
        let plan: Vec<String> = stmt
            .query_map([], |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let plan = plan.join("\n");
        assert_eq!(
            plan.matches("USING INDEX messages_lane").count(),
            3,
            "{plan}"
        );
        assert!(plan.contains("USING INDEX messages_lane"), "{plan}");
        assert!(!plan.contains("SCAN m"), "{plan}");
        assert!(!plan.contains("TEMP B-TREE FOR ORDER"), "{plan}");
    }
}
