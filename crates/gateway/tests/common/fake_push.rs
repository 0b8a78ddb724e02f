//! The one local server standing in for every push service: Google's token endpoint, the FCM
//! send endpoint, an ntfy server and a browser's Web Push service (every `/push/…` path is a push
//! resource), recording every request (the `push*.rs` and `webpush.rs` tests), and a gateway
//! pointed at them.
//!
//! `fixtures/push-test-key.pem` is a throwaway RSA key made for these tests only.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::Router;
use iris_client::{Client, ConnectOptions, Event};
use iris_gateway::push::{FcmConfig, NtfyConfig, PushConfig};
use iris_protocol::HelloAck;
use serde_json::{json, Value};
use tokio::sync::Notify;

use super::{demo_agent, send_text, TestGateway};

pub const PRIVATE_KEY: &str = include_str!("../fixtures/push-test-key.pem");
pub const PUBLIC_KEY: &str = include_str!("../fixtures/push-test-key.pub.pem");
pub const PROJECT: &str = "iris-test";
pub const CLIENT_EMAIL: &str = "push@iris-test.iam.gserviceaccount.com";
pub const NTFY_TOKEN: &str = "tk_ntfy_test";
/// Upper bound for anything a test waits for.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// FCM's answer for a token that is no longer registered (404 `UNREGISTERED`).
pub fn fcm_unregistered() -> (u16, Value) {
    let body = json!({"error": {
        "code": 404,
        "message": "Requested entity was not found.",
        "status": "NOT_FOUND",
        "details": [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": "UNREGISTERED"}],
    }});
    (404, body)
}

/// One request a fake backend received, with the status it answered.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: String,
    pub headers: HeaderMap,
    /// The body as text (a Web Push body, encrypted, is in `bytes`).
    pub body: String,
    pub bytes: Vec<u8>,
    pub status: u16,
}

