//! Media through the real server: uploads and their refusals, the content-addressed store,
//! attachments reaching the agent, files from the agent reaching other devices, pulls, deletes
//! and expiry.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use iris_client::{Client, ClientError, Event, RawConnection, RawFrame};
use iris_protocol::{
    decode, encode, ChannelCreate, ClientFrame, Empty, ErrorCode, FrameBody, Header, MediaInfo,
    MediaPull, MediaPullHeader, MediaUploadEnd, MediaUploadStart, MessageDelete, MessageSend, Ping,
    RequestId, Role, ServerFrame,
};
use sha2::{Digest, Sha256};

/// Upload chunk size the tests send (the protocol allows up to 1 MiB).
const UP_CHUNK: usize = 512 * 1024;
/// The gateway's pull chunk size: no binary frame of a pull may be larger.
const PULL_CHUNK: usize = 256 * 1024;

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Deterministic, incompressible-looking bytes.
fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// `data` with its first bytes made the magic bytes of a file type (the gateway decides what a
/// file is by these, not by what the app claims).
fn typed(magic: &[u8], mut data: Vec<u8>) -> Vec<u8> {
    data[..magic.len()].copy_from_slice(magic);
    data
}

const PNG_MAGIC: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
const MP4_MAGIC: &[u8] = b"\0\0\0\x18ftypmp42\0\0\0\0mp42isom";

/// The `kind` an app sends along with a MIME type.
fn kind_of(mime: &str) -> &'static str {
    match mime.split('/').next() {
        Some("image") => "image",
        Some("video") => "video",
        Some("audio") => "audio",
        _ => "file",
    }
}

fn start_frame(media_ref: &str, mime: &str, filename: &str, size: u64) -> ClientFrame {
    ClientFrame::MediaUploadStart(MediaUploadStart {
        media_ref: media_ref.into(),
        kind: kind_of(mime).into(),
        mime: mime.into(),
        size,
        filename: filename.into(),
    })
}

fn end_frame(media_ref: &str, sha256: String) -> ClientFrame {
    ClientFrame::MediaUploadEnd(MediaUploadEnd {
        media_ref: media_ref.into(),
        sha256,
    })
}

/// The header an app puts on `media.upload.start`: its id is answered only by a refusal.
fn start_header(media_ref: &str) -> Header {
    Header {
        id: Some(RequestId::Str(format!("start-{media_ref}"))),
        ..Header::default()
    }
}

/// Uploads a whole file the way an app does and returns the answer to `media.upload.end`.
async fn upload(
    c: &mut Client,
    media_ref: &str,
    mime: &str,
    filename: &str,
    data: &[u8],
) -> Result<Event, ClientError> {
    c.send(
        start_header(media_ref),
        start_frame(media_ref, mime, filename, data.len() as u64),
    )
    .await?;
    for chunk in data.chunks(UP_CHUNK) {
        c.send_binary(chunk.to_vec()).await?;
    }
    c.request(Header::default(), end_frame(media_ref, sha(data)))
        .await
}

async fn upload_ok(c: &mut Client, media_ref: &str, mime: &str, filename: &str, data: &[u8]) {
    let ack = upload(c, media_ref, mime, filename, data)
        .await
        .expect("upload accepted");
    match ack.body {
        ServerFrame::MediaUploadAck(a) => assert!(a.ok && a.media_ref == media_ref, "{}", ack.raw),
        other => panic!("expected media.upload.ack, got {other:?}"),
    }
}

/// Sends a message with attachments; returns the echo.
async fn send_with(
    c: &mut Client,
    lane: Header,
    text: &str,
    refs: &[&str],
) -> Result<Event, ClientError> {
    let frame = ClientFrame::MessageSend(MessageSend {
        text: text.into(),
        media_refs: refs.iter().map(|r| r.to_string()).collect(),
        ..Default::default()
    });
    c.request(lane, frame).await
}

fn media_of(event: &Event) -> Vec<MediaInfo> {
    match &event.body {
        ServerFrame::Message(m) => m.media.clone(),
        ServerFrame::MessageStop(s) => s.media.clone(),
        other => panic!("expected a message, got {other:?}"),
    }
}

