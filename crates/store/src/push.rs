//! The durable push queue: how far the push policy has read the outbox, which frames wait to be
//! pushed to which device, and each device's retry state.
//!
//! The store knows nothing about push backends or which frames deserve a push: the gateway reads
//! the outbox from [`WriteTx::push_scan_position`], queues the frames it picked together with
//! the new scan position in one job (so a frame is queued exactly once, even across crashes),
//! and removes them again with [`WriteTx::finish_push`] in the same job that raises the device's
//! `last_pushed_cursor`. Queue and retry rows go with their device when it is deleted, and so does
//! its Web Push subscription, which lives in the device row.

use rusqlite::{Connection, OptionalExtension, Row};

use crate::queries::{to_i64, to_u64};
use crate::{Store, StoreError, WriteTx};

/// One frame waiting to be pushed to one device. `title` and `preview` are opaque text
/// written by the gateway.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushItem {
    /// The device to wake.
    pub device_id: String,
    /// The frame's outbox cursor.
    pub cursor: u64,
    /// The frame's wire type (`message.stop`, `picker.approval`, …).
    pub frame_type: String,
    /// What the frame means for the user, opaque to the store (`reply`, `approval`, …).
    pub kind: String,
    /// The frame's chat.
    pub chat_id: Option<String>,
    /// The frame's thread.
    pub thread_id: Option<String>,
    /// The frame's message.
    pub message_id: Option<String>,
    /// What happened, e.g. "Hermes replied in Reports".
    pub title: String,
    /// A short excerpt of the content (empty when there is none).
    pub preview: String,
    /// When it was queued, unix ms.
    pub queued_at: i64,
}

/// A device with queued frames: what the sender needs to decide when to push.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushPending {
    /// The device.
    pub device_id: String,
    /// When its oldest waiting frame was queued, unix ms.
    pub first_queued_at: i64,
    /// Its highest waiting cursor.
    pub last_cursor: u64,
    /// Push attempts made for what is waiting (0 = none yet).
    pub attempts: u32,
    /// Not before this time, unix ms, when an attempt was made.
    pub next_attempt_at: Option<i64>,
}

/// A device's Web Push subscription (RFC 8030 push resource and RFC 8291 keys), opaque text to
/// the store; kept in the device's row, so it goes when the device is deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebPushRow {
    /// The push resource URL.
    pub endpoint: String,
    /// The subscriber's P-256 public key, base64url.
    pub p256dh: String,
    /// The subscriber's authentication secret, base64url.
    pub auth: String,
}

const ITEM_COLUMNS: &str =
    "device_id, cursor, frame_type, kind, chat_id, thread_id, message_id, title, preview, queued_at";

fn item_from_row(r: &Row<'_>) -> rusqlite::Result<PushItem> {
    Ok(PushItem {
        device_id: r.get(0)?,
        cursor: to_u64(r.get(1)?),
        frame_type: r.get(2)?,
        kind: r.get(3)?,
        chat_id: r.get(4)?,
        thread_id: r.get(5)?,
        message_id: r.get(6)?,
        title: r.get(7)?,
        preview: r.get(8)?,
        queued_at: r.get(9)?,
    })
}

fn scan_position(conn: &Connection) -> Result<u64, StoreError> {
    let cursor: Option<i64> = conn
        .prepare_cached("SELECT cursor FROM push_scan WHERE id = 1")?
        .query_row([], |r| r.get(0))
        .optional()?;
    Ok(cursor.map(to_u64).unwrap_or(0))
}

