//! Push notifications to devices without a live connection, against local servers that stand in
//! for Google's token endpoint, the FCM send endpoint and an ntfy server and record every request
//! (`common/fake_push.rs`): the exact request shapes (the JWT assertion checked with the test
//! key), token caching, one push per burst, none for a connected device, `last_pushed_cursor` in
//! `hello.ack`, retries after 500 and 429, removal of an unregistered token and previews off. A
//! crash with a push pending is in `push_restart.rs`.

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::fake_push::*;
use common::send_text;
use iris_client::Client;
use serde_json::{json, Value};

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
    fake.with(|b| b.fcm_script.push_back(fcm_unregistered()));
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

#[tokio::test]
async fn by_default_fcm_and_ntfy_pushes_carry_no_text_but_approvals_keep_their_buttons() {
    let fake = FakeBackends::start().await;
    // The defaults of `[push] content`: private for the backends that are third parties.
    let (gw, _keys) = gateway(&fake, |p| p.private = None).await;
    pair_and_leave(&gw, device(&gw, "phone", Some("fcm-phone"), None)).await;
    pair_and_leave(&gw, device(&gw, "tablet", None, Some("tablet-topic"))).await;
    let (mut laptop, _) = gw.connect("laptop").await;

    ask(&mut laptop, "my bank password is hunter2").await;
    let fcm = fake.fcm(0).await;
    assert_eq!(
        fcm.json()["message"]["notification"],
        json!({"title": "Demo agent replied in Default", "body": "Open Iris to see it."}),
        "the channel and the kind of event, never the text"
    );
    let ntfy = fake.ntfy(0).await;
    assert_eq!(ntfy.body, "Open Iris to see it.");

    send_text(&mut laptop, "default", "please approve this").await;
    laptop
        .wait_for(|e| e.frame_type() == "picker.approval")
        .await
        .expect("approval picker");
    let fcm_approval = fake.fcm(1).await;
    assert_eq!(
        fcm_approval.json()["message"]["notification"]["title"],
        json!("Approval needed")
    );
    assert!(
        !fcm_approval.data("action_token").is_empty(),
        "an approval is still answerable from the notification"
    );
    let ntfy_approval = fake.ntfy(1).await;
    for request in [&fcm, &ntfy, &fcm_approval, &ntfy_approval] {
        let all = format!("{:?} {}", request.headers, request.body);
        for secret in ["hunter2", "password", "demo-scratch", "approve this"] {
            assert!(!all.contains(secret), "{secret} in {all}");
        }
    }
    gw.stop().await;
}
