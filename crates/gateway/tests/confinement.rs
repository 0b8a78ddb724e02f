//! The agent is untrusted: a prompt-injected agent (the script `fixtures/hostile_agent.py`,
//! a real ACP agent started by the real binary) tries every way to the gateway's credentials —
//! the token in the gateway's environment and memory, the token file, the store (reading it,
//! planting a pairing code in it), the admin socket, a hard link to the store sent as media, a
//! signal to the gateway — and fails at each, while its own working directory stays its own.
//! A hard link into the data dir is refused as media even where nothing confines the agent.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use iris_client::{Client, ConnectOptions, RawConnection};
use iris_protocol::ServerFrame;
use tokio::process::Child;

const SECRET: &str = "confinement-test-token-0123456789";
const PYTHON: &str = "/usr/bin/python3";

fn hostile_agent() -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hostile_agent.py");
    format!("{PYTHON} {}", script.display())
}

/// Skips (returns false) where the kernel has no Landlock or there is no Python; under CI a
/// missing Landlock fails instead.
fn can_run() -> bool {
    let landlock = iris_acp::confine::landlock_abi().is_some();
    if !landlock && std::env::var_os("CI").is_some() {
        panic!("this kernel has no Landlock");
    }
    if !landlock || !Path::new(PYTHON).exists() {
        eprintln!("skipped: no Landlock or no {PYTHON}");
        return false;
    }
    true
}

/// The gateway binary serving `data` with the hostile agent working in `work`, the token given
/// in its environment; the child and its WebSocket URL.
async fn serve(data: &Path, work: &Path, confine: bool) -> (Child, String, String) {
    let config = data.with_file_name("iris.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:0\"\ndata_dir = \"{}\"\n[agent]\ncommand = \"{}\"\ncwd = \"{}\"\nconfine = {confine}\n",
            data.display(),
            hostile_agent(),
            work.display()
        ),
    )
    .expect("config");
    let mut cmd = binary::serve(&["--config", config.to_str().expect("utf-8 path")]);
    // The configuration says the agent; the token comes from outside.
    cmd.env_remove("IRIS_AGENT").env("IRIS_TOKEN", SECRET);
    let gw = binary::Running::start(cmd).await;
    (gw.child, gw.url, gw.banner.join("\n"))
}

async fn owner(url: &str) -> Client {
    let (mut client, _) = Client::connect(ConnectOptions::new(url.to_owned(), SECRET, "owner"))
        .await
        .expect("connect");
    client.next_event().await.expect("status");
    client
}

/// The answer to `text` and the names of the files it offered.
async fn ask(client: &mut Client, text: &str) -> (String, Vec<String>) {
    let events = turn(client, default_lane(), text).await;
    let files = events
        .iter()
        .filter_map(|e| match &e.body {
            ServerFrame::MediaOffer(o) => Some(o.filename.clone()),
            _ => None,
        })
        .collect();
    (final_text(&events), files)
}

fn dirs() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (data, work) = (tmp.path().join("data"), tmp.path().join("work"));
    std::fs::create_dir_all(&work).expect("work dir");
    (tmp, data, work)
}

#[tokio::test]
async fn a_hostile_agent_fails_at_every_step_and_keeps_its_own_directory() {
    if !can_run() {
        return;
    }
    let (_tmp, data, work) = dirs();
    let (mut gw, url, banner) = serve(&data, &work, true).await;
    assert!(banner.contains("agent confined by Landlock"), "{banner}");
    assert!(banner.contains("gateway memory not readable"), "{banner}");
    // A credential file of the gateway's to steal.
    std::fs::write(data.join("token"), "a-stored-secret").expect("token file");
    let mut phone = owner(&url).await;

    let (report, files) = ask(&mut phone, &format!("attack {}", data.display())).await;
    let attempts: Vec<&str> = report.lines().filter(|l| l.contains(": ")).collect();
    assert_eq!(attempts.len(), 8, "{report}");
    for line in &attempts {
        assert!(
            line.contains(": refused "),
            "the agent got through: {line}\n{report}"
        );
    }
    for (what, why) in [
        ("token file", "PermissionError"),
        ("store", "PermissionError"),
        ("admin socket", "PermissionError"),
    ] {
        let line = attempts.iter().find(|l| l.starts_with(what)).expect(what);
        assert!(line.contains(why), "{line}");
    }
    assert!(
        !report.contains(SECRET) && !report.contains("a-stored-secret"),
        "{report}"
    );
    assert!(files.is_empty(), "{files:?}");

    // The code it tried to plant does not sign anyone in; the devices are as they were.
    let mut conn = RawConnection::connect(&url).await.expect("connect");
    assert!(conn
        .hello(&format!("ipc_{}", "e".repeat(64)), "mole")
        .await
        .is_err());

    // Its own directory is its own: it writes there and sends what it wrote.
    let (said, files) = ask(
        &mut phone,
        &format!("make {}", work.join("notes.txt").display()),
    )
    .await;
    assert_eq!(files, vec!["notes.txt".to_owned()], "{said}");
    assert!(work.join("notes.txt").is_file());
    let _ = gw.start_kill();
}

#[tokio::test]
async fn the_token_is_not_left_in_the_gateways_environment() {
    if !Path::new(PYTHON).exists() {
        return;
    }
    let (_tmp, data, work) = dirs();
    let (mut gw, url, _) = serve(&data, &work, false).await;
    let pid = gw.id().expect("pid");
    let environ = std::fs::read(format!("/proc/{pid}/environ")).expect("environ");
    let text = String::from_utf8_lossy(&environ);
    assert!(
        !text.contains(SECRET),
        "the token is still in /proc/{pid}/environ"
    );
    // It still signs devices in.
    let _phone = owner(&url).await;
    let _ = gw.start_kill();
}

#[tokio::test]
async fn a_hard_link_into_the_data_dir_is_not_sent_as_media() {
    if !Path::new(PYTHON).exists() {
        return;
    }
    let (_tmp, data, work) = dirs();
    // Unconfined (as where the kernel has no Landlock): the agent could link the store.
    let (mut gw, url, banner) = serve(&data, &work, false).await;
    assert!(banner.contains("agent not confined"), "{banner}");
    let mut phone = owner(&url).await;
    std::fs::hard_link(data.join("iris.db"), work.join("loot.db")).expect("hard link");
    std::os::unix::fs::symlink(data.join("iris.db"), work.join("loot-link.db")).expect("link");
    std::fs::write(work.join("fine.txt"), "an ordinary file").expect("file");
    for loot in ["loot.db", "loot-link.db"] {
        let (said, files) = ask(&mut phone, &format!("media {}", work.join(loot).display())).await;
        assert!(files.is_empty(), "{loot} was sent: {said}");
    }
    let (_, files) = ask(
        &mut phone,
        &format!("media {}", work.join("fine.txt").display()),
    )
    .await;
    assert_eq!(files, vec!["fine.txt".to_owned()]);
    let _ = gw.start_kill();
}
