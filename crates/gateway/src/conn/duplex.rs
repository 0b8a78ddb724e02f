//! A duplex of frames: what a connection reads and writes, whichever transport carries it.
//!
//! The protocol's frames are WebSocket messages (text, binary, ping, pong, close). A
//! [`Duplex`] is made from an upgraded WebSocket ([`Duplex::websocket`]) or from a byte stream
//! carrying the transport binding of `iris_protocol::binding` ([`Duplex::framed`]: the one QUIC
//! stream of a connection through a relay); `hello` and the connection loop see only frames, so
//! they cannot serve one transport differently from the other.

use std::pin::Pin;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use bytes::{Buf, Bytes, BytesMut};
use futures_util::{Sink, SinkExt, Stream, StreamExt};
use iris_protocol::binding::{self, BindingError, BoundFrame};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::{Decoder, Encoder, FramedRead, FramedWrite};

use super::close::{close_code, ws_error_close};

/// The largest message either transport takes from a device: text frames above the configured
/// `max_frame_bytes` are refused by the connection with a `bad_request`, binary media chunks are
/// at most 1 MiB; beyond this the transport itself refuses (close 1009).
pub fn max_message_bytes(max_frame_bytes: usize) -> usize {
    (max_frame_bytes + 64 * 1024).max(2 * 1024 * 1024)
}

/// One frame of a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A protocol frame (JSON).
    Text(Utf8Bytes),
    /// Media bytes.
    Binary(Bytes),
    /// Asks for a pong with the same payload.
    Ping(Bytes),
    /// Answers a ping: the gateway's pings confirm delivery (see `live.rs`).
    Pong(Bytes),
    /// The end, with a close code and a reason.
    Close(Option<(u16, String)>),
}

/// Why a read failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecvError {
    /// The device sent what the transport refuses: closed with this code and reason (a message
    /// above the hard limit, text that is not UTF-8, a frame the binding does not define).
    Refused(u16, &'static str),
    /// The transport broke (or its read budget ran out): nothing more can be said on it.
    Broken,
}

/// A write failed: the transport is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Broken;

type FrameStream = Pin<Box<dyn Stream<Item = Result<Frame, RecvError>> + Send>>;
type FrameSink = Pin<Box<dyn Sink<Frame, Error = Broken> + Send>>;

/// Frames in and out of one connection.
pub struct Duplex {
    rx: FrameStream,
    tx: FrameSink,
    /// Whether pings are answered here (a byte stream) rather than by the transport (the
    /// WebSocket layer answers them itself).
    answers_pings: bool,
    /// The payload of a ping to answer before the next write.
    pong_due: Option<Bytes>,
}

impl Duplex {
    /// The frames of an upgraded WebSocket.
    pub fn websocket(socket: WebSocket) -> Duplex {
        let (tx, rx) = socket.split();
        let rx = rx.map(|msg| match msg {
            Ok(msg) => Ok(from_message(msg)),
            Err(e) => Err(match ws_error_close(&e) {
                Some((code, reason)) => RecvError::Refused(code, reason),
                None => RecvError::Broken,
            }),
        });
        let tx = tx
            .with(|frame: Frame| std::future::ready(Ok::<_, axum::Error>(to_message(frame))))
            .sink_map_err(|_| Broken);
        Duplex {
            rx: Box::pin(rx),
            tx: Box::pin(tx),
            answers_pings: false,
            pong_due: None,
        }
    }

    /// The frames of a byte stream in the transport binding, text and binary payloads up to
    /// `max` bytes (as the WebSocket layer's limit).
    pub fn framed(
        reader: impl AsyncRead + Send + 'static,
        writer: impl AsyncWrite + Send + 'static,
        max: usize,
    ) -> Duplex {
        let rx = FramedRead::new(reader, BindingCodec { max }).map(|r| r.map_err(recv_error));
        let tx = FramedWrite::new(writer, BindingCodec { max }).sink_map_err(|_| Broken);
        Duplex {
            rx: Box::pin(rx),
            tx: Box::pin(tx),
            answers_pings: true,
            pong_due: None,
        }
    }

