//! A paired device lists the paired devices and revokes itself or a device paired through its
//! codes (`devices.list`, `device.revoke`), never its parent, a sibling or the owner's devices:
//! a stolen device cannot lock the owner out.

mod common;

use std::time::Duration;

use common::*;
use iris_client::{Client, ClientError, ConnectOptions, RawConnection, RawFrame};
use iris_gateway::credentials;
use iris_protocol::{
    ClientFrame, DeviceInfo, DeviceList, DeviceRevoke, Empty, ErrorCode, Header, Ping, ServerFrame,
};

/// `hello` with `token` as `device` on a bare socket: the device token it got, or the error.
async fn hello(
    gw: &TestGateway,
    token: &str,
    device: &str,
) -> Result<Option<String>, (ErrorCode, String)> {
    let mut conn = RawConnection::connect(&gw.url).await.expect("connect");
    let result = conn.hello(token, device).await;
    let _ = conn.close().await;
    match result {
        Ok(ack) => Ok(ack.device_token),
        Err(ClientError::Server { code, message }) => Err((code, message)),
        Err(e) => panic!("hello failed without an error frame: {e}"),
    }
}

/// Spends `code` as `device` and connects it with its new token: the client and the token.
async fn pair_with(gw: &TestGateway, code: &str, device: &str) -> (Client, String) {
    let token = hello(gw, code, device)
        .await
        .expect("pairs")
        .expect("a device token");
    let (mut client, _) = Client::connect(ConnectOptions::new(gw.url.clone(), &token, device))
        .await
        .expect("connect");
    client.next_event().await.expect("status");
    (client, token)
}

/// A device paired with a code of the owner's `iris-gateway pair`.
async fn owner_paired(gw: &TestGateway, device: &str) -> (Client, String) {
    let code = credentials::create_code(&gw.shared.store, Duration::from_secs(600), None)
        .await
        .expect("code")
        .code;
    pair_with(gw, &code, device).await
}

/// A device paired with a code `parent` made (`pair.create`).
async fn paired_by(gw: &TestGateway, parent: &mut Client, device: &str) -> (Client, String) {
    let answer = parent
        .request(Header::default(), ClientFrame::PairCreate(Empty {}))
        .await
        .expect("pair.create");
    let ServerFrame::PairCode(pair) = answer.body else {
        panic!("{}", answer.raw)
    };
    pair_with(gw, &pair.code, device).await
}

async fn list(client: &mut Client) -> DeviceList {
    let answer = client
        .request(Header::default(), ClientFrame::DevicesList(Empty {}))
        .await
        .expect("devices.list");
    match answer.body {
        ServerFrame::DevicesList(list) => list,
        _ => panic!("{}", answer.raw),
    }
}

async fn revoke(client: &mut Client, device: &str) -> Result<DeviceList, (ErrorCode, String)> {
    let frame = ClientFrame::DeviceRevoke(DeviceRevoke {
        device_id: device.to_owned(),
    });
    match client.request(Header::default(), frame).await {
        Ok(answer) => match answer.body {
            ServerFrame::DevicesList(list) => Ok(list),
            _ => panic!("{}", answer.raw),
        },
        Err(ClientError::Server { code, message }) => Err((code, message)),
        Err(e) => panic!("device.revoke failed without an error frame: {e}"),
    }
}

fn ids(list: &DeviceList) -> Vec<&str> {
    list.devices.iter().map(|d| d.device_id.as_str()).collect()
}

fn entry<'a>(list: &'a DeviceList, device: &str) -> &'a DeviceInfo {
    list.devices
        .iter()
        .find(|d| d.device_id == device)
        .unwrap_or_else(|| panic!("{device} in {list:?}"))
}

/// The gateway told the device it was revoked (`error auth`, then close 4401 with the same words),
/// and sent it nothing after that.
async fn closed_as_revoked(client: &mut Client) {
    let mut told = false;
    loop {
        match client.next_event().await {
            Ok(e) => match &e.body {
                ServerFrame::Error(err) => {
                    assert_eq!(
                        (err.code, err.message.as_str()),
                        (ErrorCode::Auth, "this device was revoked")
                    );
                    told = true;
                }
                _ => assert!(!told, "a frame after the revocation: {:?}", e.body),
            },
            Err(ClientError::Closed(close)) => {
                assert!(told, "no error frame before the close");
                assert_eq!(close, Some((4401, "this device was revoked".into())));
                return;
            }
            Err(e) => panic!("not closed by the gateway: {e}"),
        }
    }
}