fn pending(conn: &Connection) -> Result<Vec<PushPending>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT q.device_id, min(q.queued_at), max(q.cursor), r.attempts, r.next_at \
         FROM push_queue q LEFT JOIN push_retry r ON r.device_id = q.device_id \
         GROUP BY q.device_id ORDER BY min(q.queued_at)",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok(PushPending {
            device_id: r.get(0)?,
            first_queued_at: r.get(1)?,
            last_cursor: to_u64(r.get(2)?),
            attempts: r.get::<_, Option<u32>>(3)?.unwrap_or(0),
            next_attempt_at: r.get(4)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn items(conn: &Connection, device_id: &str) -> Result<Vec<PushItem>, StoreError> {
    let sql = format!("SELECT {ITEM_COLUMNS} FROM push_queue WHERE device_id = ?1 ORDER BY cursor");
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map([device_id], item_from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

impl WriteTx<'_> {
    /// The highest outbox cursor the push policy has looked at.
    pub fn push_scan_position(&self) -> Result<u64, StoreError> {
        scan_position(self.conn)
    }

    /// Records that the push policy has looked at every frame up to `cursor`; never goes
    /// backwards.
    pub fn set_push_scan_position(&mut self, cursor: u64) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "INSERT INTO push_scan (id, cursor) VALUES (1, ?1) \
                 ON CONFLICT (id) DO UPDATE SET cursor = max(cursor, excluded.cursor)",
            )?
            .execute([to_i64(cursor)])?;
        Ok(())
    }

    /// Queues a frame for a device. Returns false when it was already queued, or the device
    /// does not exist (it may have been deleted meanwhile).
    pub fn queue_push(&mut self, item: &PushItem) -> Result<bool, StoreError> {
        let n = self
            .conn
            .prepare_cached(
                "INSERT INTO push_queue \
                 (device_id, cursor, frame_type, kind, chat_id, thread_id, message_id, title, preview, queued_at) \
                 SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10 \
                 WHERE EXISTS (SELECT 1 FROM devices WHERE device_id = ?1) \
                 ON CONFLICT (device_id, cursor) DO NOTHING",
            )?
            .execute((
                &item.device_id,
                to_i64(item.cursor),
                &item.frame_type,
                &item.kind,
                &item.chat_id,
                &item.thread_id,
                &item.message_id,
                &item.title,
                &item.preview,
                item.queued_at,
            ))?;
        Ok(n > 0)
    }

    /// Records that a push attempt for the device starts now and that the next one, should this
    /// one fail or never report back, may start at `next_at`. Returns the attempt's number (1 for
    /// the first).
    pub fn record_push_attempt(
        &mut self,
        device_id: &str,
        next_at: i64,
    ) -> Result<u32, StoreError> {
        let attempts: u32 = self
            .conn
            .prepare_cached(
                "INSERT INTO push_retry (device_id, attempts, next_at) VALUES (?1, 1, ?2) \
                 ON CONFLICT (device_id) DO UPDATE SET attempts = attempts + 1, next_at = excluded.next_at \
                 RETURNING attempts",
            )?
            .query_row((device_id, next_at), |r| r.get(0))?;
        Ok(attempts)
    }

    /// Moves the device's next attempt to `next_at` (a backend asked to wait longer).
    pub fn delay_push(&mut self, device_id: &str, next_at: i64) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "UPDATE push_retry SET next_at = max(next_at, ?2) WHERE device_id = ?1",
            )?
            .execute((device_id, next_at))?;
        Ok(())
    }

    /// Forgets the device's attempts, so that what waits is pushed without delay (another
    /// backend takes over).
    pub fn reset_push_attempts(&mut self, device_id: &str) -> Result<(), StoreError> {
        self.conn
            .prepare_cached("DELETE FROM push_retry WHERE device_id = ?1")?
            .execute([device_id])?;
        Ok(())
    }

    /// Removes the device's queued frames up to `upto` and its retry state: they were pushed
    /// (the caller raises `last_pushed_cursor` in the same job) or given up. Frames queued above
    /// `upto` stay. Returns the number of frames removed.
    pub fn finish_push(&mut self, device_id: &str, upto: u64) -> Result<usize, StoreError> {
        let n = self
            .conn
            .prepare_cached("DELETE FROM push_queue WHERE device_id = ?1 AND cursor <= ?2")?
            .execute((device_id, to_i64(upto)))?;
        self.reset_push_attempts(device_id)?;
        Ok(n)
    }

    /// Clears the device's FCM token if it is still `token` (the backend reported it
    /// unregistered; a token registered since then is kept). Returns whether it was cleared.
    pub fn clear_fcm_token_if(&mut self, device_id: &str, token: &str) -> Result<bool, StoreError> {
        let n = self
            .conn
            .prepare_cached(
                "UPDATE devices SET fcm_token = NULL WHERE device_id = ?1 AND fcm_token = ?2",
            )?
            .execute((device_id, token))?;
        Ok(n > 0)
    }

    /// Sets (`Some`) or removes (`None`) the device's Web Push subscription.
    pub fn set_webpush(
        &mut self,
        device_id: &str,
        sub: Option<&WebPushRow>,
    ) -> Result<(), StoreError> {
        let n = self
            .conn
            .prepare_cached(
                "UPDATE devices SET webpush_endpoint = ?2, webpush_p256dh = ?3, webpush_auth = ?4 \
                 WHERE device_id = ?1",
            )?
            .execute((
                device_id,
                sub.map(|s| s.endpoint.as_str()),
                sub.map(|s| s.p256dh.as_str()),
                sub.map(|s| s.auth.as_str()),
            ))?;
        if n == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }

    /// Removes the device's Web Push subscription if its endpoint is still `endpoint` (the push
    /// service reported it gone; a subscription registered since then is kept). Returns whether
    /// it was removed.
    pub fn clear_webpush_if(
        &mut self,
        device_id: &str,
        endpoint: &str,
    ) -> Result<bool, StoreError> {
        let n = self
            .conn
            .prepare_cached(
                "UPDATE devices SET webpush_endpoint = NULL, webpush_p256dh = NULL, webpush_auth = NULL \
                 WHERE device_id = ?1 AND webpush_endpoint = ?2",
            )?
            .execute((device_id, endpoint))?;
        Ok(n > 0)
    }

    /// The device's queued frames, oldest cursor first, as seen inside this transaction.
    pub fn push_items(&self, device_id: &str) -> Result<Vec<PushItem>, StoreError> {
        items(self.conn, device_id)
    }
}

