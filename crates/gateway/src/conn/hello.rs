//! The start of a connection: waiting for a valid `hello` (anything else is answered with an
//! error and a close), then registering the device and answering `hello.ack` and `status`.

use std::net::IpAddr;
use std::sync::Arc;

use iris_protocol::{
    decode, encode, ClientFrame, DecodeError, ErrorCode, ErrorPayload, GatewayState, Header, Hello,
    HelloAck, RequestId, ServerCaps, ServerFrame, Status,
};
use tokio::time::{timeout_at, Instant as TokioInstant};

use super::budget::ReadBudget;
use super::close::close_code;
use super::duplex::{Duplex, Frame, RecvError};
use super::live::Conn;
use crate::guard::{AuthFailure, Credential};
use crate::handlers::{self, Context};
use crate::hub::{CloseReason, ConnQueue};

/// A `hello` that passed: its request id, the hello (with the session's device id), and the
/// device token issued to it when it presented a pairing code.
struct Admitted {
    id: Option<RequestId>,
    hello: Hello,
    device_token: Option<String>,
}

/// Why a connection is refused before it has a session: the error frame and the close code.
struct Refusal {
    id: Option<RequestId>,
    code: ErrorCode,
    message: String,
    close: u16,
}

impl Refusal {
    fn new(id: Option<RequestId>, code: ErrorCode, message: impl Into<String>, close: u16) -> Self {
        Refusal {
            id,
            code,
            message: message.into(),
            close,
        }
    }

    /// The answer to a device that was revoked.
    fn revoked(id: Option<RequestId>) -> Self {
        Refusal::new(id, ErrorCode::Auth, CloseReason::REVOKED, close_code::AUTH)
    }

    /// The answer to anything but a good `hello`.
    fn hello_first(id: Option<RequestId>) -> Self {
        Refusal::new(
            id,
            ErrorCode::Auth,
            "hello required first",
            close_code::AUTH,
        )
    }
}

/// Who is at the other end of a connection, as the guard counts and the owner sees it.
#[derive(Debug, Clone)]
pub struct Peer {
    /// The address failures and connections are counted under (the client's, behind a trusted
    /// proxy; for a connection through a relay, one made from the device's endpoint id).
    pub ip: IpAddr,
    /// The connection comes from the gateway's own machine, not through a proxy (see
    /// [`crate::guard::is_local`]): the shared token is compared even while the address is
    /// throttled, and still signs in after a device was paired.
    pub local: bool,
    /// Where the device connected from, as `devices list` shows it.
    pub shown: String,
}

impl Peer {
    /// A peer known by its IP address.
    pub fn at(ip: IpAddr, local: bool) -> Peer {
        Peer {
            ip,
            local,
            shown: ip.to_string(),
        }
    }
}

/// Serves one connection until it closes.
pub async fn serve(ctx: Arc<Context>, mut socket: Duplex, peer: Peer, budget: ReadBudget) {
    let Some(admitted) = await_hello(&ctx, &mut socket, &peer, &budget).await else {
        return;
    };
    // The device is in: frames up to the hard limit may come now.
    budget.lift();
    if ctx.shutdown.is_cancelled() {
        let status = ServerFrame::Status(Status {
            state: GatewayState::Restarting,
        });
        let _ = socket
            .send(Frame::Text(encode(&Header::default(), &status).into()))
            .await;
        socket
            .close(close_code::GOING_AWAY, "gateway restarting")
            .await;
        return;
    }
    let conn_id = ctx.shared.hub.next_conn_id();
    let mut conn = match attach(&ctx, socket, conn_id, admitted, &peer).await {
        Ok(Some(conn)) => conn,
        Ok(None) => return,
        Err(e) => {
            tracing::warn!(error = %e, "hello failed");
            return;
        }
    };
    let reason = conn.run().await;
    // An upload still open when the device went away leaves nothing behind.
    conn.media.close().await;
    ctx.shared.hub.detach(conn.queue());
    // `devices list` shows when a device was last seen: its connect or, here, its disconnect.
    let (device, now) = (conn.device_id.clone(), crate::ids::now_ms());
    let _ = ctx
        .shared
        .store
        .write(move |tx| tx.touch(&device, now))
        .await;
    tracing::info!(device_id = %conn.device_id, conn_id, reason = ?reason, "connection closed");
}

