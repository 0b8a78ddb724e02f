//! Real Claude Code for integration tests: the ACP adapter `claude-agent-acp` (npm
//! `@agentclientprotocol/claude-agent-acp@0.101.0`, which runs the Claude Code binary of the Claude
//! agent SDK), pointed at the scripted fake Messages API in `tests/claude/fake_anthropic.py`, both
//! inside a fresh loopback-only network namespace.
//!
//! The adapter is found in `$IRIS_CLAUDE_ACP` (a directory holding
//! `node_modules/.bin/claude-agent-acp`), else in `tests/claude/adapter` of this crate, installed
//! there from its lockfile with `(cd crates/gateway/tests/claude/adapter && npm ci)`. The build
//! script (`build.rs`) looks in the same places: without one, the tests that need it are ignored
//! (a cfg `lacks_claude_*`), except under CI (`$CI` set), where they run and a missing adapter
//! is a failure. [`ClaudeEnv::new`] fails a test that runs without it.
//!
//! The launcher of `npm_agent.rs`, shared with Codex, enters a new network namespace,
//! brings up `lo`, starts the fake API, waits until it listens, then `exec`s the adapter with a
//! scrubbed environment: `HOME` in the temp dir, the fake API's address and key, and no
//! telemetry. Three more settings make Claude Code behave as the tests expect:
//!
//! - `permissions.defaultMode = "default"` in `$HOME/.claude/settings.json`: the adapter's own
//!   default is the `auto` mode, in which Claude Code decides on permissions itself (and appends
//!   a notice about its classifier to the answer) instead of asking the client;
//! - `CLAUDE_CODE_ENABLE_TODO_TOOLS=true` and `CLAUDE_CODE_ENABLE_TASKS=false`: Claude Code offers
//!   no plan tool for the fake's model otherwise, or its `Task*` tools instead of `TodoWrite`;
//! - `ENABLE_TOOL_SEARCH=false`: every tool is offered up front, not only by name behind
//!   `ToolSearch`, so the fake can call `TodoWrite` directly.
#![allow(dead_code)]

use std::ops::Deref;

#[path = "npm_agent.rs"]
mod npm_agent;
#[path = "sandbox.rs"]
mod sandbox;
use npm_agent::{AgentEnv, AgentSpec};

/// The fake API's port; every spawn has its own namespace, so it is always free.
pub const FAKE_API_PORT: u16 = 8766;

/// What makes the environment Claude Code's.
const SPEC: AgentSpec = AgentSpec {
    bin: "claude-agent-acp",
    package: "@agentclientprotocol/claude-agent-acp@0.101.0",
    env_var: "IRIS_CLAUDE_ACP",
    dir: "claude",
    fake_api: "fake_anthropic.py",
    port: FAKE_API_PORT,
    env: &[
        "ANTHROPIC_BASE_URL=http://127.0.0.1:8766",
        "ANTHROPIC_API_KEY=sk-fake-key",
        "DISABLE_TELEMETRY=1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
        "CLAUDE_CODE_ENABLE_TODO_TOOLS=true",
        "CLAUDE_CODE_ENABLE_TASKS=false",
        "ENABLE_TOOL_SEARCH=false",
    ],
    home_files: &[(
        ".claude/settings.json",
        r#"{"permissions": {"defaultMode": "default"}}"#,
    )],
};

/// The agent in its namespace: an [`AgentEnv`] made from [`SPEC`].
pub struct ClaudeEnv(AgentEnv);

impl ClaudeEnv {
    /// Prepares an environment; panics, saying what is missing, without the adapter.
    pub fn new() -> ClaudeEnv {
        ClaudeEnv(AgentEnv::new(&SPEC))
    }
}

impl Deref for ClaudeEnv {
    type Target = AgentEnv;

    fn deref(&self) -> &AgentEnv {
        &self.0
    }
}