async fn still_connected(client: &mut Client, who: &str) {
    let answer = client
        .request(Header::default(), ClientFrame::Ping(Ping::default()))
        .await
        .unwrap_or_else(|e| panic!("{who} lost its connection: {e}"));
    assert_eq!(answer.frame_type(), "pong");
}

/// The owner's laptop (shared token), a phone paired with the owner's code, a tablet paired
/// with the phone's code and a watch with the tablet's.
struct Family {
    laptop: Client,
    phone: Client,
    tablet: Client,
    tablet_token: String,
    watch: Client,
    watch_token: String,
}

async fn family(gw: &TestGateway) -> Family {
    let (laptop, _) = gw.connect("laptop").await;
    let (mut phone, _) = owner_paired(gw, "phone").await;
    let (mut tablet, tablet_token) = paired_by(gw, &mut phone, "tablet").await;
    let (watch, watch_token) = paired_by(gw, &mut tablet, "watch").await;
    Family {
        laptop,
        phone,
        tablet,
        tablet_token,
        watch,
        watch_token,
    }
}

#[tokio::test]
async fn the_list_shows_every_device_who_paired_it_and_what_this_device_may_revoke() {
    let gw = TestGateway::start().await;
    let mut f = family(&gw).await;
    drop(f.watch);
    let seen = list(&mut f.tablet).await;
    assert_eq!(ids(&seen), ["laptop", "phone", "tablet", "watch"]);
    assert!(seen.revoked.is_empty());
    let me = entry(&seen, "tablet");
    assert!(me.this_device && me.may_revoke && me.online);
    assert_eq!(me.paired_by.as_deref(), Some("phone"));
    assert!(me.paired_at > 0 && me.last_seen >= me.paired_at, "{me:?}");
    let watch = entry(&seen, "watch");
    assert!(!watch.this_device && watch.may_revoke);
    assert_eq!(watch.paired_by.as_deref(), Some("tablet"));
    for other in ["laptop", "phone"] {
        let d = entry(&seen, other);
        assert!(!d.this_device && !d.may_revoke, "{d:?}");
        assert_eq!(d.paired_by, None, "the owner paired {other}");
    }
    assert!(entry(&seen, "phone").online);
    // The phone, one step up, may revoke the whole line below it.
    let seen = list(&mut f.phone).await;
    let may: Vec<&str> = seen
        .devices
        .iter()
        .filter(|d| d.may_revoke)
        .map(|d| d.device_id.as_str())
        .collect();
    assert_eq!(may, ["phone", "tablet", "watch"]);
    gw.stop().await;
}

#[tokio::test]
async fn revoking_a_descendant_closes_its_socket_and_refuses_its_token_at_once() {
    let gw = TestGateway::start().await;
    let mut f = family(&gw).await;
    let answer = revoke(&mut f.phone, "tablet").await.expect("revoked");
    assert_eq!(
        answer.revoked,
        ["tablet", "watch"],
        "with the device it paired"
    );
    assert_eq!(ids(&answer), ["laptop", "phone"]);
    closed_as_revoked(&mut f.tablet).await;
    closed_as_revoked(&mut f.watch).await;
    for (token, device) in [(&f.tablet_token, "tablet"), (&f.watch_token, "watch")] {
        assert_eq!(
            hello(&gw, token, device).await,
            Err((ErrorCode::Auth, "invalid token".into())),
            "{device}'s token"
        );
    }
    // Every other device sees the change when it asks.
    assert_eq!(ids(&list(&mut f.laptop).await), ["laptop", "phone"]);
    still_connected(&mut f.phone, "the phone").await;
    gw.stop().await;
}

#[tokio::test]
async fn a_device_cannot_revoke_its_parent_a_sibling_or_the_owners_devices() {
    let gw = TestGateway::start().await;
    let mut f = family(&gw).await;
    let (mut sibling, sibling_token) = paired_by(&gw, &mut f.phone, "tablet-2").await;
    let before = list(&mut f.tablet).await;
    for target in ["phone", "tablet-2", "laptop"] {
        let (code, message) = revoke(&mut f.tablet, target).await.expect_err(target);
        assert_eq!(code, ErrorCode::Auth, "{target}: {message}");
        assert!(
            message.contains("only itself and the devices paired through its codes"),
            "{message}"
        );
    }
    // A device the owner signed in with the shared token has no descendants here either.
    for target in ["phone", "tablet"] {
        let (code, _) = revoke(&mut f.laptop, target).await.expect_err(target);
        assert_eq!(code, ErrorCode::Auth, "the laptop revoking {target}");
    }
    let (code, _) = revoke(&mut f.tablet, "nobody").await.expect_err("unknown");
    assert_eq!(code, ErrorCode::NotFound);
    // Nothing changed: every device is listed, connected, and its token still signs in.
    assert_eq!(list(&mut f.tablet).await, before);
    for (client, who) in [
        (&mut f.phone, "phone"),
        (&mut sibling, "tablet-2"),
        (&mut f.laptop, "laptop"),
        (&mut f.tablet, "tablet"),
    ] {
        still_connected(client, who).await;
    }
    drop(sibling);
    assert!(hello(&gw, &sibling_token, "tablet-2").await.is_ok());
    gw.stop().await;
}

