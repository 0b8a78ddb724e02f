//! The hub: every live connection's outbound queue, fed in cursor order.
//!
//! The store calls [`Hub::publish`] from its writer thread after each COMMIT, with the batch's
//! frames in cursor order, so every queue sees durable frames in exactly outbox order. The hub
//! never blocks on a connection: a queue that grows past its limit is marked overflowed and its
//! connection drops itself; the frames stay in the outbox for `sync`.
//!
//! Ground floor: imports nothing of the gateway but [`crate::metrics`].

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use iris_protocol::{encode, EphemeralFrame, Header, LaneRef, MessageUpdate, ServerFrame};
use iris_store::Committed;
use tokio::sync::{broadcast, Notify};
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

mod pickers;
mod watermarks;

pub use pickers::MAX_OPEN_PICKERS;

/// Why a connection must close, decided outside its own task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// Another connection with the same device id took over (close code 4409).
    Replaced,
    /// The device fell too far behind (close code 4429); it will `sync` on reconnect.
    Overflow,
    /// The gateway is shutting down (close code 1001).
    GoingAway,
    /// The device was revoked: it gets nothing more than `error auth` with
    /// [`CloseReason::REVOKED`] and close code 4401, so that it knows not to come back.
    Revoked,
}

impl CloseReason {
    /// What a revoked device is told, at once and at every later `hello` under its id.
    pub const REVOKED: &'static str = "this device was revoked";
}

/// One item waiting to be written to a socket.
#[derive(Debug, Clone)]
pub enum Outgoing {
    /// A durable frame, with its cursor.
    Durable(Arc<Committed>),
    /// An ephemeral frame, already encoded.
    Ephemeral(Arc<str>),
    /// A `message.update` with the bubble's whole text, encoded by each connection in the form
    /// its device asked for (see [`StreamUpdate`]).
    Update(Arc<StreamUpdate>),
}

/// One `message.update` as the lane made it: the whole text of the bubble so far. Every queue
/// shares it; a connection whose device asked for append-form updates
/// (`hello.caps.append_updates`) writes only what its device does not have yet, the others the
/// whole frame, encoded once for all of them on first use.
#[derive(Debug)]
pub struct StreamUpdate {
    /// The lane's envelope.
    pub header: Header,
    /// The bubble.
    pub message_id: String,
    /// The whole text so far.
    pub text: Arc<str>,
    full: OnceLock<Arc<str>>,
}

impl StreamUpdate {
    /// An update carrying the whole text.
    pub fn new(header: Header, message_id: String, text: Arc<str>) -> StreamUpdate {
        StreamUpdate {
            header,
            message_id,
            text,
            full: OnceLock::new(),
        }
    }

    /// The frame with the whole text, as every device that did not ask for appends gets it.
    pub fn full_json(&self) -> Arc<str> {
        self.full
            .get_or_init(|| {
                let frame = ServerFrame::MessageUpdate(MessageUpdate {
                    message_id: self.message_id.clone(),
                    text: self.text.to_string(),
                    offset: None,
                });
                encode(&self.header, &frame).into()
            })
            .clone()
    }

    /// The frame in append form: the first `offset` UTF-16 units of the device's text stay,
    /// `text[start..]` follows.
    pub fn append_json(&self, offset: u64, start: usize) -> String {
        let frame = ServerFrame::MessageUpdate(MessageUpdate {
            message_id: self.message_id.clone(),
            text: self.text[start..].to_owned(),
            offset: Some(offset),
        });
        encode(&self.header, &frame)
    }
}

/// What a connection takes from its queue in one go.
#[derive(Debug, Default)]
pub struct Drained {
    /// Frames in order.
    pub items: Vec<Outgoing>,
    /// Set when the connection must close after writing `items`.
    pub close: Option<CloseReason>,
}

