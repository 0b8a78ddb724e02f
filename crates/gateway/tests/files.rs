//! The file browser (`files.list`, `files.read`, `files.pull`) through the gateway as a device
//! uses it: listing, text, an image, and every hostile case: `..`, absolute paths, symlinks out
//! of the working directory, a FIFO, a sparse 1 GiB file, 100,000 entries, names with control
//! characters, hidden secrets, the gateway's own data directory, an agent without the browser.

mod common;

use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use iris_client::{Client, ClientError};
use iris_gateway::config::agents::{AgentTimeouts, NamedAgent};
use iris_protocol::{
    ClientFrame, ErrorCode, FileContent, FilesList, FilesListing, FilesPull, FilesPullHeader,
    FilesRead, Header, ServerFrame,
};

const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, 0x49, 0x48, 0x44, 0x52, 0, 0, 0,
    1, 0, 0, 0, 1, 8, 6, 0, 0, 0, 0x1f, 0x15, 0xc4, 0x89,
];

fn agent(name: &str, cwd: &Path) -> NamedAgent {
    NamedAgent {
        name: name.into(),
        command: demo_agent(),
        cwd: Some(cwd.to_path_buf()),
        env: Vec::new(),
        timeouts: AgentTimeouts::default(),
        spare_session: Some(false),
    }
}

async fn call(c: &mut Client, frame: ClientFrame) -> Result<ServerFrame, (ErrorCode, String)> {
    match c.request(Header::default(), frame).await {
        Ok(event) => Ok(event.body),
        Err(ClientError::Server { code, message, .. }) => Err((code, message)),
        Err(e) => panic!("request failed: {e}"),
    }
}

async fn list(c: &mut Client, agent: Option<&str>, path: &str) -> Result<FilesListing, ErrorCode> {
    let frame = ClientFrame::FilesList(FilesList {
        agent: agent.map(Into::into),
        path: path.into(),
    });
    match call(c, frame).await {
        Ok(ServerFrame::FilesList(l)) => Ok(l),
        Ok(other) => panic!("expected files.list, got {other:?}"),
        Err((code, _)) => Err(code),
    }
}

async fn read(c: &mut Client, path: &str, offset: u64) -> Result<FileContent, (ErrorCode, String)> {
    let frame = ClientFrame::FilesRead(FilesRead {
        agent: Some("code".into()),
        path: path.into(),
        offset,
    });
    match call(c, frame).await? {
        ServerFrame::FilesRead(r) => Ok(r),
        other => panic!("expected files.read, got {other:?}"),
    }
}

