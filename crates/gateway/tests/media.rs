//! Media through the real server: uploads and their refusals, the content-addressed store, names
//! and kinds decided by the gateway, and the caps on unsent uploads. Media to and from the agent
//! is in `media_agent.rs`, deletes, expiry and pulls in `media_lifecycle.rs`.

mod common;

use std::time::Duration;

use common::media::*;
use common::*;
use iris_client::ClientError;
use iris_protocol::{ClientFrame, ErrorCode, Header, MediaPull, RequestId, ServerFrame};

#[tokio::test]
async fn a_file_makes_the_round_trip_to_another_device() {
    let gw = TestGateway::start().await;
    let (mut a, ack) = gw.connect("phone").await;
    assert!(ack.server_caps.media, "hello.ack announces media");
    let (mut b, _) = gw.connect("laptop").await;
    let data = typed(MP4_MAGIC, bytes(5 * 1024 * 1024 + 123, 1));
    upload_ok(&mut a, "mu_1", "video/mp4", "clip.mp4", &data).await;

    let echo = send_with(&mut a, Header::lane("default", None), "a clip", &["mu_1"])
        .await
        .expect("sent");
    let media = media_of(&echo);
    assert_eq!(media.len(), 1, "{}", echo.raw);
    let m = &media[0];
    assert_eq!(
        (
            m.kind.as_str(),
            m.mime.as_str(),
            m.size,
            m.filename.as_str()
        ),
        ("video", "video/mp4", data.len() as u64, "clip.mp4")
    );
    assert!(m.media_id.starts_with("md_"));

    // The other device sees the attachment on the broadcast and pulls it.
    let seen = b
        .wait_for(|e| e.frame_type() == "message")
        .await
        .expect("broadcast");
    assert_eq!(media_of(&seen), media);
    let (header, pulled, sizes) = pull(&mut b, &m.media_id).await.expect("pull");
    assert_eq!(
        (header.size, header.sha256.as_str()),
        (data.len() as u64, sha(&data).as_str())
    );
    assert_eq!(
        (
            header.kind.as_str(),
            header.mime.as_str(),
            header.filename.as_str()
        ),
        ("video", "video/mp4", "clip.mp4")
    );
    assert!(pulled == data, "the pulled bytes are the uploaded bytes");
    assert!(
        sizes.iter().all(|s| *s <= PULL_CHUNK),
        "bounded binary frames: {sizes:?}"
    );

    // History carries the attachment, and the file is stored once under its hash.
    let history = a
        .request(
            Header::lane("default", None),
            ClientFrame::History(Default::default()),
        )
        .await
        .unwrap();
    match history.body {
        ServerFrame::History(h) => assert_eq!(h.messages[0].media, media),
        other => panic!("{other:?}"),
    }
    assert_eq!(stored_files(&gw), [sha(&data)]);
    assert!(temp_files(&gw).is_empty());
    gw.stop().await;
}

#[tokio::test]
async fn identical_content_is_stored_once() {
    let gw = TestGateway::start().await;
    let (mut a, _) = gw.connect("phone").await;
    let (mut b, _) = gw.connect("tablet").await;
    let data = bytes(300_000, 2);
    upload_ok(&mut a, "mu_a", "image/jpeg", "a.jpg", &data).await;
    upload_ok(&mut a, "mu_b", "image/jpeg", "b.jpg", &data).await;
    upload_ok(&mut b, "mu_a", "image/jpeg", "c.jpg", &data).await;
    let echo = send_with(&mut a, Header::lane("default", None), "", &["mu_a", "mu_b"])
        .await
        .expect("sent");
    let media = media_of(&echo);
    let names: Vec<&str> = media.iter().map(|m| m.filename.as_str()).collect();
    assert_eq!(
        names,
        ["a.jpg", "b.jpg"],
        "attachments keep their order and names"
    );
    assert_ne!(media[0].media_id, media[1].media_id);
    // References belong to their device: the tablet's mu_a is its own upload.
    let echo = send_with(&mut b, Header::lane("default", None), "", &["mu_a"])
        .await
        .expect("sent");
    assert_eq!(media_of(&echo)[0].filename, "c.jpg");
    assert_eq!(
        stored_files(&gw),
        [sha(&data)],
        "three uploads of one content, one file"
    );
    gw.stop().await;
}

