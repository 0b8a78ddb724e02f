//! The connection task: the single owner of a client's WebSocket, reading and writing it.
//!
//! Keeping both directions in one task (instead of splitting the socket) means the task can
//! flush the automatic Pong right after a Ping arrives. The gateway confirms delivery with
//! Ping/Pong round trips, so a client that only reads must still answer promptly.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use iris_protocol::{decode, DecodeError, Decoded, ServerFrame};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// The socket type both the client and the raw connection use.
pub(crate) type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// The WebSocket settings of both connection types. tungstenite zero-fills its whole read buffer
/// (128 KiB by default) before every read, which costs more than the frames themselves when one
/// process runs hundreds of devices (tests, the load tool); 16 KiB holds any chat frame, and
/// larger frames (media chunks) still arrive whole, in more reads.
pub(crate) fn ws_config() -> Option<tokio_tungstenite::tungstenite::protocol::WebSocketConfig> {
    Some(
        tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
            .read_buffer_size(16 * 1024),
    )
}

/// What the task saw on the wire, in arrival order.
pub(crate) enum Incoming {
    /// A text frame, already decoded (or the reason it could not be). Boxed: frames are large
    /// and the other variants small.
    Text {
        raw: String,
        decoded: Box<Result<Decoded<ServerFrame>, DecodeError>>,
    },
    /// A binary frame (media bytes).
    Binary(Vec<u8>),
    /// The server's Close frame.
    Closed(Option<(u16, String)>),
    /// The connection broke without a close handshake.
    Failed(WsError),
}

/// What the client asks the task to do. Each carries a reply so that write errors surface.
pub(crate) enum Command {
    Send(Message, oneshot::Sender<Result<(), WsError>>),
    Close(oneshot::Sender<Result<(), WsError>>),
}

/// The (code, reason) of a Close frame.
pub(crate) fn close_info(frame: Option<CloseFrame>) -> Option<(u16, String)> {
    frame.map(|f| (u16::from(f.code), f.reason.to_string()))
}

/// Starts the task for an open socket.
pub(crate) fn spawn(
    ws: Ws,
) -> (
    mpsc::UnboundedSender<Command>,
    mpsc::UnboundedReceiver<Incoming>,
) {
    let (command_tx, command_rx) = mpsc::unbounded_channel();
    let (incoming_tx, incoming_rx) = mpsc::unbounded_channel();
    tokio::spawn(run(ws, command_rx, incoming_tx));
    (command_tx, incoming_rx)
}

async fn run(
    mut ws: Ws,
    mut commands: mpsc::UnboundedReceiver<Command>,
    incoming: mpsc::UnboundedSender<Incoming>,
) {
    loop {
        tokio::select! {
            message = ws.next() => match message {
                // The stream ends after the close handshake or once the server dropped the socket.
                None => break,
                Some(Err(e)) => {
                    let _ = incoming.send(Incoming::Failed(e));
                    break;
                }
                Some(Ok(message)) => {
                    if !forward(&mut ws, message, &incoming).await {
                        break;
                    }
                }
            },
            command = commands.recv() => match command {
                Some(Command::Send(message, reply)) => {
                    let _ = reply.send(ws.send(message).await);
                }
                Some(Command::Close(reply)) => {
                    // Keep reading afterwards: the server's answering Close is what ends the stream.
                    let _ = reply.send(ws.close(None).await);
                }
                None => {
                    // The Client was dropped. Say goodbye rather than vanish, but do not wait long
                    // for an answer nobody will read.
                    let _ = tokio::time::timeout(Duration::from_secs(1), ws.close(None)).await;
                    break;
                }
            },
        }
    }
}

/// Hands one message to the client. Returns false when the client is gone.
async fn forward(
    ws: &mut Ws,
    message: Message,
    incoming: &mpsc::UnboundedSender<Incoming>,
) -> bool {
    let item = match message {
        Message::Text(text) => {
            let raw = text.to_string();
            let decoded = Box::new(decode::<ServerFrame>(&raw));
            Incoming::Text { raw, decoded }
        }
        Message::Binary(bytes) => Incoming::Binary(bytes.to_vec()),
        Message::Ping(_) => {
            // tungstenite has queued the Pong; flushing sends it now instead of with the next
            // write, which for a listening-only client might never come.
            if let Err(e) = ws.flush().await {
                tracing::debug!("flushing pong failed: {e}");
            }
            return true;
        }
        Message::Pong(_) | Message::Frame(_) => return true,
        Message::Close(frame) => {
            // tungstenite has queued the answering Close; flush it so the server sees the
            // handshake complete even if the client never writes again.
            let _ = ws.flush().await;
            Incoming::Closed(close_info(frame))
        }
    };
    incoming.send(item).is_ok()
}
