//! Secrets within an agent's reach, found by `doctor` and logged at every start: a configuration
//! file holding the token (or a token file) while nothing confines the agent, and the data dir
//! or a secret file inside an agent's working directory (there it depends on confinement alone,
//! and the directory above it is closed to the agent's new files).

use std::path::{Path, PathBuf};

use crate::agent::Roster;
use crate::config::Config;

/// A secret within an agent's reach: what was found, and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reachable {
    /// What was found.
    pub what: String,
    /// What to do about it.
    pub fix: String,
}

impl std::fmt::Display for Reachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.what, self.fix)
    }
}

/// What the agents of `roster` (working in `cwd` unless they have a directory of their own)
/// could reach of the gateway's secrets; one warning each.
pub fn reachable(config: &Config, roster: &Roster, cwd: &Path) -> Vec<Reachable> {
    let mut found = Vec::new();
    let confined = config.confine_agent && iris_acp::confine::landlock_abi().is_some();
    if !confined && !roster.agents.iter().all(|a| a.disabled) {
        let mut readable: Vec<String> = Vec::new();
        if let (true, Some(file)) = (config.secrets.token_in_config, &config.secrets.config_file) {
            readable.push(format!("{} (holds the token)", file.display()));
        }
        readable.extend(
            config
                .secrets
                .token_file
                .iter()
                .map(|f| f.display().to_string()),
        );
        if !readable.is_empty() {
            found.push(Reachable {
                what: format!(
                    "the agent is not confined and can read the shared token in {}",
                    readable.join(", ")
                ),
                fix: "let the gateway confine it ([agent] confine = true, a kernel with Landlock) \
                      or run the agent as another user (docs/deployment.md)"
                    .into(),
            });
        }
    }
    let dirs: Vec<(String, PathBuf)> = roster
        .agents
        .iter()
        .filter(|a| !a.disabled)
        .map(|a| {
            (
                a.name.clone(),
                a.spec.cwd.clone().unwrap_or_else(|| cwd.to_path_buf()),
            )
        })
        .collect();
    for place in config.protected_places() {
        let Ok(real) = place.canonicalize() else {
            continue;
        };
        for (agent, dir) in &dirs {
            let inside = dir.canonicalize().is_ok_and(|d| real.starts_with(&d));
            if inside {
                found.push(Reachable {
                    what: format!(
                        "{} lies inside the working directory of agent {agent} ({})",
                        place.display(),
                        dir.display()
                    ),
                    fix: "keep the gateway's files out of agents' directories (the default \
                          workspace is ~/iris-workspace): only confinement keeps the agent out \
                          of them, and it cannot make files next to them"
                        .into(),
                });
            }
        }
    }
    found
}