#[tokio::test]
async fn every_refusal_has_its_code_and_the_connection_survives() {
    let gw = TestGateway::start_with(|c| c.media.max_upload_bytes = 1024 * 1024).await;
    let (mut a, _) = gw.connect("phone").await;
    let lane = Header::lane("default", None);

    // A declared size over the limit is refused at start.
    let too_big = a
        .request(
            Header::default(),
            start_frame("mu_big", "video/mp4", "big.mp4", 1024 * 1024 + 1),
        )
        .await;
    assert_eq!(error_code(too_big), ErrorCode::MediaTooLarge);
    assert_eq!(
        error_code(
            a.request(
                Header::default(),
                start_frame("mu_huge", "x/y", "h", u64::MAX)
            )
            .await
        ),
        ErrorCode::MediaTooLarge
    );

    // Binary frames without an open upload.
    a.send_binary(vec![1, 2, 3]).await.unwrap();
    let (id, code, message) = next_error(&mut a).await;
    assert_eq!((id, code), (None, ErrorCode::BadRequest));
    assert!(message.contains("without an open upload"), "{message}");

    // Bytes beyond the declared size fail the upload at once, and its end is refused too.
    a.send(
        start_header("mu_over"),
        start_frame("mu_over", "text/plain", "o.txt", 10),
    )
    .await
    .unwrap();
    a.send_binary(vec![7; 8]).await.unwrap();
    a.send_binary(vec![7; 8]).await.unwrap();
    let (id, code, _) = next_error(&mut a).await;
    assert_eq!(
        (id, code),
        (
            Some(RequestId::Str("start-mu_over".into())),
            ErrorCode::BadRequest
        )
    );
    a.send_binary(vec![7; 8]).await.unwrap();
    assert_eq!(
        error_code(
            a.request(Header::default(), end_frame("mu_over", sha(&[7; 16])))
                .await
        ),
        ErrorCode::BadRequest
    );
    assert!(
        temp_files(&gw).is_empty(),
        "nothing of a failed upload is kept"
    );

    // A sha256 mismatch.
    let data = bytes(100_000, 3);
    a.send(
        start_header("mu_sha"),
        start_frame("mu_sha", "application/pdf", "d.pdf", data.len() as u64),
    )
    .await
    .unwrap();
    a.send_binary(data.clone()).await.unwrap();
    let wrong = a
        .request(
            Header::default(),
            end_frame("mu_sha", sha(b"something else")),
        )
        .await;
    assert_eq!(error_code(wrong), ErrorCode::BadRequest);
    assert_eq!(
        error_code(send_with(&mut a, lane.clone(), "see", &["mu_sha"]).await),
        ErrorCode::NotFound
    );

    // Fewer bytes than declared.
    a.send(
        start_header("mu_short"),
        start_frame("mu_short", "text/plain", "s.txt", 10),
    )
    .await
    .unwrap();
    a.send_binary(vec![1; 4]).await.unwrap();
    assert_eq!(
        error_code(
            a.request(Header::default(), end_frame("mu_short", sha(&[1; 4])))
                .await
        ),
        ErrorCode::BadRequest
    );

    // A second start while one is open is refused; the open upload carries on.
    let small = bytes(5000, 4);
    a.send(
        start_header("mu_one"),
        start_frame("mu_one", "text/plain", "one.txt", small.len() as u64),
    )
    .await
    .unwrap();
    a.send_binary(small[..2000].to_vec()).await.unwrap();
    let second = a
        .request(
            Header::default(),
            start_frame("mu_two", "text/plain", "two.txt", 3),
        )
        .await;
    assert_eq!(error_code(second), ErrorCode::BadRequest);
    // An end naming another upload does not disturb it either.
    assert_eq!(
        error_code(
            a.request(Header::default(), end_frame("mu_two", sha(b"abc")))
                .await
        ),
        ErrorCode::BadRequest
    );
    a.send_binary(small[2000..].to_vec()).await.unwrap();
    let ack = a
        .request(Header::default(), end_frame("mu_one", sha(&small)))
        .await
        .expect("the first upload completes");
    assert_eq!(ack.frame_type(), "media.upload.ack");

    // An end without any upload, and a start with an unusable reference.
    assert_eq!(
        error_code(
            a.request(Header::default(), end_frame("mu_none", sha(b"")))
                .await
        ),
        ErrorCode::BadRequest
    );
    assert_eq!(
        error_code(
            a.request(Header::default(), start_frame("", "text/plain", "x", 1))
                .await
        ),
        ErrorCode::BadRequest
    );
    let long_ref = "r".repeat(1000);
    assert_eq!(
        error_code(
            a.request(
                Header::default(),
                start_frame(&long_ref, "text/plain", "x", 1)
            )
            .await
        ),
        ErrorCode::BadRequest
    );

    // Unknown references and ids.
    assert_eq!(
        error_code(send_with(&mut a, lane.clone(), "look", &["mu_nope"]).await),
        ErrorCode::NotFound
    );
    let pull = a
        .request(
            Header::default(),
            ClientFrame::MediaPull(MediaPull {
                media_id: "md_nope".into(),
            }),
        )
        .await;
    assert_eq!(error_code(pull), ErrorCode::NotFound);

    // The connection survived all of it: the good upload is usable and a ping is answered.
    round_trip(&mut a).await;
    let echo = send_with(&mut a, lane, "here", &["mu_one"])
        .await
        .expect("sent");
    assert_eq!(media_of(&echo)[0].filename, "one.txt");
    assert_eq!(
        stored_files(&gw),
        [sha(&small)],
        "only the completed upload is stored"
    );
    assert!(temp_files(&gw).is_empty());
    gw.stop().await;
}

