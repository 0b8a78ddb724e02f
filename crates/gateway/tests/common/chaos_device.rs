//! The parts of the chaos test (tests/chaos_once.rs): a seeded random source, the gateway as a
//! process that is killed and started again on one data dir, and a device that drops its socket
//! at random points, syncs from its last cursor, and sends again whatever it has no echo for.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use iris_client::{Client, ClientError, ConnectOptions, Event};
use iris_protocol::{ClientFrame, ErrorCode, Header, MessageSend, RequestId, ServerFrame};
use tokio::process::Child;
use tokio::sync::watch;

use super::prompt_log::recording_agent;
use super::{binary, TOKEN};

/// A small seeded random source (splitmix64): the same seed plays the same choices.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// The gateway's configuration beside `data`: the per-device budgets are far above what the
/// devices send: this test is about exactly once, not about the budgets.
const CONFIG: &str = "[limits]\nsends_per_minute = 1000000\nrequests_per_minute = 1000000\n";

/// The gateway binary on `data` with the recording demo agent (its log in `log`), on a fresh
/// loopback port; returns the process and its URL.
pub async fn spawn_gateway(data: &Path, log: &Path) -> (Child, String) {
    let config = data.with_extension("toml");
    std::fs::write(&config, CONFIG).expect("write the config");
    let agent = recording_agent(log);
    let mut cmd = binary::serve(&[
        "--listen",
        "127.0.0.1:0",
        "--token",
        TOKEN,
        "--data-dir",
        data.to_str().expect("utf-8 path"),
        "--agent",
        &agent,
        "--config",
        config.to_str().expect("utf-8 path"),
    ]);
    cmd.env("IRIS_LOG", "error");
    let gw = binary::Running::start(cmd).await;
    (gw.child, gw.url)
}

/// Ends the gateway with SIGKILL (`kill`) or SIGTERM, and waits until it has exited.
pub async fn end_gateway(child: &mut Child, kill: bool) {
    if kill {
        child.start_kill().expect("SIGKILL");
    } else {
        let pid = child.id().expect("a running gateway") as libc::pid_t;
        // SAFETY: kill(2) with a pid this test spawned and has not reaped yet.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0, "SIGTERM");
    }
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the gateway exits within 30 s")
        .expect("wait for the gateway");
    if !kill {
        assert!(
            status.success(),
            "a SIGTERM ends the gateway cleanly: {status:?}"
        );
    }
}

/// What all devices did, counted as they go.
#[derive(Default, Debug)]
pub struct Counts {
    /// Messages whose echo (or duplicate ack) a device has: progress of the run.
    pub settled: AtomicUsize,
    pub connections: AtomicUsize,
    pub sends: AtomicUsize,
    pub duplicate_acks: AtomicUsize,
    pub drops: AtomicUsize,
    /// Refusals by error code (`internal` while stopping, `rate_limited` with a full queue, …).
    pub refusals: Mutex<BTreeMap<String, usize>>,
}

impl Counts {
    fn add(counter: &AtomicUsize) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn get(counter: &AtomicUsize) -> usize {
        counter.load(Ordering::Relaxed)
    }
}

/// One message a device sends: its lane, its text and its `client_id`, all unique.
#[derive(Clone, Debug)]
pub struct Planned {
    pub lane: String,
    pub text: String,
    pub client_id: String,
}

impl Planned {
    fn frame(&self) -> ClientFrame {
        ClientFrame::MessageSend(MessageSend {
            text: self.text.clone(),
            client_id: Some(self.client_id.clone()),
            ..Default::default()
        })
    }

    fn header(&self) -> Header {
        Header::lane(self.lane.clone(), None)
    }
}

/// A device under chaos: at most one connection at a time, to whatever URL the gateway has now.
pub struct Device {
    pub id: String,
    url: watch::Receiver<Option<String>>,
    rng: Rng,
    counts: Arc<Counts>,
    progress: Arc<watch::Sender<usize>>,
    client: Option<Client>,
    /// The highest cursor this device holds every durable frame up to.
    cursor: u64,
    /// Every durable frame it received, live or replayed, in arrival order.
    pub frames: Vec<Event>,
    /// The `client_id`s whose echo it has (or a duplicate ack for).
    settled: HashSet<String>,
}

impl Device {
    pub fn new(
        id: String,
        url: watch::Receiver<Option<String>>,
        seed: u64,
        counts: Arc<Counts>,
        progress: Arc<watch::Sender<usize>>,
    ) -> Device {
        Device {
            id,
            url,
            rng: Rng::new(seed),
            counts,
            progress,
            client: None,
            cursor: 0,
            frames: Vec::new(),
            settled: HashSet::new(),
        }
    }

    /// Connects to the current gateway (waiting for one to be up) and syncs from the last cursor.
    async fn connect(&mut self) {
        loop {
            let url = self.url.borrow_and_update().clone();
            if let Some(url) = url {
                if let Ok((mut client, _)) =
                    Client::connect(ConnectOptions::new(url, TOKEN, self.id.clone())).await
                {
                    Counts::add(&self.counts.connections);
                    client.set_default_timeout(Duration::from_secs(5));
                    match client.sync(self.cursor).await {
                        Ok(replay) => {
                            assert!(!replay.gap, "{}: no frame is pruned", self.id);
                            for event in replay.frames {
                                self.record(event);
                            }
                            self.cursor = self.cursor.max(replay.cursor);
                            self.client = Some(client);
                            self.drain();
                            return;
                        }
                        Err(ClientError::Server { code, message, .. }) => {
                            panic!(
                                "{}: sync({}) refused: {code:?} {message}",
                                self.id, self.cursor
                            )
                        }
                        Err(_) => {}
                    }
                }
            }
            // The gateway is down or going down: wait for the next one.
            let _ = tokio::time::timeout(Duration::from_millis(50), self.url.changed()).await;
        }
    }