/// Pulls a media item; returns the header, the bytes and the size of each binary frame.
async fn pull(
    c: &mut Client,
    media_id: &str,
) -> Result<(MediaPullHeader, Vec<u8>, Vec<usize>), ClientError> {
    let header = c
        .request(
            Header::default(),
            ClientFrame::MediaPull(MediaPull {
                media_id: media_id.into(),
            }),
        )
        .await?;
    let id = header.id();
    let ServerFrame::MediaPullHeader(h) = header.body else {
        panic!("expected the pull header, got {}", header.raw)
    };
    let (mut data, mut sizes) = (Vec::new(), Vec::new());
    while (data.len() as u64) < h.size {
        let chunk = c.binary().await?;
        sizes.push(chunk.len());
        data.extend_from_slice(&chunk);
    }
    let end = c
        .wait_for(|e| e.id() == id && e.frame_type() != "media.pull")
        .await?;
    match end.body {
        ServerFrame::MediaPullEnd(e) => assert!(e.ok, "{}", end.raw),
        other => panic!("expected media.pull.end, got {other:?}"),
    }
    Ok((h, data, sizes))
}

fn error_code(result: Result<Event, ClientError>) -> ErrorCode {
    match result {
        Err(ClientError::Server { code, .. }) => code,
        other => panic!("expected an error answer, got {other:?}"),
    }
}

/// Waits for the next error event (errors to frames without a numeric id arrive as events).
async fn next_error(c: &mut Client) -> (Option<RequestId>, ErrorCode, String) {
    let e = c
        .wait_for(|e| e.frame_type() == "error")
        .await
        .expect("an error frame");
    match e.body {
        ServerFrame::Error(err) => (e.header.id, err.code, err.message),
        _ => unreachable!(),
    }
}

/// A request/response round trip: every frame the gateway wrote before the pong is in.
async fn round_trip(c: &mut Client) {
    let pong = c
        .request(Header::default(), ClientFrame::Ping(Ping { ts: Some(7) }))
        .await
        .expect("pong");
    assert_eq!(pong.frame_type(), "pong");
}

/// Every stored file (named by its hash) under the media directory.
fn stored_files(gw: &TestGateway) -> Vec<String> {
    let root = gw.dir.join("media");
    let mut out = Vec::new();
    for fan in std::fs::read_dir(&root).into_iter().flatten().flatten() {
        if fan.file_name() == "tmp" {
            continue;
        }
        for f in std::fs::read_dir(fan.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            out.push(f.file_name().to_string_lossy().into_owned());
        }
    }
    out.sort();
    out
}

fn temp_files(gw: &TestGateway) -> Vec<PathBuf> {
    std::fs::read_dir(gw.media.files().tmp_dir())
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect()
}

/// Sends a message and returns every frame up to and including the lane's `agent.idle`.
async fn turn(c: &mut Client, text: &str) -> Vec<Event> {
    send_text(c, "default", text).await;
    until_idle(c).await
}

async fn until_idle(c: &mut Client) -> Vec<Event> {
    let mut out = Vec::new();
    loop {
        let e = c
            .next_event_timeout(Duration::from_secs(20))
            .await
            .expect("turn frames");
        let idle = e.frame_type() == "agent.idle";
        out.push(e);
        if idle {
            return out;
        }
    }
}

fn final_frame(events: &[Event]) -> &Event {
    events
        .iter()
        .find(|e| match &e.body {
            ServerFrame::MessageStop(_) => true,
            ServerFrame::Message(m) => m.role == Role::Assistant,
            _ => false,
        })
        .expect("a final message")
}

fn final_text(events: &[Event]) -> String {
    match &final_frame(events).body {
        ServerFrame::MessageStop(s) => s.final_text.clone(),
        ServerFrame::Message(m) => m.text.clone(),
        _ => unreachable!(),
    }
}

fn offers(events: &[Event]) -> Vec<MediaInfo> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            ServerFrame::MediaOffer(o) => Some(o.clone()),
            _ => None,
        })
        .collect()
}