/// Waits for a valid `hello`. Anything else is answered with an error and a close.
async fn await_hello(
    ctx: &Context,
    socket: &mut Duplex,
    peer: &Peer,
    budget: &ReadBudget,
) -> Option<Admitted> {
    let limits = &ctx.shared.config.limits;
    let deadline = TokioInstant::now() + limits.hello_timeout;
    let text = loop {
        let msg = match timeout_at(deadline, socket.recv()).await {
            Err(_) => {
                let msg = format!("no hello within {} ms", limits.hello_timeout.as_millis());
                let refusal = Refusal::new(None, ErrorCode::Auth, msg, close_code::AUTH);
                reject(socket, refusal).await;
                return None;
            }
            Ok(None) => return None,
            Ok(Some(Err(e))) => {
                // A stranger may not make the gateway buffer a large frame before `hello`: the
                // socket stops reading at the limit (see `ReadBudget`).
                let refusal = if budget.exceeded() {
                    let limit = limits.pre_hello_bytes / 1024;
                    let msg = format!("more than {limit} KiB before hello");
                    Refusal::new(None, ErrorCode::BadRequest, msg, close_code::TOO_BIG)
                } else if let RecvError::Refused(close, msg) = e {
                    Refusal::new(None, ErrorCode::BadRequest, msg, close)
                } else {
                    return None;
                };
                reject(socket, refusal).await;
                return None;
            }
            Ok(Some(Ok(msg))) => msg,
        };
        match msg {
            Frame::Text(t) => break t,
            Frame::Ping(_) | Frame::Pong(_) => continue,
            Frame::Close(_) => return None,
            Frame::Binary(_) => {
                reject(socket, Refusal::hello_first(None)).await;
                return None;
            }
        }
    };
    match check_hello(ctx, &text, peer.ip, peer.local).await {
        Ok(hello) => Some(hello),
        Err(refusal) => {
            reject(socket, refusal).await;
            None
        }
    }
}

/// Why the shared token is refused from another machine.
const SHARED_LOCAL_ONLY: &str =
    "once a device has been paired or revoked, the shared token signs in only on the \
gateway's own machine; pair this device with a pairing code";

