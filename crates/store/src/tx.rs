//! [`WriteTx`]: everything a write job can do inside its savepoint.

use std::sync::Arc;

use rusqlite::{Connection, OptionalExtension};

use crate::queries::{self, now_ms, to_i64, to_u64, FLOOR_KEY};
use crate::{
    ChannelRow, Committed, DeletedChannel, DeviceRow, NewFrame, StoreError, StoredMessage,
};

/// The handle a write job receives. Everything it does is part of the job's savepoint
/// inside the batch transaction: if the job returns `Err` (or panics) all of it is rolled
/// back and none of its appended frames reach the commit hook.
pub struct WriteTx<'a> {
    pub(crate) conn: &'a Connection,
    /// Frames appended by the successful jobs of the batch so far, plus this job's.
    pub(crate) frames: &'a mut Vec<Committed>,
    /// Outbox cursors this job deleted; they are dropped from `frames` if the job succeeds.
    pub(crate) removed: Vec<u64>,
    /// Every cursor up to this value was deleted by this job (retention pruning).
    pub(crate) removed_upto: u64,
    /// This job wrote to the channel directory (the store's cached copy must be read again).
    pub(crate) channels_changed: bool,
}

impl<'a> WriteTx<'a> {
    pub(crate) fn new(conn: &'a Connection, frames: &'a mut Vec<Committed>) -> Self {
        WriteTx {
            conn,
            frames,
            removed: Vec::new(),
            removed_upto: 0,
            channels_changed: false,
        }
    }

    /// The smallest cursor that is pending publication in this batch; only deletions
    /// at or above it need to be tracked, everything older was already published.
    fn first_pending_cursor(&self) -> u64 {
        self.frames.first().map_or(u64::MAX, |c| c.cursor)
    }

