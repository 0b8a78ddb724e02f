//! A JSON-RPC 2.0 peer over any byte stream, framed as one JSON message per line (the ACP stdio
//! transport).
//!
//! One I/O task owns the transport. It matches responses to pending requests by id, hands
//! notifications and requests from the other side to the consumer on a channel, and writes
//! outgoing messages in the order they were queued. The peer is symmetric: the same type drives an
//! agent from the gateway and serves requests in the demo agent.
//!
//! Robustness rules, because agents are third-party programs writing to a pipe:
//! - blank lines, unknown fields and `_meta` are ignored;
//! - a line that is not a JSON-RPC message is logged (truncated) and skipped;
//! - a line longer than [`MAX_LINE_BYTES`] is dropped without being buffered whole;
//! - when the transport ends, every pending request fails with [`AcpError::Closed`] and the
//!   incoming channel ends, only once the other side's output has been read to its end (also
//!   when writing failed first, as it does to a process that has just exited): a consumer that
//!   sees a request fail has every message the other side sent before it already queued;
//! - a request from the other side is always answered, even if the consumer drops it.
//!
//! Nothing waits without bound: the consumer's queue holds [`INCOMING_QUEUE`] messages, and
//! while it is full the pipe is not read (the other side's writes then block, which is the
//! back-pressure an agent writing faster than its output is stored feels). Lines to write wait
//! in a queue of [`OUTGOING_QUEUE`]; a request from the other side is read only once its answer
//! has a place there.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{json, Map, Value};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, watch};

use crate::lines::{preview, Line, LineReader};
use crate::AcpError;

/// Lines longer than this are dropped. Large enough for a prompt carrying a big image.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// JSON-RPC "method not found", the answer to requests a client does not implement (fs/*, terminal/*).
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC "invalid params".
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC "internal error".
pub const INTERNAL_ERROR: i64 = -32603;
/// JSON-RPC "invalid request".
pub const INVALID_REQUEST: i64 = -32600;

/// How many characters of an unparseable line end up in the log.
const LOG_PREVIEW_CHARS: usize = 200;

/// Messages from the other side waiting for the consumer; while it is full, the pipe is not read.
pub const INCOMING_QUEUE: usize = 64;
/// Lines waiting to be written to the other side.
pub const OUTGOING_QUEUE: usize = 256;

/// The receiving end of everything the other side sends that is not a response.
pub type IncomingRx = mpsc::Receiver<Incoming>;

/// A future that yields the text attached to [`AcpError::Closed`] once the transport ends.
pub type CloseDetail = Pin<Box<dyn Future<Output = String> + Send>>;

/// The id of a request sent by the other side. JSON-RPC allows numbers and strings; agents start
/// at 0, so no id value is special.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RequestId {
    /// A numeric id.
    Number(i64),
    /// A string id.
    Str(String),
}

impl RequestId {
    fn from_json(value: &Value) -> Option<RequestId> {
        match value {
            Value::Number(n) => n.as_i64().map(RequestId::Number),
            Value::String(s) => Some(RequestId::Str(s.clone())),
            _ => None,
        }
    }

    fn to_json(&self) -> Value {
        match self {
            RequestId::Number(n) => json!(n),
            RequestId::Str(s) => json!(s),
        }
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestId::Number(n) => write!(f, "{n}"),
            RequestId::Str(s) => write!(f, "{s:?}"),
        }
    }
}

/// A message from the other side that is not a response to one of our requests.
#[derive(Debug)]
pub enum Incoming {
    /// A notification (no answer expected), e.g. `session/update`.
    Notification {
        /// The method name.
        method: String,
        /// The params, `Null` when absent.
        params: Value,
    },
    /// A request that must be answered through `responder`, e.g. `session/request_permission`.
    Request {
        /// The id chosen by the other side.
        id: RequestId,
        /// The method name. Unimplemented ones should get [`Responder::error`] with
        /// [`METHOD_NOT_FOUND`].
        method: String,
        /// The params, `Null` when absent.
        params: Value,
        /// Answers the request exactly once.
        responder: Responder,
    },
}

/// Answers one request from the other side. Consumed by answering; if dropped unanswered it sends
/// an internal-error answer, so the other side never waits forever on a forgotten request.
pub struct Responder {
    id: RequestId,
    method: String,
    /// The answer's place in the outgoing queue, taken before the request was read on.
    out: Option<mpsc::OwnedPermit<Outgoing>>,
    answered: bool,
}

