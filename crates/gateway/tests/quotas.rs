//! Quotas through the real server: the number of channels. (Upload quotas are in `media.rs`.)

mod common;

use common::*;
use iris_client::ClientError;
use iris_protocol::{ChannelCreate, ClientFrame, Empty, ErrorCode, Header, ServerFrame};

fn create(name: &str, parent: Option<&str>) -> ClientFrame {
    ClientFrame::ChannelCreate(ChannelCreate {
        name: name.into(),
        kind: None,
        parent_chat_id: parent.map(Into::into),
        agent: None,
    })
}

#[tokio::test]
async fn channel_create_beyond_the_cap_is_refused_until_one_is_deleted() {
    let gw = TestGateway::start_with(|c| c.limits.max_channels = 3).await;
    let (mut a, _) = gw.connect("phone").await;
    // The default channel and two more reach the cap.
    let first = a
        .request(Header::default(), create("One", None))
        .await
        .unwrap();
    let ServerFrame::ChannelCreated(one) = first.body else {
        panic!("{}", first.raw)
    };
    a.request(Header::default(), create("Two", None))
        .await
        .unwrap();

    for refused in [
        create("Three", None),
        create("A thread", Some(&one.chat_id)),
    ] {
        let answer = a.request(Header::default(), refused).await;
        let Err(ClientError::Server { code, message, .. }) = answer else {
            panic!("expected a refusal, got {answer:?}")
        };
        assert_eq!(code, ErrorCode::RateLimited);
        assert!(message.contains("at most 3 channels"), "{message}");
    }
    let stored = gw.shared.store.list_channels().await.unwrap();
    assert_eq!(stored.len(), 3, "nothing was created");

    a.request(
        Header::lane(one.chat_id.clone(), None),
        ClientFrame::ChannelDelete(Empty::default()),
    )
    .await
    .unwrap();
    let again = a
        .request(Header::default(), create("Three", None))
        .await
        .unwrap();
    assert_eq!(again.frame_type(), "channel.created");
    gw.stop().await;
}
