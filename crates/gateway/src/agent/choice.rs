//! Which agent the gateway runs: the configured command line, `demo`, `none`, or Hermes when it
//! is on PATH.

use std::path::{Path, PathBuf};

use iris_acp::AgentSpec;

/// How the gateway reaches its agent.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentChoice {
    /// What to run.
    pub spec: AgentSpec,
    /// Human name.
    pub label: String,
    /// Whether it is the built-in demo agent.
    pub is_demo: bool,
    /// No agent at all (`none`): messages are stored and synced but nobody answers.
    pub disabled: bool,
    /// Said once, in the log and as a system message on the first turn (e.g. how to connect
    /// Hermes when the demo agent was chosen for lack of one).
    pub notice: Option<String>,
}

/// The message shown when no agent is configured and Hermes is not installed.
pub const DEMO_NOTICE: &str = "No agent is configured and `hermes` is not on PATH, so the built-in demo agent answers. \
To use Hermes: `pip install 'hermes-agent[acp]'`, then restart the gateway with `--agent \"hermes acp\"` \
(or put `hermes` on PATH).";

/// Chooses the agent from the configured command line: `demo`, a command line, or (when none is
/// given) `hermes acp` if `hermes` is on PATH, else the demo agent with a notice.
pub fn choose_agent(command: Option<&str>, cwd: &Path) -> Result<AgentChoice, String> {
    let demo = |notice: Option<String>| -> Result<AgentChoice, String> {
        let exe = std::env::current_exe()
            .map_err(|e| format!("cannot find this program to run the demo agent: {e}"))?;
        Ok(AgentChoice {
            spec: AgentSpec::new(exe.to_string_lossy())
                .arg("demo-agent")
                .cwd(cwd),
            label: "demo agent".into(),
            is_demo: true,
            disabled: false,
            notice,
        })
    };
    match command.map(str::trim) {
        Some("demo") => demo(None),
        Some("none") => Ok(AgentChoice {
            spec: AgentSpec::new("none"),
            label: "no agent".into(),
            is_demo: false,
            disabled: true,
            notice: None,
        }),
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
            let label = if is_demo {
                "demo agent".into()
            } else if base.starts_with("hermes") {
                "Hermes".into()
            } else {
                base
            };
            Ok(AgentChoice {
                spec,
                label,
                is_demo,
                disabled: false,
                notice: None,
            })
        }
        _ => match find_on_path("hermes") {
            Some(hermes) => Ok(AgentChoice {
                spec: AgentSpec::new(hermes.to_string_lossy()).arg("acp").cwd(cwd),
                label: "Hermes".into(),
                is_demo: false,
                disabled: false,
                notice: None,
            }),
            None => demo(Some(DEMO_NOTICE.into())),
        },
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
