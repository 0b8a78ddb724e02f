//! Upload quotas: the bytes of uploads that are open or stored but not yet used by any message,
//! per device and in total. Open uploads are counted by their declared size from
//! `media.upload.start` on; stored ones come from the store. Both caps are checked when an upload
//! starts, so a refused upload never writes a byte.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use iris_protocol::ErrorCode;

use crate::wire::WireError;

/// The declared bytes of the uploads open right now.
#[derive(Debug, Default)]
pub(super) struct OpenUploads {
    inner: Arc<Mutex<Open>>,
}

#[derive(Debug, Default)]
struct Open {
    per_device: HashMap<String, u64>,
    total: u64,
}

/// What is already held: unused stored uploads, of the device and of everyone.
#[derive(Debug, Clone, Copy)]
pub(super) struct Held {
    pub device: u64,
    pub total: u64,
}

/// The caps.
#[derive(Debug, Clone, Copy)]
pub(super) struct Caps {
    pub device: u64,
    pub total: u64,
}

/// An open upload's share of the quota, given back when it is dropped (the upload stored,
/// refused, failed or abandoned).
#[derive(Debug)]
pub struct Reservation {
    open: Arc<Mutex<Open>>,
    device: String,
    size: u64,
}

impl OpenUploads {
    /// Reserves `size` bytes for an upload of `device`, or refuses with `media_too_large` when
    /// the device's or the gateway's unsent uploads would exceed their cap.
    pub(super) fn reserve(
        &self,
        device: &str,
        size: u64,
        held: Held,
        caps: Caps,
    ) -> Result<Reservation, WireError> {
        let mut open = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let device_open = open.per_device.get(device).copied().unwrap_or(0);
        let device_after = held.device.saturating_add(device_open).saturating_add(size);
        if device_after > caps.device {
            return Err(refusal("this device", caps.device));
        }
        let total_after = held.total.saturating_add(open.total).saturating_add(size);
        if total_after > caps.total {
            return Err(refusal("the gateway", caps.total));
        }
        *open.per_device.entry(device.to_owned()).or_default() += size;
        open.total += size;
        Ok(Reservation {
            open: self.inner.clone(),
            device: device.to_owned(),
            size,
        })
    }
}

fn refusal(whose: &str, cap: u64) -> WireError {
    WireError::new(
        ErrorCode::MediaTooLarge,
        format!(
            "upload quota: uploads not yet sent in a message may hold at most {cap} bytes for \
             {whose}; send or wait for earlier uploads (unused ones expire) and try again"
        ),
    )
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.total = open.total.saturating_sub(self.size);
        if let Some(n) = open.per_device.get_mut(&self.device) {
            *n = n.saturating_sub(self.size);
            if *n == 0 {
                open.per_device.remove(&self.device);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_count_until_dropped() {
        let open = OpenUploads::default();
        let caps = Caps {
            device: 100,
            total: 150,
        };
        let none = Held {
            device: 0,
            total: 0,
        };
        let a = open.reserve("a", 60, none, caps).expect("fits");
        assert!(open.reserve("a", 41, none, caps).is_err(), "device cap");
        assert!(open.reserve("b", 91, none, caps).is_err(), "total cap");
        let exact = open
            .reserve("b", 90, none, caps)
            .expect("exactly the cap fits");
        drop(exact);
        drop(a);
        let b = open.reserve("b", 90, none, caps).expect("room again");
        let held = Held {
            device: 0,
            total: 20,
        };
        assert!(
            open.reserve("c", 50, held, caps).is_err(),
            "stored bytes count"
        );
        drop(b);
        assert!(open.inner.lock().unwrap().per_device.is_empty());
    }
}
