//! A stranger facing the gateway: wrong tokens cannot lock a paired device out (nor find the
//! shared token faster than the throttle allows), forwarded addresses
//! count only behind a trusted proxy, and browser pages of other sites cannot open `/ws`. On the
//! gateway's own machine, whoever fails (the local agent, forged `/v1/actions` tokens) cannot lock
//! the owner's shared token out.

mod common;

use std::time::Duration;

use common::*;
use iris_client::{ClientError, RawConnection};
use iris_protocol::ErrorCode;
use tokio::io::AsyncWriteExt;

/// A `hello` over a fresh raw connection (with these request headers); the error code when it
/// was refused, `None` when it was accepted.
/// A stranger's request as a reverse proxy on this machine forwards it (the proxy is not
/// trusted, so the stranger counts under the proxy's address, loopback, but is not local).
const STRANGER: [(&str, &str); 1] = [("x-forwarded-for", "203.0.113.9")];

async fn hello_code(
    gw: &TestGateway,
    headers: &[(&'static str, &str)],
    token: &str,
) -> Option<ErrorCode> {
    let mut conn = RawConnection::connect_with_headers(&gw.url, headers)
        .await
        .expect("connect");
    match conn.hello(token, "phone").await {
        Ok(_) => None,
        Err(ClientError::Server { code, .. }) => Some(code),
        Err(e) => panic!("hello failed without an error frame: {e}"),
    }
}

#[tokio::test]
async fn a_stranger_hammering_wrong_tokens_cannot_lock_out_a_paired_device() {
    let gw = TestGateway::start_with(|c| c.limits.auth_failures_per_minute = 3).await;
    let code =
        iris_gateway::credentials::create_code(&gw.shared.store, Duration::from_secs(600), None)
            .await
            .expect("code")
            .code;
    let mut pairing = RawConnection::connect_with_headers(&gw.url, &STRANGER)
        .await
        .expect("connect");
    let device_token = pairing
        .hello(&code, "owner-phone")
        .await
        .expect("pairs")
        .device_token
        .expect("a device token");
    let _ = pairing.close().await;
    let mut codes = Vec::new();
    for _ in 0..8 {
        codes.push(hello_code(&gw, &STRANGER, "wrong-token-xyz").await);
    }
    let auth = Some(ErrorCode::Auth);
    let limited = Some(ErrorCode::RateLimited);
    assert_eq!(
        codes[..3],
        [auth, auth, auth],
        "the first failures: {codes:?}"
    );
    assert!(
        codes[3..].iter().all(|c| *c == limited),
        "then throttled: {codes:?}"
    );
    // The paired phone, from the very same address, with its own token: in at once.
    assert_eq!(
        hello_code(&gw, &STRANGER, &device_token).await,
        None,
        "owner locked out"
    );
    // The shared token is not even compared while the address is throttled, so a guess that
    // happens to be right gains nothing.
    assert_eq!(hello_code(&gw, &STRANGER, TOKEN).await, limited);
    // And the stranger is still throttled.
    assert_eq!(hello_code(&gw, &STRANGER, "wrong-token-xyz").await, limited);
    gw.stop().await;
}

#[tokio::test]
async fn failures_on_the_gateways_own_machine_cannot_lock_the_owner_out() {
    let gw = TestGateway::start_with(|c| c.limits.auth_failures_per_minute = 3).await;
    // The local agent (or anything else on the machine) guesses, and forges action tokens.
    for _ in 0..6 {
        assert_eq!(
            hello_code(&gw, &[], "wrong-token-xyz").await,
            Some(ErrorCode::Auth),
            "a local failure is refused as such, never as throttled"
        );
    }
    let url = gw
        .url
        .replace("ws://", "http://")
        .replace("/ws", "/v1/actions");
    for _ in 0..6 {
        let status = reqwest::Client::new()
            .post(&url)
            .header("content-type", "application/json")
            .body(r#"{"token":"forged-action-token","value":"allow_once"}"#)
            .send()
            .await
            .expect("the gateway answers")
            .status();
        assert!(matches!(status.as_u16(), 404 | 429), "{status}");
    }
    // The owner, on the same machine, signs in with the shared token at once.
    assert_eq!(hello_code(&gw, &[], TOKEN).await, None, "owner locked out");
    // The address is throttled all the same for what comes through a proxy: a stranger's right
    // guess gains nothing.
    assert_eq!(
        hello_code(&gw, &STRANGER, TOKEN).await,
        Some(ErrorCode::RateLimited)
    );
    gw.stop().await;
}

#[tokio::test]
async fn forwarded_addresses_count_only_behind_a_trusted_proxy() {
    let attacker = [("x-forwarded-for", "203.0.113.9")];
    let neighbour = [("x-forwarded-for", "198.51.100.7")];
    // Behind a trusted proxy, each forwarded client has its own count.
    let gw = TestGateway::start_with(|c| {
        c.limits.auth_failures_per_minute = 2;
        c.trusted_proxies = vec!["127.0.0.1".parse().expect("ip")];
    })
    .await;
    for _ in 0..2 {
        assert_eq!(
            hello_code(&gw, &attacker, "wrong").await,
            Some(ErrorCode::Auth)
        );
    }
    assert_eq!(
        hello_code(&gw, &attacker, "wrong").await,
        Some(ErrorCode::RateLimited),
        "the attacker's forwarded address is throttled"
    );
    assert_eq!(
        hello_code(&gw, &neighbour, "wrong").await,
        Some(ErrorCode::Auth),
        "another client behind the same proxy is not"
    );
    gw.stop().await;
    // Without it, the header is the client's own say and is ignored: a fresh made-up address per
    // attempt does not escape the throttle.
    let gw = TestGateway::start_with(|c| c.limits.auth_failures_per_minute = 2).await;
    let mut codes = Vec::new();
    for n in 0..3 {
        let made_up = format!("192.0.2.{n}");
        codes.push(hello_code(&gw, &[("x-forwarded-for", &made_up)], "wrong").await);
    }
    assert_eq!(codes[2], Some(ErrorCode::RateLimited), "{codes:?}");
    gw.stop().await;
}

/// Sends a bare HTTP upgrade request for `/ws` with this `Origin` and returns the status code.
async fn upgrade_status(gw: &TestGateway, origin: Option<&str>) -> u16 {
    let host = gw
        .url
        .trim_start_matches("ws://")
        .trim_end_matches("/ws")
        .to_owned();
    let mut tcp = tokio::net::TcpStream::connect(&host).await.expect("tcp");
    let origin = origin
        .map(|o| format!("Origin: {o}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "GET /ws HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{origin}\r\n"
    );
    tcp.write_all(request.as_bytes()).await.expect("write");
    common::tcp::response_status(&mut tcp).await
}

#[tokio::test]
async fn pages_of_other_sites_cannot_open_a_session() {
    let gw = TestGateway::start_with(|c| {
        c.public_url = Some("https://iris.example.com".into());
        c.allowed_origins = vec!["https://app.example.net".into()];
    })
    .await;
    let own = gw.url.replace("ws://", "http://").replace("/ws", "");
    let cases: [(&str, Option<&str>, u16); 7] = [
        ("a native app (no Origin)", None, 101),
        ("the gateway's own page", Some(&own), 101),
        ("the public_url", Some("https://iris.example.com"), 101),
        ("the allow-list", Some("https://app.example.net"), 101),
        ("another site", Some("https://evil.example"), 403),
        ("a sandboxed page", Some("null"), 403),
        (
            "a look-alike host",
            Some("https://iris.example.com.evil.example"),
            403,
        ),
    ];
    for (case, origin, status) in cases {
        assert_eq!(upgrade_status(&gw, origin).await, status, "case {case:?}");
    }
    // A foreign origin gets no session even with the right token.
    let err = RawConnection::connect_with_headers(&gw.url, &[("origin", "https://evil.example")])
        .await
        .expect_err("refused before the upgrade");
    assert!(matches!(err, ClientError::Connect { .. }), "{err}");
    let ok = RawConnection::connect_with_headers(&gw.url, &[("origin", &own)])
        .await
        .expect("own origin connects");
    drop(ok);
    gw.stop().await;
}
