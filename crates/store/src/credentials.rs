//! Credentials: one-time pairing codes, per-device tokens and the address each device last
//! connected from.
//!
//! The store never sees a code or a token, only the hash the gateway computes of it (opaque
//! text here), so a copy of the database does not let anyone in.

use std::collections::HashMap;

use rusqlite::OptionalExtension;

use crate::{Store, StoreError, WriteTx};

/// A pairing code as the store knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PairingCodeRow {
    /// Hash of the code.
    pub code_hash: String,
    /// When it stops being accepted, unix milliseconds.
    pub expires_at: i64,
    /// When a device spent it, if one did.
    pub spent_at: Option<i64>,
}

/// A pairing code waiting to be used, as `pair list` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenCode {
    /// Hash of the code.
    pub code_hash: String,
    /// When it was made, unix milliseconds.
    pub created_at: i64,
    /// When it stops being accepted, unix milliseconds.
    pub expires_at: i64,
    /// The device that made it (`None`: the owner's command line).
    pub created_by: Option<String>,
}

/// The address a device last connected from, and when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceAddress {
    /// The address as the gateway saw it (the client address a trusted proxy named).
    pub addr: String,
    /// When, unix milliseconds.
    pub at: i64,
}

impl WriteTx<'_> {
    /// Records a new pairing code made by `created_by` (a device id; `None` for the owner's
    /// command line). Unspent codes that expired more than a day ago are forgotten; a spent
    /// one is kept, as the record of which device paired which ([`Self::devices_paired_by`]).
    pub fn insert_pairing_code(
        &mut self,
        code_hash: &str,
        created_at: i64,
        expires_at: i64,
        created_by: Option<&str>,
    ) -> Result<(), StoreError> {
        self.conn
            .prepare_cached("DELETE FROM pairing_codes WHERE expires_at < ?1 AND spent_at IS NULL")?
            .execute([created_at - 86_400_000])?;
        self.conn
            .prepare_cached(
                "INSERT INTO pairing_codes (code_hash, created_at, expires_at, created_by) \
                 VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute((code_hash, created_at, expires_at, created_by))?;
        Ok(())
    }

    /// How many pairing codes `created_by` made (`None`: the owner's command line) that are
    /// neither spent nor expired at `now`.
    pub fn open_pairing_codes(
        &self,
        now: i64,
        created_by: Option<&str>,
    ) -> Result<u64, StoreError> {
        let n: i64 = self
            .conn
            .prepare_cached(
                "SELECT count(*) FROM pairing_codes WHERE spent_at IS NULL AND expires_at > ?1 \
                 AND created_by IS ?2",
            )?
            .query_row((now, created_by), |r| r.get(0))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Deletes every pairing code a device made (spent or not) and the one it was paired
    /// with; returns how many unspent codes it had.
    pub fn delete_pairing_codes_of(&mut self, device_id: &str) -> Result<usize, StoreError> {
        let open = self
            .conn
            .prepare_cached("DELETE FROM pairing_codes WHERE created_by = ?1 AND spent_at IS NULL")?
            .execute([device_id])?;
        self.conn
            .prepare_cached("DELETE FROM pairing_codes WHERE created_by = ?1 OR spent_by = ?1")?
            .execute([device_id])?;
        Ok(open)
    }

    /// The devices paired with a code `device_id` made.
    pub fn devices_paired_by(&self, device_id: &str) -> Result<Vec<String>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT spent_by FROM pairing_codes \
             WHERE created_by = ?1 AND spent_by IS NOT NULL ORDER BY spent_at",
        )?;
        let rows = stmt
            .query_map([device_id], |r| r.get(0))?
            .collect::<Result<Vec<String>, _>>()?;
        Ok(rows)
    }

    /// Deletes the unspent pairing codes whose hash starts with `prefix` (hex); returns how many.
    pub fn delete_pairing_codes_by_prefix(&mut self, prefix: &str) -> Result<usize, StoreError> {
        Ok(self
            .conn
            .prepare_cached(
                "DELETE FROM pairing_codes WHERE spent_at IS NULL AND substr(code_hash, 1, ?2) = ?1",
            )?
            .execute((prefix, i64::try_from(prefix.len()).unwrap_or(0)))?)
    }

    /// Whether a device id is in use: a registered device, or one a device token names.
    pub fn device_id_taken(&self, device_id: &str) -> Result<bool, StoreError> {
        let n: i64 = self
            .conn
            .prepare_cached(
                "SELECT (SELECT count(*) FROM devices WHERE device_id = ?1) \
                 + (SELECT count(*) FROM device_tokens WHERE device_id = ?1)",
            )?
            .query_row([device_id], |r| r.get(0))?;
        Ok(n > 0)
    }

    /// Spends a pairing code for `device_id`: true when it was unspent and unexpired at `now`
    /// (and is now spent), false otherwise. Two devices racing for one code: one wins.
    pub fn spend_pairing_code(
        &mut self,
        code_hash: &str,
        now: i64,
        device_id: &str,
    ) -> Result<bool, StoreError> {
        let n = self
            .conn
            .prepare_cached(
                "UPDATE pairing_codes SET spent_at = ?2, spent_by = ?3 \
                 WHERE code_hash = ?1 AND spent_at IS NULL AND expires_at > ?2",
            )?
            .execute((code_hash, now, device_id))?;
        Ok(n == 1)
    }

    /// Records a device token (its hash) of `device_id`.
    pub fn insert_device_token(
        &mut self,
        token_hash: &str,
        device_id: &str,
        now: i64,
    ) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "INSERT INTO device_tokens (token_hash, device_id, created_at) VALUES (?1, ?2, ?3)",
            )?
            .execute((token_hash, device_id, now))?;
        Ok(())
    }

    /// Deletes every token of a device; returns how many there were.
    pub fn delete_device_tokens(&mut self, device_id: &str) -> Result<usize, StoreError> {
        Ok(self
            .conn
            .prepare_cached("DELETE FROM device_tokens WHERE device_id = ?1")?
            .execute([device_id])?)
    }

    /// Remembers the address a registered device connected from.
    pub fn set_device_address(
        &mut self,
        device_id: &str,
        addr: &str,
        now: i64,
    ) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "INSERT INTO device_addresses (device_id, addr, at) VALUES (?1, ?2, ?3) \
                 ON CONFLICT(device_id) DO UPDATE SET addr = excluded.addr, at = excluded.at",
            )?
            .execute((device_id, addr, now))?;
        Ok(())
    }
}

