//! Agent child processes: stdio wiring, stderr tail, exit, and process-group kill.

use std::os::unix::process::ExitStatusExt;

use iris_acp::rpc::Incoming;
use iris_acp::{AcpError, AgentProcess, AgentSpec};
use serde_json::json;

fn sh(script: &str) -> AgentSpec {
    AgentSpec::new("sh").arg("-c").arg(script)
}

/// True when `pid` has exited or is exiting: absent, a zombie, or flagged `PF_EXITING`. The last
/// case matters because the kernel closes a dying process's files (which is what the tests wait
/// for) before the process turns into a zombie.
fn is_dead(pid: u32) -> bool {
    const PF_EXITING: u64 = 0x4;
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    // Fields after the parenthesised command name: state, ppid, pgrp, session, tty, tpgid, flags.
    let Some((_, rest)) = stat.rsplit_once(") ") else {
        return true;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let flags: u64 = fields.get(6).and_then(|f| f.parse().ok()).unwrap_or(0);
    matches!(fields.first(), Some(&"Z" | &"X")) || flags & PF_EXITING != 0
}

#[tokio::test]
async fn stdio_env_and_cwd_reach_the_agent() {
    let dir = tempfile::tempdir().unwrap();
    let dir_path = dir.path().canonicalize().unwrap();
    let script = r#"printf '{"jsonrpc":"2.0","method":"hello","params":{"v":"%s","cwd":"%s"}}\n' "$IRIS_TEST_VALUE" "$(pwd -P)"
read line
printf '%s\n' "$line" | sed 's/"method":"echo"/"result":"echoed","x":0/'"#;
    let spec = sh(script).cwd(&dir_path).env("IRIS_TEST_VALUE", "42");
    let (process, mut incoming) = AgentProcess::spawn(&spec).unwrap();
    assert!(process.pid() > 0);

    let Some(Incoming::Notification { method, params }) = incoming.recv().await else {
        panic!("expected hello")
    };
    assert_eq!(method, "hello");
    assert_eq!(
        params,
        json!({"v": "42", "cwd": dir_path.to_str().unwrap()})
    );

    let answer = process
        .connection()
        .request("echo", json!({}))
        .await
        .unwrap();
    assert_eq!(answer, "echoed");
    let exit = process.wait_exit().await;
    assert_eq!(exit.status.and_then(|s| s.code()), Some(0));
}

#[tokio::test]
async fn a_dying_agent_fails_pending_requests_with_its_stderr_tail() {
    let script = "echo starting >&2; read a; read b; echo 'fatal: no model configured' >&2; exit 7";
    let (process, mut incoming) = AgentProcess::spawn(&sh(script)).unwrap();
    let conn = process.connection().clone();
    let (first, second) = tokio::join!(
        conn.request("initialize", json!({})),
        conn.request("session/new", json!({}))
    );
    for result in [first, second] {
        match result {
            Err(AcpError::Closed { stderr_tail }) => {
                assert!(
                    stderr_tail.contains("fatal: no model configured"),
                    "tail: {stderr_tail:?}"
                );
                assert!(stderr_tail.starts_with("starting"));
            }
            other => panic!("expected Closed, got {other:?}"),
        }
    }
    assert!(
        incoming.recv().await.is_none(),
        "incoming ends with the process"
    );
    let exit = process.wait_exit().await;
    assert_eq!(exit.status.and_then(|s| s.code()), Some(7));
    assert!(exit.stderr_tail.ends_with("fatal: no model configured"));
    assert!(exit.to_string().contains("fatal: no model configured"));
    assert!(process.try_exit().is_some());
}

#[tokio::test]
async fn stderr_tail_is_bounded() {
    let script = "i=0; while [ $i -lt 500 ]; do echo \"line $i\" >&2; i=$((i+1)); done";
    let (process, _incoming) = AgentProcess::spawn(&sh(script)).unwrap();
    let exit = process.wait_exit().await;
    let lines: Vec<&str> = exit.stderr_tail.lines().collect();
    assert_eq!(lines.len(), 64);
    assert_eq!(lines.last(), Some(&"line 499"));
}

/// Starts `sh` that forks a long `sleep` (sharing its stdout) and reports the sleep's pid.
async fn agent_with_grandchild() -> (AgentProcess, u32) {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("grandchild.pid");
    let script = r#"sleep 1000 & echo $! > "$0"; echo '{"jsonrpc":"2.0","method":"ready"}'; wait"#;
    let spec = AgentSpec::new("sh")
        .arg("-c")
        .arg(script)
        .arg(pidfile.to_str().unwrap());
    let (process, mut incoming) = AgentProcess::spawn(&spec).unwrap();
    let Some(Incoming::Notification { method, .. }) = incoming.recv().await else {
        panic!("expected ready")
    };
    assert_eq!(method, "ready");
    let grandchild: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!is_dead(grandchild));
    (process, grandchild)
}

#[tokio::test]
async fn kill_takes_the_whole_process_group() {
    let (process, grandchild) = agent_with_grandchild().await;
    process.kill();
    let exit = process.wait_exit().await;
    assert_eq!(exit.status.and_then(|s| s.signal()), Some(libc::SIGKILL));
    // The grandchild holds the stdout pipe too: the connection closes only once it is dead.
    process.connection().closed().await;
    assert!(is_dead(grandchild), "grandchild {grandchild} survived");
}

#[tokio::test]
async fn dropping_the_process_kills_the_group() {
    let (process, grandchild) = agent_with_grandchild().await;
    let conn = process.connection().clone();
    drop(process);
    conn.closed().await;
    assert!(is_dead(grandchild), "grandchild {grandchild} survived");
}

#[tokio::test]
async fn a_missing_program_is_a_spawn_error() {
    let err = AgentProcess::spawn(&AgentSpec::new("/nonexistent/iris-agent")).unwrap_err();
    assert!(
        matches!(err, AcpError::Spawn { ref program, .. } if program == "/nonexistent/iris-agent"),
        "{err}"
    );
}

#[tokio::test]
async fn terminate_ends_input_first_then_signals_the_group() {
    use std::time::Duration;
    let grace = Duration::from_millis(200);
    // An agent that exits when its input ends never sees a signal.
    let (reader, _incoming) = AgentProcess::spawn(&sh("cat >/dev/null; exit 7")).unwrap();
    let exit = reader.terminate(grace).await;
    assert_eq!(exit.status.and_then(|s| s.code()), Some(7), "{exit}");
    // One that ignores its input gets SIGTERM.
    let (sleeper, _incoming) = AgentProcess::spawn(&sh("exec sleep 1000")).unwrap();
    let exit = sleeper.terminate(grace).await;
    const SIGTERM: i32 = 15;
    assert_eq!(
        exit.status.and_then(|s| s.signal()),
        Some(SIGTERM),
        "{exit}"
    );
    // One that ignores SIGTERM too is killed.
    let (stubborn, _incoming) =
        AgentProcess::spawn(&sh("trap '' TERM; while :; do sleep 1; done")).unwrap();
    let exit = stubborn.terminate(grace).await;
    const SIGKILL: i32 = 9;
    assert_eq!(
        exit.status.and_then(|s| s.signal()),
        Some(SIGKILL),
        "{exit}"
    );
}
