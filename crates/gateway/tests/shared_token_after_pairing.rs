//! The shared token against a device that read it and was revoked: once a device has been paired
//! with a code or any device revoked, the shared token signs in only on the gateway's own
//! machine (loopback, not forwarded by a proxy). A revoked device that kept the shared token is
//! refused from its own address under a new id; the owner on the gateway's machine still gets
//! in with it, and a paired device's own token still works from anywhere.

mod common;

use std::time::Duration;

use common::*;
use iris_client::{ClientError, RawConnection};
use iris_gateway::credentials;
use iris_protocol::ErrorCode;

/// `hello` with `token` as `device`, from `from` (an `X-Forwarded-For` a trusted proxy sends,
/// or the gateway's own machine when `None`): the device token when one was issued, or the
/// error.
async fn hello(
    gw: &TestGateway,
    from: Option<&str>,
    token: &str,
    device: &str,
) -> Result<Option<String>, (ErrorCode, String)> {
    let headers: Vec<(&'static str, &str)> =
        from.map(|a| ("x-forwarded-for", a)).into_iter().collect();
    let mut conn = RawConnection::connect_with_headers(&gw.url, &headers)
        .await
        .expect("connect");
    let result = conn.hello(token, device).await;
    let _ = conn.close().await;
    match result {
        Ok(ack) => Ok(ack.device_token),
        Err(ClientError::Server { code, message }) => Err((code, message)),
        Err(e) => panic!("hello failed without an error frame: {e}"),
    }
}

const PHONE: Option<&str> = Some("203.0.113.7");

async fn gateway() -> TestGateway {
    TestGateway::start_with(|c| c.trusted_proxies = vec!["127.0.0.1".parse().expect("ip")]).await
}

#[tokio::test]
async fn a_revoked_device_cannot_come_back_with_the_shared_token() {
    let gw = gateway().await;
    // Before any pairing the shared token signs in from anywhere (the first device's way in).
    hello(&gw, PHONE, TOKEN, "laptop")
        .await
        .expect("shared token from the LAN");
    let code = credentials::create_code(&gw.shared.store, Duration::from_secs(600), None)
        .await
        .expect("code")
        .code;
    let phone_token = hello(&gw, PHONE, &code, "phone")
        .await
        .expect("pairs")
        .expect("a device token");
    // The phone read the shared token (through the file browser, say) and is revoked.
    iris_gateway::revoke::revoke_live(&gw.shared, "phone")
        .await
        .expect("revoke");
    let (code, message) = hello(&gw, PHONE, TOKEN, "phone-2")
        .await
        .expect_err("refused");
    assert_eq!(code, ErrorCode::Auth, "{message}");
    assert!(message.contains("gateway's own machine"), "{message}");
    let (code, _) = hello(&gw, PHONE, &phone_token, "phone")
        .await
        .expect_err("revoked");
    assert_eq!(code, ErrorCode::Auth);
    // A proxy on the same machine that is not trusted still names the client: not local.
    let mut conn =
        RawConnection::connect_with_headers(&gw.url, &[("forwarded", "for=203.0.113.7")])
            .await
            .expect("connect");
    assert!(conn.hello(TOKEN, "phone-3").await.is_err());
    // The owner on the gateway's machine still signs in with it.
    hello(&gw, None, TOKEN, "owner-desk")
        .await
        .expect("local shared token");
    gw.stop().await;
}

#[tokio::test]
async fn after_pairing_the_shared_token_is_local_and_device_tokens_work_from_anywhere() {
    let gw = gateway().await;
    let code = credentials::create_code(&gw.shared.store, Duration::from_secs(600), None)
        .await
        .expect("code")
        .code;
    let token = hello(&gw, PHONE, &code, "phone")
        .await
        .expect("pairs")
        .expect("a device token");
    let (code, _) = hello(&gw, Some("198.51.100.2"), TOKEN, "tablet")
        .await
        .expect_err("refused");
    assert_eq!(code, ErrorCode::Auth);
    hello(&gw, Some("198.51.100.2"), &token, "phone")
        .await
        .expect("its own token");
    hello(&gw, None, TOKEN, "owner-desk")
        .await
        .expect("local shared token");
    gw.stop().await;
}
