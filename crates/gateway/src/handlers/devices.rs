//! `devices.list` and `device.revoke`: a signed-in device sees the paired devices and revokes
//! itself or one paired through its codes (see `crate::revoke`), both answered by
//! `devices.list`.

use std::collections::HashMap;

use iris_protocol::{DeviceInfo, DeviceList, DeviceRevoke, ErrorCode, Header, ResponseFrame};

use super::context::Context;
use crate::revoke::{self, Refused};
use crate::wire::{Reply, Result, WireError};

/// Longest device id a `hello` accepts, in characters.
const MAX_DEVICE_ID_CHARS: usize = 128;

/// `devices.list`: every paired device, as `device` sees it.
pub(super) async fn list(ctx: &Context, device: &str, header: &Header) -> Result<Reply> {
    if header.id.is_none() {
        return Err(WireError::bad_request("devices.list needs an id"));
    }
    let devices = devices(ctx, device).await?;
    Ok(answer(DeviceList {
        devices,
        revoked: Vec::new(),
    }))
}

/// `device.revoke`: revokes `req.device_id` with the devices paired through its codes, when it
/// is `device` itself or one of its descendants; anything else is refused (`auth`) and changes
/// nothing. Answered by the devices that remain.
pub(super) async fn revoke(
    ctx: &Context,
    device: &str,
    header: &Header,
    req: DeviceRevoke,
) -> Result<Reply> {
    if header.id.is_none() {
        return Err(WireError::bad_request("device.revoke needs an id"));
    }
    let target = req.device_id;
    if target.is_empty() || target.chars().count() > MAX_DEVICE_ID_CHARS {
        return Err(WireError::bad_request(format!(
            "device_id must be 1-{MAX_DEVICE_ID_CHARS} characters"
        )));
    }
    let revoked = match revoke::revoke_as(&ctx.shared, device, &target).await? {
        Ok(r) => r,
        Err(Refused::Unknown) => {
            return Err(WireError::new(
                ErrorCode::NotFound,
                format!("no paired device {target:?}"),
            ))
        }
        Err(Refused::NotYours) => {
            tracing::warn!(device_id = %device, target = %target, "device.revoke refused");
            return Err(WireError::new(
                ErrorCode::Auth,
                "a device may revoke only itself and the devices paired through its codes",
            ));
        }
    };
    let devices = devices(ctx, device).await?;
    let mut ids = vec![target];
    ids.extend(revoked.also);
    Ok(answer(DeviceList {
        devices,
        revoked: ids,
    }))
}

fn answer(list: DeviceList) -> Reply {
    Reply::Direct(ResponseFrame::DevicesList(list), Header::default())
}

/// The paired devices, the longest paired first, with what `device` may do to each.
async fn devices(ctx: &Context, device: &str) -> Result<Vec<DeviceInfo>> {
    let store = &ctx.shared.store;
    let paired_by = store.paired_by().await?;
    let rows = store.list_devices().await?;
    let mut devices: Vec<DeviceInfo> = rows
        .iter()
        .map(|row| DeviceInfo {
            device_id: row.device_id.clone(),
            name: row.name.clone(),
            paired_at: row.created_at,
            last_seen: row.last_seen,
            online: ctx.shared.hub.is_online(&row.device_id),
            this_device: row.device_id == device,
            paired_by: paired_by.get(&row.device_id).cloned(),
            push: row.push_backends(),
            may_revoke: descends_from(&paired_by, &row.device_id, device),
        })
        .collect();
    devices.sort_by(|a, b| (a.paired_at, &a.device_id).cmp(&(b.paired_at, &b.device_id)));
    Ok(devices)
}

/// Whether `device` is `ancestor` or was paired through its codes (or theirs…). Pairing makes a
/// new device from an existing one, so the chain has no loop; it is bounded all the same.
fn descends_from(paired_by: &HashMap<String, String>, device: &str, ancestor: &str) -> bool {
    let mut at = device;
    for _ in 0..=paired_by.len() {
        if at == ancestor {
            return true;
        }
        match paired_by.get(at) {
            Some(parent) => at = parent,
            None => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_descends_from_itself_and_whoever_paired_its_ancestors() {
        let by: HashMap<String, String> =
            [("b", "a"), ("c", "b"), ("d", "a"), ("x", "y"), ("y", "x")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
        assert!(descends_from(&by, "a", "a"));
        assert!(descends_from(&by, "c", "a"));
        assert!(descends_from(&by, "c", "b"));
        assert!(
            !descends_from(&by, "b", "c"),
            "a parent is not a descendant"
        );
        assert!(!descends_from(&by, "d", "b"), "nor a sibling's child");
        assert!(!descends_from(&by, "x", "a"), "a loop ends");
    }
}
