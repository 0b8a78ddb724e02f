//! The slash-command catalog: the gateway's own commands.

use iris_protocol::{CommandInfo, CommandMatch, CommandsCatalog, CommandsComplete, ServerFrame};

struct Builtin {
    name: &'static str,
    aliases: &'static [&'static str],
    description: &'static str,
    args_hint: &'static str,
    category: &'static str,
}

const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "/new",
        aliases: &["/reset"],
        description: "Start a new session (fresh agent session and context)",
        args_hint: "",
        category: "Session",
    },
    Builtin {
        name: "/stop",
        aliases: &[],
        description: "Stop the running turn",
        args_hint: "",
        category: "Session",
    },
    Builtin {
        name: "/status",
        aliases: &[],
        description: "Show gateway, agent and lane status",
        args_hint: "",
        category: "Info",
    },
    Builtin {
        name: "/model",
        aliases: &[],
        description: "Switch model",
        args_hint: "[provider:model]",
        category: "Configuration",
    },
    Builtin {
        name: "/reasoning",
        aliases: &[],
        description: "Show or hide the agent's reasoning",
        args_hint: "[show|hide]",
        category: "Configuration",
    },
    Builtin {
        name: "/title",
        aliases: &[],
        description: "Rename this chat or thread",
        args_hint: "<title>",
        category: "Session",
    },
    Builtin {
        name: "/cron",
        aliases: &[],
        description: "Scheduled prompts: add, list, pause, resume or remove jobs",
        args_hint: "add <schedule> <prompt> | list | pause|resume|remove <id>",
        category: "Automation",
    },
    Builtin {
        name: "/help",
        aliases: &[],
        description: "List the available commands",
        args_hint: "",
        category: "Info",
    },
];

/// Every command, as `commands.catalog` answers it.
pub fn catalog_entries() -> Vec<CommandInfo> {
    BUILTINS
        .iter()
        .map(|b| CommandInfo {
            name: b.name.into(),
            description: b.description.into(),
            args_hint: b.args_hint.into(),
            category: b.category.into(),
            aliases: b.aliases.iter().map(|a| (*a).to_owned()).collect(),
        })
        .collect()
}

/// The gateway command a message starts with, by its canonical name, and the rest of the text.
/// `/etc/hosts` or `/unknownword` is not a command.
pub fn parse(text: &str) -> Option<(&'static str, String)> {
    let text = text.trim_start();
    if !text.starts_with('/') {
        return None;
    }
    let (head, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    let head = head.to_lowercase();
    let builtin = BUILTINS
        .iter()
        .find(|b| b.name == head || b.aliases.contains(&head.as_str()))?;
    Some((builtin.name, rest.trim().to_owned()))
}

/// The `commands.catalog` response.
pub fn catalog(entries: Vec<CommandInfo>) -> ServerFrame {
    ServerFrame::CommandsCatalog(CommandsCatalog { commands: entries })
}

/// The `commands.complete` response: commands whose name or alias starts with the prefix.
pub fn complete(entries: Vec<CommandInfo>, prefix: &str) -> ServerFrame {
    let wanted = prefix.trim().to_lowercase();
    let matches = entries
        .into_iter()
        .filter(|c| c.name.starts_with(&wanted) || c.aliases.iter().any(|a| a.starts_with(&wanted)))
        .map(|c| CommandMatch {
            name: c.name,
            description: c.description,
            args_hint: c.args_hint,
        })
        .collect();
    ServerFrame::CommandsComplete(CommandsComplete {
        prefix: prefix.to_owned(),
        matches,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_recognised_by_name_or_alias_and_paths_are_text() {
        assert_eq!(parse("/new"), Some(("/new", String::new())));
        assert_eq!(parse("/reset please"), Some(("/new", "please".into())));
        assert_eq!(
            parse("  /MODEL demo:echo "),
            Some(("/model", "demo:echo".into()))
        );
        assert_eq!(
            parse("/cron add every 2h Check it"),
            Some(("/cron", "add every 2h Check it".into()))
        );
        assert_eq!(parse("/etc/hosts"), None);
        assert_eq!(parse("/unknownword"), None);
        assert_eq!(parse("hello /new"), None);
    }
}
