//! Data the owner takes away, through the real command line next to a running gateway:
//! `iris-gateway backup` writes one archive a new data dir is restored from (a device then syncs
//! everything from it), and `iris-gateway export` writes the conversations as JSON and Markdown.

mod common;

use std::path::Path;
use std::process::Command;

use base64::Engine;
use common::*;
use iris_protocol::{ChatExport, Header, Role, EXPORT_FORMAT, EXPORT_VERSION};

/// Runs the gateway binary with `args` against the data dir `dir`; returns stdout, or panics
/// with stderr.
fn cli(dir: &Path, args: &[&str]) -> String {
    let data = dir.to_str().expect("utf-8 path");
    let (ok, out, err) = run_cli(&[args, &["--data-dir", data]].concat());
    assert!(ok, "{args:?}: {err}");
    out
}

fn demo_png() -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(iris_acp::demo::DEMO_PNG_BASE64)
        .unwrap()
}

/// A default chat with a question and an answer carrying an image, and a channel with a thread.
async fn some_conversations(gw: &TestGateway) -> (String, String) {
    let (mut phone, _) = gw.connect("phone").await;
    let events = turn(&mut phone, default_lane(), "hello mkimage").await;
    assert!(final_text(&events).contains("Here is an image."));
    let trip = create_channel(&mut phone, "Trip to Lisbon", None).await;
    let thread = create_channel(&mut phone, "Hotels", Some(&trip)).await;
    turn(&mut phone, Header::lane(&trip, None), "flights? tool").await;
    turn(&mut phone, Header::lane(&thread, None), "which hotel?").await;
    (trip, thread)
}

#[tokio::test]
async fn a_backup_taken_while_serving_restores_a_gateway_a_device_syncs_from() {
    let gw = TestGateway::start_demo().await;
    let (trip, thread) = some_conversations(&gw).await;
    let (mut phone, _) = gw.connect("phone").await;
    let before = lane_history(&mut phone, default_lane()).await;

    let out = tempfile::tempdir().unwrap();
    let archive = out.path().join("iris.tar");
    let said = cli(&gw.dir, &["backup", archive.to_str().unwrap()]);
    assert!(said.contains("the store, 1 media file, the keys"), "{said}");
    // Nothing is ever overwritten: a second backup to the same file is refused.
    let data = gw.dir.to_str().unwrap();
    let (ok, _, err) = run_cli(&["backup", archive.to_str().unwrap(), "--data-dir", data]);
    assert!(!ok);
    assert!(err.contains("already exists"), "{err}");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&archive).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the archive holds the token");
    }
    // The gateway goes on after the backup; the phone sees frames the backup does not have.
    turn(&mut phone, default_lane(), "after the backup").await;
    let phone_cursor = phone.sync(0).await.expect("sync").cursor;
    drop(phone);
    gw.stop().await;

    // Restore exactly as the docs say: unpack into an empty data dir and start there.
    let restored = tempfile::tempdir().unwrap();
    let status = Command::new("tar")
        .arg("-xf")
        .arg(&archive)
        .arg("-C")
        .arg(restored.path())
        .status()
        .unwrap();
    assert!(status.success());
    let png = demo_png();
    let sha = sha256_hex(&png);
    let blob = restored.path().join("media").join(&sha[..2]).join(&sha);
    assert_eq!(std::fs::read(&blob).unwrap(), png, "the image came along");

    let gw = TestGateway::start_in(restored.path(), |c| c.agent_command = Some(demo_agent())).await;
    let (mut laptop, ack) = gw.connect("laptop").await;
    let names: Vec<_> = ack.channels.iter().map(|c| c.name.as_str()).collect();
    assert!(
        names.contains(&"Trip to Lisbon") && names.contains(&"Hotels"),
        "{names:?}"
    );
    // The same messages; only the offer to take the newest turn back is gone, since the
    // restored gateway holds no checkpoint of the agent's session (docs/protocol.md §7).
    let mut expected = before.clone();
    for m in &mut expected {
        if let Some(r) = m.runtime.as_mut() {
            r.rewind = false;
        }
    }
    assert_eq!(lane_history(&mut laptop, default_lane()).await, expected);
    let synced = laptop.sync(0).await.expect("sync from the restored store");
    let texts: Vec<String> = synced
        .frames
        .iter()
        .filter(|e| e.frame_type() == "message")
        .map(message_text)
        .collect();
    for want in ["hello mkimage", "flights? tool", "which hotel?"] {
        assert!(texts.iter().any(|t| t == want), "{want} in {texts:?}");
    }
    assert!(!texts.iter().any(|t| t == "after the backup"), "{texts:?}");
    let hotel = lane_history(&mut laptop, Header::lane(&thread, None)).await;
    assert_eq!(hotel.first().map(|m| m.text.as_str()), Some("which hotel?"));
    // The restored gateway keeps working: a new turn in the restored channel.
    let events = turn(&mut laptop, Header::lane(&trip, None), "and trains?").await;
    assert!(final_text(&events).contains("and trains?"));

    // The phone still holds a cursor the original issued after the backup; the restored gateway
    // never issues it again, so the phone's sync from it brings the new turn.
    let (mut phone, _) = gw.connect("phone").await;
    let caught_up = phone
        .sync(phone_cursor)
        .await
        .expect("sync from the old cursor");
    let texts: Vec<String> = caught_up
        .frames
        .iter()
        .filter(|e| e.frame_type() == "message")
        .map(message_text)
        .collect();
    assert_eq!(texts, ["and trains?"], "{:?}", types(&caught_up.frames));
    gw.stop().await;
}

fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(data))
}

#[tokio::test]
async fn export_writes_every_chat_as_documented_json_and_readable_markdown() {
    let gw = TestGateway::start_demo().await;
    let (trip, thread) = some_conversations(&gw).await;
    let out = tempfile::tempdir().unwrap();
    let json_dir = out.path().join("json");

    let said = cli(
        &gw.dir,
        &[
            "export",
            "--all",
            "--format",
            "json",
            "--media",
            "--out",
            json_dir.to_str().unwrap(),
        ],
    );
    assert!(said.contains("in 2 files"), "{said}");
    let mut docs: Vec<ChatExport> = std::fs::read_dir(&json_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| ChatExport::from_json(&std::fs::read_to_string(p).unwrap()).unwrap())
        .collect();
    docs.sort_by_key(|d| d.chat.created_at);
    assert_eq!(
        docs.len(),
        2,
        "the default chat and the channel (with its thread)"
    );
    let (default, channel) = (&docs[0], &docs[1]);
    assert_eq!(
        (default.format.as_str(), default.version),
        (EXPORT_FORMAT, EXPORT_VERSION)
    );
    let roles: Vec<Role> = default.chat.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant]);
    let image = &default.chat.messages[1].media[0];
    let copied = json_dir.join(&default.media_files[&image.media_id]);
    assert_eq!(std::fs::read(copied).unwrap(), demo_png());
    assert_eq!(channel.chat.chat_id, trip);
    let answer = &channel.chat.messages[1];
    assert!(
        matches!(
            answer.steps.first(),
            Some(iris_protocol::Step::Commentary { .. })
        ) && answer
            .steps
            .iter()
            .any(|s| matches!(s, iris_protocol::Step::Tool(_))),
        "the answer's steps come along: {:?}",
        answer.steps
    );
    assert_eq!(channel.threads.len(), 1);
    assert_eq!(channel.threads[0].chat_id, thread);
    assert_eq!(channel.threads[0].messages[0].text, "which hotel?");

    // Markdown of one chat, while the gateway keeps serving.
    let md_dir = out.path().join("md");
    cli(
        &gw.dir,
        &["export", "--chat", &trip, "--out", md_dir.to_str().unwrap()],
    );
    let file = std::fs::read_dir(&md_dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert!(file
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .starts_with("trip-to-lisbon-"));
    let md = std::fs::read_to_string(file).unwrap();
    assert!(md.starts_with("# Trip to Lisbon\n"), "{md}");
    assert!(
        md.contains("### You · ") && md.contains("flights? tool"),
        "{md}"
    );
    assert!(
        md.contains("- Tool `terminal` echo hello (done)"),
        "the turn's steps: {md}"
    );
    assert!(
        md.contains("## Thread: Hotels") && md.contains("which hotel?"),
        "{md}"
    );

    // An unknown chat is a clear error, and nothing is written.
    let none = out.path().join("none");
    let (ok, _, err) = run_cli(&[
        "export",
        "--chat",
        "nope",
        "--out",
        none.to_str().unwrap(),
        "--data-dir",
        gw.dir.to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(err.contains("no chat with id nope"), "{err}");
    assert!(!out.path().join("none").exists());
    let (mut phone, _) = gw.connect("phone").await;
    let events = turn(&mut phone, default_lane(), "still here").await;
    assert!(final_text(&events).contains("still here"));
    gw.stop().await;
}

#[tokio::test]
async fn a_backup_never_writes_through_a_planted_link_and_leaves_nothing_behind() {
    use std::os::unix::fs::PermissionsExt;
    let gw = TestGateway::start().await;
    let (mut phone, _) = gw.connect("phone").await;
    send_text(&mut phone, "default", "a secret worth stealing").await;

    // Another user of the backup directory plants links at the temporary names a backup used
    // to take (`.<name>.db.<pid>`, `.<name>.partial.<pid>`), pointing where they can read.
    let out = tempfile::tempdir().unwrap();
    let loot = tempfile::tempdir().unwrap();
    let pid = std::process::id();
    for what in ["db", "partial"] {
        std::os::unix::fs::symlink(
            loot.path().join(what),
            out.path().join(format!(".iris.tar.{what}.{pid}")),
        )
        .unwrap();
    }
    let archive = out.path().join("iris.tar");
    let (dir, dest) = (gw.dir.clone(), archive.clone());
    let summary =
        tokio::task::spawn_blocking(move || iris_gateway::admin::archive::backup(&dir, &dest))
            .await
            .unwrap()
            .expect("backup");
    assert_eq!(summary.path, archive);
    let stolen: Vec<_> = std::fs::read_dir(loot.path()).unwrap().collect();
    assert!(
        stolen.is_empty(),
        "written through a planted link: {stolen:?}"
    );
    let mode = std::fs::metadata(&archive).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let mut left: Vec<String> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "iris.tar" && !n.ends_with(&format!(".{pid}")))
        .collect();
    left.sort();
    assert!(left.is_empty(), "left behind: {left:?}");

    // A failed backup (its destination exists by the time it is linked) leaves nothing either.
    let taken = out.path().join("taken.tar");
    std::os::unix::fs::symlink(loot.path().join("x"), &taken).unwrap();
    let (dir, dest) = (gw.dir.clone(), taken.clone());
    let failed =
        tokio::task::spawn_blocking(move || iris_gateway::admin::archive::backup(&dir, &dest))
            .await
            .unwrap();
    assert!(
        failed.is_err(),
        "a link at the destination is never written through"
    );
    assert!(!loot.path().join("x").exists());
    let tmp: Vec<_> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(tmp.is_empty(), "{tmp:?}");
    gw.stop().await;
}

#[tokio::test]
async fn export_media_never_writes_through_a_planted_link() {
    use iris_gateway::admin::archive::{export, ExportFormat, ExportRequest};
    let gw = TestGateway::start_demo().await;
    some_conversations(&gw).await;
    let out = tempfile::tempdir().unwrap();
    let request = |dir: &Path| ExportRequest {
        chat: None,
        format: ExportFormat::Json,
        out: dir.to_path_buf(),
        media: true,
    };
    let first = out.path().join("first");
    let done = export(&gw.dir, &request(&first), 0).expect("export");
    assert_eq!(done.media_files, 1);
    let name = std::fs::read_dir(first.join("media"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name();

    // The same name in a second export's folder is a dangling link someone planted.
    let loot = tempfile::tempdir().unwrap();
    let second = out.path().join("second");
    std::fs::create_dir_all(second.join("media")).unwrap();
    std::os::unix::fs::symlink(
        loot.path().join("stolen.png"),
        second.join("media").join(&name),
    )
    .unwrap();
    let refused = export(&gw.dir, &request(&second), 0);
    assert!(refused.is_err(), "{refused:?}");
    assert!(
        !loot.path().join("stolen.png").exists(),
        "written through the link"
    );

    // A planted link in place of the media folder is refused too.
    let third = out.path().join("third");
    std::fs::create_dir_all(&third).unwrap();
    std::os::unix::fs::symlink(loot.path(), third.join("media")).unwrap();
    assert!(export(&gw.dir, &request(&third), 0).is_err());
    assert_eq!(std::fs::read_dir(loot.path()).unwrap().count(), 0);
    gw.stop().await;
}

#[tokio::test]
async fn a_message_cannot_forge_sections_of_the_markdown_export() {
    let gw = TestGateway::start().await;
    let (mut phone, _) = gw.connect("phone").await;
    let forged = "Here is my note.\n## Thread: Payroll\n### Assistant · 2020-01-01 00:00 UTC\nSend the codes.\nFake Heading\n===\n```\n# a comment in code\n```";
    send_text(&mut phone, "default", forged).await;
    let md = gw.markdown_export();
    let headings: Vec<&str> = md.lines().filter(|l| l.starts_with('#')).collect();
    assert!(
        headings
            .iter()
            .all(|h| !h.contains("Payroll") && !h.contains("2020-01-01")),
        "{headings:?}\n{md}"
    );
    assert!(md.contains("\\## Thread: Payroll"), "{md}");
    assert!(md.contains("\\==="), "{md}");
    assert!(
        md.contains("\n# a comment in code\n"),
        "code stays as written:\n{md}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn the_markdown_export_runs_and_fetches_nothing_a_message_carries() {
    use pulldown_cmark::{Event, Parser, Tag};
    let gw = TestGateway::start().await;
    let (mut phone, _) = gw.connect("phone").await;
    let hostile = "Look: <img src=x onerror=alert(1)> and <script>steal()</script>\n\n\
        <div onclick=\"x()\">click</div>\n\n\
        [prize](javascript:alert(document.cookie)) [zip]( DATA:text/html;base64,PHNjcmlwdD4=) \
        [vb][r] <javascript:alert(1)>\n\n\
        ![tracking pixel](https://tracker.example/p.gif?u=owner) ![](//cdn.example/x.png)\n\n\
        [r]: vbscript:msgbox\n\n\
        Fine: [docs](https://example.com/docs) and `<b>code</b>`";
    send_text(&mut phone, "default", hostile).await;
    let md = gw.markdown_export();
    for event in Parser::new(&md) {
        match event {
            Event::Html(h) | Event::InlineHtml(h) => panic!("raw HTML {h:?} in\n{md}"),
            Event::Start(Tag::Link { dest_url, .. }) => {
                let to = dest_url.trim().to_ascii_lowercase();
                assert!(
                    to.starts_with("https://") || to.starts_with("//"),
                    "a link to {dest_url:?} in\n{md}"
                )
            }
            Event::Start(Tag::Image { dest_url, .. }) => {
                panic!("an image from {dest_url:?} in\n{md}")
            }
            _ => {}
        }
    }
    // What they said is still there to read, as text.
    for kept in [
        "&lt;img src=x onerror=alert(1)&gt;",
        "&lt;script&gt;steal()&lt;/script&gt;",
        "prize (link removed)",
        "zip (link removed)",
        "vb (link removed)",
        "[tracking pixel](<https://tracker.example/p.gif?u=owner>)",
        "[image](<//cdn.example/x.png>)",
        "[docs](https://example.com/docs)",
        "`<b>code</b>`",
    ] {
        assert!(md.contains(kept), "{kept:?} missing from\n{md}");
    }
    gw.stop().await;
}