#[derive(Debug, Default)]
struct QueueState {
    items: VecDeque<(Option<Arc<str>>, Outgoing)>,
    durable: usize,
    /// Coalescing key → position in `items`, counted from the start of the connection.
    keyed: HashMap<Arc<str>, u64>,
    popped: u64,
    close: Option<CloseReason>,
    coalesced: u64,
    /// The highest cursor ever queued here (the hub head at attach time before that).
    last_cursor: u64,
    /// The lanes the device shows, once it opted in to focus (`None`: every lane).
    focus: Option<Vec<LaneRef>>,
}

/// A connection's bounded outbound queue. `message.update` and `tool.progress` frames carry a
/// coalescing key: a newer frame with the same key replaces the queued one in place.
#[derive(Debug)]
pub struct ConnQueue {
    /// Process-unique connection id.
    pub conn_id: u64,
    /// The device this connection belongs to.
    pub device_id: String,
    limit: usize,
    state: Mutex<QueueState>,
    notify: Notify,
    overflow: CancellationToken,
    metrics: Arc<Metrics>,
}

impl ConnQueue {
    /// A queue holding at most `limit` durable frames.
    pub fn new(
        conn_id: u64,
        device_id: String,
        limit: usize,
        metrics: Arc<Metrics>,
    ) -> Arc<ConnQueue> {
        Arc::new(ConnQueue {
            metrics,
            conn_id,
            device_id,
            limit,
            state: Mutex::default(),
            notify: Notify::new(),
            overflow: CancellationToken::new(),
        })
    }

    pub(crate) fn push_durable(&self, frame: Arc<Committed>) {
        let mut st = self.state.lock().expect("queue lock");
        if st.close.is_some() {
            return;
        }
        st.last_cursor = st.last_cursor.max(frame.cursor);
        if st.durable >= self.limit {
            st.close = Some(CloseReason::Overflow);
            st.items.clear();
            st.keyed.clear();
            self.overflow.cancel();
            Metrics::inc(&self.metrics.slow_disconnects);
        } else {
            st.durable += 1;
            st.items.push_back((None, Outgoing::Durable(frame)));
        }
        drop(st);
        self.notify.notify_one();
    }

    /// Queues an ephemeral frame; with a key, it replaces a queued frame of the same key.
    pub fn push_ephemeral(&self, key: Option<Arc<str>>, json: Arc<str>) {
        self.push_live(key, Outgoing::Ephemeral(json));
    }

    /// Queues a live (not durable) item; with a key, it replaces a queued item of the same key
    /// in place. Appends of one bubble merge this way: the queue holds whole texts, and the
    /// connection derives what its device lacks when it writes.
    pub fn push_live(&self, key: Option<Arc<str>>, item: Outgoing) {
        let mut st = self.state.lock().expect("queue lock");
        if st.close.is_some() {
            return;
        }
        if let Some(k) = &key {
            if let Some(&pos) = st.keyed.get(k) {
                let idx = (pos - st.popped) as usize;
                st.items[idx].1 = item;
                st.coalesced += 1;
                Metrics::inc(&self.metrics.frames_coalesced);
                return;
            }
            let pos = st.popped + st.items.len() as u64;
            st.keyed.insert(k.clone(), pos);
        } else if st.items.len() >= self.limit * 2 {
            // Unkeyed ephemeral frames (typing, status) are the only ones ever dropped.
            return;
        }
        st.items.push_back((key, item));
        drop(st);
        self.notify.notify_one();
    }

    /// The lanes this connection shows from now on (`hello.caps.focus`, `focus.set`); returns
    /// those it did not show before.
    pub fn set_focus(&self, lanes: Vec<LaneRef>) -> Vec<LaneRef> {
        let mut st = self.state.lock().expect("queue lock");
        let new = match &st.focus {
            Some(old) => lanes.iter().filter(|l| !old.contains(l)).cloned().collect(),
            None => Vec::new(),
        };
        st.focus = Some(lanes);
        new
    }

    /// Whether the device shows the lane of `header` (always, without focus).
    pub fn shows(&self, header: &Header) -> bool {
        let st = self.state.lock().expect("queue lock");
        st.focus.as_ref().is_none_or(|lanes| {
            lanes.iter().any(|l| {
                header.chat_id.as_deref() == Some(l.chat_id.as_str())
                    && header.thread_id == l.thread_id
            })
        })
    }