/// A gateway with the demo agent working in its own directory (outside the data dir).
async fn demo_in(workspace: &Path) -> TestGateway {
    let cwd = workspace.to_path_buf();
    TestGateway::start_with(move |c| {
        c.agent_command = Some(demo_agent());
        c.agent_cwd = Some(cwd);
    })
    .await
}

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
async fn an_image_reaches_the_demo_agent_inline_and_a_file_as_a_link() {
    let gw = TestGateway::start_demo().await;
    let (mut a, _) = gw.connect("phone").await;
    let image = typed(PNG_MAGIC, bytes(12_345, 6));
    upload_ok(&mut a, "mu_img", "image/png", "photo.png", &image).await;
    let echo = send_with(
        &mut a,
        Header::lane("default", None),
        "what is this?",
        &["mu_img"],
    )
    .await
    .expect("sent");
    assert_eq!(media_of(&echo)[0].kind, "image");
    let frames = until_idle(&mut a).await;
    let text = final_text(&frames);
    assert!(
        text.contains("Received image image/png (12345 bytes)"),
        "{text}"
    );

    // A document goes as a resource_link to the stored file, under its display name.
    upload_ok(
        &mut a,
        "mu_doc",
        "application/pdf",
        "../report.pdf",
        &bytes(2048, 7),
    )
    .await;
    send_with(&mut a, Header::lane("default", None), "", &["mu_doc"])
        .await
        .expect("sent");
    let frames = until_idle(&mut a).await;
    let text = final_text(&frames);
    assert!(text.contains("Received file report.pdf"), "{text}");
    assert!(
        !text.contains("Echo"),
        "a message of attachments only has no text to echo: {text}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_file_from_the_demo_agent_reaches_a_second_device() {
    let workspace = tempfile::tempdir().unwrap();
    let gw = demo_in(workspace.path()).await;
    let (mut a, _) = gw.connect("phone").await;
    let (mut b, _) = gw.connect("laptop").await;
    let frames = turn(&mut a, "mkfile").await;
    let text = final_text(&frames);
    assert!(
        text.contains("Here is a file.") && !text.contains("MEDIA:"),
        "MEDIA: lines are not shown: {text:?}"
    );
    let offered = offers(&frames);
    assert_eq!(offered.len(), 1, "one media.offer");
    assert_eq!(
        media_of(final_frame(&frames)),
        offered,
        "the final message lists the offered file"
    );
    let o = &offered[0];
    assert_eq!(
        (o.kind.as_str(), o.mime.as_str(), o.filename.as_str()),
        ("file", "text/plain", "iris-demo-file.txt")
    );

    // The laptop gets the offer (durable, so also after a reconnect) and pulls the bytes.
    let offer = b
        .wait_for(|e| e.frame_type() == "media.offer")
        .await
        .expect("offer on the second device");
    assert!(offer.cursor.is_some(), "media.offer is outboxed");
    let ServerFrame::MediaOffer(info) = offer.body else {
        unreachable!()
    };
    assert_eq!(&info, o);
    let on_disk = std::fs::read(workspace.path().join(iris_acp::demo::DEMO_FILE_NAME)).unwrap();
    assert_eq!(on_disk, iris_acp::demo::demo_file_text().into_bytes());
    let (header, pulled, _) = pull(&mut b, &info.media_id).await.expect("pull");
    assert_eq!(header.sha256, sha(&on_disk));
    assert_eq!(sha(&pulled), sha(&on_disk));
    assert_eq!(header.size, on_disk.len() as u64);

    // An image content block from the agent becomes media too.
    let frames = turn(&mut a, "mkimage").await;
    let offered = offers(&frames);
    assert_eq!(offered.len(), 1);
    assert_eq!(
        (
            offered[0].kind.as_str(),
            offered[0].mime.as_str(),
            offered[0].filename.as_str()
        ),
        ("image", "image/png", "image.png")
    );
    let (header, png, _) = pull(&mut a, &offered[0].media_id).await.expect("pull");
    assert!(png.starts_with(b"\x89PNG"), "the decoded image");
    assert_eq!(header.size, png.len() as u64);
    gw.stop().await;
}

#[tokio::test]
async fn media_lines_are_served_only_from_the_allowed_directories() {
    let workspace = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let inside = workspace.path().join("notes.txt");
    std::fs::write(&inside, b"inside the workspace").unwrap();
    let secret = elsewhere.path().join("secret.txt");
    std::fs::write(&secret, b"outside").unwrap();
    let link = workspace.path().join("link.txt");
    std::os::unix::fs::symlink(&secret, &link).unwrap();
    let dotdot = workspace
        .path()
        .join("..")
        .join(elsewhere.path().file_name().unwrap())
        .join("secret.txt");

    let gw = demo_in(workspace.path()).await;
    let (mut a, _) = gw.connect("phone").await;
    let prompt = format!(
        "share these\nMEDIA:{}\nMEDIA:{}\nMEDIA:{}\nMEDIA:{}\nMEDIA:notes.txt\nMEDIA:{}/iris.db\nMEDIA:/no/such/file",
        inside.display(),
        secret.display(),
        link.display(),
        dotdot.display(),
        gw.dir.display(),
    );
    let frames = turn(&mut a, &prompt).await;
    let offered = offers(&frames);
    assert_eq!(
        offered.len(),
        1,
        "only the file inside the workspace is served (once): {offered:?}"
    );
    assert_eq!(offered[0].filename, "notes.txt");
    let text = final_text(&frames);
    assert_eq!(
        text, "Echo: share these",
        "every MEDIA: line is taken out of the text"
    );
    let (_, data, _) = pull(&mut a, &offered[0].media_id).await.expect("pull");
    assert_eq!(data, b"inside the workspace");
    gw.stop().await;

    // Configured directories replace the default.
    let other = elsewhere.path().to_path_buf();
    let cwd = workspace.path().to_path_buf();
    let gw = TestGateway::start_with(move |c| {
        c.agent_command = Some(demo_agent());
        c.agent_cwd = Some(cwd);
        c.media.allowed_dirs = vec![other];
    })
    .await;
    let (mut a, _) = gw.connect("phone").await;
    let frames = turn(
        &mut a,
        &format!(
            "again\nMEDIA:{}\nMEDIA:{}",
            inside.display(),
            secret.display()
        ),
    )
    .await;
    let names: Vec<String> = offers(&frames).into_iter().map(|o| o.filename).collect();
    assert_eq!(names, ["secret.txt"]);
    gw.stop().await;
}

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

/// An upload that claims `kind`, whatever its bytes are.
async fn upload_claiming(
    c: &mut Client,
    media_ref: &str,
    kind: &str,
    mime: &str,
    filename: &str,
    data: &[u8],
) {
    let start = ClientFrame::MediaUploadStart(MediaUploadStart {
        media_ref: media_ref.into(),
        kind: kind.into(),
        mime: mime.into(),
        size: data.len() as u64,
        filename: filename.into(),
    });
    c.send(start_header(media_ref), start).await.unwrap();
    c.send_binary(data.to_vec()).await.unwrap();
    let ack = c
        .request(Header::default(), end_frame(media_ref, sha(data)))
        .await
        .expect("stored");
    assert_eq!(ack.frame_type(), "media.upload.ack", "{}", ack.raw);
}

const SVG_WITH_SCRIPT: &[u8] = b"<svg xmlns=\"http://www.w3.org/2000/svg\"><script>localStorage.setItem('pwned','1')</script></svg>";
const HTML_WITH_SCRIPT: &[u8] =
    b"<!DOCTYPE html><html><body><script>localStorage.setItem('pwned','1')</script></body></html>";

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
async fn files_from_the_agent_are_judged_by_their_bytes_too() {
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join("chart.svg"), SVG_WITH_SCRIPT).unwrap();
    std::fs::write(workspace.path().join("photo.png"), HTML_WITH_SCRIPT).unwrap();
    let gw = demo_in(workspace.path()).await;
    let (mut a, _) = gw.connect("phone").await;
    let frames = turn(&mut a, "here\nMEDIA:chart.svg\nMEDIA:photo.png").await;
    let offered: Vec<(String, String)> = offers(&frames)
        .into_iter()
        .map(|o| (o.kind, o.filename))
        .collect();
    assert_eq!(
        offered,
        [
            ("file".to_owned(), "chart.svg".to_owned()),
            ("file".to_owned(), "photo.png".to_owned())
        ]
    );
    for o in offers(&frames) {
        assert!(!o.mime.starts_with("image/"), "{}", o.mime);
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
