//! Dialing a gateway by its endpoint id through a relay (iroh): the same frames as the
//! WebSocket, in the transport binding of `iris_protocol::binding` on one bidirectional QUIC
//! stream.
//!
//! The task here plays the part of the WebSocket task in `conn.rs`: it takes the same commands
//! and hands over the same [`Incoming`] items, so [`crate::Client`] works the same over either.
//! Pings are answered as soon as they are read, as tungstenite answers them.

use std::time::Duration;

use iris_protocol::binding::{self, BoundFrame};
use iris_protocol::{decode, ServerFrame};
use iroh::endpoint::{presets, Connection, QuicTransportConfig, RecvStream, SendStream, VarInt};
use iroh::{Endpoint, EndpointAddr, EndpointId, RelayMode, RelayUrl, SecretKey};
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use crate::conn::{Command, Incoming};
use crate::ClientError;

/// The largest frame this client reads (the gateway's media chunks are at most 1 MiB).
const MAX_FRAME: usize = 16 * 1024 * 1024;

/// Where a gateway is dialed: its endpoint id and the relays it is registered at.
#[derive(Debug, Clone)]
pub struct Dial {
    /// The gateway's endpoint id (`iris-gateway reach` prints it).
    pub gateway: EndpointId,
    /// The relays, as in the gateway's `[reach] relays`.
    pub relays: Vec<RelayUrl>,
    /// This device's endpoint key; a new one for each dial when `None`. A relay that admits
    /// only known endpoints needs the same key every time.
    pub key: Option<SecretKey>,
    /// Only through the relay, never a direct path (as a browser, which reaches iroh only
    /// through a relay); otherwise a direct path is tried too, from every interface.
    pub relay_only: bool,
}

impl Dial {
    /// A dial of `gateway` through `relays`, with a new key, relay or direct.
    pub fn new(gateway: EndpointId, relays: Vec<RelayUrl>) -> Dial {
        Dial {
            gateway,
            relays,
            key: None,
            relay_only: false,
        }
    }
}

/// Opens the connection and its stream, and starts the task that owns them.
pub(crate) async fn open(
    dial: &Dial,
) -> Result<
    (
        mpsc::UnboundedSender<Command>,
        mpsc::UnboundedReceiver<Incoming>,
    ),
    ClientError,
> {
    let failed = |message: String| ClientError::Connect {
        url: format!("iroh:{}", dial.gateway),
        source: WsError::Io(std::io::Error::other(message)),
    };
    let mut builder = Endpoint::builder(presets::Minimal)
        .relay_mode(RelayMode::custom(dial.relays.clone()))
        .clear_address_lookup()
        .transport_config(
            QuicTransportConfig::builder()
                .max_concurrent_bidi_streams(VarInt::from_u32(0))
                .max_concurrent_uni_streams(VarInt::from_u32(0))
                .keep_alive_interval(Duration::from_secs(10))
                .build(),
        );
    if let Some(key) = &dial.key {
        builder = builder.secret_key(key.clone());
    }
    if dial.relay_only {
        builder = builder.clear_ip_transports();
    }
    let endpoint = builder.bind().await.map_err(|e| failed(e.to_string()))?;
    let addr = dial
        .relays
        .iter()
        .fold(EndpointAddr::new(dial.gateway), |addr, url| {
            addr.with_relay_url(url.clone())
        });
    let conn = match endpoint.connect(addr, binding::ALPN).await {
        Ok(conn) => conn,
        Err(e) => {
            endpoint.close().await;
            return Err(failed(e.to_string()));
        }
    };
    let (send, recv) = match conn.open_bi().await {
        Ok(streams) => streams,
        Err(e) => {
            endpoint.close().await;
            return Err(failed(e.to_string()));
        }
    };
    let (command_tx, command_rx) = mpsc::unbounded_channel();
    let (incoming_tx, incoming_rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        run(send, recv, command_rx, incoming_tx).await;
        close(conn, endpoint).await;
    });
    Ok((command_tx, incoming_rx))
}

/// Closes the connection, giving the gateway a moment to hear of it.
async fn close(conn: Connection, endpoint: Endpoint) {
    conn.close(VarInt::from_u32(0), b"");
    let _ = tokio::time::timeout(Duration::from_secs(1), endpoint.close()).await;
}

async fn run(
    mut send: SendStream,
    mut recv: RecvStream,
    mut commands: mpsc::UnboundedReceiver<Command>,
    incoming: mpsc::UnboundedSender<Incoming>,
) {
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut closing = false;
    loop {
        // Whole frames already read go first.
        match binding::decode(&buf, MAX_FRAME) {
            Ok(Some((frame, used))) => {
                buf.drain(..used);
                if !forward(&mut send, frame, &incoming).await {
                    return;
                }
                continue;
            }
            Ok(None) => {}
            Err(e) => {
                let _ = incoming.send(Incoming::Failed(WsError::Io(std::io::Error::other(
                    e.to_string(),
                ))));
                return;
            }
        }
        tokio::select! {
            // Cancel safe: a read that loses the race has read nothing.
            read = recv.read_buf(&mut buf) => match read {
                // The gateway finished its side: after its Close, or gone.
                Ok(0) => return,
                Ok(_) => {}
                Err(e) => {
                    let _ = incoming.send(Incoming::Failed(WsError::Io(e)));
                    return;
                }
            },
            command = commands.recv(), if !closing => match command {
                Some(Command::Send(message, reply)) => {
                    let _ = reply.send(write(&mut send, message).await);
                }
                Some(Command::Close(reply)) => {
                    // Keep reading afterwards: the gateway's answering Close ends the stream.
                    closing = true;
                    let _ = reply.send(write(&mut send, Message::Close(None)).await);
                    let _ = send.finish();
                }
                None => {
                    let _ = write(&mut send, Message::Close(None)).await;
                    let _ = send.finish();
                    return;
                }
            },
        }
    }
}

/// Hands one frame to the client (a ping is answered at once). Returns false when the
/// connection is over or the client gone.
async fn forward(
    send: &mut SendStream,
    frame: BoundFrame,
    incoming: &mpsc::UnboundedSender<Incoming>,
) -> bool {
    let item = match frame {
        BoundFrame::Text(raw) => {
            let decoded = Box::new(decode::<ServerFrame>(&raw));
            Incoming::Text { raw, decoded }
        }
        BoundFrame::Binary(bytes) => Incoming::Binary(bytes),
        BoundFrame::Ping(payload) => {
            if let Err(e) = send.write_all(&BoundFrame::Pong(payload).encode()).await {
                tracing::debug!("writing a pong failed: {e}");
            }
            return true;
        }
        BoundFrame::Pong(_) => return true,
        BoundFrame::Close(close) => {
            let _ = incoming.send(Incoming::Closed(close));
            return false;
        }
    };
    incoming.send(item).is_ok()
}

/// Writes one message of the client's in the binding.
async fn write(send: &mut SendStream, message: Message) -> Result<(), WsError> {
    let frame = match message {
        Message::Text(text) => BoundFrame::Text(text.to_string()),
        Message::Binary(bytes) => BoundFrame::Binary(bytes.to_vec()),
        Message::Ping(p) => BoundFrame::Ping(p.to_vec()),
        Message::Pong(p) => BoundFrame::Pong(p.to_vec()),
        Message::Close(close) => {
            BoundFrame::Close(close.map(|c| (u16::from(c.code), c.reason.to_string())))
        }
        Message::Frame(_) => return Ok(()),
    };
    send.write_all(&frame.encode())
        .await
        .map_err(|e| WsError::Io(e.into()))
}
