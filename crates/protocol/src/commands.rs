//! The slash commands a chat's agent offers: `commands.catalog` and `commands.complete`.

use serde::{Deserialize, Serialize};

/// A slash command.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CommandInfo {
    /// Name with its slash.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Argument placeholder ("" when none).
    #[serde(default)]
    pub args_hint: String,
    /// Group.
    #[serde(default)]
    pub category: String,
    /// Other names, with their slash.
    #[serde(default)]
    pub aliases: Vec<String>,
}

/// `commands.catalog` response.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CommandsCatalog {
    /// Every command.
    pub commands: Vec<CommandInfo>,
}

/// A `commands.complete` match.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CommandMatch {
    /// Name with its slash.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Argument placeholder.
    #[serde(default)]
    pub args_hint: String,
}

/// `commands.complete` response.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CommandsComplete {
    /// The prefix asked for.
    pub prefix: String,
    /// Matching commands.
    pub matches: Vec<CommandMatch>,
}
