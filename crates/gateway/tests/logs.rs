//! The log an operator reads: plain lines when stderr is a file or journald (no colour codes),
//! one JSON object per line with `--log-format json`, and no warning the owner cannot act on.

#[path = "common/binary.rs"]
mod binary;

use binary::*;
use iris_client::Client;
use iris_protocol::{ClientFrame, Header, MessageSend};

/// A gateway with the demo agent, started and stopped (SIGTERM); returns its stderr.
async fn log_of_a_run(extra: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut args = vec!["--listen", "127.0.0.1:0", "--agent", "demo"];
    args.extend_from_slice(extra);
    let mut cmd = serve(&args);
    cmd.arg("--data-dir")
        .arg(&data)
        .env("IRIS_TOKEN", TOKEN)
        .env("IRIS_LOG", "info");
    let gw = Running::start(cmd).await;
    // One answered message: the agent has started and run a turn before the stop.
    let (mut phone, _) = Client::connect(gw.options(TOKEN, "phone"))
        .await
        .expect("connect");
    let send = ClientFrame::MessageSend(MessageSend {
        text: "hello".into(),
        ..Default::default()
    });
    phone
        .request(Header::lane("default", None), send)
        .await
        .expect("message.send answered");
    phone
        .wait_for(|e| e.frame_type() == "agent.idle")
        .await
        .expect("the answer ends");
    drop(phone);
    gw.stop().await
}

#[tokio::test]
async fn a_log_written_to_a_pipe_is_plain_text_without_warnings_for_nobody() {
    let log = log_of_a_run(&[]).await;
    assert!(
        log.contains("agent ready"),
        "the log says the agent is ready:\n{log}"
    );
    assert!(
        log.contains("shutting down"),
        "the log says it stops:\n{log}"
    );
    assert!(
        !log.contains('\u{1b}'),
        "no terminal colour codes in a log that is not a terminal:\n{log}"
    );
    // No device uses Safari: nothing to tell the owner about Apple's push service.
    assert!(!log.contains("Safari"), "{log}");
    assert!(
        !log.contains("WARN"),
        "a healthy start warns about nothing:\n{log}"
    );
}

#[tokio::test]
async fn log_format_json_writes_one_object_per_line() {
    // A token on the command line is warned about in the log's own format.
    let log = log_of_a_run(&["--log-format", "json", "--token", TOKEN]).await;
    let lines: Vec<serde_json::Value> = log
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: not JSON: {l}")))
        .collect();
    assert!(lines.len() >= 3, "{log}");
    for line in &lines {
        assert!(line["timestamp"].is_string(), "{line}");
        assert!(line["level"].is_string(), "{line}");
        assert!(line["fields"]["message"].is_string(), "{line}");
    }
    let ready = lines
        .iter()
        .find(|l| l["fields"]["message"] == "agent ready")
        .unwrap_or_else(|| panic!("an `agent ready` line:\n{log}"));
    assert_eq!(ready["level"], "INFO");
    let warning = lines
        .iter()
        .find(|l| l["level"] == "WARN")
        .unwrap_or_else(|| panic!("the --token warning as a JSON line:\n{log}"));
    let text = warning["fields"]["message"].as_str().unwrap();
    assert!(text.contains("visible to every user"), "{warning}");
    assert!(
        ready["fields"]["generation"].is_u64(),
        "fields stay structured: {ready}"
    );
}

#[tokio::test]
async fn an_unknown_log_format_is_refused_at_start() {
    let out = refused(serve(&["--log-format", "xml"])).await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("xml") && err.contains("json"), "{err}");
}
