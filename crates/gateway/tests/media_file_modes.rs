//! Media files, finished or still being uploaded, are the owner's alone whatever the umask.
//! (Its own test binary: the umask is process-wide.)

mod common;

use common::file_mode as mode;
use common::*;
use iris_protocol::{ClientFrame, Header, MediaUploadEnd, MediaUploadStart, Ping, RequestId};
use sha2::{Digest, Sha256};

#[tokio::test]
async fn media_and_upload_files_are_private_under_a_permissive_umask() {
    // SAFETY: umask only swaps the process's file creation mask; no other test runs in this
    // binary.
    let old = unsafe { libc::umask(0o000) };
    let gw = TestGateway::start().await;
    let (mut a, _) = gw.connect("phone").await;
    let data = b"private bytes".to_vec();
    let start = ClientFrame::MediaUploadStart(MediaUploadStart {
        media_ref: "mu_1".into(),
        kind: "file".into(),
        mime: "text/plain".into(),
        size: data.len() as u64 * 2,
        filename: "notes.txt".into(),
        voice: false,
    });
    let id = Header {
        id: Some(RequestId::Str("up".into())),
        ..Header::default()
    };
    a.send(id, start).await.unwrap();
    a.send_binary(data.clone()).await.unwrap();
    // Frames are handled in order: after this answer the first bytes are on disk.
    a.request(Header::default(), ClientFrame::Ping(Ping { ts: None }))
        .await
        .unwrap();
    let media = gw.dir.join("media");
    let temps: Vec<_> = std::fs::read_dir(media.join("tmp"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(temps.len(), 1, "{temps:?}");
    assert_eq!(mode(&temps[0]), 0o600, "an upload being written");
    assert_eq!(mode(&media), 0o700, "media dir");
    assert_eq!(mode(&media.join("tmp")), 0o700, "temp dir");

    a.send_binary(data.clone()).await.unwrap();
    let whole = [data.clone(), data].concat();
    let sha = hex::encode(Sha256::digest(&whole));
    let end = ClientFrame::MediaUploadEnd(MediaUploadEnd {
        media_ref: "mu_1".into(),
        sha256: sha.clone(),
    });
    let ack = a.request(Header::default(), end).await.unwrap();
    assert_eq!(ack.frame_type(), "media.upload.ack");
    let fan_out = media.join(&sha[..2]);
    assert_eq!(mode(&fan_out), 0o700, "fan-out dir");
    assert_eq!(mode(&fan_out.join(&sha)), 0o600, "stored file");
    gw.stop().await;
    // SAFETY: as above.
    unsafe { libc::umask(old) };
}