/// The `meta` key set when a device is revoked: from then on, as while any device holds a
/// device token, the shared token signs in only on the gateway's own machine.
pub const SHARED_TOKEN_LOCAL_KEY: &str = "shared_token_local_only";

impl Store {
    /// Whether a device was ever paired with a code or revoked: some device holds a device
    /// token, or [`SHARED_TOKEN_LOCAL_KEY`] is set.
    pub async fn shared_token_local_only(&self) -> Result<bool, StoreError> {
        self.read(|c| {
            Ok(c.prepare_cached(
                "SELECT EXISTS(SELECT 1 FROM device_tokens) \
                 OR EXISTS(SELECT 1 FROM meta WHERE key = ?1)",
            )?
            .query_row([SHARED_TOKEN_LOCAL_KEY], |r| r.get(0))?)
        })
        .await
    }

    /// The device a token hash belongs to.
    pub async fn device_of_token(&self, token_hash: &str) -> Result<Option<String>, StoreError> {
        let hash = token_hash.to_owned();
        self.read(move |c| {
            Ok(
                c.prepare_cached("SELECT device_id FROM device_tokens WHERE token_hash = ?1")?
                    .query_row([hash], |r| r.get(0))
                    .optional()?,
            )
        })
        .await
    }

    /// A pairing code by its hash.
    pub async fn pairing_code(
        &self,
        code_hash: &str,
    ) -> Result<Option<PairingCodeRow>, StoreError> {
        let hash = code_hash.to_owned();
        self.read(move |c| {
            Ok(c.prepare_cached(
                "SELECT code_hash, expires_at, spent_at FROM pairing_codes WHERE code_hash = ?1",
            )?
            .query_row([hash], |r| {
                Ok(PairingCodeRow {
                    code_hash: r.get(0)?,
                    expires_at: r.get(1)?,
                    spent_at: r.get(2)?,
                })
            })
            .optional()?)
        })
        .await
    }