#[tokio::test]
async fn a_disconnect_mid_upload_leaves_no_trace() {
    let gw = TestGateway::start().await;
    let (mut a, _) = gw.connect("phone").await;
    let data = bytes(3 * UP_CHUNK, 5);
    a.send(
        start_header("mu_1"),
        start_frame("mu_1", "image/png", "p.png", 10 * UP_CHUNK as u64),
    )
    .await
    .unwrap();
    for chunk in data.chunks(UP_CHUNK) {
        a.send_binary(chunk.to_vec()).await.unwrap();
    }
    // The gateway handles frames in order: after the pong, the bytes are on disk.
    round_trip(&mut a).await;
    let temps = temp_files(&gw);
    assert_eq!(temps.len(), 1, "the upload streams to one temporary file");
    assert_eq!(
        std::fs::metadata(&temps[0]).unwrap().len(),
        data.len() as u64
    );
    drop(a);

    // Nothing announces the cleanup, so watch the directory (bounded).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !temp_files(&gw).is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the temporary file outlived the connection"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(stored_files(&gw).is_empty());
    // The same device reconnects: its unfinished reference was never usable.
    let (mut a, _) = gw.connect("phone").await;
    assert_eq!(
        error_code(send_with(&mut a, Header::lane("default", None), "x", &["mu_1"]).await),
        ErrorCode::NotFound
    );
    gw.stop().await;
}

#[tokio::test]
async fn filenames_from_the_app_are_only_display_names() {
    let gw = TestGateway::start().await;
    let (mut a, _) = gw.connect("phone").await;
    let long = format!("{}.txt", "n".repeat(10_000));
    let names = [
        ("../../etc/passwd", "passwd"),
        ("..\\..\\boot.ini", "boot.ini"),
        ("bell\u{7}\nnew\u{0}line.txt", "bellnewline.txt"),
        ("..", "file"),
        ("", "file"),
    ];
    for (i, (raw, shown)) in names.iter().enumerate() {
        let r = format!("mu_{i}");
        upload_ok(
            &mut a,
            &r,
            "text/plain",
            raw,
            format!("content {i}").as_bytes(),
        )
        .await;
        let echo = send_with(&mut a, Header::lane("default", None), "", &[&r])
            .await
            .expect("sent");
        assert_eq!(media_of(&echo)[0].filename, *shown, "name {raw:?}");
    }
    upload_ok(&mut a, "mu_long", "text/plain", &long, b"long").await;
    let echo = send_with(&mut a, Header::lane("default", None), "", &["mu_long"])
        .await
        .expect("sent");
    let name = &media_of(&echo)[0].filename;
    assert!(
        name.len() <= 255 && name.ends_with(".txt") && name.starts_with("nnn"),
        "{name}"
    );

    // Only content hashes became file names; nothing landed next to the data dir.
    let stored = stored_files(&gw);
    assert_eq!(stored.len(), names.len() + 1);
    assert!(
        stored
            .iter()
            .all(|f| f.len() == 64 && f.bytes().all(|b| b.is_ascii_hexdigit())),
        "{stored:?}"
    );
    let parent = gw.dir.parent().unwrap();
    assert!(!parent.join("etc").exists() && !parent.join("passwd").exists());
    gw.stop().await;
}