async fn pull(c: &mut Client, path: &str) -> Result<(FilesPullHeader, Vec<u8>), ErrorCode> {
    let frame = ClientFrame::FilesPull(FilesPull {
        agent: Some("code".into()),
        path: path.into(),
    });
    let event = match c.request(Header::default(), frame).await {
        Ok(e) => e,
        Err(ClientError::Server { code, .. }) => return Err(code),
        Err(e) => panic!("pull failed: {e}"),
    };
    let id = event.id();
    let ServerFrame::FilesPull(h) = event.body else {
        panic!("expected the files.pull header, got {}", event.raw)
    };
    let mut data = Vec::new();
    while (data.len() as u64) < h.size {
        data.extend(c.binary().await.expect("bytes"));
    }
    let end = c
        .wait_for(|e| e.id() == id && e.frame_type() == "media.pull.end")
        .await
        .expect("end");
    assert!(end.raw.contains(r#""ok":true"#), "{}", end.raw);
    Ok((h, data))
}

/// The working directory `work` (the gateway's data dir `work/data` inside it) and a directory
/// beside it with a secret.
fn lay_out(root: &Path) -> std::path::PathBuf {
    let work = root.join("work");
    let outside = root.join("outside");
    for d in [&work, &outside, &work.join("src"), &work.join(".git")] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(outside.join("secret.txt"), "outside secret").unwrap();
    std::fs::write(
        work.join("src/main.rs"),
        "fn main() {\n    println!(\"hi\");\n}\n",
    )
    .unwrap();
    std::fs::write(work.join("pic.png"), PNG).unwrap();
    for secret in [".env", "id_rsa", "server.pem", ".git/config"] {
        std::fs::write(work.join(secret), "TOKEN=very-secret").unwrap();
    }
    std::fs::write(work.join("bad\nname.txt"), "newline").unwrap();
    std::fs::write(work.join("esc\u{1b}[31m.txt"), "escape").unwrap();
    symlink("../outside", work.join("link_out")).unwrap();
    symlink(outside.join("secret.txt"), work.join("abs_link")).unwrap();
    symlink("src/main.rs", work.join("link_in")).unwrap();
    symlink(".git/config", work.join("link_git")).unwrap();
    let fifo =
        std::ffi::CString::new(work.join("pipe").into_os_string().into_encoded_bytes()).unwrap();
    // SAFETY: a valid C string and mode.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    work
}

async fn start(root: &Path, work: &Path) -> TestGateway {
    let work = work.to_path_buf();
    TestGateway::start_in(&work.join("data"), move |c| {
        c.agent_command = None;
        c.agents = vec![agent("code", &work), agent("mail", &work)];
        c.default_agent = Some("code".into());
        c.files.per_agent.insert("mail".into(), false);
        let _ = root;
    })
    .await
}

#[tokio::test]
async fn a_device_lists_reads_and_pulls_inside_the_working_directory() {
    let root = tempfile::tempdir().unwrap();
    let work = lay_out(root.path());
    let gw = start(root.path(), &work).await;
    let (mut phone, _) = gw.connect("phone").await;

    // The lane's agent is the default, `code`.
    let top = list(&mut phone, None, "").await.expect("listing");
    assert_eq!(top.agent, "code");
    let names: Vec<&str> = top.entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "src",
            "abs_link",
            "bad\nname.txt",
            "esc\u{1b}[31m.txt",
            "link_git",
            "link_in",
            "link_out",
            "pic.png",
            "pipe"
        ],
        "directories first, secrets, .git and the data dir left out"
    );
    assert_eq!((top.total, top.hidden, top.truncated), (9, 5, false));
    let kind = |n: &str| {
        top.entries
            .iter()
            .find(|e| e.name == n)
            .unwrap()
            .kind
            .clone()
    };
    assert_eq!(
        [kind("src"), kind("pic.png"), kind("link_in"), kind("pipe")],
        ["dir", "file", "symlink", "other"]
    );
    let label = |n: &str| {
        top.entries
            .iter()
            .find(|e| e.name == n)
            .unwrap()
            .label
            .clone()
    };
    assert_eq!(label("bad\nname.txt").as_deref(), Some("bad\\nname.txt"));
    assert_eq!(
        label("esc\u{1b}[31m.txt").as_deref(),
        Some("esc\\u{1b}[31m.txt")
    );
    assert_eq!(label("pic.png"), None);
    let src = list(&mut phone, Some("code"), "./src/").await.unwrap();
    assert_eq!((src.path.as_str(), src.entries[0].size), ("src", 34));

    let text = read(&mut phone, "src/main.rs", 0).await.unwrap();
    assert_eq!((text.kind.as_str(), text.size), ("text", 34));
    assert_eq!(
        text.text.as_deref(),
        Some("fn main() {\n    println!(\"hi\");\n}\n")
    );
    assert_eq!(text.next_offset, None);
    let rest = read(&mut phone, "src/main.rs", 12).await.unwrap();
    assert!(rest.text.unwrap().starts_with("    println!"));
    // A symlink that stays inside is followed; the name with a newline opens as listed.
    assert_eq!(read(&mut phone, "link_in", 0).await.unwrap().kind, "text");
    assert_eq!(
        read(&mut phone, "bad\nname.txt", 0)
            .await
            .unwrap()
            .text
            .as_deref(),
        Some("newline")
    );

    let image = read(&mut phone, "pic.png", 0).await.unwrap();
    assert_eq!(
        (image.kind.as_str(), image.mime.as_str(), image.text),
        ("image", "image/png", None)
    );
    let (header, bytes) = pull(&mut phone, "pic.png").await.unwrap();
    assert_eq!(
        (header.kind.as_str(), header.name.as_str(), bytes.as_slice()),
        ("image", "pic.png", PNG)
    );
    gw.stop().await;
}