impl fmt::Debug for Responder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Responder")
            .field("id", &self.id)
            .field("method", &self.method)
            .finish()
    }
}

impl Responder {
    /// The id of the request being answered.
    pub fn id(&self) -> &RequestId {
        &self.id
    }

    /// The method of the request being answered.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// Answers with a result.
    pub fn respond(mut self, result: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": self.id.to_json(), "result": result}));
    }

    /// Answers with a JSON-RPC error object.
    pub fn error(self, code: i64, message: impl Into<String>) {
        self.error_with_data(code, message, None);
    }

    /// Answers with a JSON-RPC error object carrying `data`.
    pub fn error_with_data(mut self, code: i64, message: impl Into<String>, data: Option<Value>) {
        let msg = error_message(self.id.to_json(), code, message.into(), data);
        self.send(msg);
    }

    fn send(&mut self, msg: Value) {
        self.answered = true;
        match self.out.take() {
            Some(permit) => drop(permit.send(Outgoing::line(&msg))),
            None => {
                tracing::debug!(id = %self.id, method = %self.method, "answer dropped: connection closed")
            }
        }
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        if !self.answered {
            tracing::warn!(id = %self.id, method = %self.method, "request dropped unanswered");
            let msg = error_message(
                self.id.to_json(),
                INTERNAL_ERROR,
                "request dropped without an answer".into(),
                None,
            );
            self.send(msg);
        }
    }
}

fn notification(method: &str, params: Value) -> Outgoing {
    let mut msg = json!({"jsonrpc": "2.0", "method": method});
    if !params.is_null() {
        msg["params"] = params;
    }
    Outgoing::line(&msg)
}

fn error_message(id: Value, code: i64, message: String, data: Option<Value>) -> Value {
    let mut error = json!({"code": code, "message": message});
    if let Some(data) = data {
        error["data"] = data;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

/// What the writer half of the I/O task does next.
enum Outgoing {
    Line(Vec<u8>),
    /// Flush the transport, then acknowledge.
    Flush(oneshot::Sender<()>),
    /// Flush and close the transport's output (end of input for the peer); reading goes on.
    Close,
}

impl Outgoing {
    fn line(msg: &Value) -> Outgoing {
        // Serializing a `Value` cannot fail; the newline is the frame delimiter.
        let mut bytes = serde_json::to_vec(msg).unwrap_or_default();
        bytes.push(b'\n');
        Outgoing::Line(bytes)
    }
}

type PendingReply = oneshot::Sender<Result<Value, AcpError>>;

struct State {
    pending: HashMap<u64, PendingReply>,
    /// `Some(stderr tail)` once the transport has ended.
    closed: Option<String>,
}

struct Shared {
    next_id: AtomicU64,
    state: Mutex<State>,
    out: mpsc::Sender<Outgoing>,
    closed_tx: watch::Sender<bool>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the map inconsistent, so poisoning is moot.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn closed_error(&self) -> AcpError {
        AcpError::Closed {
            stderr_tail: self.lock().closed.clone().unwrap_or_default(),
        }
    }

    fn close(&self, stderr_tail: String) {
        let pending = {
            let mut state = self.lock();
            state.closed = Some(stderr_tail.clone());
            std::mem::take(&mut state.pending)
        };
        for (_, reply) in pending {
            let _ = reply.send(Err(AcpError::Closed {
                stderr_tail: stderr_tail.clone(),
            }));
        }
        self.closed_tx.send_replace(true);
    }
}

/// Removes a request from the pending map if the caller stops waiting for it.
struct PendingGuard<'a> {
    shared: &'a Shared,
    id: u64,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.shared.lock().pending.remove(&self.id);
    }
}

/// A handle on a JSON-RPC connection. Cheap to clone; the connection shuts down (closing the
/// transport) when the last handle is dropped.
#[derive(Clone)]
pub struct Connection {
    shared: Arc<Shared>,
    closed_rx: watch::Receiver<bool>,
    /// Dropped with the last handle, which tells the I/O task to stop.
    _shutdown: Arc<oneshot::Sender<()>>,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl Connection {
    /// Starts a connection over `reader`/`writer` and spawns its I/O task on the current Tokio
    /// runtime. Returns the handle and the channel of incoming notifications and requests.
    pub fn new<R, W>(reader: R, writer: W) -> (Connection, IncomingRx)
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        Self::with_close_detail(reader, writer, None)
    }

