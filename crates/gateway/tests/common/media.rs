//! Media as an app moves it: uploads (and uploads that claim a kind), attachments, pulls, and
//! what the data dir holds afterwards.

use std::path::{Path, PathBuf};
use std::time::Duration;

use iris_client::{Client, ClientError, Event};
use iris_protocol::{
    ClientFrame, ErrorCode, Header, MediaInfo, MediaPull, MediaPullHeader, MediaUploadEnd,
    MediaUploadStart, MessageSend, Ping, RequestId, Role, ServerFrame,
};
use sha2::{Digest, Sha256};

use super::{demo_agent, send_text, TestGateway};

/// Upload chunk size the tests send (the protocol allows up to 1 MiB).
pub const UP_CHUNK: usize = 512 * 1024;
/// The gateway's pull chunk size: no binary frame of a pull may be larger.
pub const PULL_CHUNK: usize = 256 * 1024;

pub fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Deterministic, incompressible-looking bytes.
pub fn bytes(len: usize, seed: u64) -> Vec<u8> {
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
pub fn typed(magic: &[u8], mut data: Vec<u8>) -> Vec<u8> {
    data[..magic.len()].copy_from_slice(magic);
    data
}

pub const PNG_MAGIC: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
pub const MP4_MAGIC: &[u8] = b"\0\0\0\x18ftypmp42\0\0\0\0mp42isom";

/// The `kind` an app sends along with a MIME type.
pub fn kind_of(mime: &str) -> &'static str {
    match mime.split('/').next() {
        Some("image") => "image",
        Some("video") => "video",
        Some("audio") => "audio",
        _ => "file",
    }
}

pub fn start_frame(media_ref: &str, mime: &str, filename: &str, size: u64) -> ClientFrame {
    ClientFrame::MediaUploadStart(MediaUploadStart {
        media_ref: media_ref.into(),
        kind: kind_of(mime).into(),
        mime: mime.into(),
        size,
        filename: filename.into(),
        voice: false,
    })
}

pub fn end_frame(media_ref: &str, sha256: String) -> ClientFrame {
    ClientFrame::MediaUploadEnd(MediaUploadEnd {
        media_ref: media_ref.into(),
        sha256,
    })
}

/// The header an app puts on `media.upload.start`: its id is answered only by a refusal.
pub fn start_header(media_ref: &str) -> Header {
    Header {
        id: Some(RequestId::Str(format!("start-{media_ref}"))),
        ..Header::default()
    }
}

/// Uploads a whole file the way an app does and returns the answer to `media.upload.end`.
pub async fn upload(
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

pub async fn upload_ok(c: &mut Client, media_ref: &str, mime: &str, filename: &str, data: &[u8]) {
    let ack = upload(c, media_ref, mime, filename, data)
        .await
        .expect("upload accepted");
    match ack.body {
        ServerFrame::MediaUploadAck(a) => assert!(a.ok && a.media_ref == media_ref, "{}", ack.raw),
        other => panic!("expected media.upload.ack, got {other:?}"),
    }
}

/// Sends a message with attachments; returns the echo.
pub async fn send_with(
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

pub fn media_of(event: &Event) -> Vec<MediaInfo> {
    match &event.body {
        ServerFrame::Message(m) => m.media.clone(),
        ServerFrame::MessageStop(s) => s.media.clone(),
        other => panic!("expected a message, got {other:?}"),
    }
}

/// Pulls a media item; returns the header, the bytes and the size of each binary frame.
pub async fn pull(
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

pub fn error_code(result: Result<Event, ClientError>) -> ErrorCode {
    match result {
        Err(ClientError::Server { code, .. }) => code,
        other => panic!("expected an error answer, got {other:?}"),
    }
}

/// Waits for the next error event (errors to frames without a numeric id arrive as events).
pub async fn next_error(c: &mut Client) -> (Option<RequestId>, ErrorCode, String) {
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
pub async fn round_trip(c: &mut Client) {
    let pong = c
        .request(Header::default(), ClientFrame::Ping(Ping { ts: Some(7) }))
        .await
        .expect("pong");
    assert_eq!(pong.frame_type(), "pong");
}

/// Every stored file (named by its hash) under the media directory.
pub fn stored_files(gw: &TestGateway) -> Vec<String> {
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

pub fn temp_files(gw: &TestGateway) -> Vec<PathBuf> {
    std::fs::read_dir(gw.media.files().tmp_dir())
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect()
}

/// Sends a message and returns every frame up to and including the lane's `agent.idle`.
pub async fn turn(c: &mut Client, text: &str) -> Vec<Event> {
    send_text(c, "default", text).await;
    until_idle(c).await
}

pub async fn until_idle(c: &mut Client) -> Vec<Event> {
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

pub fn final_frame(events: &[Event]) -> &Event {
    events
        .iter()
        .find(|e| match &e.body {
            ServerFrame::MessageStop(_) => true,
            ServerFrame::Message(m) => m.role == Role::Assistant,
            _ => false,
        })
        .expect("a final message")
}

pub fn offers(events: &[Event]) -> Vec<MediaInfo> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            ServerFrame::MediaOffer(o) => Some(o.clone()),
            _ => None,
        })
        .collect()
}

/// A gateway with the demo agent working in its own directory (outside the data dir).
pub async fn demo_in(workspace: &Path) -> TestGateway {
    let cwd = workspace.to_path_buf();
    TestGateway::start_with(move |c| {
        c.agent_command = Some(demo_agent());
        c.agent_cwd = Some(cwd);
    })
    .await
}

/// An upload that claims `kind`, whatever its bytes are.
pub async fn upload_claiming(
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
        voice: false,
    });
    c.send(start_header(media_ref), start).await.unwrap();
    c.send_binary(data.to_vec()).await.unwrap();
    let ack = c
        .request(Header::default(), end_frame(media_ref, sha(data)))
        .await
        .expect("stored");
    assert_eq!(ack.frame_type(), "media.upload.ack", "{}", ack.raw);
}

pub const SVG_WITH_SCRIPT: &[u8] = b"<svg xmlns=\"http://www.w3.org/2000/svg\"><script>localStorage.setItem('pwned','1')</script></svg>";
pub const HTML_WITH_SCRIPT: &[u8] =
    b"<!DOCTYPE html><html><body><script>localStorage.setItem('pwned','1')</script></body></html>";
