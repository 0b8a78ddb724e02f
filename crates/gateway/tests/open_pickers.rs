//! The pickers still open, told in `hello.ack.open_pickers` (an extension): a device that comes
//! later, or whose cursor is past the picker's frame, still sees every question that waits for
//! the person, in order of arrival, until it is answered, expires or its channel is deleted; and
//! a picker opened by a command says which device asked (`for_device`).

mod common;

use common::turns::*;
use common::*;
use iris_protocol::{ClientFrame, Empty, Header, HelloAck, ServerFrame};

/// `(type, picker id, chat id)` of each open picker a `hello.ack` lists.
fn listed(ack: &HelloAck) -> Vec<(String, String, String)> {
    ack.open_pickers
        .iter()
        .map(|f| {
            assert!(
                f["cursor"].as_u64().is_some(),
                "listed with its cursor: {f}"
            );
            (
                f["type"].as_str().unwrap().to_owned(),
                f["payload"]["picker_id"].as_str().unwrap().to_owned(),
                f["chat_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_device_that_connects_later_is_told_of_every_picker_still_open() {
    let gw = TestGateway::start_demo().await;
    let (mut a, ack) = gw.connect("a").await;
    assert!(ack.open_pickers.is_empty());
    let other = create_channel(&mut a, "Other", None).await;
    send(&mut a, default_lane(), "ask permission", false).await;
    let (first, _) = picker_id(&mut a, "picker.approval").await;
    send(
        &mut a,
        Header::lane(other.clone(), None),
        "ask permission",
        false,
    )
    .await;
    let (second, _) = picker_id(&mut a, "picker.approval").await;

    // A phone that was never connected is told of both, oldest first.
    let (phone, ack) = gw.connect("phone").await;
    assert_eq!(
        listed(&ack),
        [
            ("picker.approval".into(), first.clone(), "default".into()),
            ("picker.approval".into(), second.clone(), other.clone()),
        ]
    );
    drop(phone);

    // Answered on one device: the next connection lists only the other.
    select(&mut a, &first, "allow_once").await.unwrap();
    a.wait_for(|e| e.frame_type() == "picker.closed")
        .await
        .unwrap();
    let (phone, ack) = gw.connect("phone").await;
    assert_eq!(
        listed(&ack),
        [("picker.approval".into(), second.clone(), other.clone())]
    );
    drop(phone);

    // Its channel deleted: nothing waits any more.
    let deleted = a
        .request(
            Header::lane(other, None),
            ClientFrame::ChannelDelete(Empty {}),
        )
        .await
        .unwrap();
    assert_eq!(deleted.frame_type(), "channel.deleted");
    let (_phone, ack) = gw.connect("phone").await;
    assert_eq!(listed(&ack), []);
    gw.stop().await;
}

#[tokio::test]
async fn a_picker_opened_by_a_command_names_the_device_that_asked() {
    let gw = TestGateway::start_demo().await;
    let (mut a, _) = gw.connect("laptop").await;
    let frames = turn_command(&mut a, "/model").await;
    let for_device = match &frames.last().unwrap().body {
        ServerFrame::PickerModel(p) => p.for_device.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(for_device.as_deref(), Some("laptop"));
    let frames = turn_command(&mut a, "/reasoning").await;
    let for_device = match &frames.last().unwrap().body {
        ServerFrame::PickerChoice(p) => p.for_device.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(for_device.as_deref(), Some("laptop"));

    // Another device is told of both, each still naming the laptop.
    let (_phone, ack) = gw.connect("phone").await;
    let named: Vec<(&str, &str)> = ack
        .open_pickers
        .iter()
        .map(|f| {
            (
                f["type"].as_str().unwrap(),
                f["payload"]["for_device"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        named,
        [("picker.model", "laptop"), ("picker.choice", "laptop")]
    );
    gw.stop().await;
}
