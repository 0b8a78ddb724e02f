//! The typed client: hello, request/response matching, buffered events and cursor bookkeeping.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::time::Duration;

use iris_protocol::{
    encode, ClientCaps, ClientFrame, FrameBody, Header, Hello, HelloAck, RequestId, ServerFrame,
    StreamText, Sync, WebPushSubscription,
};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use crate::conn::{self, Command, Incoming};
use crate::relay::{self, Dial};
use crate::ClientError;

/// How long blocking calls wait unless told otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The request id of `hello`; request ids assigned by [`Client::request`] start at 1.
const HELLO_ID: u64 = 0;

/// Where and as whom to connect.
#[derive(Clone)]
pub struct ConnectOptions {
    /// WebSocket URL of the gateway's endpoint, e.g. `ws://127.0.0.1:8080/ws`.
    pub url: String,
    /// The gateway token.
    pub token: String,
    /// Stable device id; a second connection with the same id replaces the first.
    pub device_id: String,
    /// Display name of the device.
    pub device_name: Option<String>,
    /// FCM registration token to announce in `hello`.
    pub fcm_token: Option<String>,
    /// ntfy topic to announce in `hello`.
    pub ntfy_topic: Option<String>,
    /// Web Push subscription to announce in `hello`.
    pub webpush: Option<WebPushSubscription>,
    /// Ask for append-form `message.update` (`hello.caps.append_updates`); either way
    /// [`Client::stream_text`] holds each bubble's whole text.
    pub append_updates: bool,
    /// Opt in to focus with these lanes (`hello.caps.focus`): streaming updates of other lanes
    /// stay away until [`Client::focus`] names them. `None`: every lane's updates.
    pub focus: Option<Vec<iris_protocol::LaneRef>>,
}

impl ConnectOptions {
    /// Options with no device name and no push registration.
    pub fn new(
        url: impl Into<String>,
        token: impl Into<String>,
        device_id: impl Into<String>,
    ) -> Self {
        ConnectOptions {
            url: url.into(),
            token: token.into(),
            device_id: device_id.into(),
            device_name: None,
            fcm_token: None,
            ntfy_topic: None,
            webpush: None,
            append_updates: false,
            focus: None,
        }
    }

    /// The `hello` frame these options describe.
    pub fn hello(&self) -> Hello {
        let push = if self.fcm_token.is_some() {
            Some("fcm".to_owned())
        } else if self.ntfy_topic.is_some() {
            Some("ntfy".to_owned())
        } else if self.webpush.is_some() {
            Some("webpush".to_owned())
        } else {
            None
        };
        Hello {
            token: self.token.clone(),
            device_id: self.device_id.clone(),
            device_name: self.device_name.clone(),
            caps: Some(ClientCaps {
                min_protocol: Some(1),
                media: Some(true),
                push,
                append_updates: self.append_updates.then_some(true),
                focus: self.focus.clone(),
            }),
            fcm_token: self.fcm_token.clone(),
            ntfy_topic: self.ntfy_topic.clone(),
            webpush: self.webpush.clone().map(Some),
        }
    }
}

// Written by hand so that logging options never prints the token.
impl fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectOptions")
            .field("url", &self.url)
            .field("token", &"<redacted>")
            .field("device_id", &self.device_id)
            .field("device_name", &self.device_name)
            .field("fcm_token", &self.fcm_token.as_ref().map(|_| "<redacted>"))
            .field("ntfy_topic", &self.ntfy_topic)
            // The endpoint URL is a capability to push to the device.
            .field("webpush", &self.webpush.as_ref().map(|_| "<redacted>"))
            .field("append_updates", &self.append_updates)
            .finish()
    }
}

/// A received frame with the cursor it was parked under: explicit for replays, inferred for live
/// durable frames; `None` for ephemeral frames and responses of non-durable type.
#[derive(Debug, Clone)]
pub struct Event {
    /// The envelope.
    pub header: Header,
    /// The typed frame.
    pub body: ServerFrame,
    /// The outbox cursor of this frame, when it is durable.
    pub cursor: Option<u64>,
    /// True when the frame carried its cursor on the wire (a `sync` replay).
    pub replayed: bool,
    /// The text frame exactly as received.
    pub raw: String,
}

impl Event {
    /// The wire `type`.
    pub fn frame_type(&self) -> &str {
        self.body.frame_type()
    }

