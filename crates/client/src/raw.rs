//! A bare connection: no background task, no hello, reads only when asked.
//!
//! It plays a slow or misbehaving device: frames pile up in the socket until the test reads
//! them, and anything at all can be sent.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use iris_protocol::{decode, encode, ClientFrame, Header, Hello, HelloAck, RequestId, ServerFrame};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use crate::client::{numeric_id, DEFAULT_TIMEOUT};
use crate::conn::{close_info, Ws};
use crate::ClientError;

/// One frame read from a [`RawConnection`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawFrame {
    /// A text frame, as received.
    Text(String),
    /// A binary frame.
    Binary(Vec<u8>),
    /// The server's Close frame, with its code and reason when it had them.
    Close(Option<(u16, String)>),
}

/// A WebSocket to the gateway without a reader task or hello.
pub struct RawConnection {
    ws: Ws,
    /// Frames read while [`RawConnection::hello`] looked for its answer.
    pending: VecDeque<RawFrame>,
    /// Set once a Close was read: later reads report it as [`ClientError::Closed`].
    closed: Option<Option<(u16, String)>>,
}

impl fmt::Debug for RawConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawConnection")
            .field("pending", &self.pending.len())
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

impl RawConnection {
    /// Opens the WebSocket and nothing more.
    pub async fn connect(url: &str) -> Result<Self, ClientError> {
        Self::connect_with_headers(url, &[]).await
    }

