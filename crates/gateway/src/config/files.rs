//! `[files]`: the file browser, a read-only look at each agent's working directory, and which
//! agents have it (`[agent] files`, `[agents.NAME] files`).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::agents::{AgentFileConfig, NamedAgentFileConfig};
use super::error::ConfigError;

/// `[files]` in the file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilesFileConfig {
    /// Whether devices may browse the agents' working directories (default true); `[agent]
    /// files` and `[agents.NAME] files` decide per agent.
    pub enabled: Option<bool>,
    /// List and read `.git` and secret files (`.env`, keys, …) too (default false).
    pub show_hidden: Option<bool>,
    /// Entries one `files.list` answers with, the first in order (default 2000).
    pub max_entries: Option<usize>,
    /// Bytes of text one `files.read` answers with (default 256 KiB).
    pub max_read_bytes: Option<usize>,
    /// Largest file `files.pull` streams (default: `[media] max_upload_bytes`, 100 MiB).
    pub max_pull_bytes: Option<u64>,
}

/// The file browser's settings.
#[derive(Debug, Clone)]
pub struct FilesConfig {
    /// `[files] enabled`: the default for every agent.
    pub enabled: bool,
    /// `[agent] files`: the choice for the agents without a section of their own (the
    /// `--agent` one, `demo`).
    pub agent: Option<bool>,
    /// `[agents.NAME] files`, per named agent that says.
    pub per_agent: BTreeMap<String, bool>,
    /// List and read hidden entries too.
    pub show_hidden: bool,
    /// Entries one listing holds at most.
    pub max_entries: usize,
    /// Bytes of text one read holds at most.
    pub max_read_bytes: usize,
    /// Largest file a pull streams (`None`: `[media] max_upload_bytes`).
    pub max_pull_bytes: Option<u64>,
}

impl Default for FilesConfig {
    fn default() -> Self {
        FilesConfig {
            enabled: true,
            agent: None,
            per_agent: BTreeMap::new(),
            show_hidden: false,
            max_entries: 2000,
            max_read_bytes: 256 * 1024,
            max_pull_bytes: None,
        }
    }
}

impl FilesConfig {
    /// `[files]` and the agents' `files` keys, over the defaults.
    pub fn resolve(
        f: &FilesFileConfig,
        agent: &AgentFileConfig,
        agents: &BTreeMap<String, NamedAgentFileConfig>,
    ) -> Result<FilesConfig, ConfigError> {
        let d = FilesConfig::default();
        let invalid = |key: &'static str| ConfigError::Invalid {
            key,
            message: "must be at least 1".into(),
        };
        let max_entries = f.max_entries.unwrap_or(d.max_entries);
        if max_entries == 0 {
            return Err(invalid("files.max_entries"));
        }
        let max_read_bytes = f.max_read_bytes.unwrap_or(d.max_read_bytes);
        if max_read_bytes < 4 {
            return Err(ConfigError::Invalid {
                key: "files.max_read_bytes",
                message: "must be at least 4".into(),
            });
        }
        Ok(FilesConfig {
            enabled: f.enabled.unwrap_or(d.enabled),
            agent: agent.files,
            per_agent: agents
                .iter()
                .filter_map(|(name, a)| a.files.map(|on| (name.clone(), on)))
                .collect(),
            show_hidden: f.show_hidden.unwrap_or(d.show_hidden),
            max_entries,
            max_read_bytes,
            max_pull_bytes: f.max_pull_bytes,
        })
    }

    /// Whether the agent named `name` has the file browser.
    pub fn enabled_for(&self, name: &str) -> bool {
        self.per_agent
            .get(name)
            .copied()
            .or(self.agent)
            .unwrap_or(self.enabled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FileConfig;

    fn resolve(file: &FileConfig) -> Result<FilesConfig, ConfigError> {
        FilesConfig::resolve(&file.files, &file.agent, &file.agents)
    }

    fn parse(toml: &str) -> FilesConfig {
        resolve(&toml::from_str(toml).expect("toml")).expect("valid")
    }

    #[test]
    fn on_by_default_and_switchable_per_agent() {
        let d = parse("");
        assert!(d.enabled_for("demo") && !d.show_hidden);
        assert_eq!(d.max_pull_bytes, None);
        let c = parse(
            "[agent]\nfiles = false\n[agents.code]\ncommand = \"x\"\nfiles = true\n\
             [agents.mail]\ncommand = \"y\"\n[files]\nmax_pull_bytes = 10\n",
        );
        assert!(c.enabled_for("code"));
        assert!(!c.enabled_for("mail") && !c.enabled_for("demo"));
        assert_eq!(c.max_pull_bytes, Some(10));
        let off = parse("[files]\nenabled = false\nshow_hidden = true\n[agents.code]\ncommand = \"x\"\nfiles = true\n");
        assert!(off.enabled_for("code") && !off.enabled_for("demo") && off.show_hidden);
        let file: FileConfig = toml::from_str("[files]\nmax_entries = 0\n").expect("toml");
        assert!(resolve(&file).is_err());
    }
}