    /// Like [`Connection::new`], with a future whose output becomes the `stderr_tail` of
    /// [`AcpError::Closed`] (the process module passes the child's stderr tail).
    pub fn with_close_detail<R, W>(
        reader: R,
        writer: W,
        detail: Option<CloseDetail>,
    ) -> (Connection, IncomingRx)
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (conn, incoming, io) = Self::build(reader, writer, detail);
        tokio::spawn(async move {
            if let Err(e) = io.await {
                tracing::debug!(error = %e, "json-rpc transport failed");
            }
        });
        (conn, incoming)
    }

    /// Builds a connection without spawning its I/O task: the caller must drive the returned
    /// future, which resolves when the transport ends (with its I/O error, if any).
    pub(crate) fn build<R, W>(
        reader: R,
        writer: W,
        detail: Option<CloseDetail>,
    ) -> (
        Connection,
        IncomingRx,
        impl Future<Output = io::Result<()>> + Send,
    )
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (out_tx, out_rx) = mpsc::channel(OUTGOING_QUEUE);
        let (incoming_tx, incoming_rx) = mpsc::channel(INCOMING_QUEUE);
        let (closed_tx, closed_rx) = watch::channel(false);
        let (shutdown_tx, shutdown_rx) = oneshot::channel();
        let shared = Arc::new(Shared {
            next_id: AtomicU64::new(1),
            state: Mutex::new(State {
                pending: HashMap::new(),
                closed: None,
            }),
            out: out_tx,
            closed_tx,
        });
        let conn = Connection {
            shared: shared.clone(),
            closed_rx,
            _shutdown: Arc::new(shutdown_tx),
        };
        let io = io_loop(
            shared,
            reader,
            writer,
            out_rx,
            incoming_tx,
            shutdown_rx,
            detail,
        );
        (conn, incoming_rx, io)
    }

    /// Sends a request and waits for its answer. A JSON-RPC error answer becomes
    /// [`AcpError::Rpc`]; the transport ending first becomes [`AcpError::Closed`]. Dropping the
    /// future forgets the request (a late answer is then logged and ignored).
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, AcpError> {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let (reply_tx, reply_rx) = oneshot::channel();
        {
            let mut state = self.shared.lock();
            if let Some(tail) = &state.closed {
                return Err(AcpError::Closed {
                    stderr_tail: tail.clone(),
                });
            }
            state.pending.insert(id, reply_tx);
        }
        let _guard = PendingGuard {
            shared: &self.shared,
            id,
        };
        let mut msg = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if !params.is_null() {
            msg["params"] = params;
        }
        tracing::trace!(id, method, "request");
        if self.shared.out.send(Outgoing::line(&msg)).await.is_err() {
            return Err(self.shared.closed_error());
        }
        match reply_rx.await {
            Ok(reply) => reply,
            Err(_) => Err(self.shared.closed_error()),
        }
    }

    /// Sends a notification without waiting. Fails when the connection is already closed, and
    /// with [`AcpError::Congested`] when the outgoing queue is full (the other side does not
    /// read its input).
    pub fn notify(&self, method: &str, params: Value) -> Result<(), AcpError> {
        if self.is_closed() {
            return Err(self.shared.closed_error());
        }
        self.send_line(notification(method, params))
    }

    /// Sends a notification, waiting while the outgoing queue is full. Fails only when the
    /// connection is closed.
    pub async fn notify_paced(&self, method: &str, params: Value) -> Result<(), AcpError> {
        self.shared
            .out
            .send(notification(method, params))
            .await
            .map_err(|_| self.shared.closed_error())
    }

    /// Waits until the outgoing queue has room for `lines` more lines, so that as many
    /// [`Connection::notify`] calls right after it find their place (a writer that may be the
    /// only one, like the demo agent's turns, paces itself with this).
    pub async fn room(&self, lines: usize) -> Result<(), AcpError> {
        let lines = lines.clamp(1, OUTGOING_QUEUE);
        match self.shared.out.reserve_many(lines).await {
            Ok(permits) => {
                drop(permits);
                Ok(())
            }
            Err(_) => Err(self.shared.closed_error()),
        }
    }

    /// Waits until everything queued so far has been written and flushed to the transport. Works
    /// after the other side has closed its output too, as long as it still reads.
    pub async fn flush(&self) -> Result<(), AcpError> {
        let (ack_tx, ack_rx) = oneshot::channel();
        self.shared
            .out
            .send(Outgoing::Flush(ack_tx))
            .await
            .map_err(|_| self.shared.closed_error())?;
        ack_rx.await.map_err(|_| self.shared.closed_error())
    }

    /// Writes raw bytes followed by a newline, bypassing JSON encoding. The demo agent uses it to
    /// emit a malformed line on purpose.
    pub(crate) fn send_raw_line(&self, text: &str) -> Result<(), AcpError> {
        let mut bytes = text.as_bytes().to_vec();
        bytes.push(b'\n');
        self.send_line(Outgoing::Line(bytes))
    }

    fn send_line(&self, out: Outgoing) -> Result<(), AcpError> {
        self.shared.out.try_send(out).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => AcpError::Congested,
            mpsc::error::TrySendError::Closed(_) => self.shared.closed_error(),
        })
    }

    /// Closes the output side (the peer reads end of input) after everything queued so far;
    /// answers from the peer are still read until it closes its side. Requests sent afterwards
    /// are never written.
    pub fn close_output(&self) -> Result<(), AcpError> {
        self.send_line(Outgoing::Close)
    }

    /// True once the transport has ended.
    pub fn is_closed(&self) -> bool {
        *self.closed_rx.borrow()
    }

    /// Resolves once the transport has ended (immediately if it already has).
    pub async fn closed(&self) {
        let mut rx = self.closed_rx.clone();
        // The sender lives in `Shared`, which this handle keeps alive, so this cannot fail.
        let _ = rx.wait_for(|closed| *closed).await;
    }
}

