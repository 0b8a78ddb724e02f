//! The real `iris-gateway` binary as a child process: its startup output, the token file, the
//! config file with flags and environment on top, refusing bad configuration and a graceful
//! SIGTERM, and `pair` naming the address the running gateway listens on. A SIGKILL in the
//! middle of traffic is in `process_kill.rs`.

#[path = "common/binary.rs"]
mod binary;

use std::os::unix::fs::PermissionsExt;

use binary::*;
use iris_client::{Client, ClientError};
use iris_protocol::{ClientFrame, ErrorCode, GatewayState, Header, MessageSend, ServerFrame};

#[tokio::test]
async fn startup_names_the_url_and_data_dir_and_health_answers() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let data_arg = data.to_str().expect("utf-8");
    let args = [
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        data_arg,
        "--token",
        TOKEN,
    ];
    let gw = Running::start(serve(&args)).await;
    assert!(
        gw.url.starts_with("ws://127.0.0.1:") && gw.url.ends_with("/ws"),
        "{}",
        gw.url
    );
    assert_eq!(
        gw.line("Data dir:").as_deref(),
        Some(data_arg),
        "{:?}",
        gw.banner
    );
    assert!(
        !gw.banner.iter().any(|l| l.contains(TOKEN)),
        "a configured token is never printed: {:?}",
        gw.banner
    );
    assert!(
        data.join("iris.db").exists(),
        "the database lives in the data dir"
    );

    let (status, body) = http_get(&gw.addr, "/healthz").await;
    assert_eq!(status, 200, "{body}");
    let health: serde_json::Value = serde_json::from_str(&body).expect("health is JSON");
    assert_eq!(health["status"], "ok", "{body}");
    let (status, _) = http_get(&gw.addr, "/nope").await;
    assert_eq!(status, 404);

    let mut client = connect(&gw, TOKEN, "phone").await;
    let echo = client
        .request(
            Header::lane("default", None),
            ClientFrame::MessageSend(MessageSend {
                text: "a secret note about tulips".into(),
                ..Default::default()
            }),
        )
        .await
        .expect("echo");
    assert!(matches!(echo.body, ServerFrame::Message(_)), "{}", echo.raw);
    let stderr = gw.stop().await;
    assert!(!stderr.contains(TOKEN), "the log never shows the token");
    assert!(
        stderr.contains("device connected"),
        "the log says what happened: {stderr}"
    );
    assert!(
        !stderr.contains("tulips"),
        "the log never shows message text: {stderr}"
    );
}

#[tokio::test]
async fn a_generated_token_is_saved_privately_and_kept_out_of_a_piped_banner() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().to_str().expect("utf-8").to_owned();
    let args = ["--listen", "127.0.0.1:0", "--data-dir", data.as_str()];

    // Stdout is a pipe here, as under systemd: the banner names the file, never the token.
    let gw = Running::start(serve(&args)).await;
    let file = tmp.path().join("token");
    let said = gw
        .line("Token:")
        .unwrap_or_else(|| panic!("no token line: {:?}", gw.banner));
    assert!(
        said.contains(&format!("saved to {}", file.display())),
        "{said}"
    );
    let token = std::fs::read_to_string(&file).expect("token file");
    let token = token.trim().to_owned();
    assert!(
        token.len() >= 32 && token.chars().all(|c| c.is_ascii_alphanumeric()),
        "token {token:?}"
    );
    assert!(
        !gw.banner.iter().any(|l| l.contains(&token)),
        "not on stdout: {:?}",
        gw.banner
    );
    let mode = std::fs::metadata(&file)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600, "the token file is private, mode {mode:o}");
    let client = connect(&gw, &token, "phone").await;
    client.close().await.expect("close");
    let stderr = gw.stop().await;
    assert!(!stderr.contains(&token), "the log never shows the token");

    let gw = Running::start(serve(&args)).await;
    assert!(
        !gw.banner.iter().any(|l| l.contains(&token)),
        "not printed again: {:?}",
        gw.banner
    );
    let client = connect(&gw, &token, "phone").await;
    client.close().await.expect("close");
    let err = Client::connect(gw.options("some-other-token", "phone"))
        .await
        .expect_err("wrong token");
    assert!(
        matches!(
            err,
            ClientError::Server {
                code: ErrorCode::Auth,
                ..
            }
        ),
        "{err}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn config_file_with_environment_and_flags_on_top() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let file_dir = tmp.path().join("from-file");
    let flag_dir = tmp.path().join("from-flag");
    let config = write_config(
        tmp.path(),
        &format!(
            "listen = \"127.0.0.1:0\"\ndata_dir = \"{}\"\ntoken = \"file-token-11111111\"\n",
            file_dir.display()
        ),
    );
    let refused_token = |gw: &Running, token: &'static str| {
        let opts = gw.options(token, "phone");
        async move {
            let err = Client::connect(opts).await.expect_err("token refused");
            assert!(
                matches!(
                    err,
                    ClientError::Server {
                        code: ErrorCode::Auth,
                        ..
                    }
                ),
                "{token}: {err}"
            );
        }
    };

    // The file alone: its listen address, data dir and token.
    let gw = Running::start(serve(&["--config", &config])).await;
    assert!(
        !gw.addr.ends_with(":8765"),
        "listen comes from the file: {}",
        gw.addr
    );
    assert_eq!(gw.line("Data dir:").as_deref(), file_dir.to_str());
    assert!(file_dir.join("iris.db").exists());
    connect(&gw, "file-token-11111111", "phone")
        .await
        .close()
        .await
        .expect("close");
    gw.stop().await;

    // IRIS_TOKEN and --data-dir override the file.
    let mut cmd = serve(&[
        "--config",
        &config,
        "--data-dir",
        flag_dir.to_str().expect("utf-8"),
    ]);
    cmd.env("IRIS_TOKEN", "env-token-22222222");
    let gw = Running::start(cmd).await;
    assert_eq!(gw.line("Data dir:").as_deref(), flag_dir.to_str());
    assert!(flag_dir.join("iris.db").exists());
    connect(&gw, "env-token-22222222", "phone")
        .await
        .close()
        .await
        .expect("close");
    refused_token(&gw, "file-token-11111111").await;
    gw.stop().await;

    // IRIS_CONFIG names the file; --token beats IRIS_TOKEN.
    let mut cmd = serve(&["--token", "flag-token-33333333"]);
    cmd.env("IRIS_CONFIG", &config)
        .env("IRIS_TOKEN", "env-token-22222222");
    let gw = Running::start(cmd).await;
    assert_eq!(gw.line("Data dir:").as_deref(), file_dir.to_str());
    connect(&gw, "flag-token-33333333", "phone")
        .await
        .close()
        .await
        .expect("close");
    refused_token(&gw, "env-token-22222222").await;
    gw.stop().await;
}

