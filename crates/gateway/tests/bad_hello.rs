//! Before `hello`: only a valid `hello` is accepted, a device that says nothing in time is
//! refused, and repeated wrong tokens throttle their address.

mod common;

use std::time::Duration;

use common::bad::*;
use common::*;
use iris_client::{ClientError, RawConnection};
use iris_protocol::ErrorCode;

/// Before `hello` only a valid `hello` is accepted; everything else is `auth` and close 4401.
#[tokio::test]
async fn the_first_frame_must_be_a_valid_hello() {
    let gw = TestGateway::start_with(|c| c.limits.auth_failures_per_minute = 1000).await;
    let hello = |token: &str, device: &str| {
        format!(
            r#"{{"v":1,"id":3,"type":"hello","payload":{{"token":"{token}","device_id":"{device}"}}}}"#
        )
    };
    enum First {
        Text(String),
        Binary,
    }
    let long_device = "d".repeat(129);
    let cases: Vec<(&str, First, &str, Option<u64>, u16)> = vec![
        (
            "a ping before hello",
            First::Text(r#"{"v":1,"id":3,"type":"ping","payload":{}}"#.into()),
            "auth",
            Some(3),
            4401,
        ),
        (
            "a message.send before hello",
            First::Text(r#"{"v":1,"id":3,"type":"message.send","payload":{"text":"hi"}}"#.into()),
            "auth",
            Some(3),
            4401,
        ),
        (
            "an unknown type before hello",
            First::Text(r#"{"v":1,"type":"teleport","payload":{}}"#.into()),
            "auth",
            None,
            4401,
        ),
        (
            "a wrong token",
            First::Text(hello("not-the-token-at-all", "phone")),
            "auth",
            Some(3),
            4401,
        ),
        (
            "an empty token",
            First::Text(hello("", "phone")),
            "auth",
            Some(3),
            4401,
        ),
        (
            "the token with a trailing space",
            First::Text(hello(&format!("{TOKEN} "), "phone")),
            "auth",
            Some(3),
            4401,
        ),
        (
            "a hello without token",
            First::Text(r#"{"v":1,"id":3,"type":"hello","payload":{"device_id":"phone"}}"#.into()),
            "auth",
            Some(3),
            4401,
        ),
        (
            "malformed JSON",
            First::Text(r#"{"v":1,"type":"hello","payload":{"token":"#.into()),
            "auth",
            None,
            4401,
        ),
        ("a JSON array", First::Text("[]".into()), "auth", None, 4401),
        ("a binary frame", First::Binary, "auth", None, 4401),
        (
            "a hello of protocol v2",
            First::Text(hello(TOKEN, "phone").replace(r#""v":1"#, r#""v":2"#)),
            "unsupported",
            Some(3),
            4400,
        ),
        (
            "a device id of 129 characters",
            First::Text(hello(TOKEN, &long_device)),
            "bad_request",
            Some(3),
            4401,
        ),
        (
            "a device id with a space",
            First::Text(hello(TOKEN, "my phone")),
            "bad_request",
            Some(3),
            4401,
        ),
        (
            "a device id with a zero-width space, which prints like \"phone\"",
            First::Text(hello(TOKEN, "pho\u{200B}ne")),
            "bad_request",
            Some(3),
            4401,
        ),
        (
            "a device id with a bidi override",
            First::Text(hello(TOKEN, "\u{202E}enohp")),
            "bad_request",
            Some(3),
            4401,
        ),
        (
            "a device id with a word joiner",
            First::Text(hello(TOKEN, "phone\u{2060}")),
            "bad_request",
            Some(3),
            4401,
        ),
        (
            "a device id with a terminal escape",
            First::Text(hello(TOKEN, "phone\\u001b[2J")),
            "bad_request",
            Some(3),
            4401,
        ),
        (
            "a caps flag of the wrong type",
            First::Text(format!(
                r#"{{"v":1,"id":3,"type":"hello","payload":{{"token":"{TOKEN}","device_id":"phone","caps":{{"append_updates":"yes"}}}}}}"#
            )),
            "bad_request",
            Some(3),
            4401,
        ),
    ];
    for (name, first, code, id, close) in cases {
        let mut conn = RawConnection::connect(&gw.url).await.expect("connect");
        match first {
            First::Text(t) => conn.send_text(&t).await,
            First::Binary => conn.send_binary(vec![1, 2, 3]).await,
        }
        .expect("send first frame");
        assert_rejected(&mut conn, name, code, Some(id), close).await;
    }
    // The gateway is unharmed: a correct hello still works.
    let (_client, ack) = gw.connect("phone").await;
    assert_eq!(ack.device_id.as_deref(), Some("phone"));
    gw.stop().await;
}

#[tokio::test]
async fn no_hello_in_time_is_an_auth_error() {
    let gw = TestGateway::start_with(|c| c.limits.hello_timeout = Duration::from_millis(300)).await;
    let mut conn = RawConnection::connect(&gw.url).await.expect("connect");
    let started = std::time::Instant::now();
    assert_rejected(&mut conn, "silent device", "auth", Some(None), 4401).await;
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "rejected after the timeout, not before"
    );
    gw.stop().await;
}

#[tokio::test]
async fn repeated_wrong_tokens_throttle_the_address() {
    let gw = TestGateway::start_with(|c| c.limits.auth_failures_per_minute = 3).await;
    for attempt in 0..3 {
        let mut conn =
            RawConnection::connect_with_headers(&gw.url, &[("x-forwarded-for", "203.0.113.9")])
                .await
                .expect("connect");
        let err = conn
            .hello("wrong-token-xyz", "guesser")
            .await
            .expect_err("wrong token refused");
        assert!(
            matches!(
                err,
                ClientError::Server {
                    code: ErrorCode::Auth,
                    ..
                }
            ),
            "attempt {attempt}: {err}"
        );
    }
    // Further wrong attempts are refused as throttled (the right token still passes: see
    // tests/hostile.rs).
    let mut conn =
        RawConnection::connect_with_headers(&gw.url, &[("x-forwarded-for", "203.0.113.9")])
            .await
            .expect("connect");
    let hello = r#"{"v":1,"id":9,"type":"hello","payload":{"token":"wrong-token-xyz","device_id":"phone"}}"#;
    conn.send_text(hello).await.expect("send hello");
    assert_rejected(&mut conn, "locked out", "rate_limited", Some(Some(9)), 4401).await;
    gw.stop().await;
}
