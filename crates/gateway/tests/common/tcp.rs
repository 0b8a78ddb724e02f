//! Bare TCP toward the gateway, the way a hostile client talks: half-sent requests, WebSocket
//! frames written by hand (a frame header that promises more than is ever sent, bytes that are
//! not UTF-8), and the gateway's frames read back without a WebSocket library in between.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// How long any single answer may take.
pub const ANSWER: Duration = Duration::from_secs(5);

/// The gateway's `host:port` from its WebSocket URL.
pub fn server_addr(ws_url: &str) -> SocketAddr {
    ws_url
        .trim_start_matches("ws://")
        .trim_end_matches("/ws")
        .parse()
        .expect("address")
}

/// A TCP connection to `server` from the loopback address `from` (any 127.x.y.z works on
/// Linux), so that a test can play a stranger with an address of its own.
pub async fn connect_from(from: &str, server: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(format!("{from}:0").parse().expect("address"))?;
    socket.connect(server).await
}

/// Reads until the peer closes the connection (end of stream or reset); false when it is still
/// open after `within`.
pub async fn closed_within(tcp: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 4096];
    let read_all = async {
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(within, read_all).await.is_ok()
}

/// True when the connection is still open: nothing to read, no end of stream, right now.
pub fn still_open(tcp: &TcpStream) -> bool {
    let mut buf = [0u8; 1];
    matches!(tcp.try_read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// A plain `GET path` on a fresh connection; the status code and body.
pub async fn http_get(server: SocketAddr, path: &str) -> (u16, String) {
    let mut tcp = TcpStream::connect(server).await.expect("tcp");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {server}\r\nConnection: close\r\n\r\n");
    tcp.write_all(request.as_bytes()).await.expect("write");
    let mut got = Vec::new();
    tokio::time::timeout(ANSWER, tcp.read_to_end(&mut got))
        .await
        .expect("an answer in time")
        .expect("read");
    let text = String::from_utf8_lossy(&got).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {text}"));
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
    (status, body)
}

/// A WebSocket opened by hand on `tcp`: the upgrade request, then the `101` answer read.
pub async fn upgrade(tcp: &mut TcpStream, server: SocketAddr) {
    let request = format!(
        "GET /ws HTTP/1.1\r\nHost: {server}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    tcp.write_all(request.as_bytes()).await.expect("write");
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    // Byte by byte, so that nothing after the answer's head is taken from the frames.
    while !got.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(ANSWER, tcp.read(&mut byte))
            .await
            .expect("an answer in time")
            .expect("read");
        assert!(n > 0, "closed during the upgrade");
        got.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&got);
    assert!(head.starts_with("HTTP/1.1 101"), "upgrade refused: {head}");
}

/// The header of a client frame (FIN set, mask key zero, so the payload goes as is) with
/// this opcode, promising `len` bytes of payload.
pub fn frame_head(opcode: u8, len: u64) -> Vec<u8> {
    let mut head = vec![0x80 | opcode];
    if len < 126 {
        head.push(0x80 | len as u8);
    } else if len <= u64::from(u16::MAX) {
        head.push(0x80 | 126);
        head.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        head.push(0x80 | 127);
        head.extend_from_slice(&len.to_be_bytes());
    }
    head.extend_from_slice(&[0, 0, 0, 0]);
    head
}

/// A whole client text frame carrying these bytes (valid UTF-8 or not).
pub fn text_frame(payload: &[u8]) -> Vec<u8> {
    let mut frame = frame_head(0x1, payload.len() as u64);
    frame.extend_from_slice(payload);
    frame
}

/// A frame from the gateway, as far as these tests care.
#[derive(Debug, PartialEq)]
pub enum ServerFrame {
    Text(String),
    Close(u16, String),
    Other(u8),
}

/// Reads one frame from the gateway; `None` when the connection ended first.
pub async fn read_frame(tcp: &mut TcpStream) -> Option<ServerFrame> {
    let read = async {
        let mut head = [0u8; 2];
        tcp.read_exact(&mut head).await.ok()?;
        let len = match head[1] & 0x7f {
            126 => u64::from(tcp.read_u16().await.ok()?),
            127 => tcp.read_u64().await.ok()?,
            n => u64::from(n),
        };
        let mut payload = vec![0u8; len as usize];
        tcp.read_exact(&mut payload).await.ok()?;
        Some(match head[0] & 0x0f {
            0x1 => ServerFrame::Text(String::from_utf8_lossy(&payload).into_owned()),
            0x8 => {
                let code = payload
                    .get(..2)
                    .map_or(1005, |c| u16::from_be_bytes([c[0], c[1]]));
                let reason = String::from_utf8_lossy(payload.get(2..).unwrap_or_default());
                ServerFrame::Close(code, reason.into_owned())
            }
            other => ServerFrame::Other(other),
        })
    };
    tokio::time::timeout(ANSWER, read)
        .await
        .expect("a frame or the end in time")
}

/// Reads frames until the close frame; the text frames before it and the close code and reason.
pub async fn until_close(tcp: &mut TcpStream) -> (Vec<String>, Option<(u16, String)>) {
    let mut texts = Vec::new();
    while let Some(frame) = read_frame(tcp).await {
        match frame {
            ServerFrame::Text(t) => texts.push(t),
            ServerFrame::Close(code, reason) => return (texts, Some((code, reason))),
            ServerFrame::Other(_) => {}
        }
    }
    (texts, None)
}

/// The `hello` of `device` with `token`, as a client text frame.
pub fn hello_frame(token: &str, device: &str) -> Vec<u8> {
    let hello = format!(
        r#"{{"v":1,"type":"hello","id":1,"payload":{{"token":"{token}","device_id":"{device}","device_name":"t","platform":"web","app_version":"1"}}}}"#
    );
    text_frame(hello.as_bytes())
}

/// Reads an HTTP response's head from `tcp` and returns its status code.
pub async fn response_status(tcp: &mut TcpStream) -> u16 {
    let mut buf = [0u8; 1024];
    let mut got = Vec::new();
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(ANSWER, tcp.read(&mut buf))
            .await
            .expect("an answer in time")
            .expect("read");
        assert!(n > 0, "closed without an answer");
        got.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&got);
    head.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {head}"))
}

/// A parsed HTTP/1.1 response.
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked when it came `Transfer-Encoding: chunked`.
    pub body: Vec<u8>,
    /// Whether it came chunked (rather than with a known length).
    pub chunked: bool,
}

impl HttpResponse {
    /// A header's value, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A plain HTTP GET as a browser sends it, with extra request headers, on a fresh connection
/// (no client library between the test and the wire).
pub async fn http_get_with(server: SocketAddr, path: &str, extra: &[(&str, &str)]) -> HttpResponse {
    let mut stream = TcpStream::connect(server).await.expect("connect");
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {server}\r\nConnection: close\r\n");
    for (k, v) in extra {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes()).await.expect("write");
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw))
        .await
        .expect("response in time")
        .expect("read");
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("header end");
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .expect("status");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let chunked = headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
    });
    let mut body = raw[split + 4..].to_vec();
    if chunked {
        body = dechunk(&body);
    }
    HttpResponse {
        status,
        headers,
        body,
        chunked,
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(end) = data.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size =
            usize::from_str_radix(String::from_utf8_lossy(&data[..end]).trim(), 16).unwrap_or(0);
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&data[end + 2..end + 2 + size]);
        data = &data[end + 2 + size + 2..];
    }
}
