//! The last push to each device through each backend and how it ended (`push_log`): what the
//! owner sees in `devices list` and a device in its notification settings. One row per device
//! and backend, replaced by each outcome; the rows go with their device.

use rusqlite::Connection;

use crate::{Store, StoreError, WriteTx};

/// How the last push through one backend ended. `result` and `detail` are the gateway's words
/// (`delivered`, `retrying`, `rejected`, `expired`, `unreachable`), opaque to the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushLogEntry {
    /// The device pushed to.
    pub device_id: String,
    /// The backend (`fcm`, `ntfy`, `webpush`).
    pub backend: String,
    /// How it ended.
    pub result: String,
    /// What the backend said, when it said something worth showing.
    pub detail: Option<String>,
    /// When, unix milliseconds.
    pub at: i64,
    /// Whether it was a test notification the device asked for.
    pub test: bool,
}

impl WriteTx<'_> {
    /// Records how the latest push to `entry.device_id` through `entry.backend` ended. A device
    /// deleted meanwhile records nothing.
    pub fn record_push_result(&mut self, entry: &PushLogEntry) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "INSERT INTO push_log (device_id, backend, result, detail, at, test) \
                 SELECT ?1, ?2, ?3, ?4, ?5, ?6 WHERE EXISTS (SELECT 1 FROM devices WHERE device_id = ?1) \
                 ON CONFLICT (device_id, backend) DO UPDATE SET \
                 result = excluded.result, detail = excluded.detail, at = excluded.at, \
                 test = excluded.test",
            )?
            .execute((
                &entry.device_id,
                &entry.backend,
                &entry.result,
                &entry.detail,
                entry.at,
                entry.test,
            ))?;
        Ok(())
    }
}

impl Store {
    /// The last push of every device through every backend, by device, then backend.
    pub async fn push_log(&self) -> Result<Vec<PushLogEntry>, StoreError> {
        self.read(|c| log(c, None)).await
    }

    /// The last push of one device through each backend.
    pub async fn push_log_of(&self, device_id: &str) -> Result<Vec<PushLogEntry>, StoreError> {
        let id = device_id.to_owned();
        self.read(move |c| log(c, Some(&id))).await
    }
}

fn log(conn: &Connection, device_id: Option<&str>) -> Result<Vec<PushLogEntry>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT device_id, backend, result, detail, at, test FROM push_log \
         WHERE ?1 IS NULL OR device_id = ?1 ORDER BY device_id, backend",
    )?;
    let rows = stmt.query_map([device_id], |r| {
        Ok(PushLogEntry {
            device_id: r.get(0)?,
            backend: r.get(1)?,
            result: r.get(2)?,
            detail: r.get(3)?,
            at: r.get(4)?,
            test: r.get(5)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::StoreConfig;

    fn entry(device: &str, backend: &str, result: &str, at: i64) -> PushLogEntry {
        PushLogEntry {
            device_id: device.into(),
            backend: backend.into(),
            result: result.into(),
            detail: None,
            at,
            test: false,
        }
    }

    #[tokio::test]
    async fn the_latest_outcome_per_device_and_backend_is_kept_and_goes_with_its_device() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            Store::open(StoreConfig::new(dir.path().join("s.db")), Arc::new(|_| {})).unwrap();
        for id in ["phone", "tablet"] {
            let id = id.to_owned();
            store
                .write(move |tx| tx.upsert_device(&id, "Device", "{}", 1).map(|_| ()))
                .await
                .unwrap();
        }
        store
            .write(|tx| {
                tx.record_push_result(&entry("phone", "fcm", "retrying", 1))?;
                tx.record_push_result(&entry("phone", "fcm", "delivered", 2))?;
                tx.record_push_result(&entry("phone", "webpush", "expired", 3))?;
                tx.record_push_result(&entry("tablet", "ntfy", "delivered", 4))?;
                // A device that is not (or no longer) paired gets no row.
                tx.record_push_result(&entry("ghost", "fcm", "delivered", 5))
            })
            .await
            .unwrap();
        assert_eq!(
            store.push_log_of("phone").await.unwrap(),
            [
                entry("phone", "fcm", "delivered", 2),
                entry("phone", "webpush", "expired", 3)
            ]
        );
        assert_eq!(store.push_log().await.unwrap().len(), 3);
        store
            .write(|tx| tx.delete_device("phone").map(|_| ()))
            .await
            .unwrap();
        assert_eq!(
            store.push_log().await.unwrap(),
            [entry("tablet", "ntfy", "delivered", 4)]
        );
    }
}
