//! The gateway's own slash commands, typed: a message's text is parsed once into a [`Command`]
//! with its arguments; the catalog, `/help` and every dispatch come from these types, so a
//! command name is never matched as a string anywhere else.
//!
//! Ground floor: imports nothing of the gateway.

use iris_protocol::{CommandInfo, CommandMatch, CommandsCatalog, CommandsComplete, ResponseFrame};

/// Which gateway command: one per entry of the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Name {
    /// `/new` (alias `/reset`).
    New,
    /// `/stop`.
    Stop,
    /// `/status`.
    Status,
    /// `/model`.
    Model,
    /// `/agent`.
    Agent,
    /// `/reasoning`.
    Reasoning,
    /// `/title`.
    Title,
    /// `/cron`.
    Cron,
    /// `/help`.
    Help,
}

/// How a command is listed in the catalog.
#[derive(Debug)]
pub struct Spec {
    /// The canonical name, with its slash.
    pub name: &'static str,
    /// Other names that mean the same.
    pub aliases: &'static [&'static str],
    /// One line for the catalog and `/help`.
    pub description: &'static str,
    /// The arguments, for the catalog and `/help`.
    pub args_hint: &'static str,
    /// The catalog's grouping.
    pub category: &'static str,
}

impl Name {
    /// Every gateway command, in catalog order.
    pub const ALL: [Name; 9] = [
        Name::New,
        Name::Stop,
        Name::Status,
        Name::Model,
        Name::Agent,
        Name::Reasoning,
        Name::Title,
        Name::Cron,
        Name::Help,
    ];

    /// How the command is listed.
    pub fn spec(self) -> Spec {
        let (name, aliases, description, args_hint, category): (
            _,
            &'static [&'static str],
            _,
            _,
            _,
        ) = match self {
            Name::New => (
                "/new",
                &["/reset"],
                "Start a new session (fresh agent session and context)",
                "",
                "Session",
            ),
            Name::Stop => ("/stop", &[], "Stop the running turn", "", "Session"),
            Name::Status => (
                "/status",
                &[],
                "Show gateway, agent and lane status",
                "",
                "Info",
            ),
            Name::Model => (
                "/model",
                &[],
                "Switch model",
                "<provider/model>",
                "Configuration",
            ),
            Name::Agent => (
                "/agent",
                &[],
                "Switch this channel's agent (fresh sessions, history stays)",
                "[name]",
                "Configuration",
            ),
            Name::Reasoning => (
                "/reasoning",
                &[],
                "Show or hide the agent's reasoning",
                "[show|hide]",
                "Configuration",
            ),
            Name::Title => (
                "/title",
                &[],
                "Rename this chat or thread",
                "<title>",
                "Session",
            ),
            Name::Cron => (
                "/cron",
                &[],
                "Scheduled prompts: add, list, pause, resume or remove jobs",
                "add <schedule> <prompt> | list | pause|resume|remove <id>",
                "Automation",
            ),
            Name::Help => ("/help", &[], "List the available commands", "", "Info"),
        };
        Spec {
            name,
            aliases,
            description,
            args_hint,
            category,
        }
    }

    /// The canonical name, with its slash.
    pub fn as_str(self) -> &'static str {
        self.spec().name
    }

    fn find(word: &str) -> Option<Name> {
        Name::ALL.into_iter().find(|n| {
            let spec = n.spec();
            spec.name == word || spec.aliases.contains(&word)
        })
    }
}

/// What `/reasoning` was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reasoning {
    /// No argument: offer the choice.
    Ask,
    /// `show` or `on`.
    Show,
    /// `hide` or `off`.
    Hide,
    /// Anything else, kept to say what was not understood.
    Unknown(String),
}

/// A gateway command with its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Start a fresh agent session in the lane.
    New,
    /// Stop the running turn.
    Stop,
    /// Show the lane's status.
    Status,
    /// Offer the model picker (`None`) or switch to a model.
    Model(Option<String>),
    /// Offer the agent picker (`None`) or switch the channel to the named agent.
    Agent(Option<String>),
    /// Show, hide or ask about the agent's reasoning.
    Reasoning(Reasoning),
    /// Rename the lane's chat or thread (empty: show the usage).
    Title(String),
    /// The `/cron` sub-command line.
    Cron(String),
    /// List the commands.
    Help,
}