    /// The request id, when it is a number (as this client sends them).
    pub fn id(&self) -> Option<u64> {
        numeric_id(&self.header.id)
    }

    /// Whether the gateway outboxes frames of this type.
    pub fn is_durable(&self) -> bool {
        self.body.is_durable()
    }

    /// The whole frame as a JSON value, for fields the typed payloads do not model.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.raw).unwrap_or(serde_json::Value::Null)
    }
}

/// What a `sync` replayed.
#[derive(Debug, Clone)]
pub struct SyncOutcome {
    /// The replayed frames, in cursor order.
    pub frames: Vec<Event>,
    /// The outbox head the replay reached (`sync.done.cursor`).
    pub cursor: u64,
    /// Frames below the retention floor were pruned: history must be reloaded.
    pub gap: bool,
}

/// A received text frame waiting to be taken: decoded, or the reason it could not be.
enum Item {
    // Boxed because an event is an order of magnitude larger than the other variant.
    Event(Box<Event>),
    Bad { raw: String, error: String },
}

impl Item {
    fn into_result(self) -> Result<Event, ClientError> {
        match self {
            Item::Event(event) => Ok(*event),
            Item::Bad { raw, error } => Err(ClientError::Protocol(format!(
                "undecodable frame {raw:?}: {error}"
            ))),
        }
    }
}

/// A connected, authenticated device.
///
/// A background task owns the socket and forwards everything it reads, in order. Every frame
/// passes through one place (`ingest`) as it is taken from that task, which assigns cursors and
/// appends to the durable log; frames nobody is waiting for are kept in an event buffer.
pub struct Client {
    commands: mpsc::UnboundedSender<Command>,
    incoming: mpsc::UnboundedReceiver<Incoming>,
    device_id: String,
    hello_ack: HelloAck,
    timeout: Duration,
    next_id: u64,
    next_live: u64,
    events: VecDeque<Item>,
    binaries: VecDeque<Vec<u8>>,
    seen: Vec<Event>,
    durable_log: Vec<(u64, String)>,
    /// Each bubble's text as rebuilt from this connection's `message.update` frames.
    streams: HashMap<String, StreamText>,
    /// Set once the server's Close arrived: `Some(close code and reason)`.
    closed: Option<Option<(u16, String)>>,
    /// The connection task is gone (socket ended or broke).
    ended: bool,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("device_id", &self.device_id)
            .field("next_id", &self.next_id)
            .field("next_live", &self.next_live)
            .field("buffered_events", &self.events.len())
            .field("buffered_binaries", &self.binaries.len())
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Opens the WebSocket, sends `hello` (id 0) and waits for `hello.ack`.
    ///
    /// An `error` answer becomes [`ClientError::Server`]. Frames after the ack (such as
    /// `status {state:"online"}`) are left for [`Client::next_event`].
    pub async fn connect(opts: ConnectOptions) -> Result<(Client, HelloAck), ClientError> {
        let deadline = Instant::now() + DEFAULT_TIMEOUT;
        // Small frames go out at once: no Nagle delay behind an unacknowledged Pong.
        let connecting = tokio_tungstenite::connect_async_with_config(
            opts.url.as_str(),
            conn::ws_config(),
            true,
        );
        let ws = match tokio::time::timeout_at(deadline, connecting).await {
            Err(_) => return Err(ClientError::Timeout),
            Ok(Err(source)) => {
                return Err(ClientError::Connect {
                    url: opts.url.clone(),
                    source,
                })
            }
            Ok(Ok((ws, _response))) => ws,
        };
        let (commands, incoming) = conn::spawn(ws);
        Client::start(opts, commands, incoming, deadline).await
    }

    /// Dials the gateway by its endpoint id through a relay ([`Dial`]), sends `hello` (id 0)
    /// and waits for `hello.ack`, as [`Client::connect`] does over a WebSocket (`opts.url` only
    /// names the gateway in errors).
    pub async fn connect_via_relay(
        opts: ConnectOptions,
        dial: &Dial,
    ) -> Result<(Client, HelloAck), ClientError> {
        let deadline = Instant::now() + DEFAULT_TIMEOUT;
        let (commands, incoming) = match tokio::time::timeout_at(deadline, relay::open(dial)).await
        {
            Err(_) => return Err(ClientError::Timeout),
            Ok(opened) => opened?,
        };
        Client::start(opts, commands, incoming, deadline).await
    }

