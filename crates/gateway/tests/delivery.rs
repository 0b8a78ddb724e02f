//! Delivery through the real server: broadcast, replay, sync across restarts, racing syncs.

mod common;

use common::*;
use iris_protocol::ServerFrame;

#[tokio::test]
async fn a_message_is_echoed_to_the_sender_and_broadcast_to_the_others() {
    let gw = TestGateway::start().await;
    let (mut a, _) = gw.connect("phone").await;
    let (mut b, _) = gw.connect("laptop").await;
    let echo = send_text(&mut a, "default", "hello there").await;
    assert!(echo.id().is_some(), "the sender gets its echo as the response");
    assert_eq!(message_text(&echo), "hello there");
    let seen = b.next_event().await.unwrap();
    assert_eq!(seen.header.id, None, "other devices get the broadcast without id");
    assert_eq!(message_id(&seen), message_id(&echo));
    assert_eq!(seen.cursor, echo.cursor, "both are the same outbox frame");
    match &seen.body {
        ServerFrame::Message(m) => assert_eq!(m.role, iris_protocol::Role::User),
        other => panic!("{other:?}"),
    }
    gw.stop().await;
}
