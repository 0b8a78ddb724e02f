//! Real Codex for integration tests: the ACP adapter `codex-acp` (npm
//! `@agentclientprotocol/codex-acp@2.6.0`, which runs the Codex binary of `@openai/codex`, an
//! optional per-platform dependency), pointed at the scripted fake Responses API in
//! `tests/codex/fake_openai_responses.py`, both inside a fresh loopback-only network namespace.
//!
//! The adapter is found in `$IRIS_CODEX_ACP` (a directory holding `node_modules/.bin/codex-acp`),
//! else in `tests/codex/adapter` of this crate, installed there from its lockfile with
//! `(cd crates/gateway/tests/codex/adapter && npm ci)`. The build script (`build.rs`) looks in
//! the same places: without one, the tests that need it are ignored (a cfg `lacks_codex_*`),
//! except under CI (`$CI` set), where they run and a missing adapter is a failure.
//! [`CodexEnv::new`] fails a test that runs without it.
//!
//! The launcher of `npm_agent.rs`, shared with Claude Code, enters a new network namespace,
//! brings up `lo`, starts the fake API, waits until it listens, then `exec`s the adapter with a
//! scrubbed environment: `HOME` and `CODEX_HOME` in the temp dir and the fake API's key. Codex
//! reads the rest from `$CODEX_HOME/config.toml` ([`CONFIG`]):
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

use std::ops::Deref;

#[path = "npm_agent.rs"]
mod npm_agent;
#[path = "sandbox.rs"]
mod sandbox;
use npm_agent::{AgentEnv, AgentSpec};

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

/// What makes the environment Codex's.
const SPEC: AgentSpec = AgentSpec {
    bin: "codex-acp",
    package: "@agentclientprotocol/codex-acp@2.6.0",
    env_var: "IRIS_CODEX_ACP",
    dir: "codex",
    fake_api: "fake_openai_responses.py",
    port: FAKE_API_PORT,
    env: &[
        "CODEX_HOME={home}/.codex",
        "FAKE_OPENAI_API_KEY=sk-fake-key",
        "INITIAL_AGENT_MODE=read-only",
    ],
    home_files: &[(".codex/config.toml", CONFIG)],
};

/// The agent in its namespace: an [`AgentEnv`] made from [`SPEC`].
pub struct CodexEnv(AgentEnv);

impl CodexEnv {
    /// Prepares an environment; panics, saying what is missing, without the adapter.
    pub fn new() -> CodexEnv {
        CodexEnv(AgentEnv::new(&SPEC))
    }
}

impl Deref for CodexEnv {
    type Target = AgentEnv;

    fn deref(&self) -> &AgentEnv {
        &self.0
    }
}
