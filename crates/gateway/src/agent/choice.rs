//! Which agents the gateway runs: the named agents of the configuration, the `--agent` command
//! line (`demo`, `none`, a command, or Hermes when it is on PATH), and the built-in demo agent.
//!
//! An agent inherits the gateway's environment without any `IRIS_*` variable (the token and
//! every other gateway credential stay with the gateway), plus its configured `env`.

use std::path::{Path, PathBuf};

use iris_acp::AgentSpec;

use crate::config::{AgentTimeouts, Config};

/// How the gateway reaches one agent.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentChoice {
    /// Its name, as chats and `/agent` call it.
    pub name: String,
    /// Its timeouts.
    pub timeouts: AgentTimeouts,
    /// What to run.
    pub spec: AgentSpec,
    /// Human name.
    pub label: String,
    /// Whether it is the built-in demo agent.
    pub is_demo: bool,
    /// No agent at all (`none`): messages are stored and synced but nobody answers.
    pub disabled: bool,
    /// Whether a session is kept open ahead of need for the next new chat (see `agent/spare.rs`).
    pub spare_session: bool,
    /// Said once, in the log and as a system message on the first turn (e.g. how to connect
    /// Hermes when the demo agent was chosen for lack of one).
    pub notice: Option<String>,
}

impl AgentChoice {
    /// An agent that `spec` runs: default timeouts, a spare session kept ready, no notice.
    pub fn running(name: impl Into<String>, label: impl Into<String>, spec: AgentSpec) -> Self {
        AgentChoice {
            name: name.into(),
            timeouts: AgentTimeouts::default(),
            spec,
            label: label.into(),
            is_demo: false,
            disabled: false,
            spare_session: true,
            notice: None,
        }
    }

    /// No agent at all, under this name: messages are stored and synced, nobody answers.
    pub fn nobody(name: impl Into<String>) -> Self {
        AgentChoice {
            disabled: true,
            spare_session: false,
            ..AgentChoice::running(name, "no agent", AgentSpec::new("none"))
        }
    }
}

/// The message shown when no agent is configured and Hermes is not installed.
pub const DEMO_NOTICE: &str = "No agent is configured and `hermes` is not on PATH, so the built-in demo agent answers. \
To use Hermes: `python3 -m venv ~/.hermes-venv && ~/.hermes-venv/bin/pip install 'hermes-agent[acp]==0.19.0'` \
(the release this gateway is tested with), then restart the gateway with \
`--agent \"$HOME/.hermes-venv/bin/hermes acp\"` (or put `hermes` on PATH).";

/// Chooses the agent from the configured command line: `demo`, a command line, or (when none is
/// given) `hermes acp` if `hermes` is on PATH, else the demo agent with a notice.
pub fn choose_agent(command: Option<&str>, cwd: &Path) -> Result<AgentChoice, String> {
    let demo = |notice: Option<String>| -> Result<AgentChoice, String> {
        let exe = crate::config::gateway_program()
            .map_err(|e| format!("cannot find this program to run the demo agent: {e}"))?;
        let spec = AgentSpec::new(exe.to_string_lossy())
            .arg("demo-agent")
            .cwd(cwd);
        Ok(AgentChoice {
            is_demo: true,
            notice,
            ..AgentChoice::running(DEMO_NAME, "demo agent", spec)
        })
    };
    match command.map(str::trim) {
        Some("demo") => demo(None),
        Some("none") => Ok(AgentChoice::nobody("none")),
        Some(line) if !line.is_empty() => {
            let words = split_command(line)?;
            let program = words[0].clone();
            let mut spec = AgentSpec::new(program.clone()).cwd(cwd);
            for w in &words[1..] {
                spec = spec.arg(w.clone());
            }
            let is_demo = words.get(1).map(String::as_str) == Some("demo-agent");
            let base = Path::new(&program)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or(program.clone());
            let name = if is_demo {
                DEMO_NAME.into()
            } else {
                name_of(&base)
            };
            let label = if is_demo {
                "demo agent".into()
            } else if base.starts_with("hermes") {
                "Hermes".into()
            } else {
                base
            };
            Ok(AgentChoice {
                is_demo,
                ..AgentChoice::running(name, label, spec)
            })
        }
        _ => match find_on_path("hermes") {
            Some(hermes) => Ok(AgentChoice::running(
                "hermes",
                "Hermes",
                AgentSpec::new(hermes.to_string_lossy()).arg("acp").cwd(cwd),
            )),
            None => demo(Some(DEMO_NOTICE.into())),
        },
    }
}

