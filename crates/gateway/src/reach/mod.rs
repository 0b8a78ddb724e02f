//! Away from home: the gateway's iroh endpoint, registered at the relays the owner runs
//! (`[reach] relays`), and the connections devices dial to it by its endpoint id.
//!
//! Each connection carries one bidirectional QUIC stream in the transport binding of
//! `iris_protocol::binding`, served by the same `hello` and connection loop as a WebSocket
//! ([`crate::conn::serve`] over a [`Duplex`]). It takes a place under the same caps as a TCP
//! connection ([`Admission`]) before its handshake, and its reads count against the same
//! budget before `hello`. The endpoint is built from iroh's `Minimal` preset with no address
//! lookup: it contacts the configured relays and the devices that dial it, nothing else.

pub mod key;

use std::net::{IpAddr, Ipv6Addr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use iroh::endpoint::{presets, Connection, Incoming, IncomingAddr, QuicTransportConfig, VarInt};
use iroh::{Endpoint, EndpointId, RelayMode, RelayUrl};
use tokio::time::{timeout, timeout_at, Instant};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::reach::ReachConfig;
use crate::conn::{Duplex, Peer};
use crate::handlers::Context;
use crate::listener::{Admission, Metered, Ticket};
use crate::metrics::Metrics;

/// How often an idle connection is kept alive (under QUIC's idle timeout); the connection's own
/// pings run on top.
const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// How long a device gets to read the last frames (a close, say) before its connection goes.
const LINGER: Duration = Duration::from_secs(5);

/// Why the endpoint cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ReachError {
    /// The key file cannot be read or made.
    #[error(transparent)]
    Key(#[from] key::KeyError),
    /// The endpoint's sockets cannot be bound.
    #[error("cannot start the endpoint for relays: {0}")]
    Bind(String),
}

/// The gateway's endpoint, registered at its relays.
#[derive(Debug, Clone)]
pub struct Reach {
    endpoint: Endpoint,
    relays: Vec<RelayUrl>,
}

/// The QUIC settings of both ends: one bidirectional stream per connection (the device's), no
/// unidirectional ones, kept alive while idle.
pub fn transport_config() -> QuicTransportConfig {
    QuicTransportConfig::builder()
        .max_concurrent_bidi_streams(VarInt::from_u32(1))
        .max_concurrent_uni_streams(VarInt::from_u32(0))
        .keep_alive_interval(KEEP_ALIVE)
        .build()
}

/// An endpoint with `key` that uses only `relays`: no discovery service, no DNS publishing,
/// no public relay. `bind`: the UDP address to bind (all interfaces when `None`).
pub async fn endpoint(
    key: iroh::SecretKey,
    relays: Vec<RelayUrl>,
    alpns: Vec<Vec<u8>>,
    bind: Option<std::net::SocketAddr>,
) -> Result<Endpoint, ReachError> {
    let mut builder = Endpoint::builder(presets::Minimal)
        .secret_key(key)
        .relay_mode(RelayMode::custom(relays))
        .clear_address_lookup()
        .alpns(alpns)
        .transport_config(transport_config());
    if let Some(addr) = bind {
        builder = builder
            .clear_ip_transports()
            .bind_addr(addr)
            .map_err(|e| ReachError::Bind(e.to_string()))?;
    }
    builder
        .bind()
        .await
        .map_err(|e| ReachError::Bind(e.to_string()))
}

impl Reach {
    /// The endpoint of the gateway whose data dir is `dir`, or `None` when no relay is
    /// configured (then nothing is started and nothing contacted).
    pub async fn bind(config: &ReachConfig, dir: &Path) -> Result<Option<Reach>, ReachError> {
        if !config.enabled() {
            return Ok(None);
        }
        let (key, made) = key::load_or_create(dir)?;
        if made {
            tracing::info!(endpoint_id = %key.public(), "made the gateway's endpoint key");
        }
        let endpoint = endpoint(
            key,
            config.relays.clone(),
            vec![iris_protocol::binding::ALPN.to_vec()],
            config.bind,
        )
        .await?;
        Ok(Some(Reach {
            endpoint,
            relays: config.relays.clone(),
        }))
    }

    /// The endpoint id devices dial.
    pub fn id(&self) -> EndpointId {
        self.endpoint.id()
    }

    /// The relays the endpoint registers at.
    pub fn relays(&self) -> &[RelayUrl] {
        &self.relays
    }

    /// Accepts connections until `stop`, each served as a device connection in `tasks`.
    pub fn spawn(
        &self,
        ctx: Arc<Context>,
        admission: Arc<Admission>,
        tasks: TaskTracker,
        stop: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let endpoint = self.endpoint.clone();
        let relays = self.relays.clone();
        let (online, registered) = (endpoint.clone(), stop.clone());
        // Said once, when a relay first knows the endpoint (the owner's sign that devices away
        // can dial it); a relay that is down leaves the LAN path as it was.
        tokio::spawn(async move {
            tokio::select! {
                _ = online.online() => tracing::info!(relays = ?relays, endpoint_id = %online.id(), "registered at a relay: reachable from away"),
                _ = registered.cancelled() => {}
            }
        });
        tokio::spawn(async move {
            loop {
                let incoming = tokio::select! {
                    _ = stop.cancelled() => break,
                    incoming = endpoint.accept() => match incoming {
                        Some(incoming) => incoming,
                        None => break,
                    },
                };
                let peer = peer_of(&incoming.remote_addr());
                // A place under the caps before the handshake: a flood of QUIC connections
                // costs what a flood of TCP connections does.
                let Some(ticket) = admission.admit(peer.ip) else {
                    tracing::debug!(peer = %peer.shown, "connection through a relay over the cap refused");
                    Metrics::inc(&ctx.shared.metrics.connections_refused);
                    incoming.refuse();
                    continue;
                };
                tasks.spawn(serve(ctx.clone(), incoming, ticket, peer));
            }
        })
    }

    /// Closes the endpoint (its relay registrations and any connection left).
    pub async fn close(&self) {
        self.endpoint.close().await;
    }
}

/// Serves one dialed connection: the handshake and the device's stream within `hello_timeout`
/// each, then the connection as any other.
async fn serve(ctx: Arc<Context>, incoming: Incoming, ticket: Ticket, peer: Peer) {
    let limits = &ctx.shared.config.limits;
    let budget = ticket.budget();
    // Until `hello` succeeds the stream may read only a little, as a WebSocket.
    budget.limit_to(limits.pre_hello_bytes as u64);
    let deadline = Instant::now() + limits.hello_timeout;
    let connecting = async {
        let conn = incoming.accept().ok()?.await.ok()?;
        let (send, recv) = conn.accept_bi().await.ok()?;
        Some((conn, send, recv))
    };
    let Ok(Some((conn, send, recv))) = timeout_at(deadline, connecting).await else {
        tracing::debug!(peer = %peer.shown, "a connection through a relay opened no stream in time");
        return;
    };
    let max = crate::conn::max_message_bytes(limits.max_frame_bytes);
    let duplex = Duplex::framed(Metered::new(recv, ticket), send, max);
    crate::conn::serve(ctx, duplex, peer, budget).await;
    linger(conn).await;
}

/// Gives the device a moment to read what was written last and close the connection itself;
/// then it is closed from here.
async fn linger(conn: Connection) {
    let _ = timeout(LINGER, conn.closed()).await;
    conn.close(VarInt::from_u32(0), b"");
}

/// Who dialed: through a relay, known by its endpoint id (the relay authenticated it), directly
/// by its address. A device through a relay is counted under an address made from its id (in
/// the unique-local range `fd00::/8`, one /64 per id), so its failures and connections count
/// alone; the caps in total and for connections without a device count every one.
fn peer_of(addr: &IncomingAddr) -> Peer {
    match addr {
        IncomingAddr::Ip(addr) => Peer {
            ip: addr.ip(),
            local: false,
            shown: format!("{addr} (direct)"),
        },
        IncomingAddr::Relay { url, endpoint_id } => Peer {
            ip: id_address(endpoint_id),
            local: false,
            shown: format!("{} via {url}", endpoint_id.fmt_short()),
        },
        other => Peer {
            ip: IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            local: false,
            shown: format!("{other:?}"),
        },
    }
}

/// The address an endpoint id is counted under: `fd` and the id's first seven bytes, then zeros.
fn id_address(id: &EndpointId) -> IpAddr {
    let mut bytes = [0u8; 16];
    bytes[0] = 0xfd;
    bytes[1..8].copy_from_slice(&id.as_bytes()[..7]);
    IpAddr::V6(Ipv6Addr::from(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_endpoint_id_is_counted_under_its_own_prefix() {
        let a = iroh::SecretKey::from_bytes(&[1; 32]).public();
        let b = iroh::SecretKey::from_bytes(&[2; 32]).public();
        let (ka, kb) = (id_address(&a), id_address(&b));
        assert_ne!(
            crate::guard::throttle_key(ka),
            crate::guard::throttle_key(kb)
        );
        assert_eq!(crate::guard::throttle_key(ka), ka);
        assert!(!ka.is_loopback());
    }
}
