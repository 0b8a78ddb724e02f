//! Web Push to browsers, against a local server that stands in for a browser's push service: it
//! checks each request's VAPID token with the public key the gateway offered in `hello.ack`, and
//! decrypts the `aes128gcm` body with the subscriber's private key (made here, as a browser makes
//! it), following RFC 8291 step by step. Covered: registration by `fcm.register` and by `hello`,
//! one push per burst with the latest cursor, retries after 429 and 5xx, a subscription the push
//! service calls gone (410) is removed, and the key survives a restart.

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aes_gcm::aead::Aead;
use aes_gcm::{Aes128Gcm, KeyInit, Nonce};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use common::fake_push::{FakeBackends, Recorded};
use common::{demo_agent, send_text, TestGateway};
use hkdf::Hkdf;
use iris_client::{Client, ClientError, ConnectOptions, Event};
use iris_gateway::push::{PushConfig, WebPushConfig};
use iris_protocol::{
    ClientFrame, ErrorCode, FcmRegister, Header, HelloAck, PushButton, PushPayload,
    WebPushSubscription,
};
use iris_store::WebPushRow;
use p256::elliptic_curve::sec1::ToEncodedPoint;
use serde_json::Value;
use sha2::Sha256;

/// Upper bound for anything a test waits for.
const PATIENCE: Duration = Duration::from_secs(20);
const SUBJECT: &str = "mailto:ops@iris.example.com";

/// A browser's push subscription: its key pair and auth secret, as `pushManager.subscribe` makes
/// them.
struct Subscriber {
    secret: p256::SecretKey,
    auth: [u8; 16],
    endpoint: String,
}

impl Subscriber {
    fn new(fake: &FakeBackends, name: &str) -> Subscriber {
        let secret = loop {
            if let Ok(k) = p256::SecretKey::from_slice(&rand::random::<[u8; 32]>()) {
                break k;
            }
        };
        Subscriber {
            secret,
            auth: rand::random(),
            endpoint: fake.webpush_endpoint(name),
        }
    }

    fn path(&self) -> String {
        self.endpoint
            .rsplit_once("/push/")
            .map(|(_, n)| format!("/push/{n}"))
            .expect("path")
    }

    fn public(&self) -> Vec<u8> {
        self.secret
            .public_key()
            .to_encoded_point(false)
            .as_bytes()
            .to_vec()
    }

    /// What the web client sends: `PushSubscription.toJSON()` flattened.
    fn subscription(&self) -> WebPushSubscription {
        WebPushSubscription {
            endpoint: self.endpoint.clone(),
            p256dh: URL_SAFE_NO_PAD.encode(self.public()),
            auth: URL_SAFE_NO_PAD.encode(self.auth),
        }
    }

    /// Decrypts an `aes128gcm` push body (RFC 8188 framing, RFC 8291 keys) and parses its JSON.
    fn decrypt(&self, body: &[u8]) -> Value {
        // Header: salt (16) | record size (4) | key id length (1) | key id = sender's public key.
        assert!(body.len() > 21, "body too short");
        let (salt, rest) = body.split_at(16);
        let record_size = u32::from_be_bytes(rest[..4].try_into().expect("rs")) as usize;
        let id_len = rest[4] as usize;
        assert_eq!(
            id_len, 65,
            "the key id is the sender's uncompressed P-256 key"
        );
        let sender = &rest[5..5 + id_len];
        let ciphertext = &rest[5 + id_len..];
        assert!(ciphertext.len() <= record_size, "one record");

        let sender_key = p256::PublicKey::from_sec1_bytes(sender).expect("sender key");
        let shared =
            p256::ecdh::diffie_hellman(self.secret.to_nonzero_scalar(), sender_key.as_affine());
        let mut info = b"WebPush: info\0".to_vec();
        info.extend_from_slice(&self.public());
        info.extend_from_slice(sender);
        let mut ikm = [0u8; 32];
        Hkdf::<Sha256>::new(Some(&self.auth), shared.raw_secret_bytes().as_slice())
            .expand(&info, &mut ikm)
            .expect("ikm");
        let prk = Hkdf::<Sha256>::new(Some(salt), &ikm);
        let (mut cek, mut nonce) = ([0u8; 16], [0u8; 12]);
        prk.expand(b"Content-Encoding: aes128gcm\0", &mut cek)
            .expect("cek");
        prk.expand(b"Content-Encoding: nonce\0", &mut nonce)
            .expect("nonce");
        let mut plain = Aes128Gcm::new_from_slice(&cek)
            .expect("key")
            .decrypt(Nonce::from_slice(&nonce), ciphertext)
            .expect("the body decrypts with the subscriber's key");
        // The last record ends with the delimiter 2, then optional zero padding.
        while plain.last() == Some(&0) {
            plain.pop();
        }
        assert_eq!(plain.pop(), Some(2), "last-record delimiter");
        let payload: Value = serde_json::from_slice(&plain).expect("a JSON payload");
        // It is the protocol's one push payload, which the service worker reads.
        serde_json::from_value::<PushPayload>(payload.clone()).expect("a PushPayload");
        payload
    }
}