    /// The pairing codes neither spent nor expired at `now`, oldest first.
    pub async fn open_codes(&self, now: i64) -> Result<Vec<OpenCode>, StoreError> {
        self.read(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT code_hash, created_at, expires_at, created_by FROM pairing_codes \
                 WHERE spent_at IS NULL AND expires_at > ?1 ORDER BY created_at, code_hash",
            )?;
            let rows = stmt
                .query_map([now], |r| {
                    Ok(OpenCode {
                        code_hash: r.get(0)?,
                        created_at: r.get(1)?,
                        expires_at: r.get(2)?,
                        created_by: r.get(3)?,
                    })
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
    }

    /// Which device's pairing code paired each device paired by another device's code:
    /// (paired device, the device that made the code). Devices paired with a code of the owner's
    /// command line, or signed in with the shared token, are not in it.
    pub async fn paired_by(&self) -> Result<HashMap<String, String>, StoreError> {
        self.read(|c| {
            let mut stmt = c.prepare_cached(
                "SELECT spent_by, created_by FROM pairing_codes \
                 WHERE spent_by IS NOT NULL AND created_by IS NOT NULL",
            )?;
            let rows = stmt
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?
                .collect::<Result<HashMap<_, _>, _>>()?;
            Ok(rows)
        })
        .await
    }

    /// The last address of every device that has one.
    pub async fn device_addresses(&self) -> Result<HashMap<String, DeviceAddress>, StoreError> {
        self.read(|c| {
            let mut stmt = c.prepare_cached("SELECT device_id, addr, at FROM device_addresses")?;
            let rows = stmt
                .query_map([], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        DeviceAddress {
                            addr: r.get(1)?,
                            at: r.get(2)?,
                        },
                    ))
                })?
                .collect::<Result<HashMap<_, _>, _>>()?;
            Ok(rows)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::StoreConfig;

    fn open(dir: &std::path::Path) -> Store {
        Store::open(
            StoreConfig {
                path: dir.join("t.db"),
                group_commit: false,
                readers: 1,
            },
            Arc::new(|_| {}),
        )
        .expect("open")
    }

    #[tokio::test]
    async fn a_code_is_spent_once_and_only_before_it_expires() {
        let dir = tempfile::tempdir().expect("dir");
        let store = open(dir.path());
        store
            .write(|tx| {
                tx.insert_pairing_code("a", 0, 1000, None)?;
                tx.insert_pairing_code("b", 0, 1000, Some("d"))
            })
            .await
            .expect("insert");
        let spend = |hash: &'static str, now| {
            let store = store.clone();
            async move {
                store
                    .write(move |tx| tx.spend_pairing_code(hash, now, "d"))
                    .await
                    .expect("spend")
            }
        };
        assert!(spend("a", 10).await);
        assert!(!spend("a", 11).await, "spent twice");
        assert!(!spend("b", 1000).await, "expired");
        assert!(!spend("c", 10).await, "unknown");
        let row = store.pairing_code("a").await.expect("read").expect("row");
        assert_eq!(row.spent_at, Some(10));
    }

    #[tokio::test]
    async fn tokens_survive_reopening_and_go_with_their_device() {
        let dir = tempfile::tempdir().expect("dir");
        let store = open(dir.path());
        store
            .write(|tx| tx.insert_device_token("h", "dev", 1))
            .await
            .expect("insert");
        store.close();
        let store = open(dir.path());
        assert_eq!(
            store.device_of_token("h").await.expect("read").as_deref(),
            Some("dev")
        );
        let n = store
            .write(|tx| tx.delete_device_tokens("dev"))
            .await
            .expect("delete");
        assert_eq!(n, 1);
        assert_eq!(store.device_of_token("h").await.expect("read"), None);
    }

    #[tokio::test]
    async fn a_spent_code_keeps_who_paired_whom_until_its_maker_goes() {
        let dir = tempfile::tempdir().expect("dir");
        let store = open(dir.path());
        store
            .write(|tx| {
                tx.insert_pairing_code("a", 0, 1000, Some("phone"))?;
                tx.insert_pairing_code("b", 0, 1000, Some("phone"))?;
                tx.spend_pairing_code("a", 10, "spare")?;
                // Days later: the unspent code is forgotten, the spent one kept.
                tx.insert_pairing_code("c", 10 * 86_400_000, 10 * 86_400_000 + 1000, None)?;
                assert_eq!(tx.devices_paired_by("phone")?, ["spare"]);
                Ok(())
            })
            .await
            .expect("write");
        assert!(
            store.pairing_code("b").await.expect("read").is_none(),
            "expired long ago"
        );
        assert!(
            store.pairing_code("a").await.expect("read").is_some(),
            "spent: kept"
        );
        let by = store.paired_by().await.expect("read");
        assert_eq!(by.get("spare").map(String::as_str), Some("phone"));
        assert_eq!(by.len(), 1);
        store
            .write(|tx| {
                tx.delete_pairing_codes_of("phone")?;
                assert!(tx.devices_paired_by("phone")?.is_empty());
                Ok(())
            })
            .await
            .expect("revoked");
    }
}