/// Checks the first frame: not throttled, not too large, a `hello` of this protocol, a valid
/// credential, a usable device id, a device that was not revoked; then spends a pairing code.
/// `local`: the connection comes from the gateway's own machine, not forwarded by a proxy.
async fn check_hello(
    ctx: &Context,
    text: &str,
    ip: IpAddr,
    local: bool,
) -> Result<Admitted, Refusal> {
    let guard = &ctx.guard;
    // From the gateway's own machine the throttle never withholds the shared token: whoever
    // fails there (the local agent, say) cannot lock the owner out. Failures still count.
    let blocked = || !local && guard.auth_blocked(ip);
    // A failure is counted, or refused as throttled when this address already failed too often.
    // While an address is throttled the shared token is not even compared, so guessing it gets
    // no answer at all (see `Guard::authenticate`); device tokens and pairing codes (256 random
    // bits, beyond guessing) are still looked up, so a stranger hammering from the owner's
    // address (or from behind the same proxy or NAT) cannot lock a paired device out. Wrong
    // device tokens and wrong or spent codes count as failures like a wrong token.
    let failed = |refusal: Refusal| {
        if blocked() {
            let msg = "too many failed attempts; try again later";
            let close = close_code::AUTH;
            return Refusal::new(refusal.id, ErrorCode::RateLimited, msg, close);
        }
        guard.record_auth_failure(ip);
        refusal
    };
    if text.len() > ctx.shared.config.limits.max_frame_bytes {
        let msg = "frame too large";
        return Err(failed(Refusal::new(
            None,
            ErrorCode::BadRequest,
            msg,
            close_code::AUTH,
        )));
    }
    let decoded = match decode::<ClientFrame>(text) {
        Ok(d) => d,
        Err(DecodeError {
            id,
            version_mismatch: true,
            message,
            ..
        }) => {
            let close = close_code::VERSION;
            return Err(Refusal::new(id, ErrorCode::Unsupported, message, close));
        }
        Err(e) => {
            if let Some(msg) = iris_protocol::ClientCaps::error_in_hello(text) {
                let refusal = Refusal::new(e.id, ErrorCode::BadRequest, msg, close_code::AUTH);
                return Err(failed(refusal));
            }
            return Err(failed(Refusal::hello_first(e.id)));
        }
    };
    let id = decoded.header.id;
    let ClientFrame::Hello(mut hello) = decoded.body else {
        return Err(failed(Refusal::hello_first(id)));
    };
    let now = crate::ids::now_ms();
    let throttled = blocked();
    let credential = match guard
        .authenticate(&ctx.shared.store, &hello.token, now, throttled)
        .await
    {
        Ok(c) => c,
        Err(AuthFailure::Refused(msg)) => {
            tracing::warn!(addr = %ip, reason = msg, "hello with a wrong token");
            return Err(failed(Refusal::new(
                id,
                ErrorCode::Auth,
                msg,
                close_code::AUTH,
            )));
        }
        Err(AuthFailure::Store(e)) => return Err(cannot_check(id, &e)),
    };
    if credential == Credential::Shared && !local {
        match ctx.shared.store.shared_token_local_only().await {
            Ok(false) => {}
            Ok(true) => {
                tracing::warn!(addr = %ip, "the shared token from another machine after pairing");
                return Err(failed(Refusal::new(
                    id,
                    ErrorCode::Auth,
                    SHARED_LOCAL_ONLY,
                    close_code::AUTH,
                )));
            }
            Err(e) => return Err(cannot_check(id, &e)),
        }
    }
    // A device token names its device: the session is that device's, whatever id it claims.
    if let Credential::Device(device) = &credential {
        hello.device_id.clone_from(device);
    }
    check_caps(&id, &hello)?;
    if !valid_device_id(&hello.device_id) {
        let msg = "device_id must be 1-128 visible characters: no spaces, control characters or invisible ones (zero-width, bidi)";
        return Err(Refusal::new(
            id,
            ErrorCode::BadRequest,
            msg,
            close_code::AUTH,
        ));
    }
    // `iris-gateway devices revoke` blocks the id for good (see devices.rs).
    not_revoked(&ctx.shared, &hello.device_id, &id).await?;
    let device_token = match credential {
        Credential::Code(code_hash) => Some(redeem(ctx, id.clone(), &code_hash, &hello, ip).await?),
        Credential::Shared | Credential::Device(_) => None,
    };
    Ok(Admitted {
        id,
        hello,
        device_token,
    })
}

/// The `hello`'s capabilities: a protocol this gateway speaks, and a focus it can keep.
fn check_caps(id: &Option<RequestId>, hello: &Hello) -> Result<(), Refusal> {
    let Some(caps) = hello.caps.as_ref() else {
        return Ok(());
    };
    if let Some(min) = caps.min_protocol {
        if min > iris_protocol::PROTOCOL_VERSION {
            let msg = format!("client needs protocol v{min}; this gateway speaks v1");
            return Err(Refusal::new(
                id.clone(),
                ErrorCode::Unsupported,
                msg,
                close_code::VERSION,
            ));
        }
    }
    if let Some(why) = caps
        .focus
        .as_deref()
        .and_then(iris_protocol::LaneRef::focus_error)
    {
        return Err(Refusal::new(
            id.clone(),
            ErrorCode::BadRequest,
            why,
            close_code::AUTH,
        ));
    }
    Ok(())
}