/// Checks the `Authorization: vapid t=…, k=…` header against the key `hello.ack` offered, and
/// returns the token's claims.
fn verify_vapid(push: &Recorded, offered_key: &str, origin: &str) -> Value {
    let header = push.header("authorization");
    let rest = header
        .strip_prefix("vapid ")
        .unwrap_or_else(|| panic!("not a vapid authorization: {header}"));
    let mut token = None;
    let mut key = None;
    for part in rest.split(',').map(str::trim) {
        match part.split_once('=') {
            Some(("t", v)) => token = Some(v),
            Some(("k", v)) => key = Some(v),
            _ => {}
        }
    }
    assert_eq!(key, Some(offered_key), "k is the key offered in hello.ack");
    let point = URL_SAFE_NO_PAD.decode(offered_key).expect("base64url key");
    assert_eq!(
        (point.len(), point[0]),
        (65, 4),
        "an uncompressed P-256 point"
    );
    let decoding = jsonwebtoken::DecodingKey::from_ec_components(
        &URL_SAFE_NO_PAD.encode(&point[1..33]),
        &URL_SAFE_NO_PAD.encode(&point[33..]),
    )
    .expect("decoding key");
    let mut rules = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
    rules.set_audience(&[origin]);
    rules.set_required_spec_claims(&["exp", "aud", "sub"]);
    let jwt = jsonwebtoken::decode::<Value>(token.expect("t="), &decoding, &rules)
        .expect("the VAPID token verifies with the offered key");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    let exp = jwt.claims["exp"].as_i64().expect("exp");
    assert!(
        exp > now && exp <= now + 24 * 3600,
        "exp {exp} within 24 h of now {now}"
    );
    jwt.claims
}

fn config() -> PushConfig {
    PushConfig {
        coalesce: Duration::from_millis(600),
        retry_initial: Duration::from_millis(100),
        retry_max: Duration::from_secs(1),
        max_attempts: 6,
        webpush: Some(WebPushConfig {
            subject: SUBJECT.into(),
            // The fake push service listens on loopback.
            allow_private_endpoints: true,
            ..WebPushConfig::default()
        }),
        ..PushConfig::default()
    }
}

async fn gateway(tweak: impl FnOnce(&mut PushConfig)) -> TestGateway {
    let mut push = config();
    tweak(&mut push);
    TestGateway::start_with(|c| {
        c.agent_command = Some(demo_agent());
        c.push = push;
    })
    .await
}

/// Waits until the gateway no longer counts the device as connected.
async fn gone(gw: &TestGateway, id: &str) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while gw.shared.hub.is_online(id) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{id} still counted as connected"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A browser tab: connects, registers its subscription with `fcm.register` (as Iris Web does
/// after the user turns notifications on), and closes.
async fn subscribe_and_leave(gw: &TestGateway, id: &str, subscriber: &Subscriber) -> HelloAck {
    let (mut client, ack) = Client::connect(gw.options(id)).await.expect("connect");
    let register = FcmRegister {
        webpush: Some(Some(subscriber.subscription())),
        ..FcmRegister::default()
    };
    client
        .request(Header::default(), ClientFrame::FcmRegister(register))
        .await
        .expect("fcm.register accepted");
    client.close().await.expect("close");
    gone(gw, id).await;
    ack
}