impl Store {
    /// The highest outbox cursor the push policy has looked at.
    pub async fn push_scan_position(&self) -> Result<u64, StoreError> {
        self.read(|c| scan_position(c)).await
    }

    /// Every device with queued frames, the longest waiting first.
    pub async fn push_pending(&self) -> Result<Vec<PushPending>, StoreError> {
        self.read(|c| pending(c)).await
    }

    /// The device's queued frames, oldest cursor first.
    pub async fn push_items(&self, device_id: &str) -> Result<Vec<PushItem>, StoreError> {
        let id = device_id.to_string();
        self.read(move |c| items(c, &id)).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::{NewFrame, StoreConfig};

    fn item(device: &str, cursor: u64) -> PushItem {
        PushItem {
            device_id: device.into(),
            cursor,
            frame_type: "message.stop".into(),
            kind: "reply".into(),
            chat_id: Some("default".into()),
            thread_id: None,
            message_id: Some(format!("m_{cursor}")),
            title: "replied".into(),
            preview: "hi".into(),
            queued_at: 1000 + cursor as i64,
        }
    }

    #[tokio::test]
    async fn the_queue_keeps_each_frame_once_and_goes_with_its_device() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            Store::open(StoreConfig::new(dir.path().join("t.db")), Arc::new(|_| {})).unwrap();
        // A new database starts scanning at its (empty) outbox head.
        assert_eq!(store.push_scan_position().await.unwrap(), 0);
        store
            .write(|tx| {
                tx.append(NewFrame {
                    frame_type: "message".into(),
                    json: "{}".into(),
                    ..NewFrame::default()
                })?;
                tx.upsert_device("phone", "Phone", "{}", 1)?;
                tx.upsert_device("tablet", "Tablet", "{}", 1)?;
                tx.set_push_tokens("phone", Some(Some("tok-1".into())), None)?;
                assert!(tx.queue_push(&item("phone", 1))?);
                assert!(!tx.queue_push(&item("phone", 1))?, "queued once");
                assert!(
                    !tx.queue_push(&item("ghost", 1))?,
                    "unknown devices are skipped"
                );
                tx.queue_push(&item("phone", 3))?;
                tx.queue_push(&item("tablet", 3))?;
                tx.set_push_scan_position(3)?;
                tx.set_push_scan_position(2)
            })
            .await
            .unwrap();
        assert_eq!(
            store.push_scan_position().await.unwrap(),
            3,
            "the position never goes back"
        );

        let attempt = store
            .write(|tx| tx.record_push_attempt("phone", 5000))
            .await
            .unwrap();
        assert_eq!(attempt, 1);
        let pending = store.push_pending().await.unwrap();
        assert_eq!(pending.len(), 2);
        let phone = pending.iter().find(|p| p.device_id == "phone").unwrap();
        assert_eq!(
            (
                phone.first_queued_at,
                phone.last_cursor,
                phone.attempts,
                phone.next_attempt_at
            ),
            (1001, 3, 1, Some(5000))
        );

        // Success: rows up to the pushed cursor go, the retry state too; later rows stay.
        store
            .write(|tx| {
                tx.queue_push(&item("phone", 7))?;
                tx.finish_push("phone", 3)?;
                tx.set_last_pushed("phone", 3)
            })
            .await
            .unwrap();
        let left: Vec<u64> = store
            .push_items("phone")
            .await
            .unwrap()
            .iter()
            .map(|i| i.cursor)
            .collect();
        assert_eq!(left, [7]);
        let phone = store
            .push_pending()
            .await
            .unwrap()
            .into_iter()
            .find(|p| p.device_id == "phone")
            .unwrap();
        assert_eq!((phone.attempts, phone.next_attempt_at), (0, None));
        assert_eq!(
            store
                .get_device("phone")
                .await
                .unwrap()
                .unwrap()
                .last_pushed_cursor,
            3
        );

        // A token is cleared only while it is still the one that was reported.
        let cleared = store
            .write(|tx| {
                let stale = tx.clear_fcm_token_if("phone", "tok-0")?;
                let current = tx.clear_fcm_token_if("phone", "tok-1")?;
                Ok((stale, current))
            })
            .await
            .unwrap();
        assert_eq!(cleared, (false, true));

        // A Web Push subscription is stored with the device and cleared only while unchanged.
        let sub = WebPushRow {
            endpoint: "https://push.example/1".into(),
            p256dh: "BK".into(),
            auth: "au".into(),
        };
        store
            .write({
                let sub = sub.clone();
                move |tx| tx.set_webpush("phone", Some(&sub))
            })
            .await
            .unwrap();
        assert_eq!(
            store.get_device("phone").await.unwrap().unwrap().webpush,
            Some(sub)
        );
        let cleared = store
            .write(|tx| {
                Ok((
                    tx.clear_webpush_if("phone", "https://push.example/0")?,
                    tx.clear_webpush_if("phone", "https://push.example/1")?,
                ))
            })
            .await
            .unwrap();
        assert_eq!(cleared, (false, true));
        assert_eq!(
            store.get_device("phone").await.unwrap().unwrap().webpush,
            None
        );
        assert!(matches!(
            store.write(|tx| tx.set_webpush("ghost", None)).await,
            Err(StoreError::NotFound)
        ));

        store.write(|tx| tx.delete_device("tablet")).await.unwrap();
        assert!(
            store.push_items("tablet").await.unwrap().is_empty(),
            "rows go with the device"
        );
        store.close();
    }
}