/// Spends the pairing code a `hello` presented and issues the device its token (both durable
/// before `hello.ack` goes out). Another device that spent it first wins.
async fn redeem(
    ctx: &Context,
    id: Option<RequestId>,
    code_hash: &str,
    hello: &Hello,
    ip: IpAddr,
) -> Result<String, Refusal> {
    let store = &ctx.shared.store;
    use crate::credentials::Redeemed;
    match crate::credentials::redeem_code(store, code_hash, &hello.device_id).await {
        Ok(Redeemed::Token(token)) => {
            tracing::info!(device_id = %hello.device_id, addr = %ip, "device paired with a pairing code");
            Ok(token)
        }
        Ok(Redeemed::Gone) => {
            ctx.guard.record_auth_failure(ip);
            let msg = "pairing code already used";
            Err(Refusal::new(id, ErrorCode::Auth, msg, close_code::AUTH))
        }
        Ok(Redeemed::Taken) => {
            tracing::warn!(device_id = %hello.device_id, addr = %ip, "pairing code presented under a paired device's id");
            let msg = "device_id is already paired; a pairing code makes a new device";
            Err(Refusal::new(id, ErrorCode::Auth, msg, close_code::AUTH))
        }
        Err(e) => Err(cannot_check(id, &e)),
    }
}

/// The refusal when the store cannot say whether a credential or a device is good: the device
/// stays out and tries again later.
fn cannot_check(id: Option<RequestId>, e: &iris_store::StoreError) -> Refusal {
    tracing::error!(error = %e, "could not check a device's credential");
    let msg = "the gateway cannot check this device now; try again";
    Refusal::new(id, ErrorCode::Internal, msg, close_code::GOING_AWAY)
}

/// A device id is printed and compared as it is: 1–128 bytes of characters that each show, so
/// that no id looks like another ("phone" and "phone\u{200B}").
fn valid_device_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| !c.is_control() && !c.is_whitespace() && !crate::text::is_format(c))
}

async fn reject(socket: &mut Duplex, refusal: Refusal) {
    let frame = ServerFrame::Error(ErrorPayload {
        code: refusal.code,
        message: refusal.message.clone(),
    });
    let _ = socket
        .send(Frame::Text(
            encode(&Header::default().with_id(refusal.id), &frame).into(),
        ))
        .await;
    socket.close(refusal.close, &refusal.message).await;
}

/// Refuses a device that was revoked. When the store cannot say, the device stays out: a
/// revoked phone must never slip in on an error.
async fn not_revoked(
    shared: &crate::state::Shared,
    device_id: &str,
    id: &Option<RequestId>,
) -> Result<(), Refusal> {
    match crate::admin::devices::is_revoked(&shared.store, device_id).await {
        Ok(false) => Ok(()),
        Ok(true) => {
            tracing::warn!(device_id = %device_id, "hello from a revoked device");
            Err(Refusal::revoked(id.clone()))
        }
        Err(e) => Err(cannot_check(id.clone(), &e)),
    }
}

