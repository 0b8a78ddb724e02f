//! The slash-command catalog of a lane: the gateway's own commands, then the agent's.

use iris_protocol::CommandInfo;

use super::host::AgentHost;

/// The slash-command catalog: the gateway's commands, then the agent's (minus name clashes).
pub fn catalog(host: &AgentHost) -> Vec<CommandInfo> {
    let mut out = crate::command::catalog_entries();
    for cmd in host.agent_commands() {
        let name = format!("/{}", cmd.name.trim_start_matches('/'));
        if out
            .iter()
            .any(|c| c.name == name || c.aliases.contains(&name))
        {
            continue;
        }
        out.push(CommandInfo {
            name,
            description: cmd.description.clone(),
            args_hint: cmd
                .input
                .as_ref()
                .map(|i| i.hint.clone())
                .unwrap_or_default(),
            category: "Agent".into(),
            aliases: Vec::new(),
        });
    }
    out
}
