//! Real Codex for integration tests: the ACP adapter `codex-acp` (npm
//! `@agentclientprotocol/codex-acp@2.6.0`, which runs the Codex binary of `@openai/codex`, an
//! optional per-platform dependency), pointed at the scripted fake Responses API in
//! `tests/codex/fake_openai_responses.py`, both inside a fresh loopback-only network namespace.
//!
//! The adapter is found in `$IRIS_CODEX_ACP` (a directory holding `node_modules/.bin/codex-acp`),
//! else in `tests/codex/adapter` of this crate, installed there from its lockfile with
//! `npm ci --prefix crates/gateway/tests/codex/adapter`. The build script (`build.rs`) looks in
//! the same places: without one, the tests that need it are ignored (cfg `has_codex_adapter`),
//! except under CI (`$CI` set), where they run and a missing adapter is a failure.
//! [`CodexEnv::new`] fails a test that runs without it.
//!
//! [`CodexEnv::command_line`] starts a launcher that enters a new network namespace, brings up
//! `lo`, starts the fake API, waits until it listens, then `exec`s the adapter with a scrubbed
//! environment: `HOME` and `CODEX_HOME` in the temp dir and the fake API's key. Codex reads the
//! rest from `$CODEX_HOME/config.toml` ([`CONFIG`]):
//!
//! - a model provider `fake` at the fake API (`wire_api = "responses"`, the only one Codex
//!   speaks), no update check, no analytics, no feedback upload;
//! - the model `fake-model`: Codex knows no metadata for it and says so in a warning at the start
//!   of the first answer, but offers it its plain tools (`exec_command` …); for the models it
//!   knows it offers only a JavaScript `exec` tool that calls the others;
//! - `approvals_reviewer = "user"` with `approval_policy = "on-request"`, and the adapter's mode
//!   `read-only` (`INITIAL_AGENT_MODE`; the adapter's own default is `agent`, in which a model
//!   reviews the approvals instead of the client): a command that asks to run outside the
//!   sandbox waits for `session/request_permission`.
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
pub const FAKE_API_PORT: u16 = 8767;

/// The model Codex asks the fake API for.
pub const MODEL: &str = "fake-model";

/// `$CODEX_HOME/config.toml`.
pub const CONFIG: &str = r#"model = "fake-model"
model_provider = "fake"
approval_policy = "on-request"
approvals_reviewer = "user"
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[model_providers.fake]
name = "Fake"
base_url = "http://127.0.0.1:8767/v1"
env_key = "FAKE_OPENAI_API_KEY"
wire_api = "responses"
"#;

const FAKE_API: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/codex/fake_openai_responses.py"
);

/// One adapter installation plus a private HOME, working directory and request log.
pub struct CodexEnv {
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

impl CodexEnv {
    /// Prepares an environment; panics, saying what is missing, without the adapter.
    pub fn new() -> CodexEnv {
        let Some(program) = find_adapter() else {
            unavailable(
                "codex-acp not found; set IRIS_CODEX_ACP to a directory with \
                 `npm install @agentclientprotocol/codex-acp@2.6.0`, or install it \
                 into crates/gateway/tests/codex/adapter",
            );
        };
        if let Err(why) = namespace_support() {
            unavailable(&format!("cannot create a network namespace: {why}"));
        }
        let root = tempfile::Builder::new()
            .prefix("iris-codex-")
            .tempdir()
            .expect("temp dir for Codex");
        let base = root.path().to_path_buf();
        let work = base.join("work");
        fs::create_dir_all(base.join("home/.codex")).expect("home dir");
        fs::create_dir_all(&work).expect("work dir");
        fs::write(base.join("home/.codex/config.toml"), CONFIG).expect("Codex config");
        let env = CodexEnv {
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
exec env -i PATH={system_path} HOME={home} CODEX_HOME={home}/.codex LANG=C.UTF-8 TERM=dumb \
    FAKE_OPENAI_API_KEY=sk-fake-key INITIAL_AGENT_MODE=read-only \
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
    let in_dir = |dir: PathBuf| dir.join("node_modules/.bin/codex-acp");
    if let Some(dir) = std::env::var_os("IRIS_CODEX_ACP").filter(|v| !v.is_empty()) {
        let program = in_dir(PathBuf::from(dir));
        assert!(
            program.exists(),
            "IRIS_CODEX_ACP has no {}",
            program.display()
        );
        return Some(program);
    }
    let local = in_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/codex/adapter"));
    local
        .exists()
        .then(|| local.canonicalize().unwrap_or(local))
}
