//! `iris-gateway doctor` against a running gateway: a healthy setup is all `ok` and exits 0;
//! a data dir open to others, an address that does not lead to the gateway, and an agent that
//! does not start are each one `FAIL` line saying what to do, and the command exits 1; a secret
//! within an agent's reach is a `warn` line.

mod common;

use std::os::unix::fs::PermissionsExt;

use common::*;

/// Runs `doctor` beside `gw` with `extra` arguments: success and stdout.
async fn doctor(gw: &TestGateway, extra: &[&str]) -> (bool, String) {
    let addr = gw
        .url
        .strip_prefix("ws://")
        .and_then(|r| r.strip_suffix("/ws"))
        .expect("ws url")
        .to_owned();
    let dir = gw.dir.to_string_lossy().into_owned();
    let mut args: Vec<String> = ["doctor", "--data-dir", &dir, "--listen", &addr]
        .map(str::to_owned)
        .to_vec();
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    let (ok, out, err) = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run_cli(&args)
    })
    .await
    .expect("doctor ran");
    assert!(!err.contains("panicked"), "{err}");
    (ok, out)
}

#[tokio::test]
async fn a_healthy_setup_is_all_ok() {
    let gw = TestGateway::start_demo().await;
    let (ok, out) = doctor(&gw, &["--agent", "demo"]).await;
    assert!(ok, "{out}");
    // The one thing to say of a test gateway: it listens on loopback, where no phone comes.
    let not_ok: Vec<&str> = out.lines().filter(|l| !l.starts_with("ok  ")).collect();
    assert_eq!(not_ok.len(), 1, "{out}");
    assert!(
        not_ok[0].starts_with("warn") && not_ok[0].contains("this machine only"),
        "{out}"
    );
    for expected in [
        "is private",
        "reaches the gateway",
        "a WebSocket upgrade through ws://127.0.0.1:",
        "agent demo starts and speaks ACP",
    ] {
        assert!(out.contains(expected), "{expected:?} missing in:\n{out}");
    }
    gw.stop().await;
}

#[tokio::test]
async fn each_broken_piece_is_one_failure_with_its_fix() {
    let gw = TestGateway::start_demo().await;
    std::fs::set_permissions(&gw.dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    // A port nothing listens on, as a public_url that leads nowhere.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let nowhere = format!("http://{}", closed.local_addr().expect("addr"));
    drop(closed);
    let (ok, out) = doctor(&gw, &["--agent", "false", "--public-url", &nowhere]).await;
    assert!(!ok, "exit 1 when something is broken:\n{out}");
    let fails: Vec<&str> = out.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert_eq!(fails.len(), 3, "{out}");
    assert!(
        fails[0].contains("open to other users") && fails[0].contains("chmod 700"),
        "{out}"
    );
    assert!(
        fails[1].contains("cannot reach") && fails[1].contains("is the gateway running"),
        "{out}"
    );
    assert!(
        fails[2].contains("agent false") && fails[2].contains("does not start"),
        "{out}"
    );
    std::fs::set_permissions(&gw.dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    gw.stop().await;
}

#[tokio::test]
async fn a_token_an_unconfined_agent_can_read_and_the_data_dir_in_its_directory_are_warnings() {
    let gw = TestGateway::start_demo().await;
    // The owner's config file holds the token and lets the agent run unconfined, in a
    // directory that holds the gateway's data dir.
    let home = gw.dir.parent().expect("a parent").to_path_buf();
    let etc = tempfile::tempdir().expect("tmp");
    let config = etc.path().join("iris.toml");
    std::fs::write(
        &config,
        format!(
            "token = \"{TOKEN}\"\n[agent]\nconfine = false\ncwd = \"{}\"\n",
            home.display()
        ),
    )
    .expect("config");
    let config = config.to_string_lossy().into_owned();
    let (ok, out) = doctor(&gw, &["--config", &config, "--agent", "demo"]).await;
    assert!(ok, "warnings alone do not fail doctor:\n{out}");
    let warnings: Vec<&str> = out.lines().filter(|l| l.starts_with("warn")).collect();
    assert!(
        warnings.iter().any(|l| l.contains("not confined")
            && l.contains(&config)
            && l.contains("holds the token")),
        "the token in the config file is named:\n{out}"
    );
    assert!(
        warnings
            .iter()
            .any(|l| l.contains(&gw.dir.display().to_string())
                && l.contains("inside the working directory")),
        "the data dir inside the agent's directory is named:\n{out}"
    );
    assert!(
        !out.contains(TOKEN),
        "the token itself is never printed:\n{out}"
    );
    gw.stop().await;
}
