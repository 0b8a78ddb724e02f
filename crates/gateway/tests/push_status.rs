//! Accountable push (extensions): a device asks how its pushes fare (`push.status`) and for a
//! test notification (`push.test`, at most one per 10 s); every push's outcome is recorded per
//! device and backend, so `devices list` shows the owner what was delivered, and a registration
//! a push cost (an expired FCM token) is dropped and said so.

mod common;

use common::fake_push::*;
use iris_client::{Client, ClientError};
use iris_protocol::{ClientFrame, Empty, ErrorCode, Header, PushStatus, ServerFrame};
use serde_json::json;

async fn status_of(client: &mut Client, frame: ClientFrame) -> Result<PushStatus, ErrorCode> {
    match client.request(Header::default(), frame).await {
        Ok(event) => match event.body {
            ServerFrame::PushStatus(status) => Ok(status),
            other => panic!("expected push.status, got {other:?}"),
        },
        Err(ClientError::Server { code, .. }) => Err(code),
        Err(e) => panic!("request failed: {e}"),
    }
}

#[tokio::test]
async fn a_device_sends_itself_a_test_notification_and_sees_how_it_ended() {
    let fake = FakeBackends::start().await;
    let (gw, _keys) = gateway(&fake, |_| {}).await;
    let (mut phone, _) = Client::connect(device(&gw, "phone", Some("fcm-phone"), None))
        .await
        .expect("connect");

    let before = status_of(&mut phone, ClientFrame::PushStatus(Empty {}))
        .await
        .expect("push.status");
    assert_eq!(before.registered, ["fcm"]);
    assert_eq!(before.route.as_deref(), Some("fcm"));
    assert!(before.last.is_empty(), "nothing pushed yet");

    // Sent although the device is connected: that is the point of a test.
    let after = status_of(&mut phone, ClientFrame::PushTest(Empty {}))
        .await
        .expect("push.test");
    let push = fake.fcm(0).await;
    assert_eq!(push.fcm_token(), "fcm-phone");
    assert_eq!(
        push.json()["message"]["notification"]["title"],
        json!("Test notification")
    );
    assert_eq!(push.data("type"), "push.test");
    let last = &after.last[0];
    assert_eq!(
        (last.backend.as_str(), last.result.as_str(), last.test),
        ("fcm", "delivered", true)
    );

    // A second one at once is refused, and nothing is sent.
    assert_eq!(
        status_of(&mut phone, ClientFrame::PushTest(Empty {})).await,
        Err(ErrorCode::RateLimited)
    );
    assert_eq!(fake.with(|b| b.fcm.len()), 1);
    gw.stop().await;
}

#[tokio::test]
async fn an_expired_registration_is_dropped_and_the_owner_is_told() {
    let fake = FakeBackends::start().await;
    fake.with(|b| b.fcm_script.push_back(fcm_unregistered()));
    let (gw, _keys) = gateway(&fake, |_| {}).await;
    pair_and_leave(&gw, device(&gw, "phone", Some("fcm-stale"), None)).await;
    pair_and_leave(&gw, device(&gw, "tablet", None, Some("tablet-topic"))).await;
    let (mut laptop, _) = gw.connect("laptop").await;

    ask(&mut laptop, "are you there").await;
    assert_eq!(fake.fcm(0).await.status, 404);
    fake.ntfy(0).await;
    // The outcome is written just after the request (no frame tells of it): look until it is.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let list = loop {
        let list = iris_gateway::admin::devices::list(&gw.dir)
            .await
            .expect("devices list");
        let phone = list.iter().find(|d| d.device_id == "phone").expect("phone");
        let tablet = list
            .iter()
            .find(|d| d.device_id == "tablet")
            .expect("tablet");
        if !phone.last_pushes.is_empty() && !tablet.last_pushes.is_empty() {
            break list;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no outcome recorded: {list:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    let phone = list.iter().find(|d| d.device_id == "phone").unwrap();
    assert!(phone.push.is_empty(), "the stale token is gone: {phone:?}");
    assert_eq!(phone.last_pushes[0].backend, "fcm");
    assert_eq!(phone.last_pushes[0].result, "expired");
    let tablet = list.iter().find(|d| d.device_id == "tablet").unwrap();
    assert_eq!(tablet.last_pushes[0].result, "delivered");

    // The phone, back, learns the same, and that nothing can reach it now.
    let (mut phone, _) = Client::connect(gw.options("phone")).await.expect("connect");
    let status = status_of(&mut phone, ClientFrame::PushStatus(Empty {}))
        .await
        .expect("push.status");
    assert!(
        status.registered.is_empty() && status.route.is_none(),
        "{status:?}"
    );
    assert_eq!(status.last[0].result, "expired");
    // A test with no registration sends nothing and says so by the missing route.
    let tested = status_of(&mut phone, ClientFrame::PushTest(Empty {}))
        .await
        .expect("push.test");
    assert!(tested.route.is_none());
    assert_eq!(fake.with(|b| b.fcm.len()), 1);
    gw.stop().await;
}

#[tokio::test]
async fn a_test_that_finds_the_registration_gone_removes_it_and_one_that_fails_is_not_retried() {
    let fake = FakeBackends::start().await;
    fake.with(|b| {
        b.fcm_script.push_back((
            503,
            json!({"error": {"code": 503, "status": "UNAVAILABLE"}}),
        ));
        b.fcm_script.push_back(fcm_unregistered());
    });
    let (gw, _keys) = gateway(&fake, |_| {}).await;
    let (mut phone, _) = Client::connect(device(&gw, "phone", Some("fcm-old"), None))
        .await
        .expect("connect");
    let busy = status_of(&mut phone, ClientFrame::PushTest(Empty {}))
        .await
        .expect("push.test");
    assert_eq!(busy.last[0].result, "unreachable", "a test is sent once");
    assert_eq!(busy.route.as_deref(), Some("fcm"));

    let (mut tablet, _) = Client::connect(device(&gw, "tablet", Some("fcm-gone"), None))
        .await
        .expect("connect");
    let gone = status_of(&mut tablet, ClientFrame::PushTest(Empty {}))
        .await
        .expect("push.test");
    assert_eq!(gone.last[0].result, "expired");
    assert!(
        gone.registered.is_empty() && gone.route.is_none(),
        "the dead token is removed: {gone:?}"
    );
    assert_eq!(fake.with(|b| b.fcm.len()), 2, "nothing was retried");
    gw.stop().await;
}
