//! The transport binding for byte streams: how the WebSocket's messages (text, binary, ping,
//! pong, close) travel on a transport that has no messages of its own, such as the one
//! bidirectional QUIC stream of a connection through a relay (see docs/protocol.md,
//! "Transport binding").
//!
//! Each frame is a kind byte (the WebSocket opcode of the same message), a payload length as a
//! big-endian `u32`, and the payload. A reader refuses a length above its limit from the header
//! alone, before it buffers a byte of the payload, so a peer cannot make it hold more than the
//! WebSocket would.

/// The ALPN of the Iris v1 protocol on a QUIC connection (iroh): a dial that names another is
/// refused in the handshake.
pub const ALPN: &[u8] = b"iris/1";

/// Bytes before a frame's payload: the kind and the length.
pub const HEADER_LEN: usize = 5;

/// The largest payload of a ping, pong or close frame (as on a WebSocket).
pub const MAX_CONTROL_LEN: usize = 125;

/// The kind byte of a text frame (UTF-8 payload: one JSON frame of the protocol).
pub const KIND_TEXT: u8 = 0x1;
/// The kind byte of a binary frame (media bytes).
pub const KIND_BINARY: u8 = 0x2;
/// The kind byte of a close frame: a big-endian `u16` close code, then a UTF-8 reason.
pub const KIND_CLOSE: u8 = 0x8;
/// The kind byte of a ping; its payload comes back in a pong.
pub const KIND_PING: u8 = 0x9;
/// The kind byte of a pong, carrying the payload of the ping it answers.
pub const KIND_PONG: u8 = 0xA;

/// One message of the binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BoundFrame {
    /// A protocol frame (JSON text).
    Text(String),
    /// Media bytes.
    Binary(Vec<u8>),
    /// Asks for a pong with the same payload.
    Ping(Vec<u8>),
    /// Answers a ping.
    Pong(Vec<u8>),
    /// The end of the connection, with a close code and a reason when the sender gave one.
    Close(Option<(u16, String)>),
}

/// Why bytes are not a frame of the binding.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindingError {
    /// A kind byte this binding does not define.
    #[error("unknown frame kind {0:#x}")]
    UnknownKind(u8),
    /// A payload longer than the reader takes (a control frame: more than 125 bytes).
    #[error("frame of {len} bytes is larger than {max}")]
    TooLarge {
        /// The length the header announced.
        len: u64,
        /// The most the reader takes.
        max: usize,
    },
    /// A text frame or a close reason that is not UTF-8.
    #[error("text is not UTF-8")]
    NotUtf8,
    /// A close payload of one byte (a code needs two).
    #[error("close frame without a whole code")]
    BadClose,
}

impl BoundFrame {
    /// The frame's kind byte.
    pub fn kind(&self) -> u8 {
        match self {
            BoundFrame::Text(_) => KIND_TEXT,
            BoundFrame::Binary(_) => KIND_BINARY,
            BoundFrame::Ping(_) => KIND_PING,
            BoundFrame::Pong(_) => KIND_PONG,
            BoundFrame::Close(_) => KIND_CLOSE,
        }
    }

    /// Appends the frame's header and payload to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let close;
        let payload: &[u8] = match self {
            BoundFrame::Text(text) => text.as_bytes(),
            BoundFrame::Binary(b) | BoundFrame::Ping(b) | BoundFrame::Pong(b) => b,
            BoundFrame::Close(None) => &[],
            BoundFrame::Close(Some((code, reason))) => {
                // As on a WebSocket, a reason is cut to fit a control frame (at a character).
                let mut end = reason.len().min(MAX_CONTROL_LEN - 2);
                while !reason.is_char_boundary(end) {
                    end -= 1;
                }
                let mut bytes = code.to_be_bytes().to_vec();
                bytes.extend_from_slice(&reason.as_bytes()[..end]);
                close = bytes;
                &close
            }
        };
        out.reserve(HEADER_LEN + payload.len());
        out.extend_from_slice(&header(self.kind(), payload.len()));
        out.extend_from_slice(payload);
    }

    /// The frame as bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_into(&mut out);
        out
    }
}

/// The header of a frame of this kind with a payload of `len` bytes. Payloads are bounded far
/// below 4 GiB by every sender (frame limits, 1 MiB media chunks); a longer one is cut to the
/// limit here, which the reader then refuses.
pub fn header(kind: u8, len: usize) -> [u8; HEADER_LEN] {
    let len = u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes();
    [kind, len[0], len[1], len[2], len[3]]
}