impl Command {
    /// The gateway command a message starts with. `/etc/hosts` or `/unknownword` is not one, and
    /// neither is a command the agent advertises (those go to the agent as prompts).
    pub fn parse(text: &str) -> Option<Command> {
        let text = text.trim_start();
        if !text.starts_with('/') {
            return None;
        }
        let (head, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
        let args = rest.trim().to_owned();
        Some(match Name::find(&head.to_lowercase())? {
            Name::New => Command::New,
            Name::Stop => Command::Stop,
            Name::Status => Command::Status,
            Name::Model => Command::Model(Some(args).filter(|a| !a.is_empty())),
            Name::Agent => Command::Agent(Some(args).filter(|a| !a.is_empty())),
            Name::Reasoning => Command::Reasoning(match args.as_str() {
                "" => Reasoning::Ask,
                "show" | "on" => Reasoning::Show,
                "hide" | "off" => Reasoning::Hide,
                _ => Reasoning::Unknown(args),
            }),
            Name::Title => Command::Title(args),
            Name::Cron => Command::Cron(args),
            Name::Help => Command::Help,
        })
    }

    /// Which command this is.
    pub fn name(&self) -> Name {
        match self {
            Command::New => Name::New,
            Command::Stop => Name::Stop,
            Command::Status => Name::Status,
            Command::Model(_) => Name::Model,
            Command::Agent(_) => Name::Agent,
            Command::Reasoning(_) => Name::Reasoning,
            Command::Title(_) => Name::Title,
            Command::Cron(_) => Name::Cron,
            Command::Help => Name::Help,
        }
    }

    /// Whether the command runs at once while a turn is running, instead of waiting behind it:
    /// the ones that only read or change the gateway's own state. (`/stop` stops the turn.)
    pub fn runs_during_turn(&self) -> bool {
        match self {
            Command::Status
            | Command::Help
            | Command::Reasoning(_)
            | Command::Title(_)
            | Command::Cron(_) => true,
            Command::New | Command::Stop | Command::Model(_) | Command::Agent(_) => false,
        }
    }
}

/// The gateway's commands as catalog entries.
pub fn catalog_entries() -> Vec<CommandInfo> {
    Name::ALL
        .into_iter()
        .map(|n| {
            let spec = n.spec();
            CommandInfo {
                name: spec.name.into(),
                description: spec.description.into(),
                args_hint: spec.args_hint.into(),
                category: spec.category.into(),
                aliases: spec.aliases.iter().map(|a| (*a).to_owned()).collect(),
            }
        })
        .collect()
}

/// The text of `/help` for a catalog.
pub fn help_text(entries: &[CommandInfo]) -> String {
    let mut text = String::from("Commands:");
    for cmd in entries {
        let aliases = if cmd.aliases.is_empty() {
            String::new()
        } else {
            format!(" ({})", cmd.aliases.join(", "))
        };
        let hint = if cmd.args_hint.is_empty() {
            String::new()
        } else {
            format!(" {}", cmd.args_hint)
        };
        text.push_str(&format!(
            "\n{}{hint}{aliases} — {}",
            cmd.name, cmd.description
        ));
    }
    text
}

/// The `commands.catalog` response.
pub fn catalog(entries: Vec<CommandInfo>) -> ResponseFrame {
    ResponseFrame::CommandsCatalog(CommandsCatalog { commands: entries })
}

/// The `commands.complete` response: commands whose name or alias starts with the prefix.
pub fn complete(entries: Vec<CommandInfo>, prefix: &str) -> ResponseFrame {
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
    ResponseFrame::CommandsComplete(CommandsComplete {
        prefix: prefix.to_owned(),
        matches,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_recognised_by_name_or_alias_and_paths_are_text() {
        assert_eq!(Command::parse("/new"), Some(Command::New));
        assert_eq!(Command::parse("/reset please"), Some(Command::New));
        assert_eq!(
            Command::parse("  /MODEL demo:echo "),
            Some(Command::Model(Some("demo:echo".into())))
        );
        assert_eq!(Command::parse("/model"), Some(Command::Model(None)));
        assert_eq!(Command::parse("/agent"), Some(Command::Agent(None)));
        assert_eq!(
            Command::parse("/agent hermes"),
            Some(Command::Agent(Some("hermes".into())))
        );
        assert_eq!(
            Command::parse("/cron add every 2h Check it"),
            Some(Command::Cron("add every 2h Check it".into()))
        );
        assert_eq!(
            Command::parse("/reasoning off"),
            Some(Command::Reasoning(Reasoning::Hide))
        );
        assert_eq!(
            Command::parse("/reasoning loud"),
            Some(Command::Reasoning(Reasoning::Unknown("loud".into())))
        );
        assert_eq!(Command::parse("/etc/hosts"), None);
        assert_eq!(Command::parse("/unknownword"), None);
        assert_eq!(Command::parse("hello /new"), None);
    }

    #[test]
    fn every_catalog_entry_parses_back_to_its_own_command() {
        for name in Name::ALL {
            let spec = name.spec();
            for word in std::iter::once(&spec.name).chain(spec.aliases) {
                let parsed = Command::parse(word).expect("a listed name parses");
                assert_eq!(parsed.name(), name, "{word}");
            }
        }
        assert_eq!(catalog_entries().len(), Name::ALL.len());
    }
}