    /// The next frame; `None` when the device closed the transport.
    pub async fn recv(&mut self) -> Option<Result<Frame, RecvError>> {
        let frame = self.rx.next().await;
        if let Some(Ok(Frame::Ping(payload))) = &frame {
            if self.answers_pings {
                self.pong_due = Some(payload.clone());
            }
        }
        frame
    }

    /// Hands a frame to the transport, to be written by [`Duplex::flush`] at the latest.
    pub async fn feed(&mut self, frame: Frame) -> Result<(), Broken> {
        if let Some(payload) = self.pong_due.take() {
            self.tx.feed(Frame::Pong(payload)).await?;
        }
        self.tx.feed(frame).await
    }

    /// Writes everything fed.
    pub async fn flush(&mut self) -> Result<(), Broken> {
        if let Some(payload) = self.pong_due.take() {
            self.tx.feed(Frame::Pong(payload)).await?;
        }
        self.tx.flush().await
    }

    /// Feeds a frame and flushes.
    pub async fn send(&mut self, frame: Frame) -> Result<(), Broken> {
        self.feed(frame).await?;
        self.flush().await
    }

    /// Says why the connection ends, with a close code. The transport ends when the duplex is
    /// dropped.
    pub async fn close(&mut self, code: u16, reason: &str) {
        let _ = self
            .send(Frame::Close(Some((code, reason.to_owned()))))
            .await;
    }
}

fn from_message(msg: Message) -> Frame {
    match msg {
        Message::Text(text) => Frame::Text(text),
        Message::Binary(bytes) => Frame::Binary(bytes),
        Message::Ping(payload) => Frame::Ping(payload),
        Message::Pong(payload) => Frame::Pong(payload),
        Message::Close(frame) => Frame::Close(frame.map(|f| (f.code, f.reason.to_string()))),
    }
}

fn to_message(frame: Frame) -> Message {
    match frame {
        Frame::Text(text) => Message::Text(text),
        Frame::Binary(bytes) => Message::Binary(bytes),
        Frame::Ping(payload) => Message::Ping(payload),
        Frame::Pong(payload) => Message::Pong(payload),
        Frame::Close(close) => Message::Close(close.map(|(code, reason)| CloseFrame {
            code,
            reason: Utf8Bytes::from(reason),
        })),
    }
}

/// What went wrong reading the binding.
#[derive(Debug)]
enum CodecError {
    Binding(BindingError),
    Io,
}

impl From<std::io::Error> for CodecError {
    fn from(_: std::io::Error) -> Self {
        CodecError::Io
    }
}

/// The close a binding error earns, as the WebSocket layer closes for the same fault.
fn recv_error(e: CodecError) -> RecvError {
    match e {
        CodecError::Io => RecvError::Broken,
        CodecError::Binding(BindingError::TooLarge { .. }) => {
            RecvError::Refused(close_code::TOO_BIG, "message too large")
        }
        CodecError::Binding(BindingError::NotUtf8) => {
            RecvError::Refused(close_code::INVALID_DATA, "text frame is not UTF-8")
        }
        CodecError::Binding(BindingError::UnknownKind(_) | BindingError::BadClose) => {
            RecvError::Refused(close_code::PROTOCOL, "not a frame of the transport binding")
        }
    }
}

/// The transport binding as a tokio codec. Reading never reserves room for the length a header
/// announces: the buffer grows only with bytes that arrived (and were counted by the budget).
struct BindingCodec {
    max: usize,
}