/// Registers the device, attaches to the hub and answers `hello.ack` + `status online`; `None`
/// when the device was revoked meanwhile (refused like a `hello` of a revoked device).
async fn attach(
    ctx: &Arc<Context>,
    mut socket: Duplex,
    conn_id: u64,
    admitted: Admitted,
    peer: &Peer,
) -> Result<Option<Conn>, iris_store::StoreError> {
    let Admitted {
        id: hello_id,
        hello,
        device_token,
    } = admitted;
    let shared = &ctx.shared;
    let Some(confirmed) = register(shared, &hello, peer).await? else {
        reject(&mut socket, Refusal::revoked(hello_id)).await;
        return Ok(None);
    };
    let queue = ConnQueue::new(
        conn_id,
        hello.device_id.clone(),
        shared.config.limits.max_queued_frames,
        shared.metrics.clone(),
    );
    if let Some(lanes) = hello.caps.as_ref().and_then(|c| c.focus.clone()) {
        queue.set_focus(lanes);
    }
    let attached = shared.hub.attach(queue.clone());
    // A revocation since the registration found no connection of the device to close; one
    // from now on finds this one. So look again before the device reads a byte.
    if let Err(refusal) = not_revoked(shared, &hello.device_id, &hello_id).await {
        shared.hub.detach(&queue);
        reject(&mut socket, refusal).await;
        return Ok(None);
    }
    let head = attached.head;
    if let Some(old) = attached.replaced {
        old.close(CloseReason::Replaced);
    }
    // Read after the connection was attached: every message up to `head` counts in the
    // directory's activity and previews, and every later one reaches the device live.
    let channels = match handlers::channel_directory(shared).await {
        Ok(channels) => channels,
        Err(e) => {
            shared.hub.detach(&queue);
            return Err(e);
        }
    };
    let appends = hello
        .caps
        .as_ref()
        .and_then(|c| c.append_updates)
        .unwrap_or(false);
    tracing::info!(device_id = %hello.device_id, conn_id, sync_cursor = confirmed.0, head, appends, "device connected");
    let ack = HelloAck {
        sync_cursor: confirmed.0,
        last_pushed_cursor: confirmed.1,
        channels,
        head_cursor: head,
        device_id: Some(hello.device_id.clone()),
        device_token,
        // Read after the connection was attached: what follows reaches it live.
        running: crate::agent::running_turns(&shared.store)
            .await
            .unwrap_or_default(),
        open_pickers: attached.open_pickers,
        server_caps: server_caps(ctx),
    };
    let status = ServerFrame::Status(Status {
        state: GatewayState::Online,
    });
    let frames = [
        encode(
            &Header::default().with_id(hello_id),
            &ServerFrame::HelloAck(ack),
        ),
        encode(&Header::default(), &status),
    ];
    for f in frames {
        if socket.send(Frame::Text(f.into())).await.is_err() {
            shared.hub.detach(&queue);
            return Err(iris_store::StoreError::Closed);
        }
    }
    Ok(Some(Conn::attached(
        ctx.clone(),
        conn_id,
        hello.device_id,
        socket,
        queue,
        (head, confirmed.0),
        appends,
    )))
}

/// Registers the device and records where it connected from: the cursor it proved it holds
/// and its last pushed cursor, or `None` when it was revoked.
async fn register(
    shared: &crate::state::Shared,
    hello: &Hello,
    peer: &Peer,
) -> Result<Option<(u64, u64)>, iris_store::StoreError> {
    // A watermark the device proved but the writer task has not stored yet counts. Asked before
    // the store: what is no longer unstored by then is stored, and the store read sees it.
    let unstored = shared.hub.unstored_watermark(&hello.device_id);
    let Some(device) = handlers::register_device(shared, hello).await? else {
        return Ok(None);
    };
    let confirmed = device.confirmed_cursor.max(unstored.unwrap_or(0));
    // `devices list` shows where a device last connected from.
    let (id, addr, now) = (
        hello.device_id.clone(),
        peer.shown.clone(),
        crate::ids::now_ms(),
    );
    shared
        .store
        .write(move |tx| tx.set_device_address(&id, &addr, now))
        .await?;
    Ok(Some((confirmed, device.last_pushed_cursor)))
}

/// What this gateway offers, in `hello.ack`.
fn server_caps(ctx: &Context) -> ServerCaps {
    let shared = &ctx.shared;
    ServerCaps {
        streaming: true,
        reasoning: true,
        tools: true,
        media: true,
        search: true,
        push: shared.config.push.caps(),
        pickers: true,
        webpush_key: shared.config.push.webpush_key(),
        agents: ctx.agents.names(),
        voice: ctx.agents.voice_on(),
        speech: ctx.media.speaks(),
    }
}
