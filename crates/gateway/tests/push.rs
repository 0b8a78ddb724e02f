//! Push notifications to devices without a live connection, against local servers that stand in
//! for Google's token endpoint, the FCM send endpoint and an ntfy server and record every request:
//! the exact request shapes (the JWT assertion checked with the test key), token caching, one
//! push per burst, none for a connected device, `last_pushed_cursor` in `hello.ack`, retries
//! after 500 and 429, removal of an unregistered token, previews off, and a crash (SIGKILL of the
//! real binary) followed by a restart that pushes what was pending, once.
//!
//! `fixtures/push-test-key.pem` is a throwaway RSA key made for these tests only.

mod common;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::{HeaderMap, StatusCode, Uri};
use axum::Router;
use common::{demo_agent, send_text, TestGateway, TOKEN};
use iris_client::{Client, ConnectOptions, Event};
use iris_gateway::push::{FcmConfig, NtfyConfig, PushConfig};
use iris_protocol::HelloAck;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::Notify;

const PRIVATE_KEY: &str = include_str!("fixtures/push-test-key.pem");
const PUBLIC_KEY: &str = include_str!("fixtures/push-test-key.pub.pem");
const PROJECT: &str = "iris-test";
const CLIENT_EMAIL: &str = "push@iris-test.iam.gserviceaccount.com";
const NTFY_TOKEN: &str = "tk_ntfy_test";
/// Upper bound for anything a test waits for.
const PATIENCE: Duration = Duration::from_secs(20);

/// One request a fake backend received, with the status it answered.
#[derive(Debug, Clone)]
struct Recorded {
    path: String,
    headers: HeaderMap,
    body: String,
    status: u16,
}

