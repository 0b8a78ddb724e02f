//! Focus (an extension): a device that says which lanes it shows gets the streaming updates of
//! those lanes only, every durable frame of every lane, and the text so far of an answer the
//! moment its lane comes into focus; its final texts are the same as everyone's.

mod common;

use common::*;
use iris_client::{Client, ClientError, Event};
use iris_protocol::{
    ClientCaps, ClientFrame, ErrorCode, FocusSet, Header, Hello, LaneRef, Role, ServerFrame,
};

fn lane(chat: &str) -> LaneRef {
    LaneRef {
        chat_id: chat.into(),
        thread_id: None,
    }
}

/// A device showing `lanes` (focus on), or every lane (`None`).
async fn device(gw: &TestGateway, id: &str, lanes: Option<Vec<LaneRef>>) -> Client {
    let mut opts = gw.options(id);
    opts.focus = lanes;
    let (mut client, _) = Client::connect(opts).await.expect("connect");
    let status = client.next_event().await.expect("status");
    assert_eq!(status.frame_type(), "status");
    client
}

/// The texts of the `message.update`s of bubble `id` in `events`.
fn updates_of<'a>(events: &'a [Event], id: &str) -> Vec<&'a str> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            ServerFrame::MessageUpdate(u) if u.message_id == id => Some(u.text.as_str()),
            _ => None,
        })
        .collect()
}

/// The answer bubble's id: the `message.start` in `events`.
fn started(events: &[Event]) -> String {
    events
        .iter()
        .find_map(|e| match &e.body {
            ServerFrame::MessageStart(s) => Some(s.message_id.clone()),
            _ => None,
        })
        .expect("a message.start")
}

#[tokio::test]
async fn a_device_gets_streaming_updates_of_the_lanes_it_shows_only() {
    let gw = TestGateway::start_demo().await;
    let mut all = device(&gw, "desk", None).await;
    let other = create_channel(&mut all, "Other", None).await;
    let mut phone = device(&gw, "phone", Some(vec![lane("default")])).await;

    // An answer in a lane the phone does not show.
    send_text(&mut all, &other, "slow").await;
    let seen_all = until_idle(&mut all).await;
    let seen_phone = until_idle(&mut phone).await;
    let bubble = started(&seen_all);
    assert!(
        updates_of(&seen_all, &bubble).len() >= 2,
        "a device without focus sees the answer stream: {:?}",
        types(&seen_all)
    );
    assert_eq!(
        updates_of(&seen_phone, &bubble),
        Vec::<&str>::new(),
        "no update of a lane the phone does not show"
    );
    // Every durable frame of the turn (the desk took the echo of its message as the answer to
    // its request), and the same final text.
    let durable = |events: &[Event]| -> Vec<String> {
        events
            .iter()
            .filter(|e| e.is_durable())
            .filter(|e| !matches!(&e.body, ServerFrame::Message(m) if m.role == Role::User))
            .map(|e| e.frame_type().to_owned())
            .collect()
    };
    assert_eq!(durable(&seen_phone), durable(&seen_all));
    assert_eq!(final_text(&seen_phone), final_text(&seen_all));
    assert!(final_text(&seen_all).contains("tick 19"));

    // In the lane it shows, the phone streams like everyone.
    send_text(&mut all, "default", "slow").await;
    let seen_all = until_idle(&mut all).await;
    let seen_phone = until_idle(&mut phone).await;
    let bubble = started(&seen_all);
    assert!(updates_of(&seen_phone, &bubble).len() >= 2);
    assert_eq!(
        updates_of(&seen_phone, &bubble).last(),
        updates_of(&seen_all, &bubble).last()
    );
    assert_eq!(final_text(&seen_phone), final_text(&seen_all));
    gw.stop().await;
}

#[tokio::test]
async fn a_lane_coming_into_focus_brings_its_answer_so_far_at_once() {
    let gw = TestGateway::start_demo().await;
    let mut all = device(&gw, "desk", None).await;
    // Shows no lane at all: durable frames only.
    let mut phone = device(&gw, "phone", Some(Vec::new())).await;

    // Some text, then nothing more until it is stopped: no live update can stand in for the
    // catch-up.
    send_text(&mut all, "default", "linger").await;
    let desk = until(&mut all, |e| e.frame_type() == "message.update").await;
    let bubble = started(&desk);
    assert_eq!(updates_of(&desk, &bubble), ["Lingering. "]);
    let seen = until(&mut phone, |e| e.frame_type() == "message.start").await;
    assert_eq!(started(&seen), bubble);

    phone.focus(vec![lane("default")]).await.expect("focus.set");
    let next = phone.next_event().await.expect("a frame");
    match &next.body {
        ServerFrame::MessageUpdate(u) => {
            assert_eq!(u.message_id, bubble);
            assert_eq!(u.text, "Lingering. ", "the text so far, at once");
        }
        other => panic!("expected the text so far, got {other:?}"),
    }

    // Showing the lane again changes nothing; stopped now, both end with the same text.
    phone.focus(vec![lane("default")]).await.expect("focus.set");
    all.request(
        Header::lane("default", None),
        ClientFrame::AgentStop(Default::default()),
    )
    .await
    .expect("stop");
    let desk_end = until_idle(&mut all).await;
    let phone_end = until_idle(&mut phone).await;
    assert_eq!(updates_of(&phone_end, &bubble), Vec::<&str>::new());
    assert_eq!(final_text(&phone_end), final_text(&desk_end));
    assert!(final_text(&phone_end).starts_with("Lingering."));
    gw.stop().await;
}

#[tokio::test]
async fn focus_out_of_bounds_is_refused_and_the_connection_lives_on() {
    let gw = TestGateway::start_demo().await;
    let mut phone = device(&gw, "phone", Some(vec![lane("default")])).await;
    let too_many: Vec<LaneRef> = (0..17).map(|i| lane(&format!("c{i}"))).collect();
    for lanes in [
        too_many.clone(),
        vec![lane("")],
        vec![lane(&"x".repeat(129))],
    ] {
        let refused = phone
            .request(Header::default(), ClientFrame::FocusSet(FocusSet { lanes }))
            .await;
        match refused {
            Err(ClientError::Server { code, .. }) => assert_eq!(code, ErrorCode::BadRequest),
            other => panic!("expected bad_request, got {other:?}"),
        }
    }
    // Still connected, still focused on the default lane.
    let answer = turn(&mut phone, default_lane(), "hi").await;
    assert!(types(&answer).contains(&"message.update"));

    // In `hello`, the same bounds: refused, and the connection closed.
    let mut raw = iris_client::RawConnection::connect(&gw.url).await.unwrap();
    let refused = raw
        .hello_with(Hello {
            token: TOKEN.into(),
            device_id: "crowded".into(),
            caps: Some(ClientCaps {
                focus: Some(too_many),
                ..ClientCaps::default()
            }),
            ..Hello::default()
        })
        .await;
    match refused {
        Err(ClientError::Server { code, message, .. }) => {
            assert_eq!(code, ErrorCode::BadRequest);
            assert!(message.contains("at most 16"), "{message}");
        }
        other => panic!("expected bad_request, got {other:?}"),
    }
    match raw.recv().await {
        Ok(iris_client::RawFrame::Close(Some((code, _)))) => assert_eq!(code, 4401),
        other => panic!("expected close 4401, got {other:?}"),
    }
    gw.stop().await;
}
