//! Per-device credentials: a one-time pairing code (from `iris-gateway pair` or a signed-in
//! device's `pair.create`) gets a device its own token; revoking the device locks that token
//! out at once; the shared token can be switched off; wrong device tokens and codes are
//! throttled like wrong tokens; send budgets follow the credential.

mod common;

use std::time::Duration;

use common::run_cli as cli;
use common::*;
use iris_client::{Client, ClientError, ConnectOptions, RawConnection};
use iris_gateway::credentials;
use iris_protocol::{ClientFrame, Empty, ErrorCode, Header, HelloAck, MessageSend, ServerFrame};

const ANSWER: Duration = Duration::from_secs(10);

/// `hello` with `token` as `device`: the ack, or the error code and message.
/// A stranger's request through a reverse proxy on this machine (not trusted: counted under
/// loopback, and not the gateway's own machine).
const STRANGER: [(&str, &str); 1] = [("x-forwarded-for", "203.0.113.9")];

async fn hello(
    gw: &TestGateway,
    token: &str,
    device: &str,
) -> Result<HelloAck, (ErrorCode, String)> {
    hello_from(gw, &[], token, device).await
}

async fn hello_from(
    gw: &TestGateway,
    headers: &[(&'static str, &str)],
    token: &str,
    device: &str,
) -> Result<HelloAck, (ErrorCode, String)> {
    let mut conn = RawConnection::connect_with_headers(&gw.url, headers)
        .await
        .expect("connect");
    let result = conn.hello(token, device).await;
    let _ = conn.close().await;
    match result {
        Ok(ack) => Ok(ack),
        Err(ClientError::Server { code, message }) => Err((code, message)),
        Err(e) => panic!("hello failed without an error frame: {e}"),
    }
}

/// A connected client presenting `token` as `device`.
async fn connect(gw: &TestGateway, token: &str, device: &str) -> (Client, HelloAck) {
    Client::connect(ConnectOptions::new(gw.url.clone(), token, device))
        .await
        .expect("connect")
}

/// A pairing code made the way `pair.create` makes it.
async fn new_code(gw: &TestGateway, ttl: Duration) -> String {
    credentials::create_code(&gw.shared.store, ttl, None)
        .await
        .expect("code")
        .code
}

#[tokio::test]
async fn a_code_from_pair_makes_a_device_token_that_outlives_the_code_and_a_restart() {
    let dir = tempfile::tempdir().expect("dir");
    let gw = TestGateway::start_in(dir.path(), |_| {}).await;
    let data = dir.path().to_str().expect("path").to_owned();
    // `iris-gateway pair` in its own process, while the gateway runs.
    let (ok, out, err) = tokio::task::spawn_blocking(move || cli(&["pair", "--data-dir", &data]))
        .await
        .expect("cli");
    assert!(ok, "{err}");
    let code = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("Pairing code: "))
        .unwrap_or_else(|| panic!("no code in:\n{out}"))
        .to_owned();
    assert!(out.contains("within 10 minutes"), "{out}");
    assert!(out.contains(&format!("/#token={code}&ws=")), "{out}");
    assert!(out.contains("███"), "a QR code is drawn:\n{out}");

    let ack = hello(&gw, &code, "phone").await.expect("the code pairs");
    assert_eq!(ack.device_id.as_deref(), Some("phone"));
    let token = ack.device_token.expect("a device token");
    assert!(token.starts_with("idt_") && token != code);
    let again = hello(&gw, &code, "thief").await;
    assert_eq!(
        again.map(|_| ()),
        Err((ErrorCode::Auth, "pairing code already used".into()))
    );
    let ack = hello(&gw, &token, "phone")
        .await
        .expect("the device token signs in");
    assert_eq!(ack.device_token, None, "a token is issued once");

    // Neither the store's copy nor anything else keeps the secrets in clear.
    let db = std::fs::read(dir.path().join("iris.db")).expect("db");
    let wal = std::fs::read(dir.path().join("iris.db-wal")).unwrap_or_default();
    for bytes in [&db, &wal] {
        let text = String::from_utf8_lossy(bytes);
        assert!(!text.contains(&token[4..]) && !text.contains(&code[4..]));
    }

    gw.stop().await;
    let gw = TestGateway::start_in(dir.path(), |_| {}).await;
    assert!(
        hello(&gw, &token, "phone").await.is_ok(),
        "token lost in a restart"
    );
    assert_eq!(
        hello(&gw, &code, "phone").await.map(|_| ()),
        Err((ErrorCode::Auth, "pairing code already used".into())),
        "a spent code stays spent"
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_signed_in_device_creates_a_code_for_another_device() {
    let gw = TestGateway::start().await;
    let (mut laptop, _) = gw.connect("laptop").await;
    let before = iris_gateway::ids::now_ms();
    let answer = laptop
        .request(Header::default(), ClientFrame::PairCreate(Empty {}))
        .await
        .expect("pair.create");
    let ServerFrame::PairCode(pair) = answer.body else {
        panic!("{}", answer.raw)
    };
    assert!(pair.code.starts_with("ipc_"));
    let ttl = pair.expires_at - before;
    assert!(
        (599_000..=601_000).contains(&ttl),
        "10 minutes, got {ttl} ms"
    );
    assert!(
        pair.url
            .contains(&format!("/#token={}&ws=ws%3A%2F%2F", pair.code)),
        "{}",
        pair.url
    );
    assert_eq!(pair.ws, gw.url);
    assert!(pair.qr_svg.as_deref().is_some_and(|s| s.contains("<svg")));
    let ack = hello(&gw, &pair.code, "tablet").await.expect("pairs");
    assert!(ack.device_token.is_some());
    gw.stop().await;
}

#[tokio::test]
async fn an_expired_code_is_refused_and_cannot_be_spent() {
    let gw = TestGateway::start().await;
    let code = new_code(&gw, Duration::ZERO).await;
    assert_eq!(
        hello(&gw, &code, "late-phone").await.map(|_| ()),
        Err((ErrorCode::Auth, "pairing code expired".into()))
    );
    let row = gw
        .shared
        .store
        .pairing_code(&credentials::hash(&code))
        .await
        .expect("read")
        .expect("row");
    assert_eq!(row.spent_at, None);
    assert!(gw
        .shared
        .store
        .get_device("late-phone")
        .await
        .expect("read")
        .is_none());
    gw.stop().await;
}

#[tokio::test]
async fn a_code_presented_under_a_revoked_id_is_refused_and_not_spent() {
    let gw = TestGateway::start().await;
    let (old, _) = gw.connect("old-phone").await;
    old.close().await.expect("close");
    iris_gateway::admin::devices::revoke(&gw.dir, "old-phone")
        .await
        .expect("revoke");
    let code = new_code(&gw, Duration::from_secs(600)).await;
    assert_eq!(
        hello(&gw, &code, "old-phone").await.map(|_| ()),
        Err((ErrorCode::Auth, "this device was revoked".into()))
    );
    let ack = hello(&gw, &code, "new-phone")
        .await
        .expect("the code still works");
    assert!(ack.device_token.is_some());
    gw.stop().await;
}

/// A `hello` checked before a revocation and registered after it (the gateway is between the
/// two when the owner revokes) must not bring the device back: no row, no push registration.
#[tokio::test]
async fn a_registration_after_a_revocation_does_not_bring_the_device_back() {
    let gw = TestGateway::start().await;
    let (phone, _) = gw.connect("lost-phone").await;
    phone.close().await.expect("close");
    iris_gateway::admin::devices::revoke(&gw.dir, "lost-phone")
        .await
        .expect("revoke");
    let late: iris_protocol::Hello = serde_json::from_value(serde_json::json!({
        "token": "irrelevant here", "device_id": "lost-phone", "device_name": "Lost phone",
        "ntfy_topic": "lost-phone-topic",
    }))
    .expect("hello");
    let registered = iris_gateway::handlers::register_device(&gw.shared, &late)
        .await
        .expect("store");
    assert!(registered.is_none(), "{registered:?}");
    let store = &gw.shared.store;
    assert!(store
        .get_device("lost-phone")
        .await
        .expect("read")
        .is_none());
    gw.stop().await;
}

#[tokio::test]
async fn a_revoked_device_token_is_dead_whatever_id_it_claims_and_its_connection_closes() {
    let gw = TestGateway::start().await;
    let code = new_code(&gw, Duration::from_secs(600)).await;
    let token = hello(&gw, &code, "lost-phone")
        .await
        .expect("pairs")
        .device_token
        .expect("token");
    // Claiming another id does not make another device: the token's device it is.
    let (mut live, ack) = connect(&gw, &token, "someone-else").await;
    assert_eq!(ack.device_id.as_deref(), Some("lost-phone"));
    assert!(gw
        .shared
        .store
        .get_device("someone-else")
        .await
        .expect("read")
        .is_none());

    let revoked = iris_gateway::admin::devices::revoke(&gw.dir, "lost-phone")
        .await
        .expect("revoke");
    assert!(revoked.existed && revoked.disconnected, "{revoked:?}");
    let close = live.closed_timeout(ANSWER).await.expect("closed");
    // Told why, so that it does not come back.
    assert_eq!(close, Some((4401, "this device was revoked".into())));
    for claimed in ["lost-phone", "brand-new-id"] {
        assert_eq!(
            hello(&gw, &token, claimed).await.map(|_| ()),
            Err((ErrorCode::Auth, "invalid token".into())),
            "claiming {claimed}"
        );
    }
    gw.stop().await;
}

#[tokio::test]
async fn with_the_shared_token_off_only_device_tokens_and_codes_pass() {
    let gw = TestGateway::start_with(|c| c.auth.shared_token = false).await;
    let refused = hello(&gw, TOKEN, "old-app").await.map(|_| ());
    let Err((ErrorCode::Auth, message)) = refused else {
        panic!("the shared token must be refused: {refused:?}")
    };
    assert!(message.contains("switched off"), "{message}");
    let code = new_code(&gw, Duration::from_secs(600)).await;
    let token = hello(&gw, &code, "new-app")
        .await
        .expect("a code passes")
        .device_token
        .expect("token");
    assert!(
        hello(&gw, &token, "new-app").await.is_ok(),
        "a device token passes"
    );
    gw.stop().await;

    // `pair --shared` refuses to show a token that no longer signs anyone in.
    let dir = tempfile::tempdir().expect("dir");
    let config = dir.path().join("iris.toml");
    std::fs::write(&config, "[auth]\nshared_token = false\n").expect("config");
    let data = dir.path().join("data");
    let (ok, out, err) = cli(&[
        "pair",
        "--shared",
        "--config",
        config.to_str().expect("path"),
        "--data-dir",
        data.to_str().expect("path"),
    ]);
    assert!(!ok, "{out}");
    assert!(err.contains("shared token is switched off"), "{err}");
}

#[tokio::test]
async fn devices_list_shows_where_each_device_last_connected_from() {
    let gw = TestGateway::start_with(|c| {
        c.trusted_proxies = vec!["127.0.0.1".parse().expect("ip")];
    })
    .await;
    let (_direct, _) = gw.connect("desk").await;
    let forwarded = [("x-forwarded-for", "203.0.113.50")];
    let mut phone = RawConnection::connect_with_headers(&gw.url, &forwarded)
        .await
        .expect("connect");
    phone.hello(TOKEN, "phone").await.expect("hello");
    let before = iris_gateway::ids::now_ms();
    phone.close().await.expect("close");

    let list = iris_gateway::admin::devices::list(&gw.dir)
        .await
        .expect("list");
    let find = |id: &str| {
        list.iter()
            .find(|d| d.device_id == id)
            .unwrap_or_else(|| panic!("{id} in {list:?}"))
            .clone()
    };
    assert_eq!(find("desk").last_addr.as_deref(), Some("127.0.0.1"));
    assert_eq!(find("desk").online, Some(true));
    assert_eq!(find("phone").last_addr.as_deref(), Some("203.0.113.50"));
    assert!(find("phone").last_seen >= before - 1000);

    let dir = gw.dir.to_str().expect("path").to_owned();
    let (ok, out, err) =
        tokio::task::spawn_blocking(move || cli(&["devices", "list", "--data-dir", &dir]))
            .await
            .expect("cli");
    assert!(ok, "{err}");
    assert!(
        out.lines()
            .next()
            .is_some_and(|h| h.contains("LAST ADDRESS")),
        "{out}"
    );
    let line = out
        .lines()
        .find(|l| l.starts_with("desk"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        line.contains("127.0.0.1") && line.contains("online now"),
        "{line}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn wrong_device_tokens_and_codes_are_throttled_but_a_valid_device_token_passes() {
    let gw = TestGateway::start_with(|c| c.limits.auth_failures_per_minute = 3).await;
    let token = hello(&gw, &new_code(&gw, Duration::from_secs(600)).await, "owner")
        .await
        .expect("pairs")
        .device_token
        .expect("token");
    let spent = new_code(&gw, Duration::from_secs(600)).await;
    assert!(hello_from(&gw, &STRANGER, &spent, "helper").await.is_ok());
    let guesses = [
        credentials::new_secret(credentials::DEVICE_TOKEN_PREFIX),
        credentials::new_secret(credentials::CODE_PREFIX),
        spent.clone(),
    ];
    for (i, guess) in guesses.iter().enumerate() {
        let got = hello_from(&gw, &STRANGER, guess, "stranger")
            .await
            .map(|_| ());
        assert!(
            matches!(got, Err((ErrorCode::Auth, _))),
            "guess {i}: {got:?}"
        );
    }
    for guess in &guesses {
        let got = hello_from(&gw, &STRANGER, guess, "stranger")
            .await
            .map(|_| ());
        assert!(matches!(got, Err((ErrorCode::RateLimited, _))), "{got:?}");
    }
    // The owner's device token, from the same address, passes at once; so does a fresh code.
    assert!(
        hello_from(&gw, &STRANGER, &token, "owner").await.is_ok(),
        "owner locked out"
    );
    let fresh = new_code(&gw, Duration::from_secs(600)).await;
    assert!(
        hello_from(&gw, &STRANGER, &fresh, "new-tablet")
            .await
            .is_ok(),
        "a valid code locked out"
    );
    gw.stop().await;
}

#[tokio::test]
async fn while_an_address_is_throttled_even_the_right_shared_token_is_not_checked() {
    let gw = TestGateway::start_with(|c| {
        c.limits.auth_failures_per_minute = 3;
        c.trusted_proxies = vec!["127.0.0.1".parse().expect("ip")];
    })
    .await;
    let token = hello(&gw, &new_code(&gw, Duration::from_secs(600)).await, "owner")
        .await
        .expect("pairs")
        .device_token
        .expect("token");
    let code = |got: Result<HelloAck, (ErrorCode, String)>| got.map(|_| ()).map_err(|e| e.0);
    let from = |addr: &'static str| [("x-forwarded-for", addr)];
    for i in 0..3 {
        let guess = format!("wrong-guess-{i:08}");
        let got = hello_from(&gw, &from("2001:db8::1"), &guess, "stranger").await;
        assert_eq!(code(got), Err(ErrorCode::Auth), "guess {i}");
    }
    // The right token, guessed now, is not even compared: guessing gains nothing while
    // throttled. Another address of the same /64 is the same guesser.
    for addr in ["2001:db8::1", "2001:db8::ffff"] {
        let got = hello_from(&gw, &from(addr), TOKEN, "stranger").await;
        assert_eq!(code(got), Err(ErrorCode::RateLimited), "{addr}");
    }
    // A paired device's own token (256 random bits) still passes from there.
    let got = hello_from(&gw, &from("2001:db8::1"), &token, "owner").await;
    assert_eq!(code(got), Ok(()), "a paired device was locked out");
    // Another network is not throttled: its shared token is compared (and, a device being
    // paired, answered that it signs in only on the gateway's own machine).
    let got = hello_from(&gw, &from("2001:db8:0:1::1"), TOKEN, "laptop").await;
    let (c, message) = got.map(|_| ()).expect_err("local only");
    assert_eq!(c, ErrorCode::Auth, "{message}");
    assert!(message.contains("gateway's own machine"), "{message}");
    gw.stop().await;
}

async fn send_once(client: &mut Client, text: &str) -> Result<(), ErrorCode> {
    let frame = ClientFrame::MessageSend(MessageSend {
        text: text.into(),
        ..Default::default()
    });
    match client.request(default_lane(), frame).await {
        Ok(_) => Ok(()),
        Err(ClientError::Server { code, .. }) => Err(code),
        Err(e) => panic!("{e}"),
    }
}

#[tokio::test]
async fn a_device_cannot_reset_its_send_budget_by_claiming_another_id() {
    // 8 a minute: a burst of 2, then one every 7.5 s.
    let gw = TestGateway::start_with(|c| c.limits.sends_per_minute = 8).await;
    let code = new_code(&gw, Duration::from_secs(600)).await;
    let token = hello(&gw, &code, "chatty")
        .await
        .expect("pairs")
        .device_token
        .expect("token");
    let (mut chatty, _) = connect(&gw, &token, "chatty").await;
    assert_eq!(send_once(&mut chatty, "one").await, Ok(()));
    assert_eq!(send_once(&mut chatty, "two").await, Ok(()));
    assert_eq!(
        send_once(&mut chatty, "three").await,
        Err(ErrorCode::RateLimited)
    );
    chatty.close().await.expect("close");

    let (mut renamed, ack) = connect(&gw, &token, "chatty-2").await;
    assert_eq!(ack.device_id.as_deref(), Some("chatty"));
    assert_eq!(
        send_once(&mut renamed, "four").await,
        Err(ErrorCode::RateLimited),
        "a new id must not bring a fresh budget"
    );
    // Another device's budget is its own.
    let (mut other, _) = gw.connect("quiet").await;
    assert_eq!(send_once(&mut other, "hello").await, Ok(()));
    gw.stop().await;
}

#[test]
fn a_token_on_the_command_line_is_warned_about() {
    let dir = tempfile::tempdir().expect("dir");
    let data = dir.path().to_str().expect("path");
    let (ok, out, err) = cli(&[
        "pair",
        "--shared",
        "--token",
        "cli-token-123456",
        "--data-dir",
        data,
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("cli-token-123456"), "{out}");
    assert!(
        err.contains("visible to every user") && err.contains("IRIS_TOKEN"),
        "{err}"
    );
    // Through the environment, nothing to warn about.
    let out = cli_command(&["pair", "--shared", "--data-dir", data])
        .env("IRIS_TOKEN", "env-token-123456")
        .output()
        .expect("run");
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).is_empty());
}

#[tokio::test]
async fn a_device_stays_out_when_the_store_cannot_say_whether_it_was_revoked() {
    let gw = TestGateway::start().await;
    let (phone, _) = gw.connect("phone").await;
    phone.close().await.expect("close");
    // The store stops answering (a failed disk, say): nobody can tell whether this id was
    // revoked meanwhile, so it is not let in, even with the right token.
    gw.shared.store.close();
    assert_eq!(
        hello(&gw, TOKEN, "phone").await.map(|_| ()),
        Err((
            ErrorCode::Internal,
            "the gateway cannot check this device now; try again".into()
        ))
    );
    gw.stop().await;
}