    /// Appends a frame and returns its cursor. The frame is handed to the commit hook
    /// once the batch commits, unless this job fails.
    pub fn append(&mut self, f: NewFrame) -> Result<u64, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "INSERT INTO outbox (ts, frame_type, chat_id, thread_id, message_id, json) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?;
        stmt.execute((
            now_ms(),
            &f.frame_type,
            &f.chat_id,
            &f.thread_id,
            &f.message_id,
            &f.json,
        ))?;
        let cursor = to_u64(self.conn.last_insert_rowid());
        self.frames.push(Committed {
            cursor,
            frame_type: Arc::from(f.frame_type),
            json: Arc::from(f.json),
            meta: f.meta,
        });
        Ok(cursor)
    }

    /// The highest cursor ever assigned, including ones assigned earlier in this batch.
    pub fn outbox_head(&self) -> Result<u64, StoreError> {
        queries::outbox_head(self.conn)
    }

    /// Retention: deletes the outbox prefix up to the newest frame older than
    /// `older_than_ms` and raises the floor to that cursor. Frames with a newer
    /// timestamp but a lower cursor (clock steps) go too, so what remains above the
    /// floor is always a gap-free suffix of the log. The `client_id`s of requests older than
    /// the cutoff are forgotten too. Returns the number of outbox rows deleted.
    pub fn prune_outbox(&mut self, older_than_ms: i64) -> Result<usize, StoreError> {
        // The requests devices named with their own ids are remembered as long as the frames
        // that answered them.
        self.conn
            .prepare_cached("DELETE FROM client_requests WHERE created_at < ?1")?
            .execute([older_than_ms])?;
        let max: Option<i64> = self
            .conn
            .prepare_cached("SELECT max(cursor) FROM outbox WHERE ts < ?1")?
            .query_row([older_than_ms], |r| r.get(0))?;
        let Some(max) = max else { return Ok(0) };
        let deleted = self
            .conn
            .prepare_cached("DELETE FROM outbox WHERE cursor <= ?1")?
            .execute([max])?;
        let max = to_u64(max);
        let floor = queries::outbox_floor(self.conn)?.max(max);
        self.set_meta(FLOOR_KEY, &floor.to_string())?;
        self.removed_upto = self.removed_upto.max(max);
        Ok(deleted)
    }

    /// Deletes outbox rows matching `where_sql` (one `?1` parameter) and remembers the
    /// cursors that are still waiting for publication in this batch.
    fn delete_outbox_where(&mut self, where_sql: &str, param: &str) -> Result<(), StoreError> {
        let pending = self.first_pending_cursor();
        let sql = format!("DELETE FROM outbox WHERE {where_sql} RETURNING cursor");
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let mut rows = stmt.query([param])?;
        while let Some(row) = rows.next()? {
            let cursor = to_u64(row.get(0)?);
            if cursor >= pending {
                self.removed.push(cursor);
            }
        }
        Ok(())
    }

    /// Inserts a message, or updates role, text, ts and extra of an existing one
    /// (its position in the lane is kept; its state only when `m.state` is set). A message
    /// cannot move to another lane.
    pub fn upsert_message(&mut self, m: &StoredMessage) -> Result<(), StoreError> {
        if m.message_id.is_empty() || m.chat_id.is_empty() {
            return Err(StoreError::Invalid(
                "message_id and chat_id must not be empty".into(),
            ));
        }
        let extra = if m.extra.trim().is_empty() {
            "{}"
        } else {
            m.extra.as_str()
        };
        let changed = self
            .conn
            .prepare_cached(
                "INSERT INTO messages (message_id, chat_id, thread_id, role, text, ts, extra, state) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
                 ON CONFLICT (message_id) DO UPDATE SET \
                     role = excluded.role, text = excluded.text, ts = excluded.ts, extra = excluded.extra, \
                     state = COALESCE(excluded.state, state) \
                 WHERE chat_id = excluded.chat_id AND thread_id IS excluded.thread_id",
            )?
            .execute((
                &m.message_id,
                &m.chat_id,
                &m.thread_id,
                &m.role,
                &m.text,
                m.ts,
                extra,
                &m.state,
            ))?;
        if changed == 0 {
            return Err(StoreError::Invalid(format!(
                "message {} already exists in another lane",
                m.message_id
            )));
        }
        Ok(())
    }

    /// The message with this id as seen inside this transaction.
    pub fn get_message(&self, id: &str) -> Result<Option<StoredMessage>, StoreError> {
        queries::get_message(self.conn, id)
    }

    /// Hard-deletes messages with their search index rows, read receipts and every
    /// outbox row carrying one of `ids` (also for ids that have no message row).
    /// Returns the ids that existed as messages. Append a deletion notice after this
    /// call, otherwise it is deleted along with the message's other frames.
    pub fn delete_messages(&mut self, ids: &[String]) -> Result<Vec<String>, StoreError> {
        let mut existed = Vec::new();
        for id in ids {
            let n = self
                .conn
                .prepare_cached("DELETE FROM messages WHERE message_id = ?1")?
                .execute([id])?;
            if n > 0 {
                existed.push(id.clone());
            }
            self.conn
                .prepare_cached("DELETE FROM read_state WHERE message_id = ?1")?
                .execute([id])?;
            self.delete_outbox_where("message_id = ?1", id)?;
        }
        Ok(existed)
    }

    /// Inserts a channel or thread. Threads need an existing, non-thread parent; other
    /// kinds must not have one. Inserting a row with `is_default` moves the flag to it.
    pub fn insert_channel(&mut self, c: &ChannelRow) -> Result<(), StoreError> {
        self.channels_changed = true;
        if c.chat_id.is_empty() {
            return Err(StoreError::Invalid("chat_id must not be empty".into()));
        }
        match (c.kind.as_str(), &c.parent_chat_id) {
            ("thread", None) => return Err(StoreError::Invalid("a thread needs a parent".into())),
            ("thread", Some(parent)) => match self.get_channel(parent)? {
                None => {
                    return Err(StoreError::Invalid(format!(
                        "parent {parent} does not exist"
                    )))
                }
                Some(p) if p.kind == "thread" => {
                    return Err(StoreError::Invalid(
                        "a thread cannot contain threads".into(),
                    ))
                }
                Some(_) => {}
            },
            ("default" | "channel", None) => {}
            ("default" | "channel", Some(_)) => {
                return Err(StoreError::Invalid("only threads have a parent".into()))
            }
            (kind, _) => {
                return Err(StoreError::Invalid(format!(
                    "unknown channel kind {kind:?}"
                )))
            }
        }
        if c.is_default && c.kind == "thread" {
            return Err(StoreError::Invalid(
                "a thread cannot be the default channel".into(),
            ));
        }
        if self.get_channel(&c.chat_id)?.is_some() {
            return Err(StoreError::Invalid(format!(
                "channel {} already exists",
                c.chat_id
            )));
        }
        if c.is_default {
            self.conn
                .prepare_cached("UPDATE channels SET is_default = 0 WHERE is_default = 1")?
                .execute([])?;
        }
        self.conn
            .prepare_cached(
                "INSERT INTO channels \
                 (chat_id, name, kind, parent_chat_id, is_default, name_set_by_user, created_at, agent, \
                  awaiting_title) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?
            .execute((
                &c.chat_id,
                &c.name,
                &c.kind,
                &c.parent_chat_id,
                c.is_default,
                c.name_set_by_user,
                c.created_at,
                c.agent.as_deref().filter(|_| c.kind != "thread"),
                c.awaiting_title,
            ))?;
        Ok(())
    }

    /// Gives every channel without an agent, or with one not in `known`, the agent `default`.
    /// A channel taken from an agent that is gone also forgets its lanes' agent sessions (they
    /// belonged to the other agent). Returns the channels that moved.
    pub fn settle_channel_agents(
        &mut self,
        known: &[String],
        default: &str,
    ) -> Result<Vec<String>, StoreError> {
        self.channels_changed = true;
        let mut moved = Vec::new();
        for c in self.list_channels()? {
            if c.kind == "thread" || c.agent.as_ref().is_some_and(|a| known.contains(a)) {
                continue;
            }
            self.conn
                .prepare_cached("UPDATE channels SET agent = ?2 WHERE chat_id = ?1")?
                .execute((&c.chat_id, default))?;
            if c.agent.is_some() {
                self.forget_lane_sessions(&c.chat_id)?;
            }
            moved.push(c.chat_id);
        }
        Ok(moved)
    }

    /// Forgets the agent sessions of a channel's lanes (the channel and its threads).
    pub fn forget_lane_sessions(&mut self, chat_id: &str) -> Result<(), StoreError> {
        self.conn
            .prepare_cached("DELETE FROM lane_sessions WHERE chat_id = ?1")?
            .execute([chat_id])?;
        Ok(())
    }

    /// Sets the agent of a channel (`None`: the default agent); a thread has its channel's and
    /// is refused. Returns whether the channel exists.
    pub fn set_channel_agent(
        &mut self,
        chat_id: &str,
        agent: Option<&str>,
    ) -> Result<bool, StoreError> {
        self.channels_changed = true;
        match self.get_channel(chat_id)? {
            None => Ok(false),
            Some(c) if c.kind == "thread" => Err(StoreError::Invalid(
                "a thread uses its channel's agent".into(),
            )),
            Some(_) => {
                self.conn
                    .prepare_cached("UPDATE channels SET agent = ?2 WHERE chat_id = ?1")?
                    .execute((chat_id, agent))?;
                Ok(true)
            }
        }
    }

    /// The channel or thread with this id as seen inside this transaction.
    pub fn get_channel(&self, id: &str) -> Result<Option<ChannelRow>, StoreError> {
        queries::get_channel(self.conn, id)
    }

    /// All channels and threads in creation order.
    pub fn list_channels(&self) -> Result<Vec<ChannelRow>, StoreError> {
        queries::list_channels(self.conn)
    }

    /// Renames a channel. An automatic rename (`by_user == false`) never overrides a
    /// name the user chose and then returns `Ok(false)`; a user rename pins the name.
    pub fn rename_channel(
        &mut self,
        id: &str,
        name: &str,
        by_user: bool,
    ) -> Result<bool, StoreError> {
        self.channels_changed = true;
        if name.trim().is_empty() {
            return Err(StoreError::Invalid(
                "a channel name must not be empty".into(),
            ));
        }
        let row = self.get_channel(id)?.ok_or(StoreError::NotFound)?;
        if !by_user && row.name_set_by_user {
            return Ok(false);
        }
        self.conn
            .prepare_cached(
                "UPDATE channels SET name = ?2, name_set_by_user = name_set_by_user OR ?3, \
                 awaiting_title = 0 WHERE chat_id = ?1",
            )?
            .execute((id, name, by_user))?;
        Ok(true)
    }

    /// Gives a chat that still carries its placeholder name (`awaiting_title`) the title made
    /// from its first message. Returns whether it did: a chat named or renamed since (by the
    /// user or the agent), or one created with a name, keeps its name.
    pub fn give_awaited_title(&mut self, id: &str, title: &str) -> Result<bool, StoreError> {
        if title.trim().is_empty() {
            return Err(StoreError::Invalid(
                "a channel name must not be empty".into(),
            ));
        }
        let changed = self
            .conn
            .prepare_cached(
                "UPDATE channels SET name = ?2, awaiting_title = 0 \
                 WHERE chat_id = ?1 AND awaiting_title = 1",
            )?
            .execute((id, title))?;
        if changed > 0 {
            self.channels_changed = true;
        }
        Ok(changed > 0)
    }

    /// Makes `id` the default channel and clears the flag everywhere else.
    pub fn set_default(&mut self, id: &str) -> Result<(), StoreError> {
        self.channels_changed = true;
        let row = self.get_channel(id)?.ok_or(StoreError::NotFound)?;
        if row.kind == "thread" {
            return Err(StoreError::Invalid(
                "a thread cannot be the default channel".into(),
            ));
        }
        // Clearing first keeps the single-default unique index satisfied at every step.
        self.conn
            .prepare_cached(
                "UPDATE channels SET is_default = 0 WHERE is_default = 1 AND chat_id <> ?1",
            )?
            .execute([id])?;
        self.conn
            .prepare_cached("UPDATE channels SET is_default = 1 WHERE chat_id = ?1")?
            .execute([id])?;
        Ok(())
    }

    /// Hard-deletes a channel (or thread) with its threads, their messages, search rows,
    /// read receipts, outbox rows, agent lane sessions and (by a schema trigger) scheduled
    /// jobs. The current default channel cannot be deleted. Append the deletion notice after
    /// this call.
    pub fn delete_channel(&mut self, id: &str) -> Result<DeletedChannel, StoreError> {
        self.channels_changed = true;
        let row = self.get_channel(id)?.ok_or(StoreError::NotFound)?;
        if row.is_default {
            return Err(StoreError::Invalid(
                "the default channel cannot be deleted".into(),
            ));
        }
        let mut chat_ids = vec![row.chat_id.clone()];
        {
            let mut stmt = self.conn.prepare_cached(
                "SELECT chat_id FROM channels WHERE parent_chat_id = ?1 ORDER BY seq",
            )?;
            let threads = stmt.query_map([id], |r| r.get::<_, String>(0))?;
            for t in threads {
                chat_ids.push(t?);
            }
        }

        let mut message_ids = Vec::new();
        for chat in &chat_ids {
            // A chat id may appear as the lane's chat (channel) or as its thread id.
            let mut stmt = self.conn.prepare_cached(
                "DELETE FROM messages WHERE chat_id = ?1 OR thread_id = ?1 RETURNING message_id",
            )?;
            let ids = stmt.query_map([chat], |r| r.get::<_, String>(0))?;
            for m in ids {
                message_ids.push(m?);
            }
        }
        for m in &message_ids {
            self.conn
                .prepare_cached("DELETE FROM read_state WHERE message_id = ?1")?
                .execute([m])?;
            self.delete_outbox_where("message_id = ?1", m)?;
        }
        for chat in &chat_ids {
            self.conn
                .prepare_cached("DELETE FROM read_state WHERE chat_id = ?1")?
                .execute([chat])?;
            self.delete_outbox_where("chat_id = ?1 OR thread_id = ?1", chat)?;
            self.conn
                .prepare_cached("DELETE FROM lane_sessions WHERE chat_id = ?1")?
                .execute([chat])?;
        }
        if let Some(parent) = &row.parent_chat_id {
            // A thread's agent session is keyed by its parent channel and the thread id.
            self.conn
                .prepare_cached("DELETE FROM lane_sessions WHERE chat_id = ?1 AND thread_key = ?2")?
                .execute((parent, id))?;
        }
        for chat in chat_ids.iter().rev() {
            self.conn
                .prepare_cached("DELETE FROM channels WHERE chat_id = ?1")?
                .execute([chat])?;
        }
        message_ids.sort();
        message_ids.dedup();
        Ok(DeletedChannel {
            chat_ids,
            message_ids,
        })
    }

    /// Registers a device or refreshes its name, caps and last_seen; cursors and push
    /// tokens of a known device are kept.
    pub fn upsert_device(
        &mut self,
        device_id: &str,
        name: &str,
        caps_json: &str,
        now: i64,
    ) -> Result<DeviceRow, StoreError> {
        if device_id.is_empty() {
            return Err(StoreError::Invalid("device_id must not be empty".into()));
        }
        self.conn
            .prepare_cached(
                "INSERT INTO devices (device_id, name, caps, created_at, last_seen) \
                 VALUES (?1, ?2, ?3, ?4, ?4) \
                 ON CONFLICT (device_id) DO UPDATE SET \
                     name = excluded.name, caps = excluded.caps, last_seen = excluded.last_seen",
            )?
            .execute((device_id, name, caps_json, now))?;
        self.get_device(device_id)?
            .ok_or_else(|| StoreError::Internal("device vanished after upsert".into()))
    }

    /// The device with this id as seen inside this transaction.
    pub fn get_device(&self, id: &str) -> Result<Option<DeviceRow>, StoreError> {
        queries::get_device(self.conn, id)
    }

    /// Updates push tokens; an outer `None` leaves that token unchanged and
    /// `Some(None)` clears it.
    pub fn set_push_tokens(
        &mut self,
        device_id: &str,
        fcm: Option<Option<String>>,
        ntfy: Option<Option<String>>,
    ) -> Result<(), StoreError> {
        self.require_device(device_id)?;
        if let Some(fcm) = fcm {
            self.conn
                .prepare_cached("UPDATE devices SET fcm_token = ?2 WHERE device_id = ?1")?
                .execute((device_id, fcm))?;
        }
        if let Some(ntfy) = ntfy {
            self.conn
                .prepare_cached("UPDATE devices SET ntfy_topic = ?2 WHERE device_id = ?1")?
                .execute((device_id, ntfy))?;
        }
        Ok(())
    }

    /// Records what the device has durably received; the value never goes backwards.
    pub fn confirm_cursor(&mut self, device_id: &str, cursor: u64) -> Result<(), StoreError> {
        self.raise_cursor_column("confirmed_cursor", device_id, cursor)
    }

    /// Records several devices' watermarks at once (as [`Self::confirm_cursor`]); a device that
    /// no longer exists is skipped. Returns the watermarks recorded.
    pub fn confirm_cursors(
        &mut self,
        cursors: &[(String, u64)],
    ) -> Result<Vec<(String, u64)>, StoreError> {
        let mut stored = Vec::with_capacity(cursors.len());
        for (device_id, cursor) in cursors {
            match self.confirm_cursor(device_id, *cursor) {
                Ok(()) => stored.push((device_id.clone(), *cursor)),
                Err(StoreError::NotFound) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(stored)
    }

    /// Records the highest cursor a push notification was sent for; never goes backwards.
    pub fn set_last_pushed(&mut self, device_id: &str, cursor: u64) -> Result<(), StoreError> {
        self.raise_cursor_column("last_pushed_cursor", device_id, cursor)
    }

    fn raise_cursor_column(
        &mut self,
        column: &str,
        device_id: &str,
        cursor: u64,
    ) -> Result<(), StoreError> {
        let sql = format!("UPDATE devices SET {column} = max({column}, ?2) WHERE device_id = ?1");
        let n = self
            .conn
            .prepare_cached(&sql)?
            .execute((device_id, to_i64(cursor)))?;
        if n == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    /// Updates when the device was last seen.
    pub fn touch(&mut self, device_id: &str, now: i64) -> Result<(), StoreError> {
        let n = self
            .conn
            .prepare_cached("UPDATE devices SET last_seen = ?2 WHERE device_id = ?1")?
            .execute((device_id, now))?;
        if n == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    /// Removes a device, with the requests it named with its own ids; returns whether it
    /// existed.
    pub fn delete_device(&mut self, device_id: &str) -> Result<bool, StoreError> {
        self.conn
            .prepare_cached("DELETE FROM client_requests WHERE device_id = ?1")?
            .execute([device_id])?;
        let n = self
            .conn
            .prepare_cached("DELETE FROM devices WHERE device_id = ?1")?
            .execute([device_id])?;
        Ok(n > 0)
    }

    fn require_device(&self, device_id: &str) -> Result<(), StoreError> {
        let found = self
            .conn
            .prepare_cached("SELECT 1 FROM devices WHERE device_id = ?1")?
            .query_row([device_id], |_| Ok(()))
            .optional()?;
        found.ok_or(StoreError::NotFound)
    }

    /// Records that `device_id` read `message_id`; returns false if it was already
    /// recorded (the first read time is kept).
    pub fn mark_read(
        &mut self,
        chat_id: &str,
        message_id: &str,
        device_id: &str,
        ts: i64,
    ) -> Result<bool, StoreError> {
        let n = self
            .conn
            .prepare_cached(
                "INSERT INTO read_state (message_id, device_id, chat_id, ts) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (message_id, device_id) DO NOTHING",
            )?
            .execute((message_id, device_id, chat_id, ts))?;
        Ok(n > 0)
    }

    /// Stores the agent session of a lane (`thread_id` None = the flat lane);
    /// `session_id` None forgets it.
    pub fn set_lane_session(
        &mut self,
        chat_id: &str,
        thread_id: Option<&str>,
        session_id: Option<&str>,
    ) -> Result<(), StoreError> {
        let key = queries::thread_key(thread_id);
        match session_id {
            Some(session) => self
                .conn
                .prepare_cached(
                    "INSERT INTO lane_sessions (chat_id, thread_key, agent_session_id, updated_at) \
                     VALUES (?1, ?2, ?3, ?4) \
                     ON CONFLICT (chat_id, thread_key) DO UPDATE SET \
                         agent_session_id = excluded.agent_session_id, updated_at = excluded.updated_at",
                )?
                .execute((chat_id, key, session, now_ms()))?,
            None => self
                .conn
                .prepare_cached("DELETE FROM lane_sessions WHERE chat_id = ?1 AND thread_key = ?2")?
                .execute((chat_id, key))?,
        };
        Ok(())
    }

    /// The agent session of a lane as seen inside this transaction.
    pub fn lane_session(
        &self,
        chat_id: &str,
        thread_id: Option<&str>,
    ) -> Result<Option<String>, StoreError> {
        queries::lane_session(self.conn, chat_id, thread_id)
    }

    /// Sets a key of the `meta` table. The key `outbox_floor` belongs to the store.
    pub fn set_meta(&mut self, key: &str, value: &str) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "INSERT INTO meta (key, value) VALUES (?1, ?2) \
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            )?
            .execute((key, value))?;
        Ok(())
    }

    /// Removes a key of the `meta` table (nothing happens when it is not there).
    pub fn delete_meta(&mut self, key: &str) -> Result<(), StoreError> {
        self.conn
            .prepare_cached("DELETE FROM meta WHERE key = ?1")?
            .execute([key])?;
        Ok(())
    }

    /// A value of the `meta` table as seen inside this transaction.
    pub fn get_meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        queries::get_meta(self.conn, key)
    }
}