/// A device that announces its subscription in `hello`.
fn with_subscription(gw: &TestGateway, id: &str, subscriber: &Subscriber) -> ConnectOptions {
    let mut opts = gw.options(id);
    opts.webpush = Some(subscriber.subscription());
    opts
}

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

fn message_id(event: &Event) -> String {
    event.json()["payload"]["message_id"]
        .as_str()
        .expect("message_id")
        .to_owned()
}

async fn push_backends(gw: &TestGateway, device: &str) -> Vec<String> {
    let list = iris_gateway::admin::devices::list(&gw.dir)
        .await
        .expect("devices list");
    list.into_iter()
        .find(|d| d.device_id == device)
        .map(|d| d.push)
        .unwrap_or_default()
}

#[tokio::test]
async fn an_offline_browser_gets_one_encrypted_signed_push_per_burst() {
    let fake = FakeBackends::start().await;
    // The window is wide enough for three demo turns on a slow machine.
    let gw = gateway(|p| p.coalesce = Duration::from_millis(3000)).await;
    let browser = Subscriber::new(&fake, "browser-1");
    let ack = subscribe_and_leave(&gw, "browser", &browser).await;
    assert_eq!(ack.server_caps.push.as_deref(), Some("webpush"));
    let key = ack
        .server_caps
        .webpush_key
        .clone()
        .expect("hello.ack offers the VAPID key");
    assert_eq!(
        push_backends(&gw, "browser").await,
        ["webpush"],
        "devices list shows the subscription"
    );

    let (mut laptop, _) = gw.connect("laptop").await;
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

    let push = fake.webpush(0).await;
    assert_eq!(push.path, "/push/browser-1");
    assert_eq!(push.header("content-encoding"), "aes128gcm");
    assert_eq!(push.header("content-type"), "application/octet-stream");
    assert_eq!(push.header("ttl"), "86400");
    assert_eq!(push.header("urgency"), "normal");
    let topic = push.header("topic");
    assert!(
        topic.len() <= 32 && !topic.contains("default"),
        "an opaque topic per lane: {topic}"
    );
    let claims = verify_vapid(&push, &key, &fake.url());
    assert_eq!(claims["sub"], SUBJECT);
    assert_eq!(
        claims["aud"],
        fake.url(),
        "aud is the push service's origin, port included"
    );

    let payload = browser.decrypt(&push.bytes);
    let last = &stops[2];
    assert_eq!(payload["title"], "Demo agent replied in Default");
    assert_eq!(payload["body"], "Echo: three");
    assert_eq!(
        payload["cursor"],
        cursor(last),
        "the push carries the latest cursor"
    );
    assert_eq!(payload["chat_id"], "default");
    assert_eq!(payload["thread_id"], Value::Null);
    assert_eq!(payload["message_id"], message_id(last));
    assert_eq!(payload["count"], 3);
    let text = String::from_utf8_lossy(&push.bytes);
    assert!(
        !text.contains("three") && !text.contains("Echo"),
        "the push service sees no content"
    );

    // Nothing else follows, and the browser learns what already woke it.
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(fake.with(|b| b.webpush.len()), 1, "one push for the burst");
    let (_browser, ack) = Client::connect(gw.options("browser"))
        .await
        .expect("reconnect");
    assert_eq!(ack.last_pushed_cursor, cursor(last));
    gw.stop().await;
}

