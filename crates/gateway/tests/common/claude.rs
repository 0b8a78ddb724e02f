//! Real Claude Code for integration tests: the ACP adapter `claude-agent-acp` (npm
//! `@agentclientprotocol/claude-agent-acp@0.101.0`, which runs the Claude Code binary of the Claude
//! agent SDK), pointed at the scripted fake Messages API in `tests/claude/fake_anthropic.py`, both
//! inside a fresh loopback-only network namespace.
//!
//! The adapter is found in `$IRIS_CLAUDE_ACP` (a directory holding
//! `node_modules/.bin/claude-agent-acp`), else in `tests/claude/adapter` of this crate, installed
//! there from its lockfile with `npm ci --prefix crates/gateway/tests/claude/adapter`. The build
//! script (`build.rs`) looks in the same places: without one, the tests that need it are ignored
//! (cfg `has_claude_adapter`), except under CI (`$CI` set), where they run and a missing adapter
//! is a failure. [`ClaudeEnv::new`] fails a test that runs without it.
//!
//! [`ClaudeEnv::command_line`] starts a launcher that enters a new network namespace, brings up
//! `lo`, starts the fake API, waits until it listens, then `exec`s the adapter with a scrubbed
//! environment: `HOME` in the temp dir, the fake API's address and key, and no telemetry. Three
//! more settings make Claude Code behave as the tests expect:
//!
//! - `permissions.defaultMode = "default"` in `$HOME/.claude/settings.json`: the adapter's own
//!   default is the `auto` mode, in which Claude Code decides on permissions itself (and appends
//!   a notice about its classifier to the answer) instead of asking the client;
//! - `CLAUDE_CODE_ENABLE_TODO_TOOLS=true` and `CLAUDE_CODE_ENABLE_TASKS=false`: Claude Code offers
//!   no plan tool for the fake's model otherwise, or its `Task*` tools instead of `TodoWrite`;
//! - `ENABLE_TOOL_SEARCH=false`: every tool is offered up front, not only by name behind
//!   `ToolSearch`, so the fake can call `TodoWrite` directly.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tempfile::TempDir;

#[path = "sandbox.rs"]
mod sandbox;
use sandbox::{
    is_root, namespace_support, shell_quote, unavailable, wait_until_ready, SYSTEM_PATH,
};

/// The fake API's port; every spawn has its own namespace, so it is always free.
pub const FAKE_API_PORT: u16 = 8766;

const FAKE_API: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/claude/fake_anthropic.py"
);
const WORKSPACE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// One adapter installation plus a private HOME, working directory and request log.
pub struct ClaudeEnv {
    /// Root of everything this environment writes; removed on drop.
    pub root: TempDir,
    /// The adapter's program.
    pub program: PathBuf,
    /// A directory to use as the agent's cwd.
    pub work: PathBuf,
    log: PathBuf,
    launcher: PathBuf,
    fake_stderr: PathBuf,
}

impl ClaudeEnv {
    /// Prepares an environment; panics, saying what is missing, without the adapter.
    pub fn new() -> ClaudeEnv {
        let Some(program) = find_adapter() else {
            unavailable(
                "claude-agent-acp not found; set IRIS_CLAUDE_ACP to a directory with \
                 `npm install @agentclientprotocol/claude-agent-acp@0.101.0`, or install it \
                 into crates/gateway/tests/claude/adapter",
            );
        };
        if let Err(why) = namespace_support() {
            unavailable(&format!("cannot create a network namespace: {why}"));
        }
        let root = tempfile::Builder::new()
            .prefix("iris-claude-")
            .tempdir()
            .expect("temp dir for Claude Code");
        let base = root.path().to_path_buf();
        let work = base.join("work");
        fs::create_dir_all(base.join("home/.claude")).expect("home dir");
        fs::create_dir_all(&work).expect("work dir");
        fs::write(
            base.join("home/.claude/settings.json"),
            r#"{"permissions": {"defaultMode": "default"}}"#,
        )
        .expect("Claude Code settings");
        let env = ClaudeEnv {
            program,
            work,
            log: base.join("api-requests.jsonl"),
            launcher: base.join("launch.sh"),
            fake_stderr: base.join("fake-api.stderr"),
            root,
        };
        env.write_launchers();
        env
    }

    /// The agent's command line.
    pub fn command_line(&self) -> String {
        format!("sh {}", shell_quote(&self.launcher.to_string_lossy()))
    }

    /// Every request the fake API received, one JSON object each.
    pub fn requests(&self) -> Vec<Value> {
        fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// The fake API's stderr, for failure messages.
    pub fn fake_api_stderr(&self) -> String {
        fs::read_to_string(&self.fake_stderr).unwrap_or_default()
    }

    fn write_launchers(&self) {
        let base = self.root.path();
        let inner = base.join("inner.sh");
        let ready = base.join("fake-api.ready");
        let q = |p: &Path| shell_quote(&p.to_string_lossy());
        let inner_script = format!(
            r#"#!/bin/sh
# Inside a fresh network namespace: loopback only.
set -e
PATH={system_path}
export PATH
ip link set lo up
rm -f {ready}
python3 {fake} --port {port} --log {log} --ready-file {ready} --parent-pid $$ \
    </dev/null >/dev/null 2>>{fake_stderr} &
{wait}
cd {work}
exec env -i PATH={system_path} HOME={home} LANG=C.UTF-8 TERM=dumb \
    ANTHROPIC_BASE_URL=http://127.0.0.1:{port} ANTHROPIC_API_KEY=sk-fake-key \
    DISABLE_TELEMETRY=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
    CLAUDE_CODE_ENABLE_TODO_TOOLS=true CLAUDE_CODE_ENABLE_TASKS=false ENABLE_TOOL_SEARCH=false \
    {program}
"#,
            system_path = SYSTEM_PATH,
            wait = wait_until_ready(&q(&ready), "fake API"),
            ready = q(&ready),
            fake = q(Path::new(FAKE_API)),
            port = FAKE_API_PORT,
            log = q(&self.log),
            fake_stderr = q(&self.fake_stderr),
            work = q(&self.work),
            home = q(&base.join("home")),
            program = q(&self.program),
        );
        fs::write(&inner, inner_script).expect("write inner launcher");
        let unshare = if is_root() {
            "unshare -n"
        } else {
            "unshare -r -n"
        };
        let outer = format!(
            "#!/bin/sh\nPATH={SYSTEM_PATH}:$PATH\nexport PATH\nexec {unshare} sh {}\n",
            q(&inner)
        );
        fs::write(&self.launcher, outer).expect("write launcher");
    }
}

fn find_adapter() -> Option<PathBuf> {
    let in_dir = |dir: PathBuf| dir.join("node_modules/.bin/claude-agent-acp");
    if let Some(dir) = std::env::var_os("IRIS_CLAUDE_ACP").filter(|v| !v.is_empty()) {
        let program = in_dir(PathBuf::from(dir));
        assert!(
            program.exists(),
            "IRIS_CLAUDE_ACP has no {}",
            program.display()
        );
        return Some(program);
    }
    let local = in_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/claude/adapter"));
    local
        .exists()
        .then(|| local.canonicalize().unwrap_or(local))
}
