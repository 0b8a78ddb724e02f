//! The life of stored media through the real server: deleting messages and channels removes
//! files nothing refers to any more, unreferenced uploads expire, and pulls on one connection are
//! served one after another while requests interleave.

mod common;

use std::time::Duration;

use common::media::*;
use common::*;
use iris_client::{RawConnection, RawFrame};
use iris_protocol::{
    decode, encode, ChannelCreate, ClientFrame, Empty, ErrorCode, FrameBody, Header, MediaPull,
    MessageDelete, Ping, RequestId, ServerFrame,
};

#[tokio::test]
async fn deleting_messages_and_channels_removes_unreferenced_files() {
    let gw = TestGateway::start().await;
    let (mut a, _) = gw.connect("phone").await;
    let lane = Header::lane("default", None);
    let shared_content = bytes(70_000, 8);
    upload_ok(&mut a, "mu_1", "image/jpeg", "one.jpg", &shared_content).await;
    upload_ok(&mut a, "mu_2", "image/jpeg", "two.jpg", &shared_content).await;
    let first = send_with(&mut a, lane.clone(), "first", &["mu_1"])
        .await
        .unwrap();
    let second = send_with(&mut a, lane.clone(), "second", &["mu_2"])
        .await
        .unwrap();
    let (first_media, second_media) = (media_of(&first)[0].clone(), media_of(&second)[0].clone());

    let delete = |id: String| {
        ClientFrame::MessageDelete(MessageDelete {
            message_ids: vec![id],
        })
    };
    a.request(lane.clone(), delete(message_id(&first)))
        .await
        .expect("deleted");
    round_trip(&mut a).await;
    assert_eq!(
        stored_files(&gw),
        [sha(&shared_content)],
        "the second message still uses the content"
    );
    let gone = a
        .request(
            Header::default(),
            ClientFrame::MediaPull(MediaPull {
                media_id: first_media.media_id,
            }),
        )
        .await;
    assert_eq!(error_code(gone), ErrorCode::NotFound);
    assert_eq!(
        error_code(send_with(&mut a, lane.clone(), "again", &["mu_1"]).await),
        ErrorCode::NotFound
    );

    a.request(lane.clone(), delete(message_id(&second)))
        .await
        .expect("deleted");
    round_trip(&mut a).await;
    assert!(
        stored_files(&gw).is_empty(),
        "no message uses the content any more"
    );
    let gone = a
        .request(
            Header::default(),
            ClientFrame::MediaPull(MediaPull {
                media_id: second_media.media_id,
            }),
        )
        .await;
    assert_eq!(error_code(gone), ErrorCode::NotFound);

    // Deleting a channel takes the files of its messages along.
    let create = ClientFrame::ChannelCreate(ChannelCreate {
        name: "Photos".into(),
        kind: None,
        parent_chat_id: None,
        agent: None,
    });
    let created = a.request(Header::default(), create).await.unwrap();
    let ServerFrame::ChannelCreated(c) = created.body else {
        panic!("{}", created.raw)
    };
    let photo = bytes(40_000, 9);
    upload_ok(&mut a, "mu_3", "image/jpeg", "three.jpg", &photo).await;
    send_with(
        &mut a,
        Header::lane(c.chat_id.clone(), None),
        "in a channel",
        &["mu_3"],
    )
    .await
    .unwrap();
    assert_eq!(stored_files(&gw), [sha(&photo)]);
    a.request(
        Header::lane(c.chat_id, None),
        ClientFrame::ChannelDelete(Empty {}),
    )
    .await
    .expect("channel deleted");
    round_trip(&mut a).await;
    assert!(stored_files(&gw).is_empty());
    gw.stop().await;
}

#[tokio::test]
async fn unreferenced_uploads_expire() {
    let gw = TestGateway::start_with(|c| c.media.unreferenced_ttl = Duration::ZERO).await;
    let (mut a, _) = gw.connect("phone").await;
    let kept = bytes(10_000, 10);
    let dropped = bytes(10_000, 11);
    upload_ok(&mut a, "mu_kept", "text/plain", "kept.txt", &kept).await;
    upload_ok(&mut a, "mu_dropped", "text/plain", "dropped.txt", &dropped).await;
    let echo = send_with(
        &mut a,
        Header::lane("default", None),
        "keep this",
        &["mu_kept"],
    )
    .await
    .unwrap();
    // The periodic sweep, run now instead of in an hour.
    gw.media.sweep().await.expect("sweep");
    assert_eq!(
        stored_files(&gw),
        [sha(&kept)],
        "the attached upload stays, the other expired"
    );
    assert_eq!(
        error_code(
            send_with(
                &mut a,
                Header::lane("default", None),
                "late",
                &["mu_dropped"]
            )
            .await
        ),
        ErrorCode::NotFound
    );
    let (_, data, _) = pull(&mut a, &media_of(&echo)[0].media_id)
        .await
        .expect("pull");
    assert_eq!(data, kept);
    gw.stop().await;
}