impl Recorded {
    fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("a JSON body")
    }

    /// `message.data` of an FCM request.
    fn data(&self, key: &str) -> String {
        self.json()["message"]["data"][key]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    fn fcm_token(&self) -> String {
        self.json()["message"]["token"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    fn delivered(&self) -> bool {
        self.status == 200
    }
}

#[derive(Default)]
struct Backend {
    tokens: Vec<Recorded>,
    fcm: Vec<Recorded>,
    ntfy: Vec<Recorded>,
    /// Answers FCM gives before it starts accepting, in order.
    fcm_script: VecDeque<(u16, Value)>,
    /// While set, FCM answers every send with this status.
    fcm_down: Option<u16>,
}

/// Google's token endpoint, FCM and ntfy on one local port.
#[derive(Clone)]
struct FakeBackends {
    addr: SocketAddr,
    state: Arc<Mutex<Backend>>,
    changed: Arc<Notify>,
}

impl FakeBackends {
    async fn start() -> FakeBackends {
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

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn token_url(&self) -> String {
        format!("{}/token", self.url())
    }

    fn with<T>(&self, f: impl FnOnce(&mut Backend) -> T) -> T {
        f(&mut self.state.lock().expect("fake lock"))
    }

    /// Waits until `cond` holds for what was recorded.
    async fn until(&self, what: &str, cond: impl Fn(&Backend) -> bool) {
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
            let (fcm, ntfy) = self.with(|b| (b.fcm.len(), b.ntfy.len()));
            panic!("timed out waiting for {what} (fcm requests: {fcm}, ntfy requests: {ntfy})");
        }
    }

    /// The `n`th FCM request (0-based), once it arrived.
    async fn fcm(&self, n: usize) -> Recorded {
        self.until(&format!("FCM request #{n}"), |b| b.fcm.len() > n)
            .await;
        self.with(|b| b.fcm[n].clone())
    }

    /// The `n`th ntfy request (0-based), once it arrived.
    async fn ntfy(&self, n: usize) -> Recorded {
        self.until(&format!("ntfy request #{n}"), |b| b.ntfy.len() > n)
            .await;
        self.with(|b| b.ntfy[n].clone())
    }

    /// A service-account key file naming this fake as its token endpoint.
    fn service_account(&self, dir: &Path) -> PathBuf {
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

    /// Push settings pointing both backends at this fake: a short coalescing window and fast
    /// retries.
    fn config(&self, service_account: PathBuf) -> PushConfig {
        PushConfig {
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
    body: String,
) -> (StatusCode, String) {
    let path = uri.path().to_owned();
    let (status, reply) = fake.with(|b| {
        let mut record = Recorded {
            path: path.clone(),
            headers,
            body,
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
async fn gateway(
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

fn device(gw: &TestGateway, id: &str, fcm: Option<&str>, ntfy: Option<&str>) -> ConnectOptions {
    let mut opts = gw.options(id);
    opts.fcm_token = fcm.map(str::to_owned);
    opts.ntfy_topic = ntfy.map(str::to_owned);
    opts
}

/// Pairs a device with its push registration, then puts it in a pocket: it disconnects, and the
/// gateway has noticed.
async fn pair_and_leave(gw: &TestGateway, opts: ConnectOptions) -> HelloAck {
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
async fn ask(client: &mut Client, text: &str) -> Event {
    send_text(client, "default", text).await;
    client
        .wait_for(|e| e.frame_type() == "message.stop")
        .await
        .expect("the agent answers")
}

fn cursor(event: &Event) -> u64 {
    event.cursor.expect("a durable frame has a cursor")
}

fn stop_message_id(event: &Event) -> String {
    event.json()["payload"]["message_id"]
        .as_str()
        .expect("message_id")
        .to_owned()
}

#[tokio::test]
async fn an_offline_device_gets_an_fcm_push_of_the_documented_shape() {
    let fake = FakeBackends::start().await;
    let (gw, _keys) = gateway(&fake, |_| {}).await;
    let phone = device(&gw, "phone", Some("fcm-phone"), None);
    let ack = pair_and_leave(&gw, phone.clone()).await;
    assert_eq!(
        ack.server_caps.push.as_deref(),
        Some("fcm,ntfy"),
        "hello.ack names the configured backends"
    );
    assert_eq!(ack.last_pushed_cursor, 0);

    let (mut laptop, _) = gw.connect("laptop").await;
    let first = ask(&mut laptop, "hello there").await;
    let push = fake.fcm(0).await;

    // The access token came from the JWT bearer grant, signed with the service account's key.
    let grant = fake.with(|b| b.tokens[0].clone());
    assert_eq!(
        grant.header("content-type"),
        "application/x-www-form-urlencoded"
    );
    let form: Vec<(String, String)> = reqwest::Url::parse(&format!("http://x/?{}", grant.body))
        .expect("form")
        .query_pairs()
        .into_owned()
        .collect();
    assert_eq!(
        form[0],
        (
            "grant_type".to_owned(),
            "urn:ietf:params:oauth:grant-type:jwt-bearer".to_owned()
        )
    );
    assert_eq!(form[1].0, "assertion");
    let mut rules = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
    rules.set_audience(&[fake.token_url()]);
    rules.set_issuer(&[CLIENT_EMAIL]);
    let key = jsonwebtoken::DecodingKey::from_rsa_pem(PUBLIC_KEY.as_bytes()).expect("public key");
    let jwt = jsonwebtoken::decode::<Value>(&form[1].1, &key, &rules)
        .expect("the assertion verifies with the test key");
    assert_eq!(jwt.header.kid.as_deref(), Some("test-key-1"));
    assert_eq!(
        jwt.claims["scope"],
        "https://www.googleapis.com/auth/firebase.messaging"
    );
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    let iat = jwt.claims["iat"].as_i64().expect("iat");
    assert!((iat - now).abs() < 60, "iat {iat} is now ({now})");
    assert_eq!(jwt.claims["exp"].as_i64(), Some(iat + 3600));

    // The send: the documented message, every data value a string.
    assert_eq!(push.path, format!("/v1/projects/{PROJECT}/messages:send"));
    assert_eq!(push.header("authorization"), "Bearer access-1");
    assert_eq!(
        push.json(),
        json!({"message": {
            "token": "fcm-phone",
            "notification": {"title": "Demo agent replied in Default", "body": "Echo: hello there"},
            "data": {
                "cursor": cursor(&first).to_string(),
                "type": "message.stop",
                "chat_id": "default",
                "thread_id": "",
                "message_id": stop_message_id(&first),
                "count": "1",
            },
            "android": {"priority": "HIGH", "collapse_key": "iris-default", "notification": {"tag": "iris-default"}},
        }})
    );

    // The next push reuses the cached access token.
    let second = ask(&mut laptop, "and again").await;
    let push = fake.fcm(1).await;
    assert_eq!(push.header("authorization"), "Bearer access-1");
    assert_eq!(push.data("cursor"), cursor(&second).to_string());
    assert_eq!(
        fake.with(|b| b.tokens.len()),
        1,
        "one token request for both pushes"
    );

    // Back online, the phone learns what already woke it, and sync shows the same cursor.
    let (mut phone, ack) = Client::connect(phone).await.expect("reconnect");
    assert_eq!(ack.last_pushed_cursor, cursor(&second));
    let replay = phone.sync(0).await.expect("sync");
    let last_stop = replay
        .frames
        .iter()
        .rev()
        .find(|e| e.frame_type() == "message.stop")
        .expect("replayed answer");
    assert_eq!(
        last_stop.cursor,
        Some(ack.last_pushed_cursor),
        "the app can skip notifying what was pushed"
    );
    gw.stop().await;
}

#[tokio::test]
async fn an_ntfy_push_carries_title_priority_tags_and_click_headers() {
    let fake = FakeBackends::start().await;
    let (gw, _keys) = gateway(&fake, |_| {}).await;
    let phone = device(&gw, "phone", None, Some("iris-phone-topic"));
    pair_and_leave(&gw, phone.clone()).await;
    let (mut laptop, _) = gw.connect("laptop").await;

    let answer = ask(&mut laptop, "ping over ntfy").await;
    let push = fake.ntfy(0).await;
    assert_eq!(push.path, "/ntfy/iris-phone-topic");
    assert_eq!(push.body, "Echo: ping over ntfy");
    assert_eq!(push.header("title"), "Demo agent replied in Default");
    assert_eq!(push.header("priority"), "default");
    assert_eq!(push.header("tags"), "speech_balloon");
    let click = format!(
        "iris://open?chat_id=default&message_id={}&cursor={}",
        stop_message_id(&answer),
        cursor(&answer)
    );
    assert_eq!(push.header("click"), click);
    assert_eq!(push.header("x-sequence-id"), "iris-default");
    assert_eq!(push.header("authorization"), format!("Bearer {NTFY_TOKEN}"));

    // A permission request is more urgent and says so.
    send_text(&mut laptop, "default", "please approve this").await;
    let picker = laptop
        .wait_for(|e| e.frame_type() == "picker.approval")
        .await
        .expect("approval picker");
    let push = fake.ntfy(1).await;
    assert_eq!(push.header("title"), "Approval needed");
    assert_eq!(push.header("priority"), "high");
    assert_eq!(push.header("tags"), "warning");
    assert!(
        !push.body.is_empty(),
        "the body says what is to be approved"
    );
    assert!(
        push.header("click")
            .ends_with(&format!("cursor={}", cursor(&picker) + 1)),
        "the picker and its notification are one push"
    );
    assert_eq!(
        fake.with(|b| b.fcm.len()),
        0,
        "a device with only a topic is not sent to FCM"
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_burst_wakes_an_offline_device_once_and_a_connected_device_not_at_all() {
    let fake = FakeBackends::start().await;
    // The window is wide enough for three demo turns on a slow machine.
    let (gw, _keys) = gateway(&fake, |p| p.coalesce = Duration::from_millis(3000)).await;
    pair_and_leave(&gw, device(&gw, "phone", Some("fcm-phone"), None)).await;
    let (mut laptop, _) = Client::connect(device(&gw, "laptop", Some("fcm-laptop"), None))
        .await
        .expect("connect");

    for text in ["one", "two", "three"] {
        send_text(&mut laptop, "default", text).await;
    }
    let mut stops = Vec::new();
    while stops.len() < 3 {
        stops.push(
            laptop
                .wait_for(|e| e.frame_type() == "message.stop")
                .await
                .expect("answer"),
        );
    }
    let push = fake.fcm(0).await;
    assert_eq!(push.fcm_token(), "fcm-phone");
    assert_eq!(
        push.data("cursor"),
        cursor(&stops[2]).to_string(),
        "the push carries the latest cursor"
    );
    assert_eq!(push.data("count"), "3");
    assert_eq!(
        push.json()["message"]["notification"]["body"],
        "Echo: three"
    );

    // Nothing else follows: not a second push for the burst, nothing for the connected laptop.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let sent: Vec<String> = fake.with(|b| b.fcm.iter().map(Recorded::fcm_token).collect());
    assert_eq!(sent, ["fcm-phone"]);
    assert_eq!(laptop.hello_ack().last_pushed_cursor, 0);
    gw.stop().await;
}

#[tokio::test]
async fn pushes_are_retried_after_500_and_429() {
    let fake = FakeBackends::start().await;
    fake.with(|b| {
        b.fcm_script
            .push_back((500, json!({"error": {"code": 500, "status": "INTERNAL"}})));
        b.fcm_script.push_back((
            429,
            json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED"}}),
        ));
    });
    let (gw, _keys) = gateway(&fake, |_| {}).await;
    let phone = device(&gw, "phone", Some("fcm-phone"), None);
    pair_and_leave(&gw, phone.clone()).await;
    let (mut laptop, _) = gw.connect("laptop").await;
    let answer = ask(&mut laptop, "keep trying").await;

    let attempts = [fake.fcm(0).await, fake.fcm(1).await, fake.fcm(2).await];
    let statuses: Vec<u16> = attempts.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [500, 429, 200]);
    assert!(
        attempts.iter().all(|r| r.body == attempts[0].body),
        "every attempt sends the same push"
    );
    assert_eq!(attempts[2].data("cursor"), cursor(&answer).to_string());

    let (_phone, ack) = Client::connect(phone).await.expect("reconnect");
    assert_eq!(
        ack.last_pushed_cursor,
        cursor(&answer),
        "recorded once it got through"
    );
    assert_eq!(
        fake.with(|b| b.fcm.len()),
        3,
        "no attempt after the success"
    );
    let metrics = reqwest::get(
        gw.url
            .replace("ws://", "http://")
            .replace("/ws", "/metrics"),
    )
    .await
    .expect("GET /metrics")
    .text()
    .await
    .expect("metrics text");
    assert!(metrics.contains("\niris_push_sent_total 1\n"), "{metrics}");
    assert!(
        metrics.contains("\niris_push_failed_total 0\n"),
        "retried failures are not failures: {metrics}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn an_unregistered_fcm_token_is_removed_and_ntfy_takes_over() {
    let fake = FakeBackends::start().await;
    let unregistered = json!({"error": {
        "code": 404,
        "message": "Requested entity was not found.",
        "status": "NOT_FOUND",
        "details": [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": "UNREGISTERED"}],
    }});
    fake.with(|b| b.fcm_script.push_back((404, unregistered)));
    let (gw, _keys) = gateway(&fake, |_| {}).await;
    let phone = device(&gw, "phone", Some("fcm-stale"), Some("phone-topic"));
    pair_and_leave(&gw, phone.clone()).await;
    let (mut laptop, _) = gw.connect("laptop").await;

    let first = ask(&mut laptop, "are you there").await;
    assert_eq!(fake.fcm(0).await.status, 404);
    let fallback = fake.ntfy(0).await;
    assert!(
        fallback
            .header("click")
            .ends_with(&format!("cursor={}", cursor(&first))),
        "the same push went through ntfy"
    );
    let row = gw
        .shared
        .store
        .get_device("phone")
        .await
        .expect("read")
        .expect("device");
    assert_eq!(row.fcm_token, None, "the dead token is gone");
    assert_eq!(row.ntfy_topic.as_deref(), Some("phone-topic"));

    let second = ask(&mut laptop, "still there").await;
    let push = fake.ntfy(1).await;
    assert!(push
        .header("click")
        .ends_with(&format!("cursor={}", cursor(&second))));
    assert_eq!(
        fake.with(|b| b.fcm.len()),
        1,
        "the removed token is never used again"
    );
    let (_phone, ack) = Client::connect(phone).await.expect("reconnect");
    assert_eq!(ack.last_pushed_cursor, cursor(&second));
    gw.stop().await;
}

#[tokio::test]
async fn with_previews_off_a_push_says_what_happened_but_not_what_was_said() {
    let fake = FakeBackends::start().await;
    let (gw, _keys) = gateway(&fake, |p| p.previews = false).await;
    pair_and_leave(&gw, device(&gw, "phone", Some("fcm-phone"), None)).await;
    pair_and_leave(&gw, device(&gw, "tablet", None, Some("tablet-topic"))).await;
    let (mut laptop, _) = gw.connect("laptop").await;

    ask(&mut laptop, "my bank password is hunter2").await;
    let fcm = fake.fcm(0).await;
    assert_eq!(
        fcm.json()["message"]["notification"],
        json!({"title": "Demo agent replied in Default", "body": "Open Iris to see it."})
    );
    let ntfy = fake.ntfy(0).await;
    assert_eq!(ntfy.header("title"), "Demo agent replied in Default");
    assert_eq!(ntfy.body, "Open Iris to see it.");
    for request in [&fcm, &ntfy] {
        let all = format!("{:?} {}", request.headers, request.body);
        assert!(
            !all.contains("hunter2") && !all.contains("password"),
            "no content in {all}"
        );
    }
    gw.stop().await;
}

/// The real binary, killed with SIGKILL while a push is pending (one device's push failing and
/// being retried, another's frame still in its coalescing window), then started again on the same
/// data dir: each device gets exactly one push with the latest cursor.
#[tokio::test]
async fn a_push_pending_at_a_crash_is_sent_once_after_the_restart() {
    let fake = FakeBackends::start().await;
    fake.with(|b| b.fcm_down = Some(503));
    let dir = tempfile::tempdir().expect("tempdir");
    let account = fake.service_account(dir.path());
    let config = dir.path().join("iris.toml");
    let toml = format!(
        "listen = \"127.0.0.1:0\"\ntoken = \"{TOKEN}\"\n\n[agent]\ncommand = \"demo\"\n\n\
         [push]\ncoalesce_ms = 1500\nretry_initial_ms = 300\nretry_max_secs = 1\n\n\
         [push.fcm]\nservice_account = {account:?}\nproject_id = \"{PROJECT}\"\n\
         token_url = \"{}\"\nbase_url = \"{}\"\n",
        fake.token_url(),
        fake.url()
    );
    std::fs::write(&config, toml).expect("write config");
    let data = dir.path().join("data");

    let mut first = Process::start(&config, &data).await;
    let phone = first.device("phone", "fcm-phone");
    first.pair_and_leave(phone.clone()).await;
    let (mut laptop, _) = Client::connect(first.device("laptop", ""))
        .await
        .expect("laptop");
    laptop.next_event().await.expect("status");
    let c1 = cursor(&ask(&mut laptop, "first").await);
    // The phone's push is being tried (and refused) when the second device pairs.
    fake.until("a refused attempt", |b| {
        b.fcm.iter().any(|r| r.fcm_token() == "fcm-phone")
    })
    .await;
    let tablet = first.device("tablet", "fcm-tablet");
    first.pair_and_leave(tablet.clone()).await;
    let c2 = cursor(&ask(&mut laptop, "second").await);
    assert!(c2 > c1);
    first.kill().await;
    drop(laptop);
    assert!(
        fake.with(|b| b.fcm.iter().all(|r| !r.delivered())),
        "nothing got through before the crash"
    );

    fake.with(|b| b.fcm_down = None);
    let second = Process::start(&config, &data).await;
    let delivered_to = |b: &Backend, token: &str| -> Vec<String> {
        b.fcm
            .iter()
            .filter(|r| r.delivered() && r.fcm_token() == token)
            .map(|r| r.data("cursor"))
            .collect()
    };
    fake.until("both pushes", |b| {
        !delivered_to(b, "fcm-phone").is_empty() && !delivered_to(b, "fcm-tablet").is_empty()
    })
    .await;
    // Both devices are back; nothing else is pushed to them.
    let (_phone, phone_ack) = Client::connect(second.rebase(phone)).await.expect("phone");
    let (_tablet, tablet_ack) = Client::connect(second.rebase(tablet))
        .await
        .expect("tablet");
    tokio::time::sleep(Duration::from_millis(500)).await;
    fake.with(|b| {
        assert_eq!(
            delivered_to(b, "fcm-phone"),
            [c2.to_string()],
            "the phone is woken once, for everything"
        );
        assert_eq!(
            delivered_to(b, "fcm-tablet"),
            [c2.to_string()],
            "the tablet is woken once"
        );
    });
    assert_eq!(
        (phone_ack.last_pushed_cursor, tablet_ack.last_pushed_cursor),
        (c2, c2)
    );
    second.terminate().await;
}

/// `iris-gateway serve` as a child process.
struct Process {
    child: tokio::process::Child,
    url: String,
    health: String,
}

impl Process {
    async fn start(config: &Path, data: &Path) -> Process {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_iris-gateway"));
        cmd.arg("serve")
            .arg("--config")
            .arg(config)
            .arg("--data-dir")
            .arg(data);
        for var in [
            "IRIS_LISTEN",
            "IRIS_DATA_DIR",
            "IRIS_TOKEN",
            "IRIS_CONFIG",
            "IRIS_AGENT",
            "IRIS_LOG",
        ] {
            cmd.env_remove(var);
        }
        // The refused attempts are expected; only errors would be worth reading.
        cmd.env("IRIS_LOG", "error");
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("spawn iris-gateway");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let url = tokio::time::timeout(PATIENCE, async {
            while let Some(line) = lines.next_line().await.expect("read stdout") {
                if let Some(url) = line.trim().strip_prefix("WebSocket:") {
                    return url.trim().to_owned();
                }
            }
            panic!("the gateway exited before it was ready");
        })
        .await
        .expect("the gateway starts in time");
        // Keep reading so that the process never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let health = url.replace("ws://", "http://").replace("/ws", "/healthz");
        Process { child, url, health }
    }

    fn device(&self, id: &str, fcm: &str) -> ConnectOptions {
        let mut opts = ConnectOptions::new(self.url.clone(), TOKEN, id);
        opts.fcm_token = Some(fcm.to_owned()).filter(|t| !t.is_empty());
        opts
    }

    /// The same device options, pointed at this process.
    fn rebase(&self, mut opts: ConnectOptions) -> ConnectOptions {
        opts.url = self.url.clone();
        opts
    }

    async fn connections(&self) -> u64 {
        let health: Value = reqwest::get(&self.health)
            .await
            .expect("healthz")
            .json()
            .await
            .expect("json");
        health["connections"].as_u64().expect("connections")
    }

    /// Pairs a device and disconnects it; returns once the gateway counts one connection fewer.
    async fn pair_and_leave(&self, opts: ConnectOptions) {
        let before = self.connections().await;
        let (client, _) = Client::connect(opts).await.expect("connect");
        client.close().await.expect("close");
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while self.connections().await > before {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the gateway still counts the device"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn kill(&mut self) {
        self.child.start_kill().expect("SIGKILL");
        tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .expect("dies in time")
            .expect("wait");
    }

    async fn terminate(mut self) {
        let pid = self.child.id().expect("pid") as i32;
        // SAFETY: kill(2) on the pid of a child this test spawned and has not reaped.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let status = tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .expect("exits in time")
            .expect("wait");
        assert!(status.success(), "clean exit after SIGTERM: {status:?}");
    }
}
