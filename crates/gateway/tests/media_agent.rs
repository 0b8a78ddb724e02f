//! Media between devices and the agent through the real server and the demo agent: attachments
//! reaching it inline or as links, files it offers reaching other devices, `MEDIA:` lines served
//! only from the allowed directories, and its files judged by their bytes.

mod common;

use common::media::*;
use common::media::{turn, until_idle};
use common::*;
use iris_protocol::{Header, ServerFrame};

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