/// The name of the built-in demo agent.
pub const DEMO_NAME: &str = "demo";

/// Every agent the gateway can run, and the one chats use unless they chose another.
#[derive(Debug, Clone)]
pub struct Roster {
    /// The agents, by name; empty when the gateway runs without an agent (`--agent none`).
    pub agents: Vec<AgentChoice>,
    /// The default agent's name.
    pub default: String,
}

/// The agents of a configuration: the named ones (`[agents.NAME]`), the `--agent` one (named
/// after its program) when given or when nothing is named, and the demo agent as `demo`. Their
/// working directory is their own `cwd`, else `cwd`.
pub fn roster(config: &Config, cwd: &Path) -> Result<Roster, String> {
    let mut agents: Vec<AgentChoice> = Vec::new();
    let single = match (&config.agent_command, config.agents.is_empty()) {
        (Some(_), _) | (None, true) => Some(choose_agent(config.agent_command.as_deref(), cwd)?),
        (None, false) => None,
    };
    for named in &config.agents {
        let dir = named.cwd.clone().unwrap_or_else(|| cwd.to_path_buf());
        let mut choice = choose_agent(Some(&named.command), &dir)?;
        if choice.disabled {
            return Err(format!("[agents.{}]: \"none\" is not an agent", named.name));
        }
        choice.name = named.name.clone();
        choice.label = named.name.clone();
        choice.timeouts = named.timeouts;
        choice.spare_session = named.spare_session.unwrap_or(config.spare_session);
        for (k, v) in &named.env {
            choice.spec = choice.spec.env(k.clone(), v.expose());
        }
        agents.push(choice);
    }
    let base_timeouts = AgentTimeouts {
        approval: config.approval_timeout,
        turn_idle: config.turn_idle_timeout,
        cancel_grace: config.cancel_grace,
    };
    let single_name = match single {
        Some(choice) if choice.disabled && agents.is_empty() => {
            return Ok(Roster {
                agents: Vec::new(),
                default: choice.name,
            })
        }
        Some(mut choice) if !choice.disabled => {
            if agents.iter().any(|a| a.name == choice.name) {
                return Err(format!(
                    "the agent command line is named {:?}, like a configured [agents.{}]",
                    choice.name, choice.name
                ));
            }
            choice.timeouts = base_timeouts;
            choice.spare_session = config.spare_session;
            let name = choice.name.clone();
            agents.insert(0, choice);
            Some(name)
        }
        _ => None,
    };
    if !agents.iter().any(|a| a.name == DEMO_NAME) {
        let mut demo = choose_agent(Some(DEMO_NAME), cwd)?;
        demo.timeouts = base_timeouts;
        demo.spare_session = config.spare_session;
        agents.push(demo);
    }
    if config.confine_agent {
        // No agent reaches the data dir, the configuration or a secret file it names; each may
        // read the media attached to its own prompts.
        for agent in &mut agents {
            agent.spec.confine = Some(iris_acp::Confinement {
                hidden: config.protected_places(),
                readable: vec![crate::media::attached::agent_dir(
                    &config.data_dir,
                    &agent.name,
                )],
            });
        }
    }
    let default = match (&config.default_agent, single_name) {
        (Some(name), _) if agents.iter().any(|a| &a.name == name) => name.clone(),
        (Some(name), _) => {
            return Err(format!(
                "default_agent {name:?} is not a configured agent ({})",
                names(&agents)
            ))
        }
        (None, Some(name)) => name,
        (None, None) if config.agents.len() == 1 => config.agents[0].name.clone(),
        (None, None) => {
            return Err(format!(
                "several agents are configured ({}); say which is the default with default_agent = \"NAME\"",
                names(&agents)
            ))
        }
    };
    Ok(Roster { agents, default })
}