    /// Takes every frame the connection has received so far.
    fn drain(&mut self) {
        let mut taken = Vec::new();
        if let Some(client) = self.client.as_mut() {
            while let Some(event) = client.try_next_event() {
                taken.push(event);
            }
        }
        for event in taken {
            self.record(event);
        }
    }

    fn record(&mut self, event: Event) {
        let Some(cursor) = event.cursor else { return };
        self.cursor = self.cursor.max(cursor);
        if let ServerFrame::Message(m) = &event.body {
            if let Some(id) = &m.client_id {
                if id.starts_with(&format!("{}/", self.id)) && self.settled.insert(id.clone()) {
                    self.settle();
                }
            }
        }
        self.frames.push(event);
    }

    fn settle(&self) {
        Counts::add(&self.counts.settled);
        self.progress.send_modify(|n| *n += 1);
    }

    fn drop_socket(&mut self) {
        if self.client.take().is_some() {
            Counts::add(&self.counts.drops);
        }
    }

    /// Sends every planned message until it has its echo, dropping the socket at random points:
    /// before sending, after sending and before the echo, after the echo.
    pub async fn run(mut self, plan: Vec<Planned>) -> Device {
        for message in &plan {
            while !self.settled.contains(&message.client_id) {
                if self.client.is_none() {
                    self.connect().await;
                    continue;
                }
                match self.rng.below(100) {
                    0..=3 => {
                        self.drop_socket();
                        continue;
                    }
                    4..=7 => {
                        Counts::add(&self.counts.sends);
                        let client = self.client.as_mut().expect("connected");
                        // An id far from the client's own, whose answer nobody waits for.
                        let header = message.header().with_id(Some(RequestId::from(1 << 40)));
                        let _ = client.send(header, message.frame()).await;
                        self.drop_socket();
                        continue;
                    }
                    _ => {}
                }
                self.send(message).await;
                if self.settled.contains(&message.client_id) && self.rng.chance(4) {
                    self.drain();
                    self.drop_socket();
                }
            }
        }
        self
    }

    async fn send(&mut self, message: &Planned) {
        Counts::add(&self.counts.sends);
        let client = self.client.as_mut().expect("connected");
        let result = client.request(message.header(), message.frame()).await;
        self.drain();
        match result {
            Ok(event) => match &event.body {
                ServerFrame::Message(m) => {
                    assert_eq!(m.client_id.as_deref(), Some(message.client_id.as_str()));
                    assert_eq!(m.text, message.text);
                    assert!(event.cursor.is_some(), "the echo is durable");
                    self.record(event);
                }
                ServerFrame::Ack(ack) if ack.duplicate => {
                    Counts::add(&self.counts.duplicate_acks);
                    assert!(ack.message_id.is_some(), "{ack:?}");
                    if self.settled.insert(message.client_id.clone()) {
                        self.settle();
                    }
                }
                other => panic!("{}: message.send answered by {other:?}", self.id),
            },
            Err(ClientError::Server {
                code, message: why, ..
            }) => {
                assert_ne!(
                    code,
                    ErrorCode::BadRequest,
                    "{}: {} refused: {why}",
                    self.id,
                    message.client_id
                );
                *self
                    .counts
                    .refusals
                    .lock()
                    .unwrap()
                    .entry(format!("{code:?}"))
                    .or_default() += 1;
                self.after_refusal().await;
            }
            // The socket broke (the gateway went down) or the answer did not come in time.
            Err(_) => self.drop_socket(),
        }
    }

    /// Waits a little before sending again: until the next receipt (a queue moved) or 100 ms.
    async fn after_refusal(&mut self) {
        let Some(client) = self.client.as_mut() else {
            return;
        };
        let moved = |e: &Event| e.frame_type() == "message.state";
        let got = client
            .wait_for_timeout(moved, Duration::from_millis(100))
            .await;
        let mut skipped = client.take_seen();
        match got {
            Ok(event) => skipped.push(event),
            Err(ClientError::Timeout) => {}
            Err(_) => self.client = None,
        }
        for event in skipped {
            self.record(event);
        }
    }

    /// After the run: connects again if need be and syncs, so the device holds every frame.
    pub async fn catch_up(&mut self) {
        self.drain();
        if let Some(client) = self.client.as_mut() {
            match client.sync(self.cursor).await {
                Ok(replay) => {
                    for event in replay.frames {
                        self.record(event);
                    }
                    self.drain();
                    return;
                }
                Err(_) => self.client = None,
            }
        }
        self.connect().await;
    }

    /// The cursor this device holds everything up to.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }
}

/// A directory for a test's files: `data` for the gateway and `logs` for what the agent writes.
pub fn dirs(root: &Path) -> (PathBuf, PathBuf) {
    let (data, logs) = (root.join("data"), root.join("logs"));
    std::fs::create_dir_all(&logs).expect("logs dir");
    (data, logs)
}