impl Decoder for BindingCodec {
    type Item = Frame;
    type Error = CodecError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, CodecError> {
        let header = binding::peek_header(src, self.max).map_err(CodecError::Binding)?;
        let Some((kind, len)) = header else {
            return Ok(None);
        };
        if src.len() < binding::HEADER_LEN + len {
            return Ok(None);
        }
        match kind {
            // Data frames are cut from the buffer without a copy.
            binding::KIND_BINARY | binding::KIND_TEXT => {
                src.advance(binding::HEADER_LEN);
                let payload = src.split_to(len).freeze();
                if kind == binding::KIND_BINARY {
                    return Ok(Some(Frame::Binary(payload)));
                }
                let text = Utf8Bytes::try_from(payload)
                    .map_err(|_| CodecError::Binding(BindingError::NotUtf8))?;
                Ok(Some(Frame::Text(text)))
            }
            _ => {
                let decoded = binding::decode(src, self.max).map_err(CodecError::Binding)?;
                let Some((frame, used)) = decoded else {
                    return Ok(None);
                };
                src.advance(used);
                Ok(Some(match frame {
                    BoundFrame::Ping(p) => Frame::Ping(p.into()),
                    BoundFrame::Pong(p) => Frame::Pong(p.into()),
                    BoundFrame::Close(c) => Frame::Close(c),
                    BoundFrame::Text(t) => Frame::Text(t.into()),
                    BoundFrame::Binary(b) => Frame::Binary(b.into()),
                }))
            }
        }
    }
}

impl Encoder<Frame> for BindingCodec {
    type Error = std::io::Error;

    fn encode(&mut self, frame: Frame, dst: &mut BytesMut) -> Result<(), std::io::Error> {
        let (kind, payload) = match frame {
            Frame::Text(text) => (binding::KIND_TEXT, Bytes::from(text)),
            Frame::Binary(bytes) => (binding::KIND_BINARY, bytes),
            Frame::Ping(p) => (binding::KIND_PING, p),
            Frame::Pong(p) => (binding::KIND_PONG, p),
            Frame::Close(close) => {
                dst.extend_from_slice(&BoundFrame::Close(close).encode());
                return Ok(());
            }
        };
        dst.extend_from_slice(&binding::header(kind, payload.len()));
        dst.extend_from_slice(&payload);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_cross_a_byte_stream_and_pings_are_answered() {
        let (a, b) = tokio::io::duplex(64 * 1024);
        let (ar, aw) = tokio::io::split(a);
        let (br, bw) = tokio::io::split(b);
        let mut gateway = Duplex::framed(ar, aw, 1024);
        let mut device = Duplex::framed(br, bw, 1024);
        device
            .feed(Frame::Ping(Bytes::from_static(b"12345678")))
            .await
            .unwrap();
        device
            .feed(Frame::Text("{\"type\":\"hello\"}".into()))
            .await
            .unwrap();
        device
            .send(Frame::Binary(Bytes::from_static(&[1, 2, 3])))
            .await
            .unwrap();
        let got = gateway.recv().await.unwrap().unwrap();
        assert_eq!(got, Frame::Ping(Bytes::from_static(b"12345678")));
        let got = gateway.recv().await.unwrap().unwrap();
        assert_eq!(got, Frame::Text("{\"type\":\"hello\"}".into()));
        assert_eq!(
            gateway.recv().await.unwrap().unwrap(),
            Frame::Binary(Bytes::from_static(&[1, 2, 3]))
        );
        // The pong goes out with the next write, before it.
        gateway.close(close_code::AUTH, "wrong token").await;
        assert_eq!(
            device.recv().await.unwrap().unwrap(),
            Frame::Pong(Bytes::from_static(b"12345678"))
        );
        assert_eq!(
            device.recv().await.unwrap().unwrap(),
            Frame::Close(Some((close_code::AUTH, "wrong token".into())))
        );
        drop(gateway);
        assert_eq!(device.recv().await, None);
    }

    #[tokio::test]
    async fn a_frame_above_the_limit_is_refused_from_its_header() {
        let (a, b) = tokio::io::duplex(1024);
        let (ar, aw) = tokio::io::split(a);
        let (_br, mut bw) = tokio::io::split(b);
        let mut gateway = Duplex::framed(ar, aw, 1024);
        tokio::io::AsyncWriteExt::write_all(&mut bw, &binding::header(binding::KIND_TEXT, 1025))
            .await
            .unwrap();
        assert_eq!(
            gateway.recv().await.unwrap(),
            Err(RecvError::Refused(close_code::TOO_BIG, "message too large"))
        );
    }
}
