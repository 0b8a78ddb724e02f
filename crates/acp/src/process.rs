//! An agent as a child process: spawned in its own process group, spoken to over its
//! stdin/stdout, its stderr kept as a bounded tail, and killed as a whole group.
//!
//! The process group matters because agents are often started through wrapper scripts
//! (`sh -c`, venv launchers) that fork the real program: killing only the direct child would
//! leave the real agent running. Every process of the group dies on [`AgentProcess::kill`] and
//! when the [`AgentProcess`] is dropped.

use std::collections::VecDeque;
use std::fmt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::process::{ChildStderr, Command};
use tokio::sync::watch;

use crate::confine::{self, Confinement};
use crate::lines::{Line, LineReader};
use crate::rpc::{CloseDetail, Connection, IncomingRx};
use crate::AcpError;

/// At most this many stderr lines are kept.
const TAIL_LINES: usize = 64;
/// At most this many bytes of stderr are kept.
const TAIL_BYTES: usize = 16 * 1024;
/// Longer stderr lines are cut to this many bytes.
const STDERR_LINE_BYTES: usize = 4 * 1024;
/// How long the end of stdout waits for stderr to end too, so that the error explaining a crash
/// includes the crash's last words. Bounded because a grandchild may hold stderr open.
const STDERR_GRACE: Duration = Duration::from_millis(500);

/// How to start an agent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentSpec {
    /// The program, looked up in `PATH` when it has no slash.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its working directory; the gateway's own when `None`.
    pub cwd: Option<PathBuf>,
    /// Variables added to (or overriding) the inherited environment.
    pub env: Vec<(String, String)>,
    /// Inherited variables the agent must not see (removed before `env` is added).
    pub env_remove: Vec<String>,
    /// What the agent may not reach (see [`crate::confine`]); applied where the kernel has
    /// Landlock.
    pub confine: Option<Confinement>,
}

impl AgentSpec {
    /// A spec running `program` with no arguments.
    pub fn new(program: impl Into<String>) -> Self {
        AgentSpec {
            program: program.into(),
            ..AgentSpec::default()
        }
    }

    /// Adds an argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Sets the working directory.
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// Adds an environment variable.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Keeps an inherited environment variable from the agent.
    pub fn env_remove(mut self, key: impl Into<String>) -> Self {
        self.env_remove.push(key.into());
        self
    }
}

/// How an agent process ended.
#[derive(Debug, Clone)]
pub struct ExitInfo {
    /// The exit status; `None` if it could not be collected.
    pub status: Option<ExitStatus>,
    /// The last lines the agent wrote to stderr.
    pub stderr_tail: String,
}

impl fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.status {
            Some(status) => write!(f, "agent exited ({status})")?,
            None => write!(f, "agent exited (status unknown)")?,
        }
        if !self.stderr_tail.is_empty() {
            write!(f, "; stderr ends with:\n{}", self.stderr_tail)?;
        }
        Ok(())
    }
}

/// The last lines of a process's stderr.
#[derive(Default)]
struct StderrTail {
    lines: VecDeque<String>,
    bytes: usize,
}

impl StderrTail {
    fn push(&mut self, line: String) {
        self.bytes += line.len();
        self.lines.push_back(line);
        while self.lines.len() > TAIL_LINES || (self.bytes > TAIL_BYTES && self.lines.len() > 1) {
            if let Some(old) = self.lines.pop_front() {
                self.bytes -= old.len();
            }
        }
    }

