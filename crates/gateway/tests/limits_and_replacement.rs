//! Limits and identities of connected devices: rapid sends are rate limited and the connection
//! survives, a second connection of a device replaces the first after flushing it, device names
//! that look like paths are only names, and the default chat survives being deleted.

mod common;

use common::bad::*;
use common::*;
use iris_client::{Client, ClientError, ConnectOptions, RawConnection, RawFrame};
use iris_protocol::{ChannelCreate, ClientFrame, ErrorCode, Header, MessageSend, ServerFrame};
use serde_json::Value;

#[tokio::test]
async fn rapid_sends_are_rate_limited_and_the_connection_survives() {
    // 8 a minute allows a burst of 2.
    let gw = TestGateway::start_with(|c| c.limits.sends_per_minute = 8).await;
    let (mut a, _) = gw.connect("chatty").await;
    let mut accepted = Vec::new();
    let mut limited = 0;
    for i in 0..6 {
        let send = ClientFrame::MessageSend(MessageSend {
            text: format!("quick {i}"),
            ..Default::default()
        });
        match a.request(Header::lane("default", None), send).await {
            Ok(echo) => accepted.push(message_text(&echo)),
            Err(ClientError::Server {
                code: ErrorCode::RateLimited,
                ..
            }) => limited += 1,
            Err(e) => panic!("send {i}: {e}"),
        }
    }
    assert_eq!(
        accepted,
        ["quick 0", "quick 1"],
        "the burst is accepted, in order"
    );
    assert_eq!(limited, 4, "the rest is refused with rate_limited");
    assert_usable(&mut a, 42, "after rate limiting").await;
    let stored = whole_history(&mut a, "default", None).await;
    let texts: Vec<&str> = stored.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(
        texts,
        ["quick 0", "quick 1"],
        "refused messages are not stored"
    );
    // The budget is per device: another device can still talk.
    let (mut b, _) = gw.connect("quiet").await;
    let echo = send_text(&mut b, "default", "my turn").await;
    assert_eq!(message_text(&echo), "my turn");
    gw.stop().await;
}

#[tokio::test]
async fn a_second_connection_of_a_device_replaces_the_first_after_flushing() {
    let gw = TestGateway::start().await;
    let (mut sender, _) = gw.connect("sender").await;
    // The old connection never reads while frames for it pile up.
    let mut old = RawConnection::connect(&gw.url).await.expect("connect");
    old.hello(TOKEN, "tablet").await.expect("hello");
    let mut sent = Vec::new();
    for i in 0..20 {
        sent.push(message_id(
            &send_text(&mut sender, "default", &format!("for the tablet {i}")).await,
        ));
    }
    let (mut new, _) = gw.connect("tablet").await;

    let mut got = Vec::new();
    let close = loop {
        match old
            .recv_timeout(ANSWER)
            .await
            .expect("old connection ends with a Close")
        {
            RawFrame::Text(t) => {
                let v: Value = serde_json::from_str(&t).expect("json");
                if v["type"] == "message" {
                    got.push(
                        v["payload"]["message_id"]
                            .as_str()
                            .expect("message_id")
                            .to_owned(),
                    );
                }
            }
            RawFrame::Binary(_) => panic!("no binary frames expected"),
            RawFrame::Close(close) => break close,
        }
    };
    assert_eq!(
        close.map(|c| c.0),
        Some(4409),
        "the old connection is closed as replaced"
    );
    assert_eq!(
        got, sent,
        "every frame queued for the old connection arrived before the close"
    );

    // The new connection is the device's only one and works.
    let echo = send_text(&mut sender, "default", "after the switch").await;
    let seen = new
        .next_event_timeout(ANSWER)
        .await
        .expect("the new connection receives");
    assert_eq!(message_id(&seen), message_id(&echo));
    assert_usable(&mut new, 7, "replacement").await;
    gw.stop().await;
}

#[tokio::test]
async fn device_names_that_look_like_paths_or_are_long_are_accepted() {
    let gw = TestGateway::start().await;
    let longest_id = "x".repeat(128);
    let names = [
        ("../../etc/passwd", "../../../../etc/shadow".to_owned()),
        ("C:\\Windows\\..\\win.ini", "%2e%2e%2f".to_owned()),
        ("long-name-phone", "Ü".repeat(5000)),
        (longest_id.as_str(), "nul\u{0}byte".to_owned()),
    ];
    for (device_id, device_name) in names {
        let mut opts = ConnectOptions::new(gw.url.clone(), TOKEN, device_id);
        opts.device_name = Some(device_name);
        let (mut client, ack) = Client::connect(opts)
            .await
            .expect("odd device names are accepted");
        assert_eq!(ack.device_id.as_deref(), Some(device_id));
        let echo = send_text(&mut client, "default", "still fine").await;
        assert_eq!(message_text(&echo), "still fine");
        client.close().await.expect("close");
    }
    // Nothing was written outside the data dir's database: the dir holds no odd files.
    let mut entries: Vec<String> = std::fs::read_dir(&gw.dir)
        .expect("data dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    entries.sort();
    assert!(
        entries.iter().all(|e| e.starts_with("iris.db")
            || ["token", "media", "admin.sock", "admin.key"].contains(&e.as_str())),
        "{entries:?}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn the_default_chat_survives_delete_even_after_the_default_flag_moved() {
    let gw = TestGateway::start().await;
    let (mut a, _) = gw.connect("phone").await;
    let create = ClientFrame::ChannelCreate(ChannelCreate {
        name: "Home".into(),
        kind: None,
        parent_chat_id: None,
        agent: None,
    });
    let created = a
        .request(Header::default(), create)
        .await
        .expect("channel created");
    let ServerFrame::ChannelCreated(home) = created.body else {
        panic!("{}", created.raw)
    };
    let moved = a
        .request(
            Header::lane(home.chat_id.clone(), None),
            ClientFrame::ChannelSetDefault(Default::default()),
        )
        .await
        .expect("default moved");
    assert_eq!(moved.frame_type(), "channel.list", "{}", moved.raw);
    send_text(&mut a, "default", "keep me").await;
    for chat in ["default", home.chat_id.as_str()] {
        let err = a
            .request(
                Header::lane(chat, None),
                ClientFrame::ChannelDelete(Default::default()),
            )
            .await
            .expect_err("neither the default chat nor the current default channel can be deleted");
        assert!(
            matches!(
                err,
                ClientError::Server {
                    code: ErrorCode::BadRequest,
                    ..
                }
            ),
            "{chat}: {err}"
        );
    }
    let (_probe, ack) = gw.connect("probe").await;
    let ids: Vec<&str> = ack.channels.iter().map(|c| c.chat_id.as_str()).collect();
    assert!(
        ids.contains(&"default") && ids.contains(&home.chat_id.as_str()),
        "{ids:?}"
    );
    let kept = whole_history(&mut a, "default", None).await;
    assert_eq!(
        kept.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>(),
        ["keep me"]
    );
    gw.stop().await;
}
