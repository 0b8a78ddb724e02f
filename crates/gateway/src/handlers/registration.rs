//! A device's registration: its name and caps at `hello`, and its push registrations (FCM,
//! ntfy, Web Push) then and through `fcm.register`; `push.status` and `push.test` for how its
//! pushes fare.

use iris_protocol::{ClientCaps, ErrorCode, FcmRegister, Header, Hello, ResponseFrame};
use iris_store::{DeviceRow, StoreError};

use super::context::Context;
use crate::ids::now_ms;
use crate::state::Shared;
use crate::wire::{Reply, Result, WireError};

/// Stores the device's name, caps and push registration; returns its row, or `None` when the
/// device was revoked since its `hello` was checked (nothing is stored then).
pub async fn register_device(
    shared: &Shared,
    hello: &Hello,
) -> std::result::Result<Option<DeviceRow>, StoreError> {
    let device_id = hello.device_id.clone();
    let name = device_name(hello.device_name.as_deref(), &device_id);
    let caps = ClientCaps::to_stored(hello.caps.as_ref());
    let fcm = hello.fcm_token.clone();
    let ntfy = hello.ntfy_topic.clone();
    // A subscription that does not check out is left out rather than failing the connection.
    let private = private_push_endpoints(shared);
    let webpush = match hello.webpush.as_ref().map(|w| {
        w.as_ref()
            .map(|w| crate::push::webpush::parse_subscription(w, private))
    }) {
        Some(Some(Err(reason))) => {
            tracing::warn!(device_id = %device_id, %reason, "hello: ignoring an invalid webpush subscription");
            None
        }
        Some(Some(Ok(row))) => Some(row),
        Some(None) => Some(None),
        None => None,
    };
    shared
        .store
        .write(move |tx| {
            if crate::revoke::revoked_in(tx, &device_id)? {
                return Ok(None);
            }
            let row = tx.upsert_device(&device_id, &name, &caps, now_ms())?;
            if fcm.is_some() || ntfy.is_some() {
                tx.set_push_tokens(&device_id, fcm.map(Some), ntfy.map(Some))?;
            }
            if let Some(webpush) = webpush {
                tx.set_webpush(&device_id, webpush.as_ref())?;
            }
            Ok(Some(row))
        })
        .await
}

/// The most characters of a device's name that are kept.
pub const MAX_DEVICE_NAME: usize = 64;

/// A device's name as it is stored and shown: the name it sent cleaned like a chat's (control and
/// invisible format characters removed, trimmed) and cut to [`MAX_DEVICE_NAME`] characters; its
/// id when nothing is left.
fn device_name(sent: Option<&str>, device_id: &str) -> String {
    let name = crate::text::agent_line(sent.unwrap_or_default());
    let name: String = name.chars().take(MAX_DEVICE_NAME).collect();
    match name.trim_end() {
        "" => device_id.to_owned(),
        kept => kept.to_owned(),
    }
}

/// Whether Web Push endpoints at internal addresses are accepted (`allow_private_endpoints`).
fn private_push_endpoints(shared: &Shared) -> bool {
    shared
        .config
        .push
        .webpush
        .as_ref()
        .is_some_and(|w| w.allow_private_endpoints)
}

pub(super) async fn fcm_register(
    ctx: &Context,
    device_id: &str,
    header: &Header,
    req: FcmRegister,
) -> Result<Reply> {
    let device = device_id.to_owned();
    // An empty string removes a registration; an absent field leaves it as it is.
    let norm = |v: Option<String>| v.map(|s| Some(s).filter(|s| !s.is_empty()));
    let (fcm, ntfy) = (norm(req.fcm_token), norm(req.ntfy_topic));
    // `null` or an empty endpoint removes the Web Push subscription.
    let webpush = match req.webpush {
        Some(Some(sub)) => Some(
            crate::push::webpush::parse_subscription(&sub, private_push_endpoints(&ctx.shared))
                .map_err(|e| WireError::bad_request(format!("webpush: {e}")))?,
        ),
        Some(None) => Some(None),
        None => None,
    };
    ctx.shared
        .store
        .write(move |tx| {
            tx.set_push_tokens(&device, fcm, ntfy)?;
            match webpush {
                Some(webpush) => tx.set_webpush(&device, webpush.as_ref()),
                None => Ok(()),
            }
        })
        .await?;
    Ok(Reply::ack(header))
}

/// `push.status`: how pushes reach this device and how the last ones ended.
pub(super) async fn push_status(ctx: &Context, device_id: &str) -> Result<Reply> {
    let status = ctx.push.status(&ctx.shared, device_id).await?;
    Ok(Reply::Direct(
        ResponseFrame::PushStatus(status),
        Header::default(),
    ))
}

/// `push.test`: a test notification to this device now (at most one per
/// [`crate::push::TEST_INTERVAL`]), answered with its push status, the test's outcome first.
pub(super) async fn push_test(ctx: &Context, device_id: &str) -> Result<Reply> {
    if !ctx.push.take_test(device_id) {
        return Err(WireError::new(
            ErrorCode::RateLimited,
            format!(
                "one test notification per {} seconds",
                crate::push::TEST_INTERVAL.as_secs()
            ),
        ));
    }
    let status = ctx.push.test(&ctx.shared, device_id).await?;
    Ok(Reply::Direct(
        ResponseFrame::PushStatus(status),
        Header::default(),
    ))
}
