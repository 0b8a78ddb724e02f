//! What a device learns of its own pushes (`push.status`), a test notification sent on request
//! (`push.test`), and how each push's outcome is recorded for `devices list`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use iris_protocol::{PushOutcome, PushStatus};
use iris_store::{PushLogEntry, StoreError, WriteTx};

use super::backends::{Backends, Route};
use super::outcome::Outcome;
use super::policy::{Kind, PushContent};
use crate::ids::now_ms;
use crate::state::Shared;

/// The longest backend message kept with an outcome.
const MAX_DETAIL: usize = 200;
/// A device gets at most one test notification in this time: each one is a request to a third
/// party (FCM, ntfy, a browser's push service) on the owner's account.
pub const TEST_INTERVAL: Duration = Duration::from_secs(10);

/// When each device last asked for a test notification, forgotten after [`TEST_INTERVAL`].
#[derive(Default)]
pub(crate) struct TestTimes(HashMap<String, Instant>);

impl TestTimes {
    /// Takes the device's test if it had none in the last [`TEST_INTERVAL`].
    pub(crate) fn take(&mut self, device_id: &str, now: Instant) -> bool {
        self.0
            .retain(|_, at| now.duration_since(*at) < TEST_INTERVAL);
        if self.0.contains_key(device_id) {
            return false;
        }
        self.0.insert(device_id.to_owned(), now);
        true
    }
}

/// How a push through `backend` ended, as `devices list` and `push.status` show it.
pub(crate) fn log_entry(
    device_id: &str,
    backend: &str,
    outcome: &Outcome,
    test: bool,
) -> PushLogEntry {
    let (result, detail) = match outcome {
        Outcome::Delivered => ("delivered", None),
        Outcome::Retry { reason, .. } => ("retrying", Some(reason.as_str())),
        Outcome::Unregistered => (
            "expired",
            Some("the registration was no longer valid and was removed"),
        ),
        Outcome::Rejected(reason) => ("rejected", Some(reason.as_str())),
    };
    entry(device_id, backend, result, detail, test)
}

/// An outcome of now.
fn entry(
    device_id: &str,
    backend: &str,
    result: &str,
    detail: Option<&str>,
    test: bool,
) -> PushLogEntry {
    PushLogEntry {
        device_id: device_id.to_owned(),
        backend: backend.to_owned(),
        result: result.to_owned(),
        detail: detail.map(|d| crate::text::head(d, MAX_DETAIL)),
        at: now_ms(),
        test,
    }
}

/// Removes the registration `route` used, which its backend said is gone (if it is still the
/// device's: one registered meanwhile stays).
pub(crate) async fn forget_registration(
    shared: &Shared,
    device_id: &str,
    route: &Route,
) -> Result<(), StoreError> {
    let id = device_id.to_owned();
    let route = route.clone();
    shared
        .store
        .write(move |tx| clear_registration(tx, &id, &route).map(|_| ()))
        .await
}

/// [`forget_registration`] inside a transaction; whether a registration was removed.
pub(crate) fn clear_registration(
    tx: &mut WriteTx<'_>,
    device_id: &str,
    route: &Route,
) -> Result<bool, StoreError> {
    match route {
        Route::Fcm(token) => tx.clear_fcm_token_if(device_id, token),
        Route::WebPush(sub) => tx.clear_webpush_if(device_id, &sub.endpoint),
        Route::Ntfy(_) => Ok(false),
    }
}

/// A push given up after every attempt.
pub(crate) fn unreachable_entry(device_id: &str, backend: &str, attempts: u32) -> PushLogEntry {
    let detail = format!("given up after {attempts} attempts");
    entry(device_id, backend, "unreachable", Some(&detail), false)
}

/// Records an outcome; a failure to record is logged, never passed on (the push itself stands).
pub(crate) async fn record(shared: &Shared, entry: PushLogEntry) {
    if let Err(e) = shared
        .store
        .write(move |tx| tx.record_push_result(&entry))
        .await
    {
        tracing::warn!(error = %e, "could not record a push outcome");
    }
}

/// A device's registrations, its route and its last pushes.
pub(crate) async fn status(
    backends: &Backends,
    shared: &Shared,
    device_id: &str,
) -> Result<PushStatus, StoreError> {
    let mut last: Vec<PushOutcome> = shared
        .store
        .push_log_of(device_id)
        .await?
        .into_iter()
        .map(|e| PushOutcome {
            backend: e.backend,
            result: e.result,
            detail: e.detail,
            at: e.at,
            test: e.test,
        })
        .collect();
    last.sort_by_key(|o| std::cmp::Reverse(o.at));
    // Read after the log: an outcome is recorded after its effect (a registration removed).
    let device = shared.store.get_device(device_id).await?;
    let (registered, route) = match &device {
        Some(d) => (
            backends.registered(d),
            backends.route(d).map(|r| r.backend().to_owned()),
        ),
        None => (Vec::new(), None),
    };
    Ok(PushStatus {
        registered,
        route,
        last,
    })
}

/// Sends the device a test notification now, through its route, whether or not it is
/// connected; records the outcome and answers the device's push status with it. A device with
/// no route gets its status unchanged (`route` absent says why).
pub(crate) async fn test(
    backends: &Backends,
    shared: &Shared,
    device_id: &str,
) -> Result<PushStatus, StoreError> {
    let Some(device) = shared.store.get_device(device_id).await? else {
        return status(backends, shared, device_id).await;
    };
    if let Some(route) = backends.route(&device) {
        let content = PushContent {
            // The app skips notifying synced frames up to this cursor: a test moves nothing.
            cursor: device.last_pushed_cursor,
            count: 1,
            frame_type: "push.test".to_owned(),
            kind: Kind::Notice,
            chat_id: None,
            thread_id: None,
            message_id: None,
            title: "Test notification".to_owned(),
            body: "Notifications from Iris reach this device.".to_owned(),
            collapse_key: "iris-test".to_owned(),
            action: None,
        };
        let outcome = backends.send(&route, &content).await;
        tracing::info!(
            device_id,
            backend = route.backend(),
            ?outcome,
            "test push sent"
        );
        let mut entry = log_entry(device_id, route.backend(), &outcome, true);
        match outcome {
            // A test is sent once: what would be retried is reported as not reaching the device.
            Outcome::Retry { .. } => entry.result = "unreachable".to_owned(),
            // Gone for a test as for any push: the registration is removed.
            Outcome::Unregistered => forget_registration(shared, device_id, &route).await?,
            Outcome::Delivered | Outcome::Rejected(_) => {}
        }
        record(shared, entry).await;
    }
    status(backends, shared, device_id).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_test_per_device_in_the_interval() {
        let mut times = TestTimes::default();
        let t0 = Instant::now();
        assert!(times.take("phone", t0));
        assert!(!times.take("phone", t0 + Duration::from_secs(9)));
        assert!(
            times.take("tablet", t0 + Duration::from_secs(9)),
            "per device"
        );
        assert!(times.take("phone", t0 + TEST_INTERVAL));
        assert_eq!(times.0.len(), 2, "old entries are forgotten");
    }
}
