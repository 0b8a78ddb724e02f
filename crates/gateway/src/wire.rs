//! What a request handler answers: a reply, or an error with a code and a message for the app.
//!
//! Ground floor: imports nothing of the gateway.

use iris_protocol::{Ack, ErrorCode, Header, ResponseFrame};
use iris_store::StoreError;

/// What a handler answers.
///
/// A durable frame cannot be a direct answer: it has no [`ResponseFrame`] variant, so it reaches
/// devices only through the outbox.
///
/// ```compile_fail
/// use iris_gateway::wire::Reply;
/// use iris_protocol::{Header, Message, ServerFrame};
/// let _ = Reply::Direct(ServerFrame::Message(Message::default()), Header::default());
/// ```
#[allow(clippy::large_enum_variant)] // one per request, moved once: boxing would only allocate
pub enum Reply {
    /// A response written straight to the requesting connection. A [`ResponseFrame`] holds no
    /// durable type, so nothing that must be stored first can be sent this way.
    Direct(ResponseFrame, Header),
    /// The response is the durable frame the handler appended; it arrives through the queue.
    ViaOutbox,
    /// No response (a request without id that needs none).
    Nothing,
}

impl Reply {
    /// `ack` for a request with an id; nothing for one without.
    pub fn ack(header: &Header) -> Reply {
        match header.id {
            Some(_) => Reply::Direct(ResponseFrame::Ack(Ack::ok()), Header::default()),
            None => Reply::Nothing,
        }
    }
}

/// An error answered to the app: a code and a message without internals.
#[derive(Debug)]
pub struct WireError {
    /// The code.
    pub code: ErrorCode,
    /// The message.
    pub message: String,
}

impl WireError {
    /// An error with this code.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        WireError {
            code,
            message: message.into(),
        }
    }

    /// `bad_request`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadRequest, message)
    }

    /// `not_found`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }

    /// `internal`: logs the cause and tells the app nothing about it.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "internal error");
        Self::new(ErrorCode::Internal, "internal error")
    }
}

impl From<StoreError> for WireError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => WireError::not_found("not found"),
            StoreError::Invalid(msg) => WireError::bad_request(msg),
            other => WireError::internal(other),
        }
    }
}

/// The result of a request handler.
pub type Result<T> = std::result::Result<T, WireError>;
