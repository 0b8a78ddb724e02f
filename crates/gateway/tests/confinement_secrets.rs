//! The confined agent against the gateway's secrets outside the data dir and against the media
//! store: a hostile ACP agent (`fixtures/hostile_agent.py`) started by the real binary tries to
//! read and rewrite the configuration file (to switch confinement off) and the token file it
//! names, and to read uploads of the media store that were not attached to its prompts; each
//! attempt fails while the file attached to its prompt and its own directory stay readable. The
//! gateway runs as `nobody` when the test runs as root (dropped with `setpriv`), so that no
//! check passes only because root bypasses file permissions.

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use common::media::{sha, upload_ok};
use common::*;
use iris_client::{Client, ConnectOptions};
use tokio::process::Child;

const PYTHON: &str = "/usr/bin/python3";
const SECRET: &str = "token-from-the-token-file-0123456789";

/// The places of one gateway: `etc/iris.toml` naming `etc/token`, `work` for the agent, `data`.
struct Setup {
    _tmp: tempfile::TempDir,
    config: PathBuf,
    token: PathBuf,
    work: PathBuf,
    data: PathBuf,
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Hands a tree to `nobody` (when running as root), as its owner would hold it.
fn give_away(path: &Path) {
    if !is_root() {
        return;
    }
    std::os::unix::fs::lchown(path, Some(65534), Some(65534)).expect("chown");
    if path.is_dir() && !path.is_symlink() {
        for entry in std::fs::read_dir(path).expect("dir") {
            give_away(&entry.expect("entry").path());
        }
    }
}

fn setup() -> Setup {
    assert!(
        iris_acp::confine::landlock_abi().is_some(),
        "this kernel has no Landlock"
    );
    assert!(Path::new(PYTHON).exists(), "no {PYTHON}");
    let tmp = tempfile::tempdir().expect("tmp");
    let (etc, work) = (tmp.path().join("etc"), tmp.path().join("work"));
    for dir in [&etc, &work, &tmp.path().join("home")] {
        std::fs::create_dir_all(dir).expect("dir");
    }
    let (config, token, data) = (
        etc.join("iris.toml"),
        etc.join("token"),
        tmp.path().join("data"),
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hostile_agent.py");
    std::fs::write(&token, SECRET).expect("token");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:0\"\ndata_dir = \"{}\"\ntoken_file = \"{}\"\n\
             [agent]\ncommand = \"{PYTHON} {}\"\ncwd = \"{}\"\nconfine = true\n\
             [voice]\nkey = \"voice-key-in-the-config\"\n",
            data.display(),
            token.display(),
            script.display(),
            work.display()
        ),
    )
    .expect("config");
    std::fs::write(work.join("fine.txt"), "the agent's own file").expect("file");
    give_away(tmp.path());
    Setup {
        _tmp: tmp,
        config,
        token,
        work,
        data,
    }
}

/// The gateway binary, as `nobody` when the test is root; the child and its WebSocket URL.
async fn serve(s: &Setup) -> (Child, String, String) {
    let nobody = [
        "setpriv",
        "--reuid=nobody",
        "--regid=nogroup",
        "--clear-groups",
    ];
    let wrapper: &[&str] = if is_root() { &nobody } else { &[] };
    let config = s.config.to_str().expect("utf-8 path");
    let mut command = binary::serve_through(wrapper, &["--config", config]);
    // The configuration says the agent and the token file.
    command
        .env("HOME", s.data.with_file_name("home"))
        .env_remove("IRIS_AGENT");
    let gw = binary::Running::start(command).await;
    if is_root() {
        let uid = std::fs::metadata(format!("/proc/{}", gw.pid))
            .expect("proc")
            .uid();
        assert_eq!(uid, 65534, "the gateway is not running as nobody");
    }
    (gw.child, gw.url, gw.banner.join("\n"))
}

async fn owner(url: &str) -> Client {
    let (mut client, _) = Client::connect(ConnectOptions::new(url.to_owned(), SECRET, "owner"))
        .await
        .expect("connect with the token of the token file");
    client.next_event().await.expect("status");
    client
}

async fn ask(client: &mut Client, text: &str) -> String {
    final_text(&turn(client, default_lane(), text).await)
}

#[tokio::test]
#[cfg_attr(
    lacks_setpriv_setpriv,
    ignore = "needs setpriv (util-linux) to run the gateway as an ordinary user"
)]
async fn a_confined_agent_cannot_read_or_rewrite_the_config_or_the_token_file() {
    let s = setup();
    let (mut gw, url, banner) = serve(&s).await;
    assert!(banner.contains("agent confined by Landlock"), "{banner}");
    let mut phone = owner(&url).await;
    let config_before = std::fs::read(&s.config).expect("config");
    for file in [&s.config, &s.token, &s.data.join("iris.db")] {
        let said = ask(&mut phone, &format!("read {}", file.display())).await;
        assert!(
            said.starts_with("read: refused PermissionError"),
            "{file:?}: {said}"
        );
        let said = ask(&mut phone, &format!("write {}", file.display())).await;
        assert!(
            said.starts_with("write: refused PermissionError"),
            "{file:?}: {said}"
        );
    }
    assert_eq!(std::fs::read(&s.config).expect("config"), config_before);
    assert_eq!(std::fs::read_to_string(&s.token).expect("token"), SECRET);
    let said = ask(
        &mut phone,
        &format!("read {}", s.work.join("fine.txt").display()),
    )
    .await;
    assert!(said.starts_with("read: got"), "{said}");
    let said = ask(
        &mut phone,
        &format!("write {}", s.work.join("fine.txt").display()),
    )
    .await;
    assert!(
        said.starts_with("write: wrote") || said.starts_with("write: got"),
        "{said}"
    );
    let _ = gw.start_kill();
}

#[tokio::test]
#[cfg_attr(
    lacks_setpriv_setpriv,
    ignore = "needs setpriv (util-linux) to run the gateway as an ordinary user"
)]
async fn a_confined_agent_reads_the_files_attached_to_its_prompts_and_no_other_upload() {
    let s = setup();
    let (mut gw, url, _) = serve(&s).await;
    let mut phone = owner(&url).await;
    let (mine, other) = (
        b"attached to the prompt\n".to_vec(),
        b"another upload\n".to_vec(),
    );
    upload_ok(&mut phone, "r1", "text/plain", "mine.txt", &mine).await;
    upload_ok(&mut phone, "r2", "text/plain", "other.txt", &other).await;
    common::media::send_with(&mut phone, default_lane(), "attached", &["r1"])
        .await
        .expect("send");
    let said = final_text(&common::media::until_idle(&mut phone).await);
    let line = said.lines().next().unwrap_or_default().to_owned();
    assert!(line.contains(": got 23 bytes"), "{said}");
    assert!(
        line.contains("/attached/"),
        "not through the agent's own links: {said}"
    );
    for content in [&mine, &other] {
        let h = sha(content);
        let blob = s.data.join("media").join(&h[..2]).join(&h);
        assert!(blob.is_file(), "{blob:?}");
        let said = ask(&mut phone, &format!("read {}", blob.display())).await;
        assert!(said.starts_with("read: refused PermissionError"), "{said}");
    }
    let _ = gw.start_kill();
}