#[tokio::test]
async fn an_unknown_config_key_is_refused_in_one_line() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let config = write_config(tmp.path(), "listen = \"127.0.0.1:0\"\nbogus_key = 1\n");
    let data = tmp.path().join("data");
    let output = refused(serve(&[
        "--config",
        &config,
        "--data-dir",
        data.to_str().expect("utf-8"),
    ]))
    .await;
    let reason = one_line_reason(&output);
    assert!(
        reason.contains("bogus_key"),
        "the reason names the key: {reason}"
    );
    assert!(
        !data.exists(),
        "nothing is created before the configuration is valid"
    );
}

#[tokio::test]
async fn a_token_and_a_token_file_together_or_a_missing_token_file_are_refused_in_one_line() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let token_file = tmp.path().join("token");
    std::fs::write(&token_file, "file-token-3333333333\n").expect("write token file");
    for (name, body, names) in [
        (
            "both",
            format!(
                "listen = \"127.0.0.1:0\"\ntoken = \"conf-token-4444444444\"\ntoken_file = \"{}\"\n",
                token_file.display()
            ),
            "either token or token_file",
        ),
        (
            "missing",
            format!(
                "listen = \"127.0.0.1:0\"\ntoken_file = \"{}\"\n",
                tmp.path().join("absent").display()
            ),
            "token_file",
        ),
    ] {
        std::fs::create_dir_all(tmp.path().join(name)).expect("mkdir");
        let config = write_config(&tmp.path().join(name), &body);
        let data = tmp.path().join(name).join("data");
        let output = refused(serve(&[
            "--config",
            &config,
            "--data-dir",
            data.to_str().expect("utf-8"),
        ]))
        .await;
        let reason = one_line_reason(&output);
        assert!(reason.contains(names), "{name}: the reason says {names}: {reason}");
        assert!(
            !reason.contains("3333333333") && !reason.contains("4444444444"),
            "{name}: no token is printed: {reason}"
        );
        assert!(!data.exists(), "{name}: nothing is created");
    }
}

#[tokio::test]
async fn a_bad_listen_address_is_refused_in_one_line() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().to_str().expect("utf-8");
    for listen in ["nonsense", "127.0.0.1", "127.0.0.1:99999"] {
        let output = refused(serve(&["--listen", listen, "--data-dir", data])).await;
        let reason = one_line_reason(&output);
        assert!(
            reason.contains("listen") && reason.contains(listen),
            "{listen}: {reason}"
        );
    }
}

#[tokio::test]
async fn an_address_in_use_is_refused_in_one_line() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let data = tmp.path().to_str().expect("utf-8");
    let output = refused(serve(&["--listen", &addr, "--data-dir", data])).await;
    let reason = one_line_reason(&output);
    assert!(
        reason.contains(&addr) && reason.contains("in use"),
        "{reason}"
    );
}

