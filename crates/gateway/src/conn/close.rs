//! How this gateway closes a WebSocket: its close codes, and the code for a socket error the
//! device caused.

/// Close codes of this gateway.
pub mod close_code {
    /// Wrong token, no hello in time, or a request before hello.
    pub const AUTH: u16 = 4401;
    /// Unknown major protocol version.
    pub const VERSION: u16 = 4400;
    /// Another connection with the same device id took over.
    pub const REPLACED: u16 = 4409;
    /// The device fell too far behind; it should reconnect and `sync`.
    pub const TOO_SLOW: u16 = 4429;
    /// The gateway is shutting down or restarting.
    pub const GOING_AWAY: u16 = 1001;
    /// Bytes that are not a frame of the transport binding (an unknown kind).
    pub const PROTOCOL: u16 = 1002;
    /// A text frame that is not UTF-8.
    pub const INVALID_DATA: u16 = 1007;
    /// A message above the hard size limit, or more than the limit before `hello`.
    pub const TOO_BIG: u16 = 1009;
}

/// The close code and reason for a WebSocket layer error caused by what the device sent: a
/// message above the hard limit (1009) or a text frame that is not UTF-8 (1007). `None` for a
/// broken socket, which gets no close frame.
pub(crate) fn ws_error_close(error: &axum::Error) -> Option<(u16, &'static str)> {
    let source = std::error::Error::source(error)?;
    match source.downcast_ref::<tungstenite::Error>()? {
        tungstenite::Error::Capacity(_) => Some((close_code::TOO_BIG, "message too large")),
        tungstenite::Error::Utf8(_) => Some((close_code::INVALID_DATA, "text frame is not UTF-8")),
        _ => None,
    }
}
