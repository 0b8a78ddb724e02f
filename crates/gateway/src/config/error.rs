//! A configuration problem, reported in one line before exiting.

use std::path::PathBuf;

/// A configuration problem, reported in one line before exiting.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML or has unknown keys.
    #[error("invalid config file {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A value is invalid.
    #[error("invalid {key}: {message}")]
    Invalid {
        /// The setting.
        key: &'static str,
        /// Why.
        message: String,
    },
}