async fn io_loop<R, W>(
    shared: Arc<Shared>,
    reader: R,
    writer: W,
    out_rx: mpsc::Receiver<Outgoing>,
    incoming_tx: mpsc::Sender<Incoming>,
    mut shutdown_rx: oneshot::Receiver<()>,
    detail: Option<CloseDetail>,
) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let close = |detail: Option<CloseDetail>| {
        let shared = shared.clone();
        async move {
            let tail = match detail {
                Some(detail) => detail.await,
                None => String::new(),
            };
            shared.close(tail);
        }
    };
    // Reading and writing run concurrently inside this one task: writing a large prompt must not
    // stop us from draining the other side's output, or both could block on full pipes.
    let reading = read_loop(&shared, reader, incoming_tx);
    let writing = write_loop(writer, out_rx);
    tokio::pin!(reading, writing);
    tokio::select! {
        (read_result, incoming_tx) = &mut reading => {
            // No answer can arrive any more. Fail what is pending before ending the incoming
            // channel, so a consumer that sees the channel end can rely on that.
            close(detail).await;
            drop(incoming_tx);
            // Keep writing until the last handle goes: answers queued now still reach a peer that
            // has only closed its output (e.g. a client piping a file into the demo agent).
            let write_result = tokio::select! {
                r = &mut writing => r,
                _ = &mut shutdown_rx => Ok(()),
            };
            read_result.and(write_result)
        }
        write_result = &mut writing => {
            // The other side no longer reads, most often because it exited. What it wrote
            // before may still be unread in the pipe: read on to the end of its output before
            // failing what is pending, or its last messages (an agent's updates just before it
            // died) would be lost. Nothing more is written meanwhile: the outgoing queue is
            // gone, so new requests and notifications fail at once.
            if let Err(e) = &write_result {
                tracing::debug!(error = %e, "cannot write to the json-rpc peer; reading its output to the end");
            }
            let read_result = tokio::select! {
                (read_result, incoming_tx) = &mut reading => {
                    close(detail).await;
                    drop(incoming_tx);
                    read_result
                }
                _ = &mut shutdown_rx => {
                    close(detail).await;
                    Ok(())
                }
            };
            write_result.and(read_result)
        }
        _ = &mut shutdown_rx => {
            close(detail).await;
            Ok(())
        }
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut writer: W,
    mut out_rx: mpsc::Receiver<Outgoing>,
) -> io::Result<()> {
    while let Some(out) = out_rx.recv().await {
        match out {
            Outgoing::Line(bytes) => writer.write_all(&bytes).await?,
            Outgoing::Flush(ack) => {
                writer.flush().await?;
                let _ = ack.send(());
                continue;
            }
            Outgoing::Close => {
                writer.shutdown().await?;
                drop(writer);
                // Nothing more can be written; the connection lives on until the peer's output
                // ends too.
                return std::future::pending().await;
            }
        }
        // Flush once per burst rather than once per message.
        if out_rx.is_empty() {
            writer.flush().await?;
        }
    }
    Ok(())
}

