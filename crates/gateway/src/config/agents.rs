//! `[agents.NAME]`: several agents behind one gateway, each chat choosing one of them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::error::ConfigError;
use super::secret::Secret;

/// `[agent]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentFileConfig {
    /// The agent's command line, e.g. `"hermes acp"` or `"demo"`.
    pub command: Option<String>,
    /// The agent's working directory (default: the user's home).
    pub cwd: Option<PathBuf>,
    /// Seconds a pending approval waits for an answer before it is cancelled (default 55,
    /// below Hermes' own 60 s).
    pub approval_timeout_secs: Option<u64>,
    /// Seconds a turn may go without any output from the agent before it is cancelled
    /// (default 600).
    pub turn_idle_timeout_secs: Option<u64>,
    /// Seconds a cancelled turn has to end before the agent is restarted (default 5).
    pub cancel_grace_secs: Option<u64>,
    /// Confine every agent with Landlock where the kernel has it: no access to the data dir
    /// (default true).
    pub confine: Option<bool>,
    /// Keep one agent session open ahead of need, handed to the next new channel, thread or
    /// `/new` so that its first answer does not wait for the agent to open a session (default
    /// true). Turn it off for an agent whose idle sessions are not cheap.
    pub spare_session: Option<bool>,
    /// Whether devices may browse its working directory (`[files]`; default `[files] enabled`).
    pub files: Option<bool>,
}

/// `[agents.NAME]` in the file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedAgentFileConfig {
    /// The agent's command line, e.g. `"hermes acp"`.
    pub command: String,
    /// Its working directory (default: `[agent].cwd`, else the user's home).
    pub cwd: Option<PathBuf>,
    /// Variables set for it, on top of the gateway's environment without its `IRIS_*` variables.
    /// Values are secrets: `Debug` never prints them.
    #[serde(default)]
    pub env: BTreeMap<String, Secret>,
    /// As in `[agent]`; default: `[agent]`'s value.
    pub approval_timeout_secs: Option<u64>,
    /// As in `[agent]`; default: `[agent]`'s value.
    pub turn_idle_timeout_secs: Option<u64>,
    /// As in `[agent]`; default: `[agent]`'s value.
    pub cancel_grace_secs: Option<u64>,
    /// As in `[agent]`; default: `[agent]`'s value.
    pub spare_session: Option<bool>,
    /// Whether devices may browse its working directory (default `[files] enabled`).
    pub files: Option<bool>,
}

/// How long an agent's turns and approvals may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentTimeouts {
    /// How long a pending approval waits.
    pub approval: Duration,
    /// A turn without agent output for this long is cancelled.
    pub turn_idle: Duration,
    /// A cancelled turn that has not ended after this long restarts the agent.
    pub cancel_grace: Duration,
}

impl Default for AgentTimeouts {
    fn default() -> Self {
        AgentTimeouts {
            approval: Duration::from_secs(55),
            turn_idle: Duration::from_secs(600),
            cancel_grace: Duration::from_secs(5),
        }
    }
}

impl AgentTimeouts {
    /// `[agent]`'s timeouts, the defaults where it says nothing.
    pub fn from_file(file: &AgentFileConfig) -> AgentTimeouts {
        let d = AgentTimeouts::default();
        AgentTimeouts {
            approval: secs_or(file.approval_timeout_secs, d.approval),
            turn_idle: secs_or(file.turn_idle_timeout_secs, d.turn_idle),
            cancel_grace: secs_or(file.cancel_grace_secs, d.cancel_grace),
        }
    }
}

fn secs_or(secs: Option<u64>, default: Duration) -> Duration {
    secs.map(Duration::from_secs).unwrap_or(default)
}

/// One configured agent.
#[derive(Debug, Clone)]
pub struct NamedAgent {
    /// Its name, as chats and `/agent` call it.
    pub name: String,
    /// Its command line.
    pub command: String,
    /// Its working directory (`None`: `[agent].cwd`, else the user's home).
    pub cwd: Option<PathBuf>,
    /// Variables set for it.
    pub env: Vec<(String, Secret)>,
    /// Its timeouts.
    pub timeouts: AgentTimeouts,
    /// Whether a session is kept open ahead of need (`None`: `[agent]`'s choice).
    pub spare_session: Option<bool>,
}

/// Whether `name` can name an agent: 1 to 32 lower-case letters, digits, `-` and `_`.
pub fn valid_agent_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// Resolves the `[agents.*]` sections against `[agent]`'s timeouts.
pub fn resolve(
    sections: BTreeMap<String, NamedAgentFileConfig>,
    base: AgentTimeouts,
) -> Result<Vec<NamedAgent>, ConfigError> {
    sections
        .into_iter()
        .map(|(name, a)| {
            if !valid_agent_name(&name) {
                return Err(ConfigError::Invalid {
                    key: "agents",
                    message: format!(
                        "{name:?} is not an agent name (1-32 lower-case letters, digits, - and _)"
                    ),
                });
            }
            if a.command.trim().is_empty() {
                return Err(ConfigError::Invalid {
                    key: "agents",
                    message: format!("[agents.{name}] needs a command"),
                });
            }
            if let Some(key) = a
                .env
                .keys()
                .find(|k| k.is_empty() || k.contains(['=', '\0']))
            {
                return Err(ConfigError::Invalid {
                    key: "agents",
                    message: format!("[agents.{name}] env: {key:?} is not a variable name"),
                });
            }
            Ok(NamedAgent {
                command: a.command,
                cwd: a.cwd,
                env: a.env.into_iter().collect(),
                timeouts: AgentTimeouts {
                    approval: secs_or(a.approval_timeout_secs, base.approval),
                    turn_idle: secs_or(a.turn_idle_timeout_secs, base.turn_idle),
                    cancel_grace: secs_or(a.cancel_grace_secs, base.cancel_grace),
                },
                spare_session: a.spare_session,
                name,
            })
        })
        .collect()
}