    /// Asks the connection to close after flushing what is queued (or at once on overflow).
    pub fn close(&self, reason: CloseReason) {
        let mut st = self.state.lock().expect("queue lock");
        if st.close.is_none() {
            st.close = Some(reason);
        }
        drop(st);
        self.notify.notify_one();
    }

    /// Takes everything queued.
    pub fn drain(&self) -> Drained {
        let mut st = self.state.lock().expect("queue lock");
        let n = st.items.len();
        st.popped += n as u64;
        st.durable = 0;
        st.keyed.clear();
        let items = st.items.drain(..).map(|(_, item)| item).collect();
        Drained {
            items,
            close: st.close,
        }
    }

    /// The highest durable cursor queued so far (or the head when the connection attached).
    pub fn last_cursor(&self) -> u64 {
        self.state.lock().expect("queue lock").last_cursor
    }

    /// Frames replaced by newer ones so far.
    pub fn coalesced(&self) -> u64 {
        self.state.lock().expect("queue lock").coalesced
    }

    /// Completes once the queue has overflowed.
    pub async fn overflowed(&self) {
        self.overflow.cancelled().await
    }

    /// Waits until something is queued or a close is requested.
    pub async fn wait(&self) {
        self.notify.notified().await
    }
}

#[derive(Default)]
struct HubState {
    conns: HashMap<u64, Arc<ConnQueue>>,
    devices: HashMap<String, u64>,
    head: u64,
    /// The pickers open up to `head`.
    pickers: pickers::OpenPickers,
}

/// What [`Hub::attach`] saw at the instant a connection was registered.
pub struct Attached {
    /// The outbox head: every frame above it reaches the queue.
    pub head: u64,
    /// The connection of the same device it replaces, if any.
    pub replaced: Option<Arc<ConnQueue>>,
    /// The pickers open up to `head`, as `sync` replays their frames, oldest first.
    pub open_pickers: Vec<serde_json::Value>,
}

/// The registry of live connections.
pub struct Hub {
    state: Mutex<HubState>,
    /// Counters the queues update.
    pub metrics: Arc<Metrics>,
    next_conn: AtomicU64,
    watermarks: broadcast::Sender<(String, u64)>,
    /// Watermarks confirmed by devices, waiting for the writer task.
    watermarks_pending: Arc<watermarks::Watermarks>,
}

impl Hub {
    /// A hub whose outbox head starts at `head`.
    pub fn new(head: u64) -> Arc<Hub> {
        let hub = Hub {
            state: Mutex::default(),
            metrics: Arc::default(),
            next_conn: AtomicU64::new(1),
            watermarks: broadcast::channel(256).0,
            watermarks_pending: Arc::default(),
        };
        hub.state.lock().expect("hub lock").head = head;
        Arc::new(hub)
    }

    /// A new process-unique connection id (never 0, which means "no origin").
    pub fn next_conn_id(&self) -> u64 {
        self.next_conn.fetch_add(1, Ordering::Relaxed)
    }

    /// Records a delivery watermark a device proved (its Pong); the writer task
    /// ([`Self::spawn_watermark_writer`]) stores it soon, together with the others.
    pub fn confirm_watermark(&self, device_id: &str, cursor: u64) {
        self.watermarks_pending.confirm(device_id, cursor);
    }

    /// A watermark `device_id` confirmed that is not stored yet, if any.
    pub fn unstored_watermark(&self, device_id: &str) -> Option<u64> {
        self.watermarks_pending.unstored(device_id)
    }

    /// Starts the task that stores the watermarks devices confirm and announces each stored one
    /// ([`Self::watermarks`]) until `stop` is cancelled. Await the handle before closing the
    /// store.
    pub fn spawn_watermark_writer(
        &self,
        store: iris_store::Store,
        stop: tokio_util::sync::CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        watermarks::spawn_writer(
            self.watermarks_pending.clone(),
            self.watermarks.clone(),
            store,
            stop,
        )
    }