/// The kind and payload length a header announces, checked against `max` (data frames) and
/// [`MAX_CONTROL_LEN`] (control frames). `None` while fewer than [`HEADER_LEN`] bytes are there.
pub fn peek_header(buf: &[u8], max: usize) -> Result<Option<(u8, usize)>, BindingError> {
    let Some(header) = buf.get(..HEADER_LEN) else {
        return Ok(None);
    };
    let kind = header[0];
    let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as u64;
    let limit = match kind {
        KIND_TEXT | KIND_BINARY => max,
        KIND_PING | KIND_PONG | KIND_CLOSE => MAX_CONTROL_LEN,
        other => return Err(BindingError::UnknownKind(other)),
    };
    if len > limit as u64 {
        return Err(BindingError::TooLarge { len, max: limit });
    }
    Ok(Some((kind, len as usize)))
}

/// Reads one frame from the start of `buf`: the frame and the bytes it took, `None` while the
/// frame is not complete. A header announcing more than `max` bytes is an error at once.
pub fn decode(buf: &[u8], max: usize) -> Result<Option<(BoundFrame, usize)>, BindingError> {
    let Some((kind, len)) = peek_header(buf, max)? else {
        return Ok(None);
    };
    let Some(payload) = buf.get(HEADER_LEN..HEADER_LEN + len) else {
        return Ok(None);
    };
    let frame = match kind {
        KIND_TEXT => BoundFrame::Text(
            String::from_utf8(payload.to_vec()).map_err(|_| BindingError::NotUtf8)?,
        ),
        KIND_BINARY => BoundFrame::Binary(payload.to_vec()),
        KIND_PING => BoundFrame::Ping(payload.to_vec()),
        KIND_PONG => BoundFrame::Pong(payload.to_vec()),
        _ => BoundFrame::Close(close_payload(payload)?),
    };
    Ok(Some((frame, HEADER_LEN + len)))
}

fn close_payload(payload: &[u8]) -> Result<Option<(u16, String)>, BindingError> {
    match payload {
        [] => Ok(None),
        [_] => Err(BindingError::BadClose),
        [hi, lo, reason @ ..] => {
            let reason = std::str::from_utf8(reason).map_err(|_| BindingError::NotUtf8)?;
            Ok(Some((u16::from_be_bytes([*hi, *lo]), reason.to_owned())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_kind_round_trips() {
        let frames = [
            BoundFrame::Text(r#"{"v":1,"type":"hello"}"#.into()),
            BoundFrame::Binary(vec![0, 1, 2, 255]),
            BoundFrame::Ping(7u64.to_be_bytes().to_vec()),
            BoundFrame::Pong(vec![]),
            BoundFrame::Close(None),
            BoundFrame::Close(Some((4401, "wrong token".into()))),
        ];
        let mut bytes = Vec::new();
        for f in &frames {
            f.encode_into(&mut bytes);
        }
        let mut at = 0;
        for f in &frames {
            let (got, used) = decode(&bytes[at..], 1024).unwrap().unwrap();
            assert_eq!(&got, f);
            at += used;
        }
        assert_eq!(at, bytes.len());
    }

    #[test]
    fn the_header_alone_refuses_a_large_frame() {
        let header = [KIND_BINARY, 0, 16, 0, 1];
        assert_eq!(
            decode(&header, 1024 * 1024),
            Err(BindingError::TooLarge {
                len: 1024 * 1024 + 1,
                max: 1024 * 1024
            })
        );
        let ping = [KIND_PING, 0, 0, 0, 126];
        assert!(matches!(
            decode(&ping, 1 << 20),
            Err(BindingError::TooLarge { .. })
        ));
        assert_eq!(
            decode(&[3, 0, 0, 0, 0], 10),
            Err(BindingError::UnknownKind(3))
        );
    }

    #[test]
    fn bad_text_and_close_are_errors() {
        let mut bad = vec![KIND_TEXT, 0, 0, 0, 2];
        bad.extend_from_slice(&[0xC3, 0x28]);
        assert_eq!(decode(&bad, 10), Err(BindingError::NotUtf8));
        assert_eq!(
            decode(&[KIND_CLOSE, 0, 0, 0, 1, 3], 10),
            Err(BindingError::BadClose)
        );
    }

    #[test]
    fn a_long_close_reason_is_cut_at_a_character() {
        let reason = "é".repeat(100);
        let bytes = BoundFrame::Close(Some((1000, reason))).encode();
        let (BoundFrame::Close(Some((code, cut))), _) = decode(&bytes, 10).unwrap().unwrap() else {
            panic!("not a close");
        };
        assert_eq!(code, 1000);
        assert_eq!(cut.len(), 122);
    }

    proptest! {
        #[test]
        fn any_split_point_waits_for_the_rest(text in ".{0,200}", cut in 0usize..400) {
            let bytes = BoundFrame::Text(text.clone()).encode();
            let cut = cut.min(bytes.len());
            if cut < bytes.len() {
                prop_assert_eq!(decode(&bytes[..cut], 1024).unwrap(), None);
            }
            let (frame, used) = decode(&bytes, 1024).unwrap().unwrap();
            prop_assert_eq!(frame, BoundFrame::Text(text));
            prop_assert_eq!(used, bytes.len());
        }
    }
}
