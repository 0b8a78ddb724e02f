//! Answering from the lock screen: a push about an approval carries the choices and a token for
//! that device and that picker (FCM data, Web Push payload, ntfy `http` actions), and
//! `POST /v1/actions` with the token answers the picker as that device, once. Tried the way an attacker would: a spent, guessed or wrong-value token, a token
//! whose picker was answered elsewhere, a revoked device's token, another site's page, a body
//! that is not JSON, and guessing until the address is throttled (which never disables a real token).

mod common;

use common::fake_push::*;
use common::turns::picker_id;
use common::{select, send_text, TestGateway};
use iris_client::Client;
use serde_json::{json, Value};

/// `http://127.0.0.1:<port>/v1/actions` of this gateway (its public URL in the tests).
fn actions_url(gw: &TestGateway) -> String {
    let base = gw
        .url
        .strip_prefix("ws://")
        .and_then(|rest| rest.strip_suffix("/ws"))
        .expect("a ws:// url ending in /ws");
    format!("http://{base}/v1/actions")
}

/// POSTs `body` as JSON (with an `Origin` when given): the status and the JSON answer.
async fn post(gw: &TestGateway, body: &Value, origin: Option<&str>) -> (u16, Value) {
    let mut req = reqwest::Client::new()
        .post(actions_url(gw))
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(origin) = origin {
        req = req.header("origin", origin);
    }
    let res = req.send().await.expect("the gateway answers");
    let status = res.status().as_u16();
    let text = res.text().await.expect("a body");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn code(answer: &Value) -> &str {
    answer["error"]["code"].as_str().unwrap_or_default()
}

/// Asks for a permission from `laptop` and waits for the phone's push that offers buttons:
/// `(picker id, token, push data)`.
async fn approval_push(fake: &FakeBackends, laptop: &mut Client) -> (String, String, Value) {
    let before = fake.with(|b| b.fcm.len());
    send_text(laptop, "default", "please approve this").await;
    let (picker, _) = picker_id(laptop, "picker.approval").await;
    fake.until("a push with an action token", |b| {
        b.fcm[before.min(b.fcm.len())..]
            .iter()
            .any(|r| !r.data("action_token").is_empty())
    })
    .await;
    let push = fake.with(|b| {
        b.fcm[before..]
            .iter()
            .find(|r| !r.data("action_token").is_empty())
            .cloned()
            .expect("found above")
    });
    let data = push.json()["message"]["data"].clone();
    (picker, push.data("action_token"), data)
}

async fn paired_phone_and_laptop() -> (FakeBackends, TestGateway, tempfile::TempDir, Client) {
    let fake = FakeBackends::start().await;
    let (gw, keys) = gateway(&fake, |_| {}).await;
    pair_and_leave(&gw, device(&gw, "phone", Some("fcm-phone"), None)).await;
    let (laptop, _) = gw.connect("laptop").await;
    (fake, gw, keys, laptop)
}

#[tokio::test]
async fn an_approval_is_answered_from_the_notification_exactly_once() {
    let (fake, gw, _keys, mut laptop) = paired_phone_and_laptop().await;
    let (picker, token, data) = approval_push(&fake, &mut laptop).await;
    assert_eq!(
        data["picker_id"],
        json!(picker),
        "the push names its picker"
    );
    assert_eq!(
        data["type"],
        json!("picker.approval"),
        "it describes the picker"
    );
    assert!(token.starts_with("iat_"), "{token}");
    assert_eq!(
        data["action_url"],
        json!(actions_url(&gw)),
        "where the app sends it"
    );
    let buttons: Value =
        serde_json::from_str(data["actions"].as_str().expect("actions as a JSON string"))
            .expect("actions parse");
    let values: Vec<&str> = buttons
        .as_array()
        .expect("a list")
        .iter()
        .map(|b| b["action"].as_str().expect("action"))
        .collect();
    assert_eq!(values, ["allow_once", "allow_always", "reject_once"]);
    assert!(buttons
        .as_array()
        .unwrap()
        .iter()
        .all(|b| !b["title"].as_str().unwrap_or_default().is_empty()));

    // Not JSON: refused before the token is looked at, and the token stays good.
    let res = reqwest::Client::new()
        .post(actions_url(&gw))
        .header("content-type", "text/plain")
        .body(json!({"token": token, "value": "allow_once"}).to_string())
        .send()
        .await
        .expect("answer");
    assert_eq!(res.status().as_u16(), 415);
    // A page of another site.
    let (status, answer) = post(
        &gw,
        &json!({"token": token, "value": "allow_once"}),
        Some("https://evil.example"),
    )
    .await;
    assert_eq!((status, code(&answer)), (403, "auth"));
    // A value the question does not offer.
    let (status, answer) = post(
        &gw,
        &json!({"token": token, "value": "allow_all_forever"}),
        None,
    )
    .await;
    assert_eq!((status, code(&answer)), (400, "bad_request"));
    // A body of another shape.
    let (status, _) = post(&gw, &json!({"token": token, "value": 1}), None).await;
    assert_eq!(status, 400);

    // The button: answered as the phone, and every device sees it.
    let (status, answer) = post(&gw, &json!({"token": token, "value": "allow_once"}), None).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer, json!({"ok": true, "picker_id": picker}));
    let closed = laptop
        .wait_for(|e| e.frame_type() == "picker.closed")
        .await
        .expect("picker.closed");
    let closed = closed.json();
    assert_eq!(closed["payload"]["picker_id"], json!(picker));
    assert_eq!(closed["payload"]["by_device"], json!("phone"));
    let done = laptop
        .wait_for(|e| e.frame_type() == "message.stop")
        .await
        .expect("the turn ends");
    let text = done.json()["payload"]["final_text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(text.contains("Permission granted: allow_once"), "{text}");

    // Pressed again (a second tap, a retried request): nothing more happens.
    let (status, answer) = post(&gw, &json!({"token": token, "value": "allow_once"}), None).await;
    assert_eq!((status, code(&answer)), (404, "not_found"));
    let (status, _) = post(&gw, &json!({"token": token, "value": "reject_once"}), None).await;
    assert_eq!(status, 404);
    gw.stop().await;
}

#[tokio::test]
async fn a_token_dies_with_its_picker_and_with_its_device() {
    let (fake, gw, _keys, mut laptop) = paired_phone_and_laptop().await;

    // Answered on the laptop first: the phone's button changes nothing.
    let (picker, token, _) = approval_push(&fake, &mut laptop).await;
    select(&mut laptop, &picker, "reject_once")
        .await
        .expect("answered on the laptop");
    laptop
        .wait_for(|e| e.frame_type() == "message.stop")
        .await
        .expect("the turn ends");
    let (status, answer) = post(&gw, &json!({"token": token, "value": "allow_once"}), None).await;
    assert_eq!((status, code(&answer)), (404, "not_found"), "{answer}");

    // The phone revoked while its notification still shows: its button no longer answers, and
    // the question still waits for someone who may answer it.
    let (picker, token, _) = approval_push(&fake, &mut laptop).await;
    let revoked = iris_gateway::admin::devices::revoke(&gw.dir, "phone")
        .await
        .expect("revoke");
    assert!(revoked.existed);
    let (status, _) = post(&gw, &json!({"token": token, "value": "allow_always"}), None).await;
    assert!(status == 403 || status == 404, "refused, got {status}");
    let (_, ack) = gw.connect("laptop-2").await;
    assert!(
        ack.open_pickers
            .iter()
            .any(|f| f["payload"]["picker_id"] == json!(picker)),
        "the picker is still open"
    );
    select(&mut laptop, &picker, "allow_once")
        .await
        .expect("the laptop answers it");
    gw.stop().await;
}

#[tokio::test]
async fn guessing_tokens_gets_an_address_throttled() {
    let fake = FakeBackends::start().await;
    let keys = tempfile::tempdir().expect("tempdir");
    let push = fake.config(fake.service_account(keys.path()));
    let gw = TestGateway::start_with(|c| {
        c.agent_command = Some(common::demo_agent());
        c.push = push;
        c.limits.auth_failures_per_minute = 5;
    })
    .await;
    pair_and_leave(&gw, device(&gw, "phone", Some("fcm-phone"), None)).await;
    let (mut laptop, _) = gw.connect("laptop").await;
    let (picker, token, _) = approval_push(&fake, &mut laptop).await;

    // A guess that keeps the id of a real token but not its secret is as wrong as any other.
    let (id, _) = token.split_once('.').expect("id.secret");
    let forged = format!("{id}.{}", "0".repeat(64));
    for guess in [forged.as_str(), "iat_00.11", "", "x", "iat_"] {
        let (status, answer) =
            post(&gw, &json!({"token": guess, "value": "allow_once"}), None).await;
        assert_eq!((status, code(&answer)), (404, "not_found"), "{guess}");
    }
    // The address is throttled now: a guess gets no more answer than "wait a minute".
    let (status, answer) = post(
        &gw,
        &json!({"token": "iat_1.2", "value": "allow_once"}),
        None,
    )
    .await;
    assert_eq!((status, code(&answer)), (429, "rate_limited"), "{answer}");
    // No forged guess spent the real token, and the owner's button still works from the same
    // address (behind one NAT or reverse proxy, the guesser's address is the owner's).
    assert!(gw.shared.hub.picker_open(&picker));
    let (status, answer) = post(&gw, &json!({"token": token, "value": "allow_once"}), None).await;
    assert_eq!(status, 200, "{answer}");
    let closed = laptop
        .wait_for(|e| e.frame_type() == "picker.closed")
        .await
        .expect("picker.closed");
    assert_eq!(closed.json()["payload"]["by_device"], json!("phone"));
    gw.stop().await;
}

#[tokio::test]
async fn ntfy_buttons_post_the_answer_themselves() {
    let fake = FakeBackends::start().await;
    let (gw, _keys) = gateway(&fake, |_| {}).await;
    pair_and_leave(&gw, device(&gw, "phone", None, Some("iris-phone"))).await;
    let (mut laptop, _) = gw.connect("laptop").await;
    send_text(&mut laptop, "default", "please approve this").await;
    let (picker, _) = picker_id(&mut laptop, "picker.approval").await;
    let push = fake.ntfy(0).await;
    let header = push.header("actions").to_owned();
    let actions: Vec<&str> = header.split("; ").collect();
    assert_eq!(actions.len(), 3, "{header}");
    assert!(
        actions[0].starts_with(&format!(
            "http, Allow once, {}, method=POST, ",
            actions_url(&gw)
        )),
        "{header}"
    );
    assert!(actions[2].starts_with("http, "), "{header}");
    assert!(actions
        .iter()
        .all(|a| a.ends_with(", clear=true")
            && a.contains(", headers.content-type=application/json, ")));

    // What the ntfy app sends when "Allow once" is pressed: the quoted body, to that URL.
    let body = actions[0]
        .split_once("body='")
        .and_then(|(_, rest)| rest.split_once('\''))
        .map(|(body, _)| body)
        .expect("a quoted body");
    let body: Value = serde_json::from_str(body).expect("the body is JSON");
    assert_eq!(body["value"], json!("allow_once"));
    let (status, answer) = post(&gw, &body, None).await;
    assert_eq!(status, 200, "{answer}");
    let closed = laptop
        .wait_for(|e| e.frame_type() == "picker.closed")
        .await
        .expect("picker.closed");
    assert_eq!(closed.json()["payload"]["picker_id"], json!(picker));
    assert_eq!(closed.json()["payload"]["by_device"], json!("phone"));
    gw.stop().await;
}