    /// Opens the WebSocket with extra request headers (e.g. `Origin` as a browser would send
    /// it, or `X-Forwarded-For` as a reverse proxy would).
    pub async fn connect_with_headers(
        url: &str,
        headers: &[(&'static str, &str)],
    ) -> Result<Self, ClientError> {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        use tokio_tungstenite::tungstenite::http::HeaderValue;
        let connect_err = |source| ClientError::Connect {
            url: url.to_owned(),
            source,
        };
        let mut request = url.into_client_request().map_err(connect_err)?;
        for (name, value) in headers {
            let value = HeaderValue::from_str(value)
                .map_err(|e| connect_err(WsError::HttpFormat(e.into())))?;
            request.headers_mut().insert(*name, value);
        }
        let ws = match tokio::time::timeout(
            DEFAULT_TIMEOUT,
            tokio_tungstenite::connect_async_with_config(request, crate::conn::ws_config(), true),
        )
        .await
        {
            Err(_) => return Err(ClientError::Timeout),
            Ok(Err(source)) => {
                return Err(ClientError::Connect {
                    url: url.to_owned(),
                    source,
                })
            }
            Ok(Ok((ws, _response))) => ws,
        };
        Ok(RawConnection {
            ws,
            pending: VecDeque::new(),
            closed: None,
        })
    }

    /// Sends a text frame as is.
    pub async fn send_text(&mut self, text: &str) -> Result<(), ClientError> {
        self.write(Message::text(text)).await
    }

    /// Sends a binary frame.
    pub async fn send_binary(&mut self, bytes: Vec<u8>) -> Result<(), ClientError> {
        self.write(Message::binary(bytes)).await
    }

    /// Encodes and sends a typed frame.
    pub async fn send(&mut self, header: &Header, frame: &ClientFrame) -> Result<(), ClientError> {
        self.send_text(&encode(header, frame)).await
    }

    /// The next Text, Binary or Close frame, within the default timeout (10 s).
    pub async fn recv(&mut self) -> Result<RawFrame, ClientError> {
        self.recv_timeout(DEFAULT_TIMEOUT).await
    }

    /// The next Text, Binary or Close frame. Pings read on the way are answered.
    pub async fn recv_timeout(&mut self, timeout: Duration) -> Result<RawFrame, ClientError> {
        if let Some(frame) = self.pending.pop_front() {
            return Ok(frame);
        }
        if let Some(close) = &self.closed {
            return Err(ClientError::Closed(close.clone()));
        }
        let deadline = Instant::now() + timeout;
        loop {
            let message = match tokio::time::timeout_at(deadline, self.ws.next()).await {
                Err(_) => return Err(ClientError::Timeout),
                Ok(None) => {
                    self.closed = Some(None);
                    return Err(ClientError::Closed(None));
                }
                Ok(Some(Err(e))) => return Err(ClientError::Ws(e)),
                Ok(Some(Ok(message))) => message,
            };
            match message {
                Message::Text(text) => return Ok(RawFrame::Text(text.to_string())),
                Message::Binary(bytes) => return Ok(RawFrame::Binary(bytes.to_vec())),
                Message::Close(frame) => {
                    // Send the queued answering Close now: the slow device may never read again.
                    let _ = self.ws.flush().await;
                    let close = close_info(frame);
                    self.closed = Some(close.clone());
                    return Ok(RawFrame::Close(close));
                }
                Message::Ping(_) => {
                    // tungstenite queued the Pong; send it now rather than with the next write.
                    let _ = self.ws.flush().await;
                }
                Message::Pong(_) | Message::Frame(_) => {}
            }
        }
    }

    /// Sends `hello` (id 0) and reads until its answer. Frames read before it are kept for
    /// [`RawConnection::recv`]; an `error` answer becomes [`ClientError::Server`].
    pub async fn hello(&mut self, token: &str, device_id: &str) -> Result<HelloAck, ClientError> {
        self.hello_with(Hello {
            token: token.to_owned(),
            device_id: device_id.to_owned(),
            ..Hello::default()
        })
        .await
    }

    /// [`RawConnection::hello`] with a `hello` of the caller's making (capabilities, say).
    pub async fn hello_with(&mut self, hello: Hello) -> Result<HelloAck, ClientError> {
        let header = Header {
            id: Some(RequestId::from(0)),
            ..Header::default()
        };
        self.send(&header, &ClientFrame::Hello(hello)).await?;
        let deadline = Instant::now() + DEFAULT_TIMEOUT;
        let mut read = VecDeque::new();
        let result = loop {
            let frame = match self
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .await
            {
                Ok(frame) => frame,
                Err(e) => break Err(e),
            };
            if let RawFrame::Text(text) = &frame {
                if let Ok(decoded) = decode::<ServerFrame>(text) {
                    // A gateway that rejects the hello before reading its id may answer without one.
                    let answers =
                        decoded.header.id.is_none() || numeric_id(&decoded.header.id) == Some(0);
                    match decoded.body {
                        ServerFrame::HelloAck(ack) if answers => break Ok(ack),
                        ServerFrame::Error(e) if answers => {
                            break Err(ClientError::Server {
                                code: e.code,
                                message: e.message,
                            })
                        }
                        _ => {}
                    }
                }
            }
            read.push_back(frame);
        };
        // Whatever came first stays readable, ahead of anything still in the socket.
        read.append(&mut self.pending);
        self.pending = read;
        result
    }

    /// Sends Close and reads until the server's answering Close (or the end of the stream).
    pub async fn close(mut self) -> Result<(), ClientError> {
        if self.closed.is_none() {
            match self.ws.close(None).await {
                Ok(()) => {}
                Err(WsError::ConnectionClosed | WsError::AlreadyClosed) => return Ok(()),
                Err(e) => return Err(ClientError::Ws(e)),
            }
        }
        let deadline = Instant::now() + DEFAULT_TIMEOUT;
        loop {
            match tokio::time::timeout_at(deadline, self.ws.next()).await {
                Err(_) => return Err(ClientError::Timeout),
                Ok(None) | Ok(Some(Err(_))) => return Ok(()),
                Ok(Some(Ok(_))) => {}
            }
        }
    }

    async fn write(&mut self, message: Message) -> Result<(), ClientError> {
        match self.ws.send(message).await {
            Ok(()) => Ok(()),
            Err(WsError::ConnectionClosed | WsError::AlreadyClosed) => {
                Err(ClientError::Closed(self.closed.clone().flatten()))
            }
            Err(e) => Err(ClientError::Ws(e)),
        }
    }
}