fn names(agents: &[AgentChoice]) -> String {
    agents
        .iter()
        .map(|a| a.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The spec to start an agent with: every `IRIS_*` variable of the gateway (the token,
/// credentials, settings) kept from the agent and the commands it runs, as the gateway's
/// environment is when the agent starts. Variables configured for the agent itself still reach it.
pub fn without_gateway_env(spec: &AgentSpec) -> AgentSpec {
    let mut spec = spec.clone();
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if key.starts_with("IRIS_") && !spec.env.iter().any(|(k, _)| *k == key) {
            spec.env_remove.push(key.into_owned());
        }
    }
    spec
}

/// An agent name made from a program's file name: lower case, other characters as `-`.
fn name_of(program: &str) -> String {
    let name: String = program
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' {
                c
            } else {
                '-'
            }
        })
        .take(32)
        .collect();
    let name = name.trim_matches('-').to_owned();
    if name.starts_with("hermes") {
        "hermes".into()
    } else if name.is_empty() {
        "agent".into()
    } else {
        name
    }
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| {
            p.metadata()
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// Splits a command line into words, honouring single and double quotes and backslashes.
pub fn split_command(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') | (None, '\\') => match chars.next() {
                Some(n) => {
                    cur.push(n);
                    in_word = true;
                }
                None => return Err("command line ends with a backslash".into()),
            },
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            (None, c) => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return Err("unbalanced quote in the agent command line".into());
    }
    if in_word {
        words.push(cur);
    }
    if words.is_empty() {
        return Err("the agent command line is empty".into());
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(named: &[&str], command: Option<&str>, default: Option<&str>) -> Config {
        let mut c = Config::for_tests(Path::new("/tmp"), "test-token-0123");
        c.agent_command = command.map(str::to_owned);
        c.default_agent = default.map(str::to_owned);
        c.agents = named
            .iter()
            .map(|n| crate::config::NamedAgent {
                name: (*n).into(),
                command: format!("{n}-acp --stdio"),
                cwd: None,
                env: Vec::new(),
                timeouts: AgentTimeouts::default(),
                spare_session: None,
            })
            .collect();
        c
    }

    #[test]
    fn the_roster_names_every_agent_and_its_default() {
        let names = |r: &Roster| r.agents.iter().map(|a| a.name.clone()).collect::<Vec<_>>();
        let r = roster(&config(&["a", "b"], None, Some("b")), Path::new("/tmp")).unwrap();
        assert_eq!(
            (names(&r), r.default.as_str()),
            (vec!["a".into(), "b".into(), "demo".into()], "b")
        );
        let r = roster(
            &config(&["a"], Some("'/opt/My Agent' --acp"), None),
            Path::new("/tmp"),
        )
        .unwrap();
        assert_eq!(names(&r), ["my-agent", "a", "demo"]);
        assert_eq!(r.default, "my-agent", "the --agent command is the default");
        let r = roster(&config(&[], Some("none"), None), Path::new("/tmp")).unwrap();
        assert!(r.agents.is_empty(), "no agent at all");
        let several = roster(&config(&["a", "b"], None, None), Path::new("/tmp")).unwrap_err();
        assert!(several.contains("default_agent"), "{several}");
        let unknown = roster(&config(&["a"], None, Some("z")), Path::new("/tmp")).unwrap_err();
        assert!(unknown.contains("\"z\""), "{unknown}");
        let clash = roster(
            &config(&["hermes"], Some("hermes acp"), None),
            Path::new("/tmp"),
        );
        assert!(clash.is_err());
    }

    #[test]
    fn command_lines_split_like_a_shell() {
        assert_eq!(split_command("hermes acp").unwrap(), ["hermes", "acp"]);
        assert_eq!(
            split_command("'/opt/my agent/bin' --x \"a b\" c\\ d").unwrap(),
            ["/opt/my agent/bin", "--x", "a b", "c d"]
        );
        assert!(split_command("\"open").is_err());
        assert!(split_command("   ").is_err());
    }
}
