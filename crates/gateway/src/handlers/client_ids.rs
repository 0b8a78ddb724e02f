//! Requests a device names with its own id (`client_id` on `message.send`, `agent.steer` and
//! `message.retry`): the same id from the same device is taken once, on any connection and
//! across restarts.
//!
//! The id is kept with a digest of the request's content and what it made, in the transaction
//! that stores the request's effect. The same id again with the same content is answered with
//! `ack {duplicate:true}` naming the first request's message (and the cursor of its echo),
//! and nothing runs again; with other content it is `bad_request` and nothing changes.

use iris_protocol::{Ack, ErrorCode, Header, ResponseFrame, MAX_CLIENT_ID};
use iris_store::{ClientRequest, StoreError, WriteTx};
use sha2::{Digest, Sha256};

use super::context::Context;
use crate::outbox::from_stored;
use crate::wire::{Reply, Result, WireError};

/// A request's `client_id`, checked: at most [`MAX_CLIENT_ID`] characters, not empty.
pub(super) fn check(client_id: Option<&str>) -> Result<Option<&str>> {
    match client_id {
        None => Ok(None),
        Some("") => Err(WireError::bad_request("client_id is empty")),
        Some(id) if id.chars().count() > MAX_CLIENT_ID => Err(WireError::bad_request(format!(
            "client_id longer than {MAX_CLIENT_ID} characters"
        ))),
        Some(id) => Ok(Some(id)),
    }
}

/// The digest of a request's content: its kind and fields, each length-prefixed.
pub(super) fn digest(kind: &str, parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in std::iter::once(kind).chain(parts.iter().copied()) {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p.as_bytes());
    }
    hex::encode(h.finalize())
}

/// What an id was used for before.
pub(super) enum Prior {
    /// The same request: answer with what it made.
    Same(ClientRequest),
    /// Another request under the same id.
    Other,
}

/// Looks the id up inside the transaction that would take the request.
pub(super) fn prior(
    tx: &WriteTx<'_>,
    device_id: &str,
    client_id: &str,
    digest: &str,
) -> std::result::Result<Option<Prior>, StoreError> {
    Ok(tx
        .client_request(device_id, client_id)?
        .map(|r| match r.digest == digest {
            true => Prior::Same(r),
            false => Prior::Other,
        }))
}

/// The error for an id reused with other content.
pub(super) fn reused(client_id: &str) -> WireError {
    WireError::new(
        ErrorCode::BadRequest,
        format!("client_id {client_id:?} was used for a different request"),
    )
}

/// Answers a request whose id was found taken inside its transaction.
pub(super) async fn answer(
    ctx: &Context,
    header: &Header,
    prior: Prior,
    client_id: Option<String>,
) -> Result<Reply> {
    match prior {
        Prior::Same(first) => duplicate(ctx, header, first).await,
        Prior::Other => Err(reused(client_id.as_deref().unwrap_or(""))),
    }
}

/// Answers a repeated request: `ack {duplicate:true}` with what the first one made.
pub(super) async fn duplicate(
    ctx: &Context,
    header: &Header,
    first: ClientRequest,
) -> Result<Reply> {
    let message = match &first.message_id {
        Some(id) => ctx
            .shared
            .store
            .get_message(id)
            .await?
            .map(|row| from_stored(&row)),
        None => None,
    };
    let ack = Ack {
        ok: true,
        duplicate: true,
        message_id: first.message_id,
        cursor: first.cursor,
        message,
    };
    Ok(Reply::Direct(ResponseFrame::Ack(ack), header.clone()))
}

/// Answers from a prior request when there is one (read outside a transaction, so that a
/// repeated request costs no send budget); `None`: take the request.
pub(super) async fn answer_prior(
    ctx: &Context,
    device_id: &str,
    header: &Header,
    client_id: Option<&str>,
    digest: &str,
) -> Result<Option<Reply>> {
    let Some(cid) = client_id else {
        return Ok(None);
    };
    match ctx.shared.store.client_request(device_id, cid).await? {
        None => Ok(None),
        Some(first) if first.digest != digest => Err(reused(cid)),
        Some(first) => duplicate(ctx, header, first).await.map(Some),
    }
}

/// A request id taken before the request's effect ([`take`]), to [`release`] when it fails.
pub(super) struct Taken(Option<String>);

/// Takes the id for a request whose effect is not a stored message (`agent.steer`).
pub(super) async fn take(
    ctx: &Context,
    device_id: &str,
    client_id: Option<&str>,
    digest: String,
) -> Result<Taken> {
    take_with(ctx, device_id, client_id, digest, None, |_| Ok(())).await
}

/// Takes the id in one transaction with `effect`. Two requests racing with the same id: the
/// second one is refused as reused (it is answered as a duplicate once the first is done).
pub(super) async fn take_with<F>(
    ctx: &Context,
    device_id: &str,
    client_id: Option<&str>,
    digest: String,
    message_id: Option<String>,
    effect: F,
) -> Result<Taken>
where
    F: FnOnce(&mut WriteTx<'_>) -> std::result::Result<(), StoreError> + Send + 'static,
{
    let device = device_id.to_owned();
    let cid = client_id.map(str::to_owned);
    let taken = cid.clone();
    let fresh = ctx
        .shared
        .store
        .write(move |tx| {
            if let Some(cid) = &cid {
                if tx.client_request(&device, cid)?.is_some() {
                    return Ok(false);
                }
                let request = ClientRequest {
                    digest,
                    message_id,
                    cursor: None,
                };
                tx.insert_client_request(&device, cid, &request)?;
            }
            effect(tx)?;
            Ok(true)
        })
        .await?;
    match fresh {
        true => Ok(Taken(taken)),
        false => Err(reused(client_id.unwrap_or(""))),
    }
}

/// Forgets an id taken for a request that then failed, so that the device may send it again.
pub(super) async fn release(ctx: &Context, device_id: &str, taken: Taken) -> Result<()> {
    let Some(cid) = taken.0 else {
        return Ok(());
    };
    let device = device_id.to_owned();
    ctx.shared
        .store
        .write(move |tx| tx.delete_client_request(&device, &cid))
        .await?;
    Ok(())
}
