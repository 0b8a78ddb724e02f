//! The agent bridge: the agent process ([`host`]), one actor per lane ([`lane`]) that maps ACP
//! turns onto frames ([`turn`]), the bridge that starts and addresses the lane actors
//! ([`bridge`]), and the command catalog that mixes the gateway's commands with the agent's.
//!
//! Layer: agent. Imports the ground floor and the services (media, cron); never the request
//! handlers or connections above it.

pub mod bridge;
pub mod choice;
pub mod host;
pub mod lane;
pub mod recovery;
pub mod tools;
pub mod turn;

use iris_protocol::CommandInfo;

pub use bridge::{Agents, BridgeConfig};
pub use choice::{choose_agent, split_command, AgentChoice, DEMO_NOTICE};
use host::AgentHost;

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
