//! State shared by every connection: configuration, the store, the hub, limiters.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use iris_protocol::{encode, Header, ServerFrame};
use iris_store::{FrameMeta, NewFrame, Store, WriteTx};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::hub::Hub;

/// Everything a connection needs, shared behind an `Arc`.
pub struct Shared {
    /// The resolved configuration.
    pub config: Config,
    /// The token devices must present.
    pub token: String,
    /// The durable store.
    pub store: Store,
    /// Live connections.
    pub hub: Arc<Hub>,
    /// Cancelled when the gateway shuts down.
    pub shutdown: CancellationToken,
    /// Connection tasks, awaited on shutdown.
    pub tasks: TaskTracker,
    /// Failed `hello`s per address.
    pub auth_failures: Mutex<HashMap<IpAddr, VecDeque<Instant>>>,
    /// Send budget per device.
    pub send_buckets: Mutex<HashMap<String, TokenBucket>>,
    /// The agent bridge.
    pub agents: Arc<crate::agent::Agents>,
    /// The media file store under `<data_dir>/media/`.
    pub media: crate::media::MediaFiles,
    /// Operational counters.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The scheduler of scheduled prompts.
    pub cron: crate::cron::Cron,
    /// Every stored delivery watermark `(device_id, cursor)`, for observers.
    pub confirmations: tokio::sync::broadcast::Sender<(String, u64)>,
    next_conn: AtomicU64,
}

impl Shared {
    /// Assembles the shared state.
    pub fn new(
        config: Config,
        token: String,
        store: Store,
        hub: Arc<Hub>,
        agents: Arc<crate::agent::Agents>,
    ) -> Arc<Shared> {
        let metrics = hub.metrics.clone();
        let cron = crate::cron::Cron::new(config.cron.clone());
        Arc::new(Shared {
            cron,
            media: crate::media::MediaFiles::new(&config.data_dir),
            config,
            agents,
            metrics,
            token,
            store,
            hub,
            shutdown: CancellationToken::new(),
            tasks: TaskTracker::new(),
            auth_failures: Mutex::default(),
            send_buckets: Mutex::default(),
            confirmations: tokio::sync::broadcast::channel(256).0,
            next_conn: AtomicU64::new(1),
        })
    }

    /// A new process-unique connection id (never 0, which means "no origin").
    pub fn next_conn_id(&self) -> u64 {
        self.next_conn.fetch_add(1, Ordering::Relaxed)
    }

    /// Whether this address has failed `hello` too often in the last minute.
    pub fn auth_blocked(&self, addr: IpAddr) -> bool {
        let mut map = self.auth_failures.lock().expect("auth lock");
        let Some(times) = map.get_mut(&addr) else {
            return false;
        };
        let window = Instant::now() - Duration::from_secs(60);
        while times.front().is_some_and(|t| *t < window) {
            times.pop_front();
        }
        times.len() >= self.config.limits.auth_failures_per_minute as usize
    }

    /// Records a failed `hello` from this address.
    pub fn record_auth_failure(&self, addr: IpAddr) {
        let mut map = self.auth_failures.lock().expect("auth lock");
        if map.len() > 10_000 {
            // Bound the table: old entries of other addresses go first.
            let window = Instant::now() - Duration::from_secs(60);
            map.retain(|_, times| times.back().is_some_and(|t| *t >= window));
        }
        map.entry(addr).or_default().push_back(Instant::now());
    }

    /// Takes one send from the device's budget; false when it is exhausted.
    pub fn take_send(&self, device_id: &str) -> bool {
        let per_minute = self.config.limits.sends_per_minute;
        let mut map = self.send_buckets.lock().expect("bucket lock");
        map.entry(device_id.to_owned())
            .or_insert_with(|| TokenBucket::new(per_minute))
            .take()
    }

    /// Encodes and broadcasts an ephemeral frame to every connection.
    pub fn broadcast_ephemeral(&self, header: &Header, frame: &ServerFrame, key: Option<Arc<str>>) {
        self.hub
            .broadcast_ephemeral(key, encode(header, frame).into());
    }
}

/// A token bucket: `capacity` sends at once, refilled at `per_minute`.
#[derive(Debug)]
pub struct TokenBucket {
    tokens: f64,
    capacity: f64,
    per_sec: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket allowing `per_minute` sends a minute, in bursts of up to a quarter of that.
    pub fn new(per_minute: u32) -> Self {
        let capacity = f64::from(per_minute.max(4)) / 4.0;
        TokenBucket {
            tokens: capacity,
            capacity,
            per_sec: f64::from(per_minute) / 60.0,
            last: Instant::now(),
        }
    }

    fn take(&mut self) -> bool {
        let now = Instant::now();
        self.tokens = (self.tokens + now.duration_since(self.last).as_secs_f64() * self.per_sec)
            .min(self.capacity);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Who a durable frame answers: its connection and request id, so that the origin receives the
/// frame as its response (with `id`) while every other device gets the broadcast.
#[derive(Debug, Clone, Default)]
pub struct Origin {
    /// Connection id (0 = none).
    pub conn: u64,
    /// The request id, as JSON text.
    pub request_id: Option<Arc<str>>,
}

impl Origin {
    /// No origin: a pure broadcast.
    pub fn none() -> Self {
        Origin::default()
    }
}

/// Appends a server frame to the outbox inside a write transaction; returns its cursor. The row
/// is filed under the header's lane, so deleting the lane or the message removes it.
pub fn append_frame(
    tx: &mut WriteTx<'_>,
    header: &Header,
    frame: &ServerFrame,
    message_id: Option<&str>,
    origin: &Origin,
) -> Result<u64, iris_store::StoreError> {
    append_filed(
        tx,
        header,
        frame,
        (header.chat_id.as_deref(), header.thread_id.as_deref()),
        message_id,
        origin,
    )
}

/// Appends a frame filed under a lane other than its header's: `channel.*` frames carry no lane in
/// their envelope but belong to the channel they describe, and go when it is deleted.
pub fn append_filed(
    tx: &mut WriteTx<'_>,
    header: &Header,
    frame: &ServerFrame,
    lane: (Option<&str>, Option<&str>),
    message_id: Option<&str>,
    origin: &Origin,
) -> Result<u64, iris_store::StoreError> {
    use iris_protocol::FrameBody;
    tx.append(NewFrame {
        frame_type: frame.frame_type().to_owned(),
        chat_id: lane.0.map(str::to_owned),
        thread_id: lane.1.map(str::to_owned),
        message_id: message_id.map(str::to_owned),
        json: encode(header, frame),
        meta: FrameMeta {
            origin_conn: origin.conn,
            request_id: origin.request_id.clone(),
        },
    })
}