#[tokio::test]
async fn a_busy_push_service_is_retried_and_a_gone_subscription_is_removed() {
    let fake = FakeBackends::start().await;
    let gw = gateway(|_| {}).await;
    let busy = Subscriber::new(&fake, "busy");
    let stale = Subscriber::new(&fake, "stale");
    fake.script_webpush(&busy.path(), &[429, 503]);
    fake.script_webpush(&stale.path(), &[410]);
    // One browser registers in hello, the other by fcm.register.
    let (client, _) = Client::connect(with_subscription(&gw, "tab-busy", &busy))
        .await
        .expect("connect");
    client.close().await.expect("close");
    gone(&gw, "tab-busy").await;
    let ack = subscribe_and_leave(&gw, "tab-stale", &stale).await;
    let key = ack.server_caps.webpush_key.expect("key");

    let (mut laptop, _) = gw.connect("laptop").await;
    // A subscription that could never be delivered to is refused when it is registered.
    let bad = WebPushSubscription {
        endpoint: "http://push.example.com/x".into(),
        ..stale.subscription()
    };
    let register = FcmRegister {
        webpush: Some(Some(bad)),
        ..FcmRegister::default()
    };
    match laptop
        .request(Header::default(), ClientFrame::FcmRegister(register))
        .await
    {
        Err(ClientError::Server {
            code: ErrorCode::BadRequest,
            message,
        }) => assert!(message.contains("https"), "{message}"),
        other => panic!("expected bad_request, got {:?}", other.map(|e| e.raw)),
    }

    let first = ask(&mut laptop, "are you there").await;
    let wait = async {
        loop {
            let changed = fake.changed.notified();
            let done = fake.with(|s| {
                let ok = s
                    .webpush
                    .iter()
                    .any(|r| r.path == busy.path() && r.status == 201);
                ok && s.webpush.iter().any(|r| r.path == stale.path())
            });
            if done {
                return;
            }
            changed.await;
        }
    };
    tokio::time::timeout(PATIENCE, wait)
        .await
        .expect("both push resources were tried");
    let attempts: Vec<Recorded> = fake.with(|s| {
        s.webpush
            .iter()
            .filter(|r| r.path == busy.path())
            .cloned()
            .collect()
    });
    assert_eq!(
        attempts.iter().map(|r| r.status).collect::<Vec<_>>(),
        [429, 503, 201]
    );
    for attempt in &attempts {
        verify_vapid(attempt, &key, &fake.url());
        let payload = busy.decrypt(&attempt.bytes);
        assert_eq!(
            payload["cursor"],
            cursor(&first),
            "every attempt is the same push"
        );
    }

    // 410: the push service says the subscription is gone; the gateway forgets it.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let row = gw
            .shared
            .store
            .get_device("tab-stale")
            .await
            .expect("read")
            .expect("device");
        if row.webpush.is_none() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the gone subscription is still stored"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        push_backends(&gw, "tab-stale").await.is_empty(),
        "devices list no longer shows it"
    );
    assert_eq!(push_backends(&gw, "tab-busy").await, ["webpush"]);

    // The next answer goes to the live subscription only.
    let second = ask(&mut laptop, "still there").await;
    let next = fake.webpush(4).await;
    assert_eq!(next.path, busy.path());
    assert_eq!(busy.decrypt(&next.bytes)["cursor"], cursor(&second));
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        fake.with(|s| s.webpush.iter().filter(|r| r.path == stale.path()).count()),
        1
    );
    let (_stale, ack) = Client::connect(gw.options("tab-stale"))
        .await
        .expect("reconnect");
    assert!(
        ack.last_pushed_cursor < cursor(&first),
        "the gone subscription woke nobody"
    );
    gw.stop().await;
}

