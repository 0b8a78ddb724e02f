//! Configuration: one TOML file whose keys mirror the command-line flags, overridden by `IRIS_*`
//! environment variables and then by flags.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// The whole configuration, as read from the TOML file. Every key is optional; unknown keys are
/// rejected so that a typo is an error instead of a silently ignored setting.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// `listen = "127.0.0.1:8765"`.
    pub listen: Option<String>,
    /// `data_dir = "/var/lib/iris"`.
    pub data_dir: Option<PathBuf>,
    /// `token = "…"`.
    pub token: Option<String>,
    /// `[agent]` section.
    #[serde(default)]
    pub agent: AgentFileConfig,
    /// `[limits]` section.
    #[serde(default)]
    pub limits: LimitsFileConfig,
    /// `[outbox]` section.
    #[serde(default)]
    pub outbox: OutboxFileConfig,
}

/// `[agent]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentFileConfig {
    /// The agent's command line, e.g. `"hermes acp"` or `"demo"`.
    pub command: Option<String>,
    /// The agent's working directory (default: the user's home).
    pub cwd: Option<PathBuf>,
    /// Seconds a pending approval waits for an answer before it is cancelled (default 55,
    /// below Hermes' own 60 s).
    pub approval_timeout_secs: Option<u64>,
}

/// `[limits]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsFileConfig {
    /// Largest accepted text frame in bytes (default 1 MiB).
    pub max_frame_bytes: Option<usize>,
    /// Messages a device may send per minute (default 120).
    pub sends_per_minute: Option<u32>,
    /// Durable frames a connection may have queued before it is disconnected (default 4096).
    pub max_queued_frames: Option<usize>,
    /// Failed `hello`s per address per minute before further attempts are refused (default 10).
    pub auth_failures_per_minute: Option<u32>,
}

/// `[outbox]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutboxFileConfig {
    /// Days outbox frames are kept for `sync` (default 30).
    pub retention_days: Option<u64>,
    /// Group commit of durable frames (default true). Off means one fsync per write.
    pub group_commit: Option<bool>,
}

/// Limits enforced per connection.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest accepted text frame in bytes.
    pub max_frame_bytes: usize,
    /// Messages a device may send per minute.
    pub sends_per_minute: u32,
    /// Durable frames a connection may have queued before it is disconnected.
    pub max_queued_frames: usize,
    /// Failed `hello`s per address per minute.
    pub auth_failures_per_minute: u32,
    /// Time a new connection has to send `hello`.
    pub hello_timeout: Duration,
    /// Interval of delivery/keepalive WebSocket pings on an idle connection.
    pub ping_interval: Duration,
    /// A connection whose pings go unanswered this long is dropped.
    pub ping_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_frame_bytes: 1024 * 1024,
            sends_per_minute: 120,
            max_queued_frames: 4096,
            auth_failures_per_minute: 10,
            hello_timeout: Duration::from_secs(10),
            ping_interval: Duration::from_secs(15),
            ping_timeout: Duration::from_secs(45),
        }
    }
}

/// The resolved configuration the gateway runs with.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// Directory holding the database, the token file and media.
    pub data_dir: PathBuf,
    /// The token, when given; otherwise one is generated and stored in the data dir.
    pub token: Option<String>,
    /// The agent command line (`None` = choose automatically).
    pub agent_command: Option<String>,
    /// The agent's working directory.
    pub agent_cwd: Option<PathBuf>,
    /// How long a pending approval waits.
    pub approval_timeout: Duration,
    /// Minimum spacing of streamed `message.update` frames.
    pub update_interval: Duration,
    /// Per-connection limits.
    pub limits: Limits,
    /// How long outbox frames are kept.
    pub retention: Duration,
    /// Group commit on (default) or one fsync per write.
    pub group_commit: bool,
}

/// Values given on the command line or in the environment (they win over the file).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--listen` / `IRIS_LISTEN`.
    pub listen: Option<String>,
    /// `--data-dir` / `IRIS_DATA_DIR`.
    pub data_dir: Option<PathBuf>,
    /// `--token` / `IRIS_TOKEN`.
    pub token: Option<String>,
    /// `--agent` / `IRIS_AGENT`.
    pub agent: Option<String>,
    /// `--config` / `IRIS_CONFIG`.
    pub config: Option<PathBuf>,
}

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

