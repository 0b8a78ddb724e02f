//! The slash-command catalog of a lane: the gateway's own commands, then the agent's, of which
//! the gateway keeps a bounded list ([`bounded`]).

use iris_acp::{AvailableCommand, AvailableCommandInput};
use iris_protocol::CommandInfo;

use crate::text::head;

/// Commands kept of an agent's list.
const MAX_AGENT_COMMANDS: usize = 200;
/// The longest command name kept (longer ones are left out), and where descriptions and
/// argument hints are cut.
const MAX_NAME: usize = 64;
const MAX_DESCRIPTION: usize = 300;
const MAX_HINT: usize = 100;

/// What the gateway keeps of the commands an agent advertises: the first
/// [`MAX_AGENT_COMMANDS`] whose name is one word of at most [`MAX_NAME`] characters, with
/// descriptions and hints cut. A runaway agent's list cannot swell every catalog a device asks for.
pub fn bounded(commands: &[AvailableCommand]) -> Vec<AvailableCommand> {
    commands
        .iter()
        .filter(|c| {
            let name = c.name.trim_start_matches('/');
            !name.is_empty()
                && name.chars().count() <= MAX_NAME
                && !name.chars().any(|ch| ch.is_whitespace() || ch.is_control())
        })
        .take(MAX_AGENT_COMMANDS)
        .map(|c| AvailableCommand {
            name: c.name.clone(),
            description: head(&c.description, MAX_DESCRIPTION),
            input: c.input.as_ref().map(|i| AvailableCommandInput {
                hint: head(&i.hint, MAX_HINT),
            }),
        })
        .collect()
}

/// The slash-command catalog: the gateway's commands, then the agent's `commands` (minus name
/// clashes).
pub fn catalog(commands: Vec<AvailableCommand>) -> Vec<CommandInfo> {
    let mut out = crate::command::catalog_entries();
    for cmd in commands {
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
