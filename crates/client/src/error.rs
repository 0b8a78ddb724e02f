//! The one error type of the client.

use iris_protocol::ErrorCode;
use tokio_tungstenite::tungstenite::Error as WsError;

use crate::Event;

/// Everything that can go wrong talking to a gateway.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The WebSocket connection could not be opened (TCP, TLS or the HTTP upgrade failed).
    #[error("cannot connect to {url}: {source}")]
    Connect {
        /// The URL that was dialled.
        url: String,
        /// Why the handshake failed.
        #[source]
        source: WsError,
    },
    /// The open connection failed underneath (I/O error, WebSocket protocol violation).
    #[error("websocket error: {0}")]
    Ws(#[from] WsError),
    /// The connection is closed; carries the server's close code and reason when it sent one.
    #[error("connection closed{}", describe_close(.0))]
    Closed(Option<(u16, String)>),
    /// Nothing suitable arrived in time.
    #[error("timed out waiting for the gateway")]
    Timeout,
    /// The gateway answered the request with an `error` frame.
    #[error("gateway error {}: {message}", code.as_str())]
    Server {
        /// The machine-readable code.
        code: ErrorCode,
        /// The human-readable reason.
        message: String,
    },
    /// The gateway sent something this client cannot make sense of.
    #[error("protocol violation: {0}")]
    Protocol(String),
    /// A frame arrived that the caller said should not (see `Client::expect_quiet`).
    #[error("unexpected frame: {}", .0.raw)]
    Unexpected(Box<Event>),
}

fn describe_close(close: &Option<(u16, String)>) -> String {
    match close {
        Some((code, reason)) if reason.is_empty() => format!(" with code {code}"),
        Some((code, reason)) => format!(" with code {code} ({reason})"),
        None => String::new(),
    }
}