#[tokio::test]
async fn the_vapid_key_survives_a_restart_and_revoking_drops_the_subscription() {
    use std::os::unix::fs::PermissionsExt;
    let fake = FakeBackends::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let start = || {
        TestGateway::start_in(dir.path(), |c| {
            c.agent_command = Some(demo_agent());
            c.push = config();
        })
    };
    let browser = Subscriber::new(&fake, "browser");

    let gw = start().await;
    let (client, ack) = Client::connect(with_subscription(&gw, "browser", &browser))
        .await
        .expect("connect");
    let key = ack.server_caps.webpush_key.clone().expect("key");
    client.close().await.expect("close");
    let mode = std::fs::metadata(dir.path().join("vapid.pem"))
        .expect("vapid.pem")
        .permissions()
        .mode();
    assert_eq!(
        mode & 0o777,
        0o600,
        "the private key is readable by its owner only"
    );
    gw.stop().await;

    let gw = start().await;
    let (mut laptop, ack) = gw.connect("laptop").await;
    assert_eq!(
        ack.server_caps.webpush_key.as_deref(),
        Some(key.as_str()),
        "the same key after a restart"
    );
    // The browser's subscription, made with that key, still works.
    let answer = ask(&mut laptop, "after the restart").await;
    let push = fake.webpush(0).await;
    verify_vapid(&push, &key, &fake.url());
    assert_eq!(browser.decrypt(&push.bytes)["cursor"], cursor(&answer));

    let revoked = iris_gateway::admin::devices::revoke(&gw.dir, "browser")
        .await
        .expect("revoke");
    assert!(revoked.existed);
    assert!(
        gw.shared
            .store
            .get_device("browser")
            .await
            .expect("read")
            .is_none(),
        "the subscription went with it"
    );
    ask(&mut laptop, "nobody to wake").await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(
        fake.with(|b| b.webpush.len()),
        1,
        "a revoked browser is not pushed to"
    );
    gw.stop().await;
}

/// A subscription of `subscriber`'s keys with another endpoint.
fn pointing_at(subscriber: &Subscriber, endpoint: &str) -> WebPushSubscription {
    WebPushSubscription {
        endpoint: endpoint.into(),
        ..subscriber.subscription()
    }
}

#[tokio::test]
async fn push_endpoints_must_be_https_to_a_public_address() {
    let fake = FakeBackends::start().await;
    let gw = gateway(|p| {
        if let Some(w) = p.webpush.as_mut() {
            w.allow_private_endpoints = false;
        }
    })
    .await;
    let keys = Subscriber::new(&fake, "keys");
    let (mut tab, _) = gw.connect("tab").await;
    let register = |endpoint: &str| {
        ClientFrame::FcmRegister(FcmRegister {
            webpush: Some(Some(pointing_at(&keys, endpoint))),
            ..FcmRegister::default()
        })
    };
    for (endpoint, says) in [
        ("http://push.example.com/x", "https"),
        (fake.url().as_str(), "https"),
        ("https://127.0.0.1:8443/x", "public address"),
        ("https://10.0.0.7/x", "public address"),
        ("https://172.20.1.1/x", "public address"),
        ("https://192.168.1.20/x", "public address"),
        ("https://169.254.169.254/latest/meta-data", "public address"),
        ("https://100.64.0.1/x", "public address"),
        ("https://0.0.0.0/x", "public address"),
        ("https://[::1]/x", "public address"),
        ("https://[fe80::1]/x", "public address"),
        ("https://[fd12:3456::1]/x", "public address"),
        ("https://[::ffff:192.168.0.1]/x", "public address"),
        // 6to4 and Teredo carry an IPv4 address inside; site-local and discard are internal.
        ("https://[2002:7f00:1::1]/x", "public address"),
        (
            "https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/x",
            "public address",
        ),
        ("https://[fec0::1]/x", "public address"),
        ("https://[100::1]/x", "public address"),
        ("https://localhost:8443/x", "public address"),
        ("https://push.localhost/x", "public address"),
    ] {
        match tab.request(Header::default(), register(endpoint)).await {
            Err(ClientError::Server {
                code: ErrorCode::BadRequest,
                message,
            }) => assert!(message.contains(says), "{endpoint}: {message}"),
            other => panic!(
                "{endpoint}: expected bad_request, got {:?}",
                other.map(|e| e.raw)
            ),
        }
    }
    let stored = gw.shared.store.get_device("tab").await.unwrap().unwrap();
    assert_eq!(stored.webpush, None, "nothing was registered");
    // A public push service is taken.
    tab.request(
        Header::default(),
        register("https://push.example.net/wpush/abc"),
    )
    .await
    .expect("a public endpoint is accepted");
    let stored = gw.shared.store.get_device("tab").await.unwrap().unwrap();
    assert_eq!(
        stored.webpush.map(|w| w.endpoint).as_deref(),
        Some("https://push.example.net/wpush/abc")
    );

    // In hello an internal endpoint is ignored, and the connection goes on.
    let mut opts = gw.options("tab-2");
    opts.webpush = Some(pointing_at(&keys, "https://10.0.0.7/x"));
    let (client, _) = Client::connect(opts).await.expect("hello still succeeds");
    let stored = gw.shared.store.get_device("tab-2").await.unwrap().unwrap();
    assert_eq!(stored.webpush, None);
    client.close().await.unwrap();
    gw.stop().await;
}