    /// Every delivery watermark stored from now on, as `(device_id, cursor)`.
    pub fn watermarks(&self) -> broadcast::Receiver<(String, u64)> {
        self.watermarks.subscribe()
    }

    /// Sets the outbox head (at start, before any connection attaches).
    pub fn set_head(&self, head: u64) {
        let mut st = self.state.lock().expect("hub lock");
        st.head = st.head.max(head);
    }

    /// Fans committed frames out to every connection, in cursor order. Called by the store after
    /// each COMMIT.
    pub fn publish(&self, frames: &[Committed]) {
        let mut st = self.state.lock().expect("hub lock");
        for frame in frames {
            st.pickers.note(frame);
            let frame = Arc::new(frame.clone());
            for q in st.conns.values() {
                q.push_durable(frame.clone());
            }
            st.head = st.head.max(frame.cursor);
        }
    }

    /// Sends an ephemeral frame to every connection. With a key, a queued frame of the same key
    /// is replaced (a newer `message.update` of the same bubble, say).
    pub fn broadcast(&self, header: &Header, frame: EphemeralFrame, key: Option<Arc<str>>) {
        let item = match frame {
            EphemeralFrame::MessageUpdate(u) => Outgoing::Update(Arc::new(StreamUpdate::new(
                header.clone(),
                u.message_id,
                u.text.into(),
            ))),
            frame => Outgoing::Ephemeral(encode(header, &ServerFrame::from(frame)).into()),
        };
        let st = self.state.lock().expect("hub lock");
        for q in st.conns.values() {
            // A keyed frame is streaming progress (`message.update`, `tool.progress`): only for
            // devices that show its lane. Durable frames go to all.
            if key.is_none() || q.shows(header) {
                q.push_live(key.clone(), item.clone());
            }
        }
    }

    /// Sends an ephemeral frame to one connection, if it is still there.
    pub fn send_to(&self, conn_id: u64, header: &Header, frame: EphemeralFrame) {
        let json: Arc<str> = encode(header, &ServerFrame::from(frame)).into();
        if let Some(q) = self.state.lock().expect("hub lock").conns.get(&conn_id) {
            q.push_ephemeral(None, json);
        }
    }

    /// Registers a connection: the outbox head at this instant (every frame above it will reach
    /// the queue), the pickers open up to it, and the connection it replaces, if the device was
    /// already connected.
    pub fn attach(&self, queue: Arc<ConnQueue>) -> Attached {
        let mut st = self.state.lock().expect("hub lock");
        let head = st.head;
        queue.state.lock().expect("queue lock").last_cursor = head;
        let replaced = st
            .devices
            .insert(queue.device_id.clone(), queue.conn_id)
            .and_then(|id| st.conns.remove(&id));
        st.conns.insert(queue.conn_id, queue);
        Attached {
            head,
            replaced,
            open_pickers: st.pickers.frames(),
        }
    }

    /// The frame at `cursor`, if it opened a picker that is still open.
    pub fn open_picker(&self, cursor: u64) -> Option<serde_json::Value> {
        let st = self.state.lock().expect("hub lock");
        st.pickers.at(cursor).cloned()
    }

    /// Whether the picker `picker_id` is open.
    pub fn picker_open(&self, picker_id: &str) -> bool {
        self.state
            .lock()
            .expect("hub lock")
            .pickers
            .is_open(picker_id)
    }

    /// Removes a connection (if it is still registered).
    pub fn detach(&self, queue: &ConnQueue) {
        let mut st = self.state.lock().expect("hub lock");
        if st.conns.remove(&queue.conn_id).is_some()
            && st.devices.get(&queue.device_id) == Some(&queue.conn_id)
        {
            st.devices.remove(&queue.device_id);
        }
    }

    /// The device of a live connection.
    pub fn device_of(&self, conn_id: u64) -> Option<String> {
        let st = self.state.lock().expect("hub lock");
        st.conns.get(&conn_id).map(|q| q.device_id.clone())
    }