/// Reads until end of stream; hands the incoming sender back so that the caller decides when the
/// incoming channel ends.
async fn read_loop<R: AsyncRead + Unpin>(
    shared: &Shared,
    reader: R,
    incoming_tx: mpsc::Sender<Incoming>,
) -> (io::Result<()>, mpsc::Sender<Incoming>) {
    let mut lines = LineReader::new(reader, MAX_LINE_BYTES);
    loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => return (Err(e), incoming_tx),
        };
        match line {
            Line::Complete(bytes) => handle_line(shared, &bytes, &incoming_tx).await,
            // Only the size is logged: such a line is most likely a real message carrying user
            // content, not diagnostic output.
            Line::Oversized(_) => {
                tracing::warn!(
                    limit = MAX_LINE_BYTES,
                    "dropped an oversized line from the peer"
                )
            }
        }
    }
    tracing::debug!("json-rpc peer closed its output");
    (Ok(()), incoming_tx)
}

async fn handle_line(shared: &Shared, bytes: &[u8], incoming_tx: &mpsc::Sender<Incoming>) {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return;
    }
    let msg = match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(msg)) => msg,
        Ok(_) | Err(_) => {
            tracing::warn!(line = %preview(bytes, LOG_PREVIEW_CHARS), "skipped a line that is not a JSON-RPC message");
            return;
        }
    };
    dispatch(shared, msg, incoming_tx).await;
}

/// Hands a message on: a response to its request, anything else to the consumer, waiting while
/// its queue is full (the pipe is not read meanwhile).
async fn dispatch(
    shared: &Shared,
    mut msg: Map<String, Value>,
    incoming_tx: &mpsc::Sender<Incoming>,
) {
    let params = msg.remove("params").unwrap_or(Value::Null);
    let id = msg.remove("id").filter(|id| !id.is_null());
    match (msg.remove("method"), id) {
        (Some(Value::String(method)), None) => {
            tracing::trace!(%method, "notification");
            let _ = incoming_tx
                .send(Incoming::Notification { method, params })
                .await;
        }
        (Some(Value::String(method)), Some(raw_id)) => {
            let Some(id) = RequestId::from_json(&raw_id) else {
                tracing::warn!(%method, id = %raw_id, "request with an unusable id");
                let reply =
                    error_message(raw_id, INVALID_REQUEST, "invalid request id".into(), None);
                let _ = shared.out.send(Outgoing::line(&reply)).await;
                return;
            };
            tracing::trace!(%id, %method, "request");
            // The answer's place is taken before the request goes on: a peer that sends
            // requests without reading the answers stops being read.
            let responder = Responder {
                id: id.clone(),
                method: method.clone(),
                out: shared.out.clone().reserve_owned().await.ok(),
                answered: false,
            };
            // If nobody listens any more the request comes back here and is dropped, which makes
            // its responder answer with an error.
            let _ = incoming_tx
                .send(Incoming::Request {
                    id,
                    method,
                    params,
                    responder,
                })
                .await;
        }
        (None, Some(raw_id)) => handle_response(shared, raw_id, msg),
        _ => tracing::warn!(
            "skipped a JSON message that is neither request, notification nor response"
        ),
    }
}

fn handle_response(shared: &Shared, raw_id: Value, mut msg: Map<String, Value>) {
    // Our ids are numbers; tolerate peers that echo them back as strings.
    let id = match &raw_id {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    };
    let Some(reply) = id.and_then(|id| shared.lock().pending.remove(&id)) else {
        tracing::warn!(id = %raw_id, "answer to an unknown or abandoned request");
        return;
    };
    let outcome = match msg.remove("error") {
        Some(error) => Err(rpc_error(error)),
        None => Ok(msg.remove("result").unwrap_or(Value::Null)),
    };
    let _ = reply.send(outcome);
}

fn rpc_error(error: Value) -> AcpError {
    let code = error
        .get("code")
        .and_then(Value::as_i64)
        .unwrap_or(INTERNAL_ERROR);
    let message = match error.get("message") {
        Some(Value::String(s)) => s.clone(),
        _ => error.to_string(),
    };
    let data = error.get("data").cloned();
    AcpError::Rpc {
        code,
        message,
        data,
    }
}