    /// Says `hello` on an open connection (its task's channels) and waits for the answer.
    async fn start(
        opts: ConnectOptions,
        commands: mpsc::UnboundedSender<Command>,
        incoming: mpsc::UnboundedReceiver<Incoming>,
        deadline: Instant,
    ) -> Result<(Client, HelloAck), ClientError> {
        let mut client = Client {
            commands,
            incoming,
            device_id: opts.device_id.clone(),
            hello_ack: HelloAck::default(),
            timeout: DEFAULT_TIMEOUT,
            next_id: HELLO_ID + 1,
            next_live: 1,
            events: VecDeque::new(),
            binaries: VecDeque::new(),
            seen: Vec::new(),
            durable_log: Vec::new(),
            streams: HashMap::new(),
            closed: None,
            ended: false,
        };
        let header = Header {
            id: Some(RequestId::from(HELLO_ID)),
            ..Header::default()
        };
        client
            .send_text(&encode(&header, &ClientFrame::Hello(opts.hello())))
            .await?;
        loop {
            match client.pull(deadline).await? {
                // A gateway that rejects the hello before reading its id may answer without one.
                Some(Item::Event(event)) if matches!(event.id(), None | Some(HELLO_ID)) => {
                    let answers_hello = event.id() == Some(HELLO_ID);
                    match event.body {
                        ServerFrame::HelloAck(ack) => {
                            client.hello_ack = ack.clone();
                            return Ok((client, ack));
                        }
                        ServerFrame::Error(e) => {
                            return Err(ClientError::Server {
                                code: e.code,
                                message: e.message,
                            })
                        }
                        _ if answers_hello => {
                            return Err(ClientError::Protocol(format!(
                                "hello answered by {}",
                                event.raw
                            )))
                        }
                        _ => client.events.push_back(Item::Event(event)),
                    }
                }
                Some(item) => client.events.push_back(item),
                None => {}
            }
        }
    }

    /// The `hello.ack` this connection was accepted with.
    pub fn hello_ack(&self) -> &HelloAck {
        &self.hello_ack
    }

    /// The device id this client said hello as.
    pub fn device_id(&self) -> &str {
        &self.device_id
    }

    /// Changes how long the calls without an explicit timeout wait (default 10 s).
    pub fn set_default_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Sends a request under the next request id (overriding `header.id`) and waits up to the
    /// default timeout for the frame carrying that id. An `error` answer becomes
    /// [`ClientError::Server`]. Other frames arriving meanwhile are kept as events, in order.
    pub async fn request(
        &mut self,
        header: Header,
        frame: ClientFrame,
    ) -> Result<Event, ClientError> {
        let timeout = self.timeout;
        self.request_timeout(header, frame, timeout).await
    }

    /// Says which lanes this device shows (`focus.set`); returns once the gateway took it.
    /// Streaming updates of the lanes named that are answering now follow at once.
    pub async fn focus(&mut self, lanes: Vec<iris_protocol::LaneRef>) -> Result<(), ClientError> {
        let frame = ClientFrame::FocusSet(iris_protocol::FocusSet { lanes });
        self.request(Header::default(), frame).await.map(|_| ())
    }

    /// [`Client::request`] with an explicit timeout.
    pub async fn request_timeout(
        &mut self,
        mut header: Header,
        frame: ClientFrame,
        timeout: Duration,
    ) -> Result<Event, ClientError> {
        let id = self.take_id();
        header.id = Some(RequestId::from(id));
        self.send_text(&encode(&header, &frame)).await?;
        let deadline = Instant::now() + timeout;
        loop {
            match self.pull(deadline).await? {
                Some(Item::Event(event)) if event.id() == Some(id) => return response(*event),
                Some(item) => self.events.push_back(item),
                None => {}
            }
        }
    }

    /// Sends a frame with the header as given: no id is assigned, so no response is awaited.
    pub async fn send(&mut self, header: Header, frame: ClientFrame) -> Result<(), ClientError> {
        self.send_text(&encode(&header, &frame)).await
    }

    /// Sends a raw text frame (for testing how the gateway treats bad input).
    pub async fn send_text(&mut self, text: &str) -> Result<(), ClientError> {
        self.send_message(Message::text(text)).await
    }

    /// Sends a binary frame (upload bytes, or bad input).
    pub async fn send_binary(&mut self, bytes: Vec<u8>) -> Result<(), ClientError> {
        self.send_message(Message::binary(bytes)).await
    }