#[tokio::test]
async fn a_device_may_revoke_itself_and_its_line_goes_with_it() {
    let gw = TestGateway::start().await;
    let mut f = family(&gw).await;
    let answer = revoke(&mut f.tablet, "tablet").await.expect("revoked");
    assert_eq!(answer.revoked, ["tablet", "watch"]);
    assert_eq!(ids(&answer), ["laptop", "phone"]);
    closed_as_revoked(&mut f.tablet).await;
    closed_as_revoked(&mut f.watch).await;
    assert_eq!(
        hello(&gw, &f.tablet_token, "tablet").await,
        Err((ErrorCode::Auth, "invalid token".into()))
    );
    still_connected(&mut f.phone, "the phone").await;
    assert_eq!(ids(&list(&mut f.phone).await), ["laptop", "phone"]);
    gw.stop().await;
}

/// Reads frames until the answer to request `id`: its type and payload.
async fn answer_to(conn: &mut RawConnection, id: u64) -> (String, serde_json::Value) {
    loop {
        match conn.recv().await.expect("a frame") {
            RawFrame::Text(text) => {
                let v: serde_json::Value = serde_json::from_str(&text).expect("json");
                if v["id"].as_u64() == Some(id) {
                    return (
                        v["type"].as_str().unwrap_or("").to_owned(),
                        v["payload"].clone(),
                    );
                }
            }
            RawFrame::Binary(_) => {}
            RawFrame::Close(c) => panic!("closed: {c:?}"),
        }
    }
}

#[tokio::test]
async fn malformed_device_frames_get_bad_request_and_the_connection_stays() {
    let gw = TestGateway::start().await;
    let (_phone, phone_token) = owner_paired(&gw, "phone").await;
    drop(_phone);
    let mut conn = RawConnection::connect(&gw.url).await.expect("connect");
    conn.hello(&phone_token, "phone").await.expect("hello");
    let long = "x".repeat(129);
    let bad = [
        r#"{"v":1,"id":1,"type":"device.revoke","payload":{}}"#.to_owned(),
        r#"{"v":1,"id":2,"type":"device.revoke","payload":{"device_id":5}}"#.to_owned(),
        r#"{"v":1,"id":3,"type":"device.revoke","payload":{"device_id":""}}"#.to_owned(),
        format!(r#"{{"v":1,"id":4,"type":"device.revoke","payload":{{"device_id":"{long}"}}}}"#),
        r#"{"v":1,"id":5,"type":"device.revoke","payload":"phone"}"#.to_owned(),
    ];
    for (i, text) in bad.iter().enumerate() {
        conn.send_text(text).await.expect("send");
        let (ty, payload) = answer_to(&mut conn, i as u64 + 1).await;
        assert_eq!(ty, "error", "{text}");
        assert_eq!(payload["code"], "bad_request", "{text}: {payload}");
    }
    // Without an id there is nothing to answer to: refused, and nothing revoked.
    for text in [
        r#"{"v":1,"type":"devices.list","payload":{}}"#,
        r#"{"v":1,"type":"device.revoke","payload":{"device_id":"phone"}}"#,
    ] {
        conn.send_text(text).await.expect("send");
        let error = loop {
            match conn.recv().await.expect("an error") {
                RawFrame::Text(t) if t.contains(r#""type":"error""#) => break t,
                RawFrame::Close(c) => panic!("closed: {c:?}"),
                _ => {}
            }
        };
        assert!(error.contains(r#""code":"bad_request""#), "{error}");
    }
    conn.send_text(r#"{"v":1,"id":9,"type":"devices.list","payload":{}}"#)
        .await
        .expect("send");
    let (ty, payload) = answer_to(&mut conn, 9).await;
    assert_eq!(ty, "devices.list", "the connection survived: {payload}");
    assert_eq!(payload["devices"][0]["device_id"], "phone");
    assert_eq!(payload["devices"][0]["this_device"], true);
    let _ = conn.close().await;
    gw.stop().await;
}