    /// Whether the device has a live connection.
    pub fn is_online(&self, device_id: &str) -> bool {
        self.state
            .lock()
            .expect("hub lock")
            .devices
            .contains_key(device_id)
    }

    /// Asks one device's connection to close.
    pub fn kick(&self, device_id: &str, reason: CloseReason) -> bool {
        let st = self.state.lock().expect("hub lock");
        match st.devices.get(device_id).and_then(|id| st.conns.get(id)) {
            Some(q) => {
                q.close(reason);
                true
            }
            None => false,
        }
    }

    /// Asks every connection to close.
    pub fn close_all(&self, reason: CloseReason) {
        for q in self.state.lock().expect("hub lock").conns.values() {
            q.close(reason);
        }
    }

    /// Live connections.
    pub fn connection_count(&self) -> usize {
        self.state.lock().expect("hub lock").conns.len()
    }

    /// The highest cursor published.
    pub fn head(&self) -> u64 {
        self.state.lock().expect("hub lock").head
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iris_store::FrameMeta;
    use proptest::prelude::*;

    fn committed(cursor: u64) -> Arc<Committed> {
        Arc::new(Committed {
            cursor,
            frame_type: Arc::from("message.stop"),
            json: Arc::from(format!("{{\"c\":{cursor}}}")),
            meta: FrameMeta::default(),
        })
    }

    #[derive(Debug, Clone)]
    enum Op {
        Durable,
        Update(u8, u16),
        Typing,
        Drain,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => Just(Op::Durable),
            4 => (0u8..4, any::<u16>()).prop_map(|(k, v)| Op::Update(k, v)),
            1 => Just(Op::Typing),
            1 => Just(Op::Drain),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

        /// Coalescing replaces queued updates with newer ones of the same key, and never drops or
        /// reorders a durable (terminal) frame.
        #[test]
        fn coalescing_never_drops_a_durable_frame(ops in prop::collection::vec(op(), 1..300)) {
            let q = ConnQueue::new(1, "d".into(), 10_000, Arc::default());
            let mut next = 1u64;
            let mut out: Vec<Outgoing> = Vec::new();
            let mut latest: std::collections::HashMap<u8, u16> = Default::default();
            for op in ops.into_iter().chain([Op::Drain]) {
                match op {
                    Op::Durable => {
                        q.push_durable(committed(next));
                        next += 1;
                    }
                    Op::Update(k, v) => {
                        q.push_ephemeral(Some(Arc::from(format!("mu:{k}"))), Arc::from(format!("{k}={v}")));
                        latest.insert(k, v);
                    }
                    Op::Typing => q.push_ephemeral(None, Arc::from("typing")),
                    Op::Drain => {
                        let drained = q.drain();
                        prop_assert!(drained.close.is_none());
                        // After a drain, the newest value of each key written since is what is queued.
                        let mut seen_keys = std::collections::HashSet::new();
                        for item in drained.items.iter().rev() {
                            if let Outgoing::Ephemeral(text) = item {
                                if let Some((k, v)) = text.split_once('=') {
                                    let k: u8 = k.parse().unwrap();
                                    if seen_keys.insert(k) {
                                        prop_assert_eq!(v.parse::<u16>().unwrap(), latest[&k]);
                                    }
                                }
                            }
                        }
                        out.extend(drained.items);
                    }
                }
            }
            let cursors: Vec<u64> = out
                .iter()
                .filter_map(|o| match o {
                    Outgoing::Durable(c) => Some(c.cursor),
                    Outgoing::Ephemeral(_) | Outgoing::Update(_) => None,
                })
                .collect();
            prop_assert_eq!(cursors, (1..next).collect::<Vec<u64>>());
        }
    }

    #[test]
    fn overflow_closes_instead_of_dropping() {
        let q = ConnQueue::new(1, "d".into(), 16, Arc::default());
        for c in 1..=17 {
            q.push_durable(committed(c));
        }
        let drained = q.drain();
        assert_eq!(drained.close, Some(CloseReason::Overflow));
        assert!(
            drained.items.is_empty(),
            "an overflowed connection is dropped; its frames wait in the outbox"
        );
    }
}