    fn render(&self) -> String {
        self.lines
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

type SharedTail = Arc<Mutex<StderrTail>>;

fn render_tail(tail: &SharedTail) -> String {
    tail.lock().unwrap_or_else(|e| e.into_inner()).render()
}

/// A running agent process. Dropping it kills the agent's whole process group.
pub struct AgentProcess {
    pid: u32,
    connection: Connection,
    tail: SharedTail,
    stderr_done: watch::Receiver<bool>,
    exit: watch::Receiver<Option<Option<ExitStatus>>>,
}

impl fmt::Debug for AgentProcess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentProcess")
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

impl AgentProcess {
    /// Starts the agent with piped stdio in a new process group and connects to it. Must be
    /// called inside a Tokio runtime. Returns the process and the channel of messages the agent
    /// sends that are not answers (updates, permission requests).
    pub fn spawn(spec: &AgentSpec) -> Result<(AgentProcess, IncomingRx), AcpError> {
        let mut command = Command::new(&spec.program);
        for key in &spec.env_remove {
            command.env_remove(key);
        }
        command
            .args(&spec.args)
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own group, so that killing -pgid reaches everything it forks.
            .process_group(0);
        if let Some(cwd) = &spec.cwd {
            command.current_dir(cwd);
        }
        let spawn_error = |source| AcpError::Spawn {
            program: spec.program.clone(),
            source,
        };
        // Built here, applied in the child between fork and exec; kept open until the spawn.
        let ruleset = match &spec.confine {
            Some(confinement) => confine::prepare(confinement).map_err(spawn_error)?,
            None => None,
        };
        if let Some(ruleset) = &ruleset {
            let fd = ruleset.raw();
            // SAFETY: the closure only makes two system calls (see `confine::restrict_self`).
            unsafe {
                command.pre_exec(move || confine::restrict_self(fd));
            }
        }
        let mut child = command.spawn().map_err(spawn_error)?;
        drop(ruleset);
        let (Some(pid), Some(stdin), Some(stdout), Some(stderr)) = (
            child.id(),
            child.stdin.take(),
            child.stdout.take(),
            child.stderr.take(),
        ) else {
            // Unreachable with piped stdio and a fresh child; still, do not leak the process.
            let _ = child.start_kill();
            return Err(spawn_error(std::io::Error::other(
                "child stdio unavailable",
            )));
        };
        tracing::info!(pid, program = %spec.program, "agent started");

        let tail = SharedTail::default();
        let (stderr_done_tx, stderr_done) = watch::channel(false);
        tokio::spawn(collect_stderr(pid, stderr, tail.clone(), stderr_done_tx));

        let (exit_tx, exit) = watch::channel(None);
        tokio::spawn(async move {
            let status = match child.wait().await {
                Ok(status) => Some(status),
                Err(e) => {
                    tracing::warn!(pid, error = %e, "cannot collect agent exit status");
                    None
                }
            };
            tracing::info!(pid, status = ?status, "agent exited");
            exit_tx.send_replace(Some(status));
        });

        let detail: CloseDetail = {
            let tail = tail.clone();
            let stderr_done = stderr_done.clone();
            Box::pin(async move {
                wait_stderr(stderr_done).await;
                render_tail(&tail)
            })
        };
        let (connection, incoming) = Connection::with_close_detail(stdout, stdin, Some(detail));
        Ok((
            AgentProcess {
                pid,
                connection,
                tail,
                stderr_done,
                exit,
            },
            incoming,
        ))
    }

    /// The agent's process id, which is also its process group id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The JSON-RPC connection over the agent's stdin/stdout.
    pub fn connection(&self) -> &Connection {
        &self.connection
    }

    /// The last lines the agent wrote to stderr so far.
    pub fn stderr_tail(&self) -> String {
        render_tail(&self.tail)
    }

    /// Waits for the agent to exit; returns its status and stderr tail.
    pub async fn wait_exit(&self) -> ExitInfo {
        let mut exit = self.exit.clone();
        // The sender is dropped only after sending, so the value is always there at the end.
        let status = match exit.wait_for(Option::is_some).await {
            Ok(status) => status.flatten(),
            Err(_) => None,
        };
        wait_stderr(self.stderr_done.clone()).await;
        ExitInfo {
            status,
            stderr_tail: self.stderr_tail(),
        }
    }

    /// The exit, if the agent has already exited.
    pub fn try_exit(&self) -> Option<ExitInfo> {
        let status = (*self.exit.borrow())?;
        Some(ExitInfo {
            status,
            stderr_tail: self.stderr_tail(),
        })
    }

    /// Sends SIGKILL to the agent's whole process group. Returns at once; use
    /// [`AgentProcess::wait_exit`] to wait for the exit.
    pub fn kill(&self) {
        kill_group(self.pid);
    }

    /// Ends the agent gently: end of input first (a well-behaved ACP agent exits when its input
    /// ends), then SIGTERM to its process group after `grace`, then SIGKILL after another
    /// `grace`. Returns how it exited.
    pub async fn terminate(&self, grace: Duration) -> ExitInfo {
        let _ = self.connection.close_output();
        if let Ok(info) = tokio::time::timeout(grace, self.wait_exit()).await {
            return info;
        }
        signal_group(self.pid, libc::SIGTERM);
        if let Ok(info) = tokio::time::timeout(grace, self.wait_exit()).await {
            return info;
        }
        kill_group(self.pid);
        self.wait_exit().await
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        kill_group(self.pid);
    }
}

fn kill_group(pid: u32) {
    if signal_group(pid, libc::SIGKILL) {
        tracing::debug!(pid, "killed agent process group");
    }
}

/// Sends `signal` to the agent's process group; true when it was delivered.
fn signal_group(pid: u32, signal: libc::c_int) -> bool {
    let Ok(pgid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill(2) has no memory-safety preconditions. A negative pid addresses the process
    // group created for the agent; ESRCH (group already gone) is expected and ignored.
    unsafe { libc::kill(-pgid, signal) == 0 }
}

async fn wait_stderr(mut done: watch::Receiver<bool>) {
    let _ = tokio::time::timeout(STDERR_GRACE, done.wait_for(|done| *done)).await;
}

async fn collect_stderr(
    pid: u32,
    stderr: ChildStderr,
    tail: SharedTail,
    done: watch::Sender<bool>,
) {
    let mut lines = LineReader::new(stderr, STDERR_LINE_BYTES);
    loop {
        let text = match lines.next_line().await {
            Ok(Some(Line::Complete(bytes))) => String::from_utf8_lossy(&bytes).into_owned(),
            Ok(Some(Line::Oversized(bytes))) => format!("{}…", String::from_utf8_lossy(&bytes)),
            Ok(None) => break,
            Err(e) => {
                tracing::debug!(pid, error = %e, "agent stderr unreadable");
                break;
            }
        };
        let text = text.trim_end_matches('\r').to_owned();
        tracing::debug!(pid, line = %text, "agent stderr");
        tail.lock().unwrap_or_else(|e| e.into_inner()).push(text);
    }
    done.send_replace(true);
}