#[tokio::test]
async fn a_host_name_resolving_to_an_internal_address_is_never_contacted() {
    let fake = FakeBackends::start().await;
    let gw = gateway(|p| {
        if let Some(w) = p.webpush.as_mut() {
            w.allow_private_endpoints = false;
        }
    })
    .await;
    // Something listens where the name leads; it must never see a connection.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let keys = Subscriber::new(&fake, "keys");
    let (client, _) = Client::connect(gw.options("browser"))
        .await
        .expect("connect");
    client.close().await.expect("close");
    gone(&gw, "browser").await;
    // A name that passed registration and now resolves to loopback (DNS rebinding), stored as
    // registration would have stored it.
    let sub = WebPushRow {
        endpoint: format!("https://localhost:{port}/push/rebound"),
        p256dh: keys.subscription().p256dh,
        auth: keys.subscription().auth,
    };
    gw.shared
        .store
        .write(move |tx| tx.set_webpush("browser", Some(&sub)))
        .await
        .unwrap();

    let (mut laptop, _) = gw.connect("laptop").await;
    ask(&mut laptop, "anyone home").await;
    // The push is not sent, and the subscription that cannot be sent to is dropped.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let row = gw
            .shared
            .store
            .get_device("browser")
            .await
            .unwrap()
            .unwrap();
        if row.webpush.is_none() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the subscription is still stored"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the internal address was contacted: {other:?}"),
    }
    assert!(fake.with(|s| s.webpush.is_empty()));
    gw.stop().await;
}

/// The fields Iris Web's service worker (`web/sw.js`) reads from a push and from a button.
fn fields_the_service_worker_reads() -> (Vec<String>, Vec<String>) {
    const SW_JS: &str = include_str!("../web/sw.js");
    let start = SW_JS
        .find("self.addEventListener('push'")
        .expect("sw.js handles `push`");
    let handler = &SW_JS[start..];
    let handler = &handler[..handler.find("\n});").expect("the handler ends")];
    let after = |prefix: &str| -> Vec<String> {
        let mut names: Vec<String> = handler
            .match_indices(prefix)
            // `data.x`, not `event.data.json()`.
            .filter(|(i, _)| {
                !handler[..*i].ends_with(|c: char| c == '.' || c.is_ascii_alphanumeric())
            })
            .map(|(i, _)| {
                handler[i + prefix.len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect()
            })
            .filter(|n: &String| !n.is_empty())
            .collect();
        names.sort();
        names.dedup();
        names
    };
    (after("data."), after("a."))
}

#[test]
fn the_service_worker_reads_only_what_a_push_payload_carries() {
    let full = PushPayload {
        chat_id: Some("c".into()),
        thread_id: Some("t".into()),
        message_id: Some("m".into()),
        picker_id: Some("p".into()),
        action_token: Some("k".into()),
        action_url: Some("u".into()),
        actions: vec![PushButton::default()],
        ..PushPayload::default()
    };
    let json = serde_json::to_value(&full).expect("json");
    let button = &json["actions"][0];
    let (read, buttons) = fields_the_service_worker_reads();
    assert!(read.len() >= 8, "parsed what sw.js reads: {read:?}");
    for field in &read {
        assert!(
            json.get(field).is_some(),
            "sw.js reads `data.{field}`, which PushPayload (crates/protocol/src/push.rs) does not carry"
        );
    }
    assert_eq!(
        buttons,
        ["action", "title"],
        "sw.js reads a button's {buttons:?}"
    );
    for field in &buttons {
        assert!(
            button.get(field).is_some(),
            "a PushButton carries `{field}`"
        );
    }
}