impl Config {
    /// Resolves the configuration: defaults, then the file, then environment and flags.
    pub fn resolve(over: Overrides) -> Result<Config, ConfigError> {
        let file = match &over.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|source| ConfigError::Read { path: path.clone(), source })?;
                toml::from_str::<FileConfig>(&text).map_err(|e| ConfigError::Parse {
                    path: path.clone(),
                    message: e.message().to_owned(),
                })?
            }
            None => FileConfig::default(),
        };
        let listen_text = over.listen.or(file.listen).unwrap_or_else(|| "127.0.0.1:8765".into());
        let listen = listen_text.parse().map_err(|e| ConfigError::Invalid {
            key: "listen",
            message: format!("{listen_text:?} is not an address like 127.0.0.1:8765 ({e})"),
        })?;
        let token = over.token.or(file.token);
        if let Some(t) = &token {
            if t.trim().len() < 8 {
                return Err(ConfigError::Invalid { key: "token", message: "must be at least 8 characters".into() });
            }
        }
        let defaults = Limits::default();
        let limits = Limits {
            max_frame_bytes: file.limits.max_frame_bytes.unwrap_or(defaults.max_frame_bytes),
            sends_per_minute: file.limits.sends_per_minute.unwrap_or(defaults.sends_per_minute),
            max_queued_frames: file.limits.max_queued_frames.unwrap_or(defaults.max_queued_frames),
            auth_failures_per_minute: file
                .limits
                .auth_failures_per_minute
                .unwrap_or(defaults.auth_failures_per_minute),
            ..defaults
        };
        if limits.max_queued_frames < 16 {
            return Err(ConfigError::Invalid { key: "limits.max_queued_frames", message: "must be at least 16".into() });
        }
        Ok(Config {
            listen,
            data_dir: over.data_dir.or(file.data_dir).unwrap_or_else(default_data_dir),
            token,
            agent_command: over.agent.or(file.agent.command),
            agent_cwd: file.agent.cwd,
            approval_timeout: Duration::from_secs(file.agent.approval_timeout_secs.unwrap_or(55)),
            update_interval: Duration::from_millis(50),
            limits,
            retention: Duration::from_secs(file.outbox.retention_days.unwrap_or(30) * 86_400),
            group_commit: file.outbox.group_commit.unwrap_or(true),
        })
    }

    /// A configuration for tests: loopback on port 0, the given data dir and token.
    pub fn for_tests(data_dir: &Path, token: &str) -> Config {
        Config {
            listen: "127.0.0.1:0".parse().expect("valid address"),
            data_dir: data_dir.to_path_buf(),
            token: Some(token.to_owned()),
            agent_command: Some(format!("{} demo-agent", demo_agent_program())),
            agent_cwd: Some(data_dir.to_path_buf()),
            approval_timeout: Duration::from_secs(55),
            update_interval: Duration::from_millis(50),
            limits: Limits::default(),
            retention: Duration::from_secs(30 * 86_400),
            group_commit: true,
        }
    }
}

/// The `iris-gateway` binary next to the running test or program, quoted for a command line.
fn demo_agent_program() -> String {
    let exe = std::env::current_exe().unwrap_or_default();
    // Test binaries live in target/<profile>/deps; the gateway binary one level up.
    let dir = exe.parent().map(|d| if d.ends_with("deps") { d.parent().unwrap_or(d) } else { d });
    let bin = dir.map(|d| d.join("iris-gateway")).unwrap_or_default();
    format!("'{}'", bin.display())
}

/// The user's home directory.
pub fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from)
}

/// A path relative to the home directory for display (`~/work`), else the full path.
pub fn home_relative(path: &Path) -> String {
    match home_dir().and_then(|h| path.strip_prefix(&h).ok().map(Path::to_path_buf)) {
        Some(rel) if rel.as_os_str().is_empty() => "~".into(),
        Some(rel) => format!("~/{}", rel.display()),
        None => path.display().to_string(),
    }
}

/// `$XDG_DATA_HOME/iris-gateway`, else `~/.local/share/iris-gateway`, else `./iris-data`.
pub fn default_data_dir() -> PathBuf {
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(xdg).join("iris-gateway");
    }
    match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        Some(home) => PathBuf::from(home).join(".local/share/iris-gateway"),
        None => PathBuf::from("iris-data"),
    }
}
