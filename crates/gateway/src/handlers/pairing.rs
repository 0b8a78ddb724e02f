//! `pair.create`: a signed-in device asks for a one-time pairing code for another device.

use iris_protocol::{ErrorCode, Header, PairCode, ResponseFrame};

use super::context::Context;
use crate::credentials::{self, CodeError, Link};
use crate::wire::{Reply, Result, WireError};

/// Creates a pairing code valid for `auth.pairing_code_minutes` and answers it with its link
/// and QR code. At most [`credentials::MAX_OPEN_CODES`] of one device may wait at once
/// (`rate_limited`); they belong to the device and are deleted when it is revoked.
pub(super) async fn create(ctx: &Context, device: &str, header: &Header) -> Result<Reply> {
    if header.id.is_none() {
        return Err(WireError::bad_request("pair.create needs an id"));
    }
    let config = &ctx.shared.config;
    let issued = credentials::create_code(
        &ctx.shared.store,
        config.auth.pairing_code_ttl,
        Some(device),
    )
    .await
    .map_err(|e| match e {
        CodeError::TooMany => WireError::new(ErrorCode::RateLimited, e.to_string()),
        CodeError::Store(e) => WireError::from(e),
    })?;
    let link = Link::new(config, &issued.code);
    let frame = ResponseFrame::PairCode(PairCode {
        qr_svg: link.qr_svg(),
        url: link.web_url,
        ws: link.ws_url,
        code: issued.code,
        expires_at: issued.expires_at,
    });
    Ok(Reply::Direct(frame, Header::default()))
}
