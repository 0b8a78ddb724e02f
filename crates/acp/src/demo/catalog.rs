//! What the demo offers a session: its models, its modes and its slash commands.

use crate::types::*;

/// `(id, name, description)` of every model a session can switch to; the first is
/// [`DEFAULT_MODEL`](super::DEFAULT_MODEL).
pub(super) const MODELS: [(&str, &str, &str); 3] = [
    ("demo:echo", "Demo Echo", "Echoes the prompt"),
    (
        "demo:verbose",
        "Demo Verbose",
        "Echoes the prompt and names itself",
    ),
    (
        "other:mini",
        "Other Mini",
        "A second provider, to show grouping",
    ),
];

/// `(id, name)` of every mode; a new session starts in the first.
pub(super) const MODES: [(&str, &str); 2] =
    [("default", "Default"), ("accept_edits", "Accept Edits")];

/// A slash command, answered locally without running the script.
pub(super) struct Command {
    /// Name without the slash.
    name: &'static str,
    /// What it does, as advertised in `available_commands_update`.
    description: &'static str,
    /// Placeholder of its argument, when it takes one.
    hint: Option<&'static str>,
    /// The answer, given the session's model.
    answer: fn(model_id: &str) -> String,
}

/// The slash commands, in the order they are advertised and listed by `/help`.
const COMMANDS: [Command; 3] = [
    Command {
        name: "help",
        description: "List available commands",
        hint: None,
        answer: help,
    },
    Command {
        name: "tools",
        description: "List the demo's (simulated) tools",
        hint: None,
        answer: |_| "Tools: terminal (simulated; nothing really runs)".to_string(),
    },
    Command {
        name: "model",
        description: "Show the current model",
        hint: Some("model id to show"),
        answer: |model_id| format!("Current model: {model_id}"),
    },
];

/// The answer to `/help`: every command, slash included.
fn help(_model_id: &str) -> String {
    let names: Vec<String> = COMMANDS.iter().map(|c| format!("/{}", c.name)).collect();
    format!("Commands: {}", names.join(", "))
}

/// The answer to the slash command `command` (the prompt text after the `/`).
pub(super) fn answer_command(command: &str, model_id: &str) -> String {
    let name = command.split_whitespace().next().unwrap_or_default();
    match COMMANDS.iter().find(|c| c.name == name) {
        Some(command) => (command.answer)(model_id),
        None => format!("Unknown command /{name}"),
    }
}

/// The `available_commands_update` sent after `session/new` and `session/load`. With
/// `DEMO_EXTRA_COMMAND=<name>` in its environment the demo advertises one command more, so that
/// two demo agents can be told apart by their catalogs.
pub(super) fn available_commands() -> SessionUpdate {
    let mut available_commands: Vec<AvailableCommand> = COMMANDS
        .iter()
        .map(|c| AvailableCommand {
            name: c.name.into(),
            description: c.description.into(),
            input: c
                .hint
                .map(|hint| AvailableCommandInput { hint: hint.into() }),
        })
        .collect();
    if let Some(name) = std::env::var("DEMO_EXTRA_COMMAND")
        .ok()
        .filter(|n| !n.is_empty())
    {
        available_commands.push(AvailableCommand {
            name,
            description: "A command only this demo agent offers".into(),
            input: None,
        });
    }
    SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate { available_commands })
}

/// The `models` of a session whose model is `current`.
pub(super) fn models_state(current: &str) -> SessionModelState {
    SessionModelState {
        available_models: MODELS
            .iter()
            .map(|(id, name, description)| ModelInfo {
                model_id: (*id).into(),
                name: (*name).into(),
                description: Some((*description).into()),
            })
            .collect(),
        current_model_id: current.into(),
        config_id: None,
    }
}

/// The `modes` of a session whose mode is `current`.
pub(super) fn modes_state(current: &str) -> SessionModeState {
    SessionModeState {
        available_modes: MODES
            .iter()
            .map(|(id, name)| SessionMode {
                id: (*id).into(),
                name: (*name).into(),
                description: None,
            })
            .collect(),
        current_mode_id: current.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slash_command_answers() {
        assert_eq!(
            answer_command("help", "m"),
            "Commands: /help, /tools, /model"
        );
        assert_eq!(
            answer_command("tools x", "m"),
            "Tools: terminal (simulated; nothing really runs)"
        );
        assert_eq!(
            answer_command("model", "demo:echo"),
            "Current model: demo:echo"
        );
        assert_eq!(answer_command("nope 1", "m"), "Unknown command /nope");
        assert_eq!(answer_command("", "m"), "Unknown command /");
    }
}