#[tokio::test]
async fn every_way_out_of_the_jail_is_refused_with_its_code() {
    let root = tempfile::tempdir().unwrap();
    let work = lay_out(root.path());
    let gw = start(root.path(), &work).await;
    let (mut phone, _) = gw.connect("phone").await;
    let code = |r: Result<FileContent, (ErrorCode, String)>| r.expect_err("refused");

    let (c, m) = code(read(&mut phone, "../outside/secret.txt", 0).await);
    assert_eq!(c, ErrorCode::BadRequest, "{m}");
    assert!(m.contains(".."), "{m}");
    let (c, m) = code(read(&mut phone, "src/../../outside/secret.txt", 0).await);
    assert_eq!(c, ErrorCode::BadRequest, "{m}");
    let (c, m) = code(
        read(
            &mut phone,
            &root.path().join("outside/secret.txt").to_string_lossy(),
            0,
        )
        .await,
    );
    assert_eq!(c, ErrorCode::BadRequest, "{m}");
    assert!(m.contains("absolute"), "{m}");
    // Symlinks out of the directory, relative or absolute, are not followed.
    for link in ["link_out/secret.txt", "abs_link"] {
        let (c, m) = code(read(&mut phone, link, 0).await);
        assert_eq!(c, ErrorCode::Auth, "{link}: {m}");
        assert!(m.contains("outside"), "{m}");
    }
    assert_eq!(
        list(&mut phone, None, "link_out").await.unwrap_err(),
        ErrorCode::Auth
    );
    // Secrets and .git are hidden, also behind a symlink inside the directory.
    for hidden in [".env", "id_rsa", "server.pem", ".git/config", "link_git"] {
        let (c, m) = code(read(&mut phone, hidden, 0).await);
        assert_eq!(c, ErrorCode::Auth, "{hidden}: {m}");
        assert!(m.contains("hidden"), "{m}");
    }
    assert_eq!(
        list(&mut phone, None, ".git").await.unwrap_err(),
        ErrorCode::Auth
    );
    // The gateway's own data directory, inside the working directory here, is never shown.
    let (c, _) = code(read(&mut phone, "data/iris.db", 0).await);
    assert_eq!(c, ErrorCode::Auth);
    assert_eq!(
        list(&mut phone, None, "data").await.unwrap_err(),
        ErrorCode::Auth
    );
    // A FIFO is never opened: refused at once, nothing waits for a writer.
    let asked = Instant::now();
    let (c, m) = code(read(&mut phone, "pipe", 0).await);
    assert_eq!(c, ErrorCode::Unsupported, "{m}");
    assert_eq!(
        pull(&mut phone, "pipe").await.unwrap_err(),
        ErrorCode::Unsupported
    );
    assert!(asked.elapsed() < Duration::from_secs(5));
    // Neither a directory read nor a file listed; nothing missing invented.
    assert_eq!(
        code(read(&mut phone, "src", 0).await).0,
        ErrorCode::BadRequest
    );
    assert_eq!(
        list(&mut phone, None, "pic.png").await.unwrap_err(),
        ErrorCode::BadRequest
    );
    assert_eq!(
        code(read(&mut phone, "nope.txt", 0).await).0,
        ErrorCode::NotFound
    );
    // An agent without the browser, and one that does not exist.
    assert_eq!(
        list(&mut phone, Some("mail"), "").await.unwrap_err(),
        ErrorCode::Auth
    );
    assert_eq!(
        list(&mut phone, Some("ghost"), "").await.unwrap_err(),
        ErrorCode::NotFound
    );
    // The connection is still good.
    assert_eq!(
        list(&mut phone, Some("code"), "src").await.unwrap().total,
        1
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_huge_file_and_a_huge_directory_give_bounded_answers() {
    let root = tempfile::tempdir().unwrap();
    let work = lay_out(root.path());
    // 1 GiB, sparse: some text, then holes.
    let big = std::fs::File::create(work.join("big.log")).unwrap();
    std::io::Write::write_all(&mut &big, "a log line\n".repeat(30_000).as_bytes()).unwrap();
    big.set_len(1 << 30).unwrap();
    let zeros = std::fs::File::create(work.join("zeros.bin")).unwrap();
    zeros.set_len(1 << 30).unwrap();
    let many = work.join("many");
    std::fs::create_dir(&many).unwrap();
    for i in 0..100_000 {
        std::fs::File::create(many.join(format!("f{i:06}"))).unwrap();
    }
    let gw = start(root.path(), &work).await;
    let (mut phone, _) = gw.connect("phone").await;

    let head = read(&mut phone, "big.log", 0).await.unwrap();
    assert_eq!((head.kind.as_str(), head.size), ("text", 1 << 30));
    let text = head.text.unwrap();
    assert_eq!(text.len(), 256 * 1024, "a bounded head");
    assert!(text.starts_with("a log line\n"));
    assert_eq!(head.next_offset, Some(256 * 1024));
    assert_eq!(
        pull(&mut phone, "big.log").await.unwrap_err(),
        ErrorCode::MediaTooLarge
    );
    let binary = read(&mut phone, "zeros.bin", 0).await.unwrap();
    assert_eq!((binary.kind.as_str(), binary.text), ("file", None));

    let listed = list(&mut phone, None, "many").await.unwrap();
    assert!(listed.truncated);
    assert_eq!((listed.total, listed.entries.len()), (100_000, 2000));
    assert_eq!(listed.entries[0].name, "f000000");
    assert_eq!(listed.entries[1999].name, "f001999");
    gw.stop().await;
}

/// The paths of an agent's tool calls are absolute (ACP): one inside the working directory is
/// taken as its relative path, and every defence holds for it as for a relative one.
#[tokio::test]
async fn an_absolute_path_inside_the_working_directory_is_taken_as_tool_calls_name_it() {
    let root = tempfile::tempdir().unwrap();
    let work = lay_out(root.path());
    std::fs::create_dir_all(root.path().join("workshop")).unwrap();
    std::fs::write(root.path().join("workshop/notes.txt"), "beside, not inside").unwrap();
    let gw = start(root.path(), &work).await;
    let (mut phone, _) = gw.connect("phone").await;
    let abs = |rel: &str| format!("{}/{rel}", work.display());

    let file = read(&mut phone, &abs("src/main.rs"), 0)
        .await
        .expect("read");
    assert_eq!(
        file.path, "src/main.rs",
        "answered with the path in the directory"
    );
    assert!(file.text.unwrap_or_default().contains("println"));
    let listing = list(&mut phone, Some("code"), &work.to_string_lossy())
        .await
        .expect("list");
    assert_eq!(listing.path, "");
    let (header, bytes) = pull(&mut phone, &abs("pic.png")).await.expect("pull");
    assert_eq!((header.path.as_str(), bytes.as_slice()), ("pic.png", PNG));

    // A sibling whose name starts the same is outside; `..` after the prefix is refused.
    let beside = root.path().join("workshop/notes.txt");
    for path in [
        beside.to_string_lossy().into_owned(),
        abs("../outside/secret.txt"),
        abs("src/../../outside/secret.txt"),
    ] {
        let (c, m) = read(&mut phone, &path, 0).await.expect_err("refused");
        assert_eq!(c, ErrorCode::BadRequest, "{path}: {m}");
    }
    // Hidden files, symlinks out and the gateway's data directory stay refused as they are
    // by their relative paths.
    for rel in [".env", "link_out/secret.txt", "abs_link", "data"] {
        let relative = read(&mut phone, rel, 0).await.expect_err("refused").0;
        let absolute = read(&mut phone, &abs(rel), 0).await.expect_err("refused").0;
        assert_eq!(absolute, relative, "{rel}");
    }
    gw.stop().await;
}