impl Recorded {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("a JSON body")
    }

    /// `message.data` of an FCM request.
    pub fn data(&self, key: &str) -> String {
        self.json()["message"]["data"][key]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    pub fn fcm_token(&self) -> String {
        self.json()["message"]["token"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    pub fn delivered(&self) -> bool {
        self.status == 200
    }
}

#[derive(Default)]
pub struct Backend {
    pub tokens: Vec<Recorded>,
    pub fcm: Vec<Recorded>,
    pub ntfy: Vec<Recorded>,
    pub webpush: Vec<Recorded>,
    /// Answers a Web Push resource gives before it starts accepting (201), per path, in order.
    pub webpush_script: HashMap<String, VecDeque<u16>>,
    /// Answers FCM gives before it starts accepting, in order.
    pub fcm_script: VecDeque<(u16, Value)>,
    /// While set, FCM answers every send with this status.
    pub fcm_down: Option<u16>,
}

/// Google's token endpoint, FCM, ntfy and Web Push on one local port.
#[derive(Clone)]
pub struct FakeBackends {
    pub addr: SocketAddr,
    pub state: Arc<Mutex<Backend>>,
    pub changed: Arc<Notify>,
}

impl FakeBackends {
    pub async fn start() -> FakeBackends {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let fake = FakeBackends {
            addr: listener.local_addr().expect("addr"),
            state: Arc::default(),
            changed: Arc::new(Notify::new()),
        };
        let app = Router::new().fallback(answer).with_state(fake.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        fake
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://<addr>/push/<name>`: a browser's push subscription endpoint on this fake.
    pub fn webpush_endpoint(&self, name: &str) -> String {
        format!("{}/push/{name}", self.url())
    }

    /// Web Push requests to `path` are answered with these statuses first, in order.
    pub fn script_webpush(&self, path: &str, statuses: &[u16]) {
        self.with(|b| {
            b.webpush_script
                .entry(path.to_owned())
                .or_default()
                .extend(statuses)
        });
    }

    pub fn token_url(&self) -> String {
        format!("{}/token", self.url())
    }

    pub fn with<T>(&self, f: impl FnOnce(&mut Backend) -> T) -> T {
        f(&mut self.state.lock().expect("fake lock"))
    }

    /// Waits until `cond` holds for what was recorded.
    pub async fn until(&self, what: &str, cond: impl Fn(&Backend) -> bool) {
        let wait = async {
            loop {
                let changed = self.changed.notified();
                if self.with(|b| cond(b)) {
                    return;
                }
                changed.await;
            }
        };
        if tokio::time::timeout(PATIENCE, wait).await.is_err() {
            let (fcm, ntfy, web) = self.with(|b| (b.fcm.len(), b.ntfy.len(), b.webpush.len()));
            panic!(
                "timed out waiting for {what} (requests: fcm {fcm}, ntfy {ntfy}, web push {web})"
            );
        }
    }

    /// The `n`th FCM request (0-based), once it arrived.
    pub async fn fcm(&self, n: usize) -> Recorded {
        self.until(&format!("FCM request #{n}"), |b| b.fcm.len() > n)
            .await;
        self.with(|b| b.fcm[n].clone())
    }

    /// The `n`th Web Push request (0-based), once it arrived.
    pub async fn webpush(&self, n: usize) -> Recorded {
        self.until(&format!("Web Push request #{n}"), |b| b.webpush.len() > n)
            .await;
        self.with(|b| b.webpush[n].clone())
    }

    /// The `n`th ntfy request (0-based), once it arrived.
    pub async fn ntfy(&self, n: usize) -> Recorded {
        self.until(&format!("ntfy request #{n}"), |b| b.ntfy.len() > n)
            .await;
        self.with(|b| b.ntfy[n].clone())
    }

    /// A service-account key file naming this fake as its token endpoint.
    pub fn service_account(&self, dir: &Path) -> PathBuf {
        let path = dir.join("service-account.json");
        let account = json!({
            "type": "service_account",
            "project_id": PROJECT,
            "private_key_id": "test-key-1",
            "private_key": PRIVATE_KEY,
            "client_email": CLIENT_EMAIL,
            "client_id": "1",
            "token_uri": self.token_url(),
        });
        std::fs::write(&path, account.to_string()).expect("write service account");
        path
    }

    /// Push settings pointing both backends at this fake: a short coalescing window, fast
    /// retries, and the conversation's text in the pushes (`content = "full"`) so that tests can
    /// tell pushes apart by it.
    pub fn config(&self, service_account: PathBuf) -> PushConfig {
        PushConfig {
            private: Some(false),
            coalesce: Duration::from_millis(600),
            retry_initial: Duration::from_millis(100),
            retry_max: Duration::from_secs(1),
            max_attempts: 6,
            fcm: Some(FcmConfig {
                service_account,
                project_id: Some(PROJECT.into()),
                token_url: Some(self.token_url()),
                base_url: self.url(),
            }),
            ntfy: Some(NtfyConfig {
                server: format!("{}/ntfy", self.url()),
                token: Some(NTFY_TOKEN.into()),
            }),
            ..PushConfig::default()
        }
    }
}

async fn answer(
    axum::extract::State(fake): axum::extract::State<FakeBackends>,
    uri: Uri,
    headers: HeaderMap,
    bytes: Bytes,
) -> (StatusCode, String) {
    let path = uri.path().to_owned();
    let (status, reply) = fake.with(|b| {
        let mut record = Recorded {
            path: path.clone(),
            headers,
            body: String::from_utf8_lossy(&bytes).into_owned(),
            bytes: bytes.to_vec(),
            status: 200,
        };
        if path == "/token" {
            b.tokens.push(record);
            let token = format!("access-{}", b.tokens.len());
            (
                200,
                json!({"access_token": token, "expires_in": 3599, "token_type": "Bearer"}),
            )
        } else if path.starts_with("/v1/projects/") {
            let (status, reply) = match (b.fcm_down, b.fcm_script.pop_front()) {
                (Some(down), _) => (
                    down,
                    json!({"error": {"code": down, "status": "UNAVAILABLE"}}),
                ),
                (None, Some(scripted)) => scripted,
                (None, None) => (
                    200,
                    json!({"name": format!("projects/{PROJECT}/messages/{}", b.fcm.len() + 1)}),
                ),
            };
            record.status = status;
            b.fcm.push(record);
            (status, reply)
        } else if path.starts_with("/push/") {
            let scripted = b
                .webpush_script
                .get_mut(&path)
                .and_then(VecDeque::pop_front);
            let status = scripted.unwrap_or(201);
            record.status = status;
            b.webpush.push(record);
            (status, json!({}))
        } else if path.starts_with("/ntfy/") {
            b.ntfy.push(record);
            (200, json!({"id": "n1", "event": "message"}))
        } else {
            (404, json!({}))
        }
    });
    fake.changed.notify_waiters();
    (
        StatusCode::from_u16(status).expect("status"),
        reply.to_string(),
    )
}

/// A gateway with the demo agent and push pointed at `fake`.
pub async fn gateway(
    fake: &FakeBackends,
    tweak: impl FnOnce(&mut PushConfig),
) -> (TestGateway, tempfile::TempDir) {
    let keys = tempfile::tempdir().expect("tempdir");
    let mut push = fake.config(fake.service_account(keys.path()));
    tweak(&mut push);
    let gw = TestGateway::start_with(|c| {
        c.agent_command = Some(demo_agent());
        c.push = push;
    })
    .await;
    (gw, keys)
}

pub fn device(gw: &TestGateway, id: &str, fcm: Option<&str>, ntfy: Option<&str>) -> ConnectOptions {
    let mut opts = gw.options(id);
    opts.fcm_token = fcm.map(str::to_owned);
    opts.ntfy_topic = ntfy.map(str::to_owned);
    opts
}

/// Pairs a device with its push registration, then puts it in a pocket: it disconnects, and the
/// gateway has noticed.
pub async fn pair_and_leave(gw: &TestGateway, opts: ConnectOptions) -> HelloAck {
    let id = opts.device_id.clone();
    let (client, ack) = Client::connect(opts).await.expect("connect");
    client.close().await.expect("close");
    // The server drops the connection from the hub just after answering the close.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while gw.shared.hub.is_online(&id) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{id} still counted as connected"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    ack
}

/// Sends a prompt and waits for the agent's final message; returns its event (with its cursor).
pub async fn ask(client: &mut Client, text: &str) -> Event {
    send_text(client, "default", text).await;
    client
        .wait_for(|e| e.frame_type() == "message.stop")
        .await
        .expect("the agent answers")
}

pub fn cursor(event: &Event) -> u64 {
    event.cursor.expect("a durable frame has a cursor")
}

pub fn stop_message_id(event: &Event) -> String {
    event.json()["payload"]["message_id"]
        .as_str()
        .expect("message_id")
        .to_owned()
}