#[tokio::test]
async fn the_bytes_decide_what_media_is_not_the_app() {
    let gw = TestGateway::start().await;
    let (mut a, _) = gw.connect("phone").await;
    let (mut b, _) = gw.connect("laptop").await;
    let png = typed(PNG_MAGIC, bytes(2_000, 11));
    upload_claiming(
        &mut a,
        "mu_svg",
        "image",
        "image/svg+xml",
        "logo.svg",
        SVG_WITH_SCRIPT,
    )
    .await;
    upload_claiming(
        &mut a,
        "mu_html",
        "image",
        "image/png",
        "cat.png",
        HTML_WITH_SCRIPT,
    )
    .await;
    upload_claiming(
        &mut a,
        "mu_png",
        "file",
        "application/octet-stream",
        "scan",
        &png,
    )
    .await;
    let refs = ["mu_svg", "mu_html", "mu_png"];
    let echo = send_with(&mut a, Header::lane("default", None), "", &refs)
        .await
        .expect("sent");
    let seen: Vec<(String, String, String)> = media_of(&echo)
        .into_iter()
        .map(|m| (m.kind, m.mime, m.filename))
        .collect();
    let owned = |k: &str, m: &str, f: &str| (k.to_owned(), m.to_owned(), f.to_owned());
    assert_eq!(
        seen,
        [
            owned("file", "application/octet-stream", "logo.svg"),
            owned("file", "text/html", "cat.png"),
            owned("image", "image/png", "scan"),
        ],
        "an SVG or HTML claimed as an image is a file; a real PNG is an image whatever was claimed"
    );

    // Another device pulls them with the same verdict.
    let message = b
        .wait_for(|e| e.frame_type() == "message")
        .await
        .expect("broadcast");
    for m in media_of(&message) {
        let (header, data, _) = pull(&mut b, &m.media_id).await.expect("pull");
        assert_eq!((header.kind, header.mime), (m.kind, m.mime));
        assert_eq!(data.len() as u64, m.size);
    }
    gw.stop().await;
}

#[tokio::test]
async fn uploads_not_yet_sent_are_capped_per_device_and_in_total() {
    let gw = TestGateway::start_with(|c| {
        c.media.max_pending_bytes_per_device = 1_000_000;
        c.media.max_pending_bytes = 1_500_000;
    })
    .await;
    let (mut a, _) = gw.connect("phone").await;
    let (mut b, _) = gw.connect("tablet").await;
    let (mut c, _) = gw.connect("laptop").await;
    upload_ok(&mut a, "mu_1", "text/plain", "one.txt", &bytes(600_000, 1)).await;

    // The phone's stored, unsent upload counts against its share.
    let refused = a
        .request(
            Header::default(),
            start_frame("mu_2", "text/plain", "two.txt", 500_000),
        )
        .await;
    let Err(ClientError::Server { code, message, .. }) = refused else {
        panic!("expected a refusal, got {refused:?}")
    };
    assert_eq!(code, ErrorCode::MediaTooLarge);
    assert!(
        message.contains("upload quota") && message.contains("this device"),
        "{message}"
    );
    assert!(
        temp_files(&gw).is_empty(),
        "a refused upload writes nothing"
    );

    // An upload still open counts too, for the gateway as a whole.
    b.send(
        start_header("mu_open"),
        start_frame("mu_open", "text/plain", "open.txt", 800_000),
    )
    .await
    .unwrap();
    // A start that succeeds has no answer: once a ping is answered, the tablet's upload is open.
    round_trip(&mut b).await;
    let refused = c
        .request(
            Header::default(),
            start_frame("mu_c", "text/plain", "c.txt", 200_000),
        )
        .await;
    let Err(ClientError::Server { code, message, .. }) = refused else {
        panic!("expected a refusal, got {refused:?}")
    };
    assert_eq!(code, ErrorCode::MediaTooLarge);
    assert!(message.contains("the gateway"), "{message}");

    // Sending the phone's upload in a message frees its share: both fit again.
    send_with(&mut a, Header::lane("default", None), "", &["mu_1"])
        .await
        .expect("sent");
    upload_ok(&mut a, "mu_2", "text/plain", "two.txt", &bytes(500_000, 2)).await;
    gw.stop().await;
}