/// A raw connection's next text frame, decoded (pings are answered on the way).
async fn raw_next(raw: &mut RawConnection) -> RawFrame {
    raw.recv_timeout(Duration::from_secs(10))
        .await
        .expect("a frame")
}

#[tokio::test]
async fn pulls_on_one_connection_are_serialized_while_requests_interleave() {
    let gw = TestGateway::start().await;
    let (mut a, _) = gw.connect("phone").await;
    let (one, two) = (bytes(1_000_000, 12), bytes(600_000, 13));
    upload_ok(&mut a, "mu_1", "application/zip", "one.zip", &one).await;
    upload_ok(&mut a, "mu_2", "application/zip", "two.zip", &two).await;
    let echo = send_with(
        &mut a,
        Header::lane("default", None),
        "files",
        &["mu_1", "mu_2"],
    )
    .await
    .unwrap();
    let ids: Vec<String> = media_of(&echo).into_iter().map(|m| m.media_id).collect();

    let mut raw = RawConnection::connect(&gw.url).await.unwrap();
    raw.hello(TOKEN, "raw-device").await.unwrap();
    let req = |id: u64, frame: ClientFrame| {
        encode(
            &Header {
                id: Some(RequestId::from(id)),
                ..Header::default()
            },
            &frame,
        )
    };
    raw.send_text(&req(
        1,
        ClientFrame::MediaPull(MediaPull {
            media_id: ids[0].clone(),
        }),
    ))
    .await
    .unwrap();
    raw.send_text(&req(
        2,
        ClientFrame::MediaPull(MediaPull {
            media_id: ids[1].clone(),
        }),
    ))
    .await
    .unwrap();
    raw.send_text(&req(3, ClientFrame::Ping(Ping { ts: None })))
        .await
        .unwrap();

    // Frames in arrival order: (request id, type) for text, None for bytes.
    let mut order: Vec<(Option<u64>, String)> = Vec::new();
    let mut got: [Vec<u8>; 2] = [Vec::new(), Vec::new()];
    let mut current: Option<usize> = None;
    let mut ended = 0;
    while ended < 2 || !order.iter().any(|(id, _)| *id == Some(3)) {
        match raw_next(&mut raw).await {
            RawFrame::Text(t) => {
                let d = decode::<ServerFrame>(&t).expect("valid frame");
                let id = match d.header.id {
                    Some(RequestId::Number(n)) => n.as_u64(),
                    _ => None,
                };
                match (&d.body, id) {
                    (ServerFrame::MediaPullHeader(_), Some(n)) => current = Some(n as usize - 1),
                    (ServerFrame::MediaPullEnd(e), Some(_)) => {
                        assert!(e.ok);
                        current = None;
                        ended += 1;
                    }
                    _ => {}
                }
                if id.is_some() {
                    order.push((id, d.body.frame_type().to_owned()));
                }
            }
            RawFrame::Binary(b) => {
                let i = current.expect("bytes only inside a pull");
                assert!(b.len() <= PULL_CHUNK);
                got[i].extend_from_slice(&b);
            }
            RawFrame::Close(c) => panic!("closed: {c:?}"),
        }
    }
    let pulls: Vec<_> = order
        .iter()
        .filter(|(_, t)| t.starts_with("media.pull"))
        .cloned()
        .collect();
    let want = [
        (Some(1), "media.pull"),
        (Some(1), "media.pull.end"),
        (Some(2), "media.pull"),
        (Some(2), "media.pull.end"),
    ];
    let want: Vec<_> = want.iter().map(|(i, t)| (*i, t.to_string())).collect();
    assert_eq!(pulls, want, "one pull after the other");
    assert!(
        got[0] == one && got[1] == two,
        "each pull carries exactly its file"
    );
    raw.close().await.unwrap();
    gw.stop().await;
}
