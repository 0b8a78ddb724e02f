//! Revoking devices, the one path for the owner's `devices revoke` and a device's own
//! `device.revoke`.
//!
//! A revoked device is removed from the store together with its push registration, its device
//! tokens (so its token stops working whatever id it claims), the pairing codes it made that are
//! still unspent (so a kept code cannot sign it in again) and its scheduled jobs, and its id is
//! remembered (`meta` key `revoked_device:<id>`): a later `hello` with that id is refused with
//! `error auth` and close code 4401. Its live connection is told so the same way, and gets nothing
//! more. The devices paired through a code it made go with it, and
//! theirs, and so on: whoever held a revoked device could have paired another for later. In a
//! running gateway their live connections are then closed and their action tokens forgotten.
//! A revocation also keeps the shared token to the gateway's own machine from then on (`meta`
//! key `shared_token_local_only`; see `conn/hello.rs`): a revoked device may have read it.
//!
//! A device may revoke itself and its descendants (the devices paired through its codes, and
//! theirs), nothing else: a stolen device must not be able to lock the owner out.
//!
//! Ground floor: imports nothing of the gateway above it.

use serde::{Deserialize, Serialize};

use iris_store::{Store, StoreError, WriteTx};

use crate::hub::CloseReason;
use crate::state::Shared;

/// The `meta` key prefix of revoked device ids.
const REVOKED_PREFIX: &str = "revoked_device:";

/// What a revocation did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revoked {
    /// The device was registered (false: only its id was blocked).
    pub existed: bool,
    /// The devices paired through a code it made (and so on), revoked with it.
    #[serde(default)]
    pub also: Vec<String>,
    /// A live connection of it was closed.
    pub disconnected: bool,
    /// Whether a running gateway did it (false: the store was changed directly).
    pub by_gateway: bool,
}

/// Why a device may not revoke another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// No such paired device.
    Unknown,
    /// It is neither the asking device nor paired through its codes.
    NotYours,
}

/// Whether this device id has been revoked.
pub async fn is_revoked(store: &Store, device_id: &str) -> Result<bool, StoreError> {
    Ok(store
        .get_meta(&format!("{REVOKED_PREFIX}{device_id}"))
        .await?
        .is_some())
}

/// Whether this device id has been revoked, within a write: a registration that checks here
/// cannot bring back a device revoked since its `hello` was checked.
pub fn revoked_in(tx: &WriteTx<'_>, device_id: &str) -> Result<bool, StoreError> {
    Ok(tx
        .get_meta(&format!("{REVOKED_PREFIX}{device_id}"))?
        .is_some())
}

/// The devices paired through a code `device_id` made, and through theirs, and so on.
pub fn descendants(tx: &WriteTx<'_>, device_id: &str) -> Result<Vec<String>, StoreError> {
    let mut found: Vec<String> = Vec::new();
    let mut next = tx.devices_paired_by(device_id)?;
    while let Some(id) = next.pop() {
        if id == device_id || found.contains(&id) {
            continue;
        }
        next.extend(tx.devices_paired_by(&id)?);
        found.push(id);
    }
    Ok(found)
}

/// Revokes a device inside a write transaction, with its descendants ([`descendants`]).
/// Returns whether the device was registered, and the ids of the others revoked with it.
pub fn revoke_in(
    tx: &mut WriteTx<'_>,
    device_id: &str,
    now: i64,
) -> Result<(bool, Vec<String>), StoreError> {
    let also = descendants(tx, device_id)?;
    let existed = revoke_one(tx, device_id, now)?;
    for id in &also {
        revoke_one(tx, id, now)?;
    }
    Ok((existed, also))
}

/// Revokes one device: removes its row (and with it the push registration) and remembers the
/// id. Returns whether the device was registered.
fn revoke_one(tx: &mut WriteTx<'_>, device_id: &str, now: i64) -> Result<bool, StoreError> {
    let existed = tx.delete_device(device_id)?;
    tx.delete_device_tokens(device_id)?;
    // Codes it made die with it: a kept code must not sign a revoked device in again. So do
    // the scheduled jobs it added.
    tx.delete_pairing_codes_of(device_id)?;
    tx.delete_cron_jobs_of(device_id)?;
    tx.set_meta(&format!("{REVOKED_PREFIX}{device_id}"), &now.to_string())?;
    // A revoked device may have read the shared token: from now on it signs in only on the
    // gateway's own machine.
    tx.set_meta(iris_store::SHARED_TOKEN_LOCAL_KEY, &now.to_string())?;
    Ok(existed)
}

/// Revokes a device in a running gateway, as the owner: the store first (so a reconnect is
/// refused), then the live connections of it and its descendants are closed.
pub async fn revoke_live(shared: &Shared, device_id: &str) -> Result<Revoked, StoreError> {
    let id = device_id.to_owned();
    let now = crate::ids::now_ms();
    let (existed, also) = shared
        .store
        .write(move |tx| revoke_in(tx, &id, now))
        .await?;
    Ok(disconnect(shared, device_id, existed, also))
}

/// Revokes `target` as the device `by` asks: only `by` itself or one of its descendants, checked
/// in the transaction that revokes. A refusal changes nothing.
pub async fn revoke_as(
    shared: &Shared,
    by: &str,
    target: &str,
) -> Result<Result<Revoked, Refused>, StoreError> {
    let (by_id, id) = (by.to_owned(), target.to_owned());
    let now = crate::ids::now_ms();
    let done = shared
        .store
        .write(move |tx| {
            if !tx.device_id_taken(&id)? {
                return Ok(Err(Refused::Unknown));
            }
            if id != by_id && !descendants(tx, &by_id)?.contains(&id) {
                return Ok(Err(Refused::NotYours));
            }
            revoke_in(tx, &id, now).map(Ok)
        })
        .await?;
    Ok(done.map(|(existed, also)| {
        let revoked = disconnect(shared, target, existed, also);
        tracing::info!(by = %by, device_id = %target, "device revoked by a device");
        revoked
    }))
}

/// Closes the connections of a device just revoked and of those revoked with it, and forgets
/// their action tokens.
fn disconnect(shared: &Shared, device_id: &str, existed: bool, also: Vec<String>) -> Revoked {
    let disconnected = shared.hub.kick(device_id, CloseReason::Revoked);
    shared.actions.forget_device(device_id);
    for other in &also {
        shared.hub.kick(other, CloseReason::Revoked);
        shared.actions.forget_device(other);
    }
    tracing::info!(device_id = %device_id, existed, disconnected, also = ?also, "device revoked");
    Revoked {
        existed,
        also,
        disconnected,
        by_gateway: true,
    }
}