    /// The next frame that no call is waiting for, within the default timeout.
    pub async fn next_event(&mut self) -> Result<Event, ClientError> {
        let timeout = self.timeout;
        self.next_event_timeout(timeout).await
    }

    /// [`Client::next_event`] with an explicit timeout ([`ClientError::Timeout`] when it passes).
    pub async fn next_event_timeout(&mut self, timeout: Duration) -> Result<Event, ClientError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(item) = self.events.pop_front() {
                return item.into_result();
            }
            if let Some(item) = self.pull(deadline).await? {
                return item.into_result();
            }
        }
    }

    /// Waits for the first event matching `pred`; the events skipped on the way are appended to
    /// [`Client::seen`] so that a test can still inspect them.
    pub async fn wait_for<F: FnMut(&Event) -> bool>(
        &mut self,
        pred: F,
    ) -> Result<Event, ClientError> {
        let timeout = self.timeout;
        self.wait_for_timeout(pred, timeout).await
    }

    /// [`Client::wait_for`] with an explicit overall timeout.
    pub async fn wait_for_timeout<F: FnMut(&Event) -> bool>(
        &mut self,
        mut pred: F,
        timeout: Duration,
    ) -> Result<Event, ClientError> {
        let deadline = Instant::now() + timeout;
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let event = self.next_event_timeout(remaining).await?;
            if pred(&event) {
                return Ok(event);
            }
            self.seen.push(event);
        }
    }

    /// The events [`Client::wait_for`] skipped, in arrival order.
    pub fn seen(&self) -> &[Event] {
        &self.seen
    }

    /// Takes the skipped events out of [`Client::seen`].
    pub fn take_seen(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.seen)
    }

    /// The next event already received, without waiting. An undecodable frame at the front of
    /// the buffer stops this (it returns `None`) so that [`Client::next_event`] can report it.
    pub fn try_next_event(&mut self) -> Option<Event> {
        self.drain_received();
        match self.events.front()? {
            Item::Event(_) => match self.events.pop_front() {
                Some(Item::Event(event)) => Some(*event),
                _ => None,
            },
            Item::Bad { .. } => None,
        }
    }

    /// Succeeds if no frame arrives within `quiet`. A frame that does (or one already buffered)
    /// is taken and returned as [`ClientError::Unexpected`]; a close as [`ClientError::Closed`].
    pub async fn expect_quiet(&mut self, quiet: Duration) -> Result<(), ClientError> {
        let deadline = Instant::now() + quiet;
        loop {
            if let Some(item) = self.events.pop_front() {
                return Err(ClientError::Unexpected(Box::new(item.into_result()?)));
            }
            if let Some(bytes) = self.binaries.pop_front() {
                return Err(ClientError::Protocol(format!(
                    "unexpected binary frame of {} bytes",
                    bytes.len()
                )));
            }
            match self.pull(deadline).await {
                Err(ClientError::Timeout) => return Ok(()),
                Err(e) => return Err(e),
                Ok(Some(item)) => self.events.push_back(item),
                Ok(None) => {}
            }
        }
    }

    /// Replays the outbox after `cursor`: sends `sync` and collects the frames carrying a cursor
    /// until the `sync.done` answering it. Live frames that arrive before `sync.done` stay in the
    /// event buffer in order. Waits at most the default timeout between two frames, so a long
    /// replay that keeps flowing is not cut short.
    pub async fn sync(&mut self, cursor: u64) -> Result<SyncOutcome, ClientError> {
        let timeout = self.timeout;
        self.sync_timeout(cursor, timeout).await
    }

    /// [`Client::sync`] with an explicit inactivity timeout.
    pub async fn sync_timeout(
        &mut self,
        cursor: u64,
        idle: Duration,
    ) -> Result<SyncOutcome, ClientError> {
        let id = self.take_id();
        let header = Header {
            id: Some(RequestId::from(id)),
            ..Header::default()
        };
        self.send_text(&encode(&header, &ClientFrame::Sync(Sync { cursor })))
            .await?;
        let mut frames = Vec::new();
        loop {
            let item = self.pull(Instant::now() + idle).await?;
            match item {
                Some(Item::Event(event)) if event.id() == Some(id) => {
                    let event = response(*event)?;
                    return match event.body {
                        ServerFrame::SyncDone(done) => Ok(SyncOutcome {
                            frames,
                            cursor: done.cursor,
                            gap: done.gap,
                        }),
                        _ => Err(ClientError::Protocol(format!(
                            "sync answered by {}",
                            event.raw
                        ))),
                    };
                }
                Some(Item::Event(event)) if event.replayed => frames.push(*event),
                Some(item) => self.events.push_back(item),
                None => {}
            }
        }
    }

    /// Every durable frame received so far with its explicit or inferred cursor, in arrival order.
    pub fn durable_log(&self) -> &[(u64, String)] {
        &self.durable_log
    }

    /// The cursor the next live durable frame will be given.
    pub fn next_live_cursor(&self) -> u64 {
        self.next_live
    }

    /// The next binary frame (media bytes), within the default timeout. Binary frames are queued
    /// apart from JSON events; JSON frames arriving meanwhile are kept as events.
    pub async fn binary(&mut self) -> Result<Vec<u8>, ClientError> {
        let timeout = self.timeout;
        self.binary_timeout(timeout).await
    }

    /// [`Client::binary`] with an explicit timeout.
    pub async fn binary_timeout(&mut self, timeout: Duration) -> Result<Vec<u8>, ClientError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(bytes) = self.binaries.pop_front() {
                return Ok(bytes);
            }
            if let Some(item) = self.pull(deadline).await? {
                self.events.push_back(item);
            }
        }
    }

    /// Sends Close and waits (default timeout) for the server's answering Close.
    pub async fn close(mut self) -> Result<(), ClientError> {
        self.drain_received();
        if self.closed.is_some() || self.ended {
            return Ok(());
        }
        let (reply, result) = oneshot::channel();
        if self.commands.send(Command::Close(reply)).is_err() {
            return Ok(());
        }
        match result.await {
            Ok(Err(e)) if !is_closed_error(&e) => return Err(ClientError::Ws(e)),
            _ => {}
        }
        let timeout = self.timeout;
        self.closed_timeout(timeout).await.map(|_| ())
    }

    /// Waits (default timeout) until the server closes the connection and returns its close code
    /// and reason (e.g. 4409 replaced, 4401 auth); `None` when it closed without a Close frame.
    /// Frames arriving meanwhile are kept as events.
    pub async fn closed(&mut self) -> Result<Option<(u16, String)>, ClientError> {
        let timeout = self.timeout;
        self.closed_timeout(timeout).await
    }

    /// A bubble's text as rebuilt from the `message.update` frames this connection received so
    /// far (in either form; see [`iris_protocol::StreamText`]), also after its `message.stop`.
    /// An update that does not fit the text held (a gap) is reported by the call that reads it
    /// as [`ClientError::Protocol`].
    pub fn stream_text(&self, message_id: &str) -> Option<&str> {
        self.streams.get(message_id).map(StreamText::as_str)
    }

    /// [`Client::closed`] with an explicit timeout.
    pub async fn closed_timeout(
        &mut self,
        timeout: Duration,
    ) -> Result<Option<(u16, String)>, ClientError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(close) = &self.closed {
                return Ok(close.clone());
            }
            if self.ended {
                return Ok(None);
            }
            match self.pull(deadline).await {
                Ok(Some(item)) => self.events.push_back(item),
                Ok(None) | Err(ClientError::Closed(_)) | Err(ClientError::Ws(_)) => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn take_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    async fn send_message(&mut self, message: Message) -> Result<(), ClientError> {
        // Once the server has closed, writing is pointless; say so with its close code.
        self.drain_received();
        if self.closed.is_some() || self.ended {
            return Err(self.end_error());
        }
        let (reply, result) = oneshot::channel();
        if self.commands.send(Command::Send(message, reply)).is_err() {
            return Err(self.end_error());
        }
        match result.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) if is_closed_error(&e) => Err(self.end_error()),
            Ok(Err(e)) => Err(ClientError::Ws(e)),
            Err(_) => Err(self.end_error()),
        }
    }

    /// Why nothing more can be read or written.
    fn end_error(&mut self) -> ClientError {
        // A Close may be waiting in the channel; take it in so its code is reported.
        self.drain_received();
        ClientError::Closed(self.closed.clone().flatten())
    }

    /// Ingests everything the connection task has already forwarded, into the buffers.
    fn drain_received(&mut self) {
        while let Ok(incoming) = self.incoming.try_recv() {
            match self.ingest(incoming) {
                Ok(Some(item)) => self.events.push_back(item),
                Ok(None) => {}
                // The error is remembered as the ended/closed state and reported by the next wait.
                Err(_) => {}
            }
        }
    }

    /// Takes the next message from the connection task and ingests it. `Ok(None)` means it was a
    /// binary frame or a Close, already stored.
    async fn pull(&mut self, deadline: Instant) -> Result<Option<Item>, ClientError> {
        if self.closed.is_some() || self.ended {
            // Frames sent before the Close may still be in the channel; hand them out first.
            return match self.incoming.try_recv() {
                Ok(incoming) => self.ingest(incoming),
                Err(_) => Err(ClientError::Closed(self.closed.clone().flatten())),
            };
        }
        match tokio::time::timeout_at(deadline, self.incoming.recv()).await {
            Err(_) => Err(ClientError::Timeout),
            Ok(None) => {
                self.ended = true;
                Err(ClientError::Closed(self.closed.clone().flatten()))
            }
            Ok(Some(incoming)) => self.ingest(incoming),
        }
    }

    /// The single place every received message passes through, in arrival order: assigns the
    /// cursor (explicit on replays, counted for live durable frames), keeps the durable log, and
    /// follows `hello.ack` and `sync.done`, which reset the live counter.
    fn ingest(&mut self, incoming: Incoming) -> Result<Option<Item>, ClientError> {
        match incoming {
            Incoming::Text { raw, decoded } => {
                let decoded = match *decoded {
                    Ok(decoded) => decoded,
                    Err(e) => {
                        return Ok(Some(Item::Bad {
                            raw,
                            error: e.message,
                        }))
                    }
                };
                let frame_type = decoded.body.frame_type().to_owned();
                let durable = decoded.body.is_durable();
                let replayed = decoded.header.cursor.is_some();
                let cursor = match decoded.header.cursor {
                    Some(cursor) => Some(cursor),
                    None if durable => {
                        let cursor = self.next_live;
                        self.next_live += 1;
                        Some(cursor)
                    }
                    None => None,
                };
                if durable {
                    if let Some(cursor) = cursor {
                        self.durable_log.push((cursor, frame_type));
                    }
                }
                match &decoded.body {
                    ServerFrame::MessageUpdate(u) => {
                        let text = self.streams.entry(u.message_id.clone()).or_default();
                        if let Err(e) = text.apply(u) {
                            return Ok(Some(Item::Bad {
                                raw,
                                error: e.to_string(),
                            }));
                        }
                    }
                    // Live durable frames on this connection start right after the head.
                    ServerFrame::HelloAck(ack) => self.next_live = ack.head_cursor + 1,
                    // After a replay, live frames continue after the head it reached.
                    ServerFrame::SyncDone(done) => self.next_live = done.cursor + 1,
                    _ => {}
                }
                let event = Event {
                    header: decoded.header,
                    body: decoded.body,
                    cursor,
                    replayed,
                    raw,
                };
                Ok(Some(Item::Event(Box::new(event))))
            }
            Incoming::Binary(bytes) => {
                self.binaries.push_back(bytes);
                Ok(None)
            }
            Incoming::Closed(close) => {
                tracing::debug!(device = %self.device_id, ?close, "gateway closed the connection");
                self.closed = Some(close);
                Ok(None)
            }
            Incoming::Failed(e) => {
                self.ended = true;
                if self.closed.is_some() {
                    // After a Close, a dropped socket is the expected end, not a failure.
                    Ok(None)
                } else {
                    Err(ClientError::Ws(e))
                }
            }
        }
    }
}

/// A request id as a number; a numeric string counts too, in case a gateway echoes ids as text.
pub(crate) fn numeric_id(id: &Option<RequestId>) -> Option<u64> {
    match id.as_ref()? {
        RequestId::Number(n) => n.as_u64(),
        RequestId::Str(s) => s.parse().ok(),
    }
}

/// A response, or the gateway's error for it.
fn response(event: Event) -> Result<Event, ClientError> {
    match event.body {
        ServerFrame::Error(e) => Err(ClientError::Server {
            code: e.code,
            message: e.message,
        }),
        _ => Ok(event),
    }
}

fn is_closed_error(e: &WsError) -> bool {
    use tokio_tungstenite::tungstenite::error::ProtocolError;
    matches!(
        e,
        WsError::ConnectionClosed
            | WsError::AlreadyClosed
            | WsError::Protocol(ProtocolError::SendAfterClosing)
    )
}