#[tokio::test]
async fn a_data_dir_that_cannot_be_created_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = tmp.path().join("plain-file");
    std::fs::write(&file, "not a directory").expect("write");
    let data = file.join("data");
    let output = refused(serve(&[
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        data.to_str().expect("utf-8"),
    ]))
    .await;
    let reason = one_line_reason(&output);
    assert!(reason.contains("data dir"), "{reason}");
}

#[tokio::test]
async fn sigterm_tells_devices_it_is_restarting_and_exits_cleanly() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().to_str().expect("utf-8");
    let mut gw = Running::start(serve(&[
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        data,
        "--token",
        TOKEN,
    ]))
    .await;
    let mut a = connect(&gw, TOKEN, "phone").await;
    let mut b = connect(&gw, TOKEN, "laptop").await;
    gw.signal(libc::SIGTERM);
    for client in [&mut a, &mut b] {
        let status = client
            .wait_for(|e| matches!(&e.body, ServerFrame::Status(s) if s.state == GatewayState::Restarting))
            .await
            .expect("status restarting before the close");
        assert_eq!(status.header.id, None);
        let close = client.closed().await.expect("the socket closes");
        assert_eq!(close.map(|c| c.0), Some(1001), "closed as going away");
    }
    let status = gw.wait().await;
    assert_eq!(status.code(), Some(0), "a graceful stop exits 0");
}

/// `pair` without `--listen`, the gateway running on port 0 in the same data dir: the link
/// names the port it really listens on (asked over the admin socket); once it is stopped,
/// `pair` falls back to the configured default.
#[tokio::test]
async fn pair_names_the_port_the_running_gateway_listens_on() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let data_arg = data.to_str().expect("utf-8 path");
    let gw = Running::start(serve(&[
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        data_arg,
        "--token",
        TOKEN,
    ]))
    .await;
    let port = gw.addr.rsplit(':').next().expect("port").to_owned();
    assert_ne!(port, "8765");

    let pair = |extra: &[&str]| {
        let mut cmd = cli_command(&["pair", "--data-dir", data_arg]);
        cmd.args(extra);
        for var in ["IRIS_LISTEN", "IRIS_DATA_DIR", "IRIS_PUBLIC_URL"] {
            cmd.env_remove(var);
        }
        let out = cmd.output().expect("run pair");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let out = pair(&[]);
    assert!(
        out.contains(&format!("  WebSocket:    ws://127.0.0.1:{port}/ws\n")),
        "the running gateway's port:\n{out}"
    );
    assert!(
        out.contains(&format!("http://127.0.0.1:{port}/#token=")),
        "{out}"
    );
    assert!(!out.contains("127.0.0.1:8765"), "{out}");
    // An explicit --listen is taken at its word.
    let out = pair(&["--listen", "127.0.0.1:9999"]);
    assert!(
        out.contains("  WebSocket:    ws://127.0.0.1:9999/ws\n"),
        "{out}"
    );

    gw.stop().await;
    let out = pair(&[]);
    assert!(
        out.contains("  WebSocket:    ws://127.0.0.1:8765/ws\n"),
        "no gateway runs: the default\n{out}"
    );
}

#[tokio::test]
async fn pair_and_doctor_learn_the_running_gateways_self_signed_tls() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let data_arg = data.to_str().expect("utf-8 path");
    let gw = Running::start(serve(&[
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        data_arg,
        "--token",
        TOKEN,
        "--tls-self-signed",
    ]))
    .await;
    assert!(gw.url.starts_with("wss://"), "{:?}", gw.banner);
    assert_eq!(
        gw.line("Web:"),
        Some(format!("https://{}/", gw.addr)),
        "{:?}",
        gw.banner
    );
    let pin = gw
        .line("TLS pin:")
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| panic!("no pin line: {:?}", gw.banner));

    // Neither command is told about TLS: they ask the gateway running on the data dir.
    let (ok, out, err) = run_cli(&["pair", "--data-dir", data_arg]);
    assert!(ok, "{err}");
    assert!(
        out.contains(&format!("  WebSocket:    wss://{}/ws\n", gw.addr)),
        "{out}"
    );
    assert!(
        out.contains(&format!("https://{}/#token=", gw.addr)),
        "{out}"
    );
    assert!(out.contains(&pin), "the link carries the pin {pin}:\n{out}");
    let (_, out, err) = run_cli(&["doctor", "--data-dir", data_arg, "--agent", "none"]);
    assert!(
        out.contains(&format!("https://{} reaches the gateway", gw.addr)),
        "doctor checks the running gateway's address and TLS:\n{out}\n{err}"
    );
    gw.stop().await;
}
