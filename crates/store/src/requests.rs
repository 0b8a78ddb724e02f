//! Where user messages stand with the agent, and the requests devices named with their own ids.
//!
//! A user message that asks the agent for a turn keeps a `state` (opaque text to the store:
//! the gateway writes and reads its names); the messages in a given state, oldest first, are
//! the gateway's durable queue. A request a device sent with a `client_id` is kept under
//! (device, client id) with a digest of its content and what it made, so that the same id from
//! the same device is answered from here and never taken twice.

use rusqlite::{Connection, OptionalExtension};

use crate::queries::{message_from_row, now_ms, to_i64, to_u64, MESSAGE_COLUMNS};
use crate::{Store, StoreError, StoredMessage, WriteTx};

/// A request a device named with its own id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientRequest {
    /// A digest of the request's content, opaque to the store.
    pub digest: String,
    /// The message it made (or ran again).
    pub message_id: Option<String>,
    /// The cursor of the durable frame that answered it, when it made one.
    pub cursor: Option<u64>,
}

fn client_request(
    conn: &Connection,
    device_id: &str,
    client_id: &str,
) -> Result<Option<ClientRequest>, StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT digest, message_id, cursor FROM client_requests \
             WHERE device_id = ?1 AND client_id = ?2",
        )?
        .query_row((device_id, client_id), |r| {
            Ok(ClientRequest {
                digest: r.get(0)?,
                message_id: r.get(1)?,
                cursor: r.get::<_, Option<i64>>(2)?.map(to_u64),
            })
        })
        .optional()?)
}

fn messages_in_state(conn: &Connection, state: &str) -> Result<Vec<StoredMessage>, StoreError> {
    let sql = format!("SELECT {MESSAGE_COLUMNS} FROM messages WHERE state = ?1 ORDER BY seq");
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt
        .query_map([state], message_from_row)?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

impl WriteTx<'_> {
    /// The request `client_id` of this device, if it was taken before.
    pub fn client_request(
        &self,
        device_id: &str,
        client_id: &str,
    ) -> Result<Option<ClientRequest>, StoreError> {
        client_request(self.conn, device_id, client_id)
    }

    /// Forgets a request a device named with its own id (it was not taken after all).
    pub fn delete_client_request(
        &mut self,
        device_id: &str,
        client_id: &str,
    ) -> Result<(), StoreError> {
        self.conn
            .prepare_cached("DELETE FROM client_requests WHERE device_id = ?1 AND client_id = ?2")?
            .execute((device_id, client_id))?;
        Ok(())
    }

    /// Records a request a device named with its own id. A second request under the same
    /// (device, client id) is [`StoreError::Invalid`]: check [`Self::client_request`] first.
    pub fn insert_client_request(
        &mut self,
        device_id: &str,
        client_id: &str,
        request: &ClientRequest,
    ) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "INSERT INTO client_requests \
                 (device_id, client_id, digest, message_id, cursor, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute((
                device_id,
                client_id,
                &request.digest,
                &request.message_id,
                request.cursor.map(to_i64),
                now_ms(),
            ))
            .map_err(|e| match e {
                rusqlite::Error::SqliteFailure(f, _)
                    if f.code == rusqlite::ErrorCode::ConstraintViolation =>
                {
                    StoreError::Invalid(format!("client_id {client_id} was taken before"))
                }
                other => other.into(),
            })?;
        Ok(())
    }

    /// Sets a message's state; returns the state it had, or `None` when no such message exists
    /// (nothing is written then).
    pub fn set_message_state(
        &mut self,
        message_id: &str,
        state: &str,
    ) -> Result<Option<Option<String>>, StoreError> {
        let before: Option<Option<String>> = self
            .conn
            .prepare_cached("SELECT state FROM messages WHERE message_id = ?1")?
            .query_row([message_id], |r| r.get(0))
            .optional()?;
        if before.is_some() {
            self.conn
                .prepare_cached("UPDATE messages SET state = ?2 WHERE message_id = ?1")?
                .execute((message_id, state))?;
        }
        Ok(before)
    }

    /// The messages in `state`, oldest first.
    pub fn messages_in_state(&self, state: &str) -> Result<Vec<StoredMessage>, StoreError> {
        messages_in_state(self.conn, state)
    }
}

impl Store {
    /// The request `client_id` of this device, if it was taken before.
    pub async fn client_request(
        &self,
        device_id: &str,
        client_id: &str,
    ) -> Result<Option<ClientRequest>, StoreError> {
        let (device_id, client_id) = (device_id.to_owned(), client_id.to_owned());
        self.read(move |c| client_request(c, &device_id, &client_id))
            .await
    }

    /// The messages in `state`, oldest first.
    pub async fn messages_in_state(&self, state: &str) -> Result<Vec<StoredMessage>, StoreError> {
        let state = state.to_owned();
        self.read(move |c| messages_in_state(c, &state)).await
    }
}
