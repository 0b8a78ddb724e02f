//! Configuration: one TOML file whose keys mirror the command-line flags, overridden by `IRIS_*`
//! environment variables and then by flags.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

pub mod agents;
pub mod auth;
pub mod cron;
mod error;
pub mod files;
mod limits;
mod parse;
pub mod push;
pub mod reach;
mod secret;
pub mod secrets;
pub mod tls;
pub mod voice;
pub mod workspace;

pub use agents::{AgentFileConfig, AgentTimeouts, NamedAgent};
pub use error::ConfigError;
pub use limits::{Limits, LimitsFileConfig};
use parse::{check_retention_days, parse_origin, parse_proxies, parse_public_url};
pub use secret::Secret;

pub use secrets::MIN_TOKEN_CHARS;

/// The default spacing of streamed `message.update` frames (leading edge: a chunk after a quiet
/// interval goes out at once). Chosen from `iris-bench stream` (BENCHMARKS.md).
/// The database file in the data dir.
pub const DB_FILE: &str = "iris.db";

/// The generated token's file in the data dir.
pub const TOKEN_FILE: &str = "token";

pub const DEFAULT_UPDATE_INTERVAL: Duration = Duration::from_millis(12);

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
    pub token: Option<Secret>,
    /// `token_file = "/path"`: a file holding the token, kept out of the configuration file.
    pub token_file: Option<PathBuf>,
    /// `public_url = "https://iris.example.com"`: where devices reach the gateway (see
    /// [`Config::public_url`]).
    pub public_url: Option<String>,
    /// `trusted_proxies = ["127.0.0.1"]`: reverse proxies whose `X-Forwarded-For` names the
    /// client address the failed-`hello` throttle counts.
    pub trusted_proxies: Option<Vec<String>>,
    /// `allowed_origins = ["https://app.example.com"]`: browser origins besides the gateway's own
    /// that may open `/ws`.
    pub allowed_origins: Option<Vec<String>>,
    /// `mdns = false`: do not announce the gateway on the LAN over mDNS (it is announced when it
    /// listens beyond loopback).
    pub mdns: Option<bool>,
    /// `[auth]` section.
    #[serde(default)]
    pub auth: auth::AuthFileConfig,
    /// `[agent]` section.
    #[serde(default)]
    pub agent: AgentFileConfig,
    /// `[agents.NAME]` sections: several agents, chosen per channel.
    #[serde(default)]
    pub agents: std::collections::BTreeMap<String, agents::NamedAgentFileConfig>,
    /// `default_agent = "NAME"`: the agent of the default channel and of new channels.
    pub default_agent: Option<String>,
    /// `[limits]` section.
    #[serde(default)]
    pub limits: LimitsFileConfig,
    /// `[outbox]` section.
    #[serde(default)]
    pub outbox: OutboxFileConfig,
    /// `[media]` section.
    #[serde(default)]
    pub media: MediaFileConfig,
    /// `[cron]` section.
    #[serde(default)]
    pub cron: CronFileConfig,
    /// `[push]` section.
    #[serde(default)]
    pub push: push::PushFileConfig,
    /// `[tls]` section.
    #[serde(default)]
    pub tls: tls::TlsFileConfig,
    /// `[files]` section.
    #[serde(default)]
    pub files: files::FilesFileConfig,
    /// `[voice]` section.
    #[serde(default)]
    pub voice: voice::VoiceFileConfig,
    /// `[reach]` section.
    #[serde(default)]
    pub reach: reach::ReachFileConfig,
}

/// `[cron]`: scheduled prompts.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CronFileConfig {
    /// IANA time zone of cron expressions and of times without an offset, e.g.
    /// `"Europe/Berlin"` (default: the host's zone, from `TZ` or `/etc/localtime`, else UTC).
    pub timezone: Option<String>,
    /// Run jobs missed while the gateway was down once at startup (default true).
    pub catch_up: Option<bool>,
}

/// `[media]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MediaFileConfig {
    /// Largest accepted upload in bytes (default 100 MiB); also the largest file taken from the
    /// agent.
    pub max_upload_bytes: Option<u64>,
    /// Directories whose files the agent may share with `MEDIA:<path>` lines (default: the
    /// agent's working directory).
    pub allowed_dirs: Option<Vec<PathBuf>>,
    /// Bytes one device's uploads may hold while open or not yet used by a message (default
    /// 1 GiB).
    pub max_pending_bytes_per_device: Option<u64>,
    /// The same for all devices together (default 4 GiB).
    pub max_pending_bytes: Option<u64>,
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

/// The resolved configuration the gateway runs with.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// Directory holding the database, the token file and media.
    pub data_dir: PathBuf,
    /// The token, when given; otherwise one is generated and stored in the data dir.
    pub token: Option<Secret>,
    /// Which credentials sign devices in; pairing codes' lifetime.
    pub auth: auth::AuthConfig,
    /// The agent command line (`None` = choose automatically).
    pub agent_command: Option<String>,
    /// The agent's working directory (`None`: [`workspace::default_workspace`]).
    pub agent_cwd: Option<PathBuf>,
    /// Whether agents are confined (Landlock, where the kernel has it) away from the data dir.
    pub confine_agent: bool,
    /// Keep one agent session open ahead of need for the next new chat (`[agent] spare_session`,
    /// default true; `[agents.NAME]` may say otherwise).
    pub spare_session: bool,
    /// Named agents (`[agents.NAME]`), besides `agent_command`'s and the demo agent.
    pub agents: Vec<NamedAgent>,
    /// The agent of the default channel and of channels created without one.
    pub default_agent: Option<String>,
    /// How long a pending approval waits.
    pub approval_timeout: Duration,
    /// A turn without agent output for this long is cancelled.
    pub turn_idle_timeout: Duration,
    /// A cancelled turn that has not ended after this long restarts the agent.
    pub cancel_grace: Duration,
    /// Minimum spacing of streamed `message.update` frames.
    pub update_interval: Duration,
    /// Per-connection limits.
    pub limits: Limits,
    /// How long outbox frames are kept.
    pub retention: Duration,
    /// Group commit on (default) or one fsync per write.
    pub group_commit: bool,
    /// Media transfer settings.
    pub media: MediaConfig,
    /// The file browser.
    pub files: files::FilesConfig,
    /// Voice notes.
    pub voice: voice::VoiceConfig,
    /// Relays the gateway is reached through from away.
    pub reach: reach::ReachConfig,
    /// The base URL devices reach the gateway at, when configured (no trailing slash).
    pub public_url: Option<String>,
    /// Scheduled prompts.
    pub cron: cron::CronConfig,
    /// Push notifications to devices without a live connection.
    pub push: push::PushConfig,
    /// Reverse proxies trusted to name the client address in `X-Forwarded-For`.
    pub trusted_proxies: Vec<IpAddr>,
    /// Browser origins (`scheme://host[:port]`) besides the gateway's own that may open `/ws`.
    pub allowed_origins: Vec<String>,
    /// TLS served by the gateway itself; `None`: plain HTTP (behind a TLS proxy, or on a LAN).
    pub tls: Option<tls::TlsConfig>,
    /// The SHA-256 fingerprint (hex) of a self-signed certificate, set once it is loaded: pairing
    /// links carry it so that the app can pin it.
    pub tls_pin: Option<String>,
    /// Announce the gateway on the LAN over mDNS when it listens beyond loopback (`mdns`,
    /// default true).
    pub mdns: bool,
    /// The configuration file and the other files outside the data dir that hold secrets.
    pub secrets: secrets::SecretPlaces,
}

/// Media transfer settings.
#[derive(Debug, Clone)]
pub struct MediaConfig {
    /// Largest accepted upload (and largest file taken from the agent), in bytes.
    pub max_upload_bytes: u64,
    /// Directories `MEDIA:<path>` lines may name files in; empty means the agent's working dir.
    pub allowed_dirs: Vec<PathBuf>,
    /// How long media that no message uses is kept.
    pub unreferenced_ttl: Duration,
    /// How often expired media is swept.
    pub sweep_interval: Duration,
    /// Bytes one device's open and unused uploads may hold.
    pub max_pending_bytes_per_device: u64,
    /// Bytes all devices' open and unused uploads may hold.
    pub max_pending_bytes: u64,
}

impl Default for MediaConfig {
    fn default() -> Self {
        MediaConfig {
            max_upload_bytes: 100 * 1024 * 1024,
            max_pending_bytes_per_device: 1024 * 1024 * 1024,
            max_pending_bytes: 4 * 1024 * 1024 * 1024,
            allowed_dirs: Vec::new(),
            unreferenced_ttl: Duration::from_secs(24 * 3600),
            sweep_interval: Duration::from_secs(3600),
        }
    }
}

/// Values given on the command line or in the environment (they win over the file).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--listen` / `IRIS_LISTEN`.
    pub listen: Option<String>,
    /// `--data-dir` / `IRIS_DATA_DIR`.
    pub data_dir: Option<PathBuf>,
    /// `--token` / `IRIS_TOKEN`.
    pub token: Option<Secret>,
    /// `--agent` / `IRIS_AGENT`.
    pub agent: Option<String>,
    /// `--config` / `IRIS_CONFIG`.
    pub config: Option<PathBuf>,
    /// `--public-url` / `IRIS_PUBLIC_URL`.
    pub public_url: Option<String>,
    /// `--tls-cert` / `IRIS_TLS_CERT`.
    pub tls_cert: Option<PathBuf>,
    /// `--tls-key` / `IRIS_TLS_KEY`.
    pub tls_key: Option<PathBuf>,
    /// `--tls-self-signed`.
    pub tls_self_signed: bool,
    /// `--http-listen` / `IRIS_HTTP_LISTEN`: the plain HTTP redirect to https.
    pub http_listen: Option<String>,
}

impl Config {
    /// Resolves the configuration: defaults, then the file, then environment and flags.
    pub fn resolve(over: Overrides) -> Result<Config, ConfigError> {
        let file = match &over.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.clone(),
                    source,
                })?;
                toml::from_str::<FileConfig>(&text).map_err(|e| ConfigError::Parse {
                    path: path.clone(),
                    message: e.message().to_owned(),
                })?
            }
            None => FileConfig::default(),
        };
        let files = files::FilesConfig::resolve(&file.files, &file.agent, &file.agents)?;
        let listen_text = over
            .listen
            .or(file.listen)
            .unwrap_or_else(|| "127.0.0.1:8765".into());
        let listen = listen_text.parse().map_err(|e| ConfigError::Invalid {
            key: "listen",
            message: format!("{listen_text:?} is not an address like 127.0.0.1:8765 ({e})"),
        })?;
        let token_in_config = file.token.is_some();
        let token = match (over.token.or(file.token), &file.token_file) {
            (Some(_), Some(_)) if token_in_config => {
                return Err(ConfigError::Invalid {
                    key: "token_file",
                    message: "set either token or token_file, not both".into(),
                })
            }
            (Some(t), _) => Some(t),
            (None, Some(path)) => Some(secrets::read_token_file(path)?),
            (None, None) => None,
        };
        if let Some(t) = &token {
            secrets::check_token(t.expose(), "token")?;
        }
        let secrets = secrets::SecretPlaces {
            config_file: over.config.clone(),
            token_file: file.token_file.clone(),
            token_in_config,
        };
        let limits = limits::resolve(&file.limits)?;
        let public_url = over
            .public_url
            .or(file.public_url)
            .map(|u| parse_public_url(&u))
            .transpose()?;
        let mut cron = cron::CronConfig {
            catch_up: file.cron.catch_up.unwrap_or(true),
            ..Default::default()
        };
        if let Some(tz) = &file.cron.timezone {
            cron.timezone = tz.parse().map_err(|_| ConfigError::Invalid {
                key: "cron.timezone",
                message: format!(
                    "{tz:?} is not an IANA time zone like \"Europe/Berlin\" or \"UTC\""
                ),
            })?;
        }
        let trusted_proxies = parse_proxies(file.trusted_proxies.unwrap_or_default())?;
        let allowed_origins = file
            .allowed_origins
            .unwrap_or_default()
            .iter()
            .map(|o| parse_origin(o))
            .collect::<Result<Vec<_>, _>>()?;
        let retention_days = check_retention_days(file.outbox.retention_days.unwrap_or(30))?;
        let timeouts = AgentTimeouts::from_file(&file.agent);
        let named = agents::resolve(file.agents, timeouts)?;
        Ok(Config {
            listen,
            data_dir: over
                .data_dir
                .or(file.data_dir)
                .unwrap_or_else(default_data_dir),
            token,
            auth: auth::AuthConfig::resolve(file.auth)?,
            agent_command: over.agent.or(file.agent.command),
            agent_cwd: file.agent.cwd,
            confine_agent: file.agent.confine.unwrap_or(true),
            spare_session: file.agent.spare_session.unwrap_or(true),
            agents: named,
            default_agent: file.default_agent,
            approval_timeout: timeouts.approval,
            turn_idle_timeout: timeouts.turn_idle,
            cancel_grace: timeouts.cancel_grace,
            update_interval: DEFAULT_UPDATE_INTERVAL,
            limits,
            retention: Duration::from_secs(retention_days * 86_400),
            group_commit: file.outbox.group_commit.unwrap_or(true),
            media: media_config(file.media),
            files,
            voice: voice::VoiceConfig::resolve(file.voice)?,
            reach: reach::ReachConfig::resolve(file.reach)?,
            public_url,
            cron,
            push: push::PushConfig::resolve(file.push)?,
            trusted_proxies,
            allowed_origins,
            tls: tls::TlsConfig::resolve(
                file.tls,
                over.tls_cert,
                over.tls_key,
                over.tls_self_signed,
                over.http_listen,
            )?,
            tls_pin: None,
            mdns: file.mdns.unwrap_or(true),
            secrets,
        })
    }

    /// The base URL devices reach the gateway at (`http(s)://host[:port][/prefix]`, no trailing
    /// slash): `public_url` when set, else derived from `listen` — an unspecified address
    /// (`0.0.0.0`, `::`) is replaced by this machine's host name. Behind a reverse proxy the
    /// gateway is reached elsewhere than it listens, which is what `public_url` is for.
    pub fn public_url(&self) -> String {
        if let Some(url) = &self.public_url {
            return url.clone();
        }
        let port = self.listen.port();
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        match self.listen.ip() {
            ip if ip.is_unspecified() => format!(
                "{scheme}://{}:{port}",
                host_name().unwrap_or_else(|| "localhost".into())
            ),
            std::net::IpAddr::V6(ip) => format!("{scheme}://[{ip}]:{port}"),
            ip => format!("{scheme}://{ip}:{port}"),
        }
    }

    /// The files outside the data dir that hold secrets ([`secrets::secret_files`]).
    pub fn secret_files(&self) -> Vec<PathBuf> {
        secrets::secret_files(&self.secrets, self.tls.as_ref(), self.push.fcm.as_ref())
    }

    /// What the agent may not reach and the file browser never serves: the data dir and
    /// [`Config::secret_files`].
    pub fn protected_places(&self) -> Vec<PathBuf> {
        let mut places = vec![self.data_dir.clone()];
        places.extend(self.secret_files());
        places
    }

    /// The WebSocket URL for [`Config::public_url`]: `ws://…/ws` or `wss://…/ws`.
    pub fn public_ws_url(&self) -> String {
        let base = self.public_url();
        let rest = base.strip_prefix("https://").map(|r| format!("wss://{r}"));
        let ws = rest
            .unwrap_or_else(|| format!("ws://{}", base.strip_prefix("http://").unwrap_or(&base)));
        format!("{ws}/ws")
    }

    /// A configuration for tests: loopback on port 0, the given data dir and token.
    pub fn for_tests(data_dir: &Path, token: &str) -> Config {
        Config {
            listen: "127.0.0.1:0".parse().expect("valid address"),
            data_dir: data_dir.to_path_buf(),
            token: Some(token.into()),
            auth: auth::AuthConfig::default(),
            agent_command: Some(format!("{} demo-agent", demo_agent_program())),
            agent_cwd: Some(data_dir.to_path_buf()),
            // Tests run their agents in the data dir; the confinement tests switch it on.
            confine_agent: false,
            spare_session: true,
            agents: Vec::new(),
            default_agent: None,
            approval_timeout: Duration::from_secs(55),
            turn_idle_timeout: Duration::from_secs(600),
            cancel_grace: Duration::from_secs(5),
            update_interval: DEFAULT_UPDATE_INTERVAL,
            limits: Limits::default(),
            retention: Duration::from_secs(30 * 86_400),
            group_commit: true,
            media: MediaConfig::default(),
            files: files::FilesConfig::default(),
            voice: voice::VoiceConfig::default(),
            reach: reach::ReachConfig::default(),
            public_url: None,
            cron: cron::CronConfig::default(),
            push: push::PushConfig::default(),
            trusted_proxies: Vec::new(),
            allowed_origins: Vec::new(),
            tls: None,
            tls_pin: None,
            mdns: true,
            secrets: secrets::SecretPlaces::default(),
        }
    }
}

/// `[media]`, resolved over the defaults.
fn media_config(file: MediaFileConfig) -> MediaConfig {
    let d = MediaConfig::default();
    MediaConfig {
        max_upload_bytes: file.max_upload_bytes.unwrap_or(d.max_upload_bytes),
        allowed_dirs: file.allowed_dirs.unwrap_or_default(),
        max_pending_bytes_per_device: file
            .max_pending_bytes_per_device
            .unwrap_or(d.max_pending_bytes_per_device),
        max_pending_bytes: file.max_pending_bytes.unwrap_or(d.max_pending_bytes),
        ..d
    }
}

/// This machine's host name, if it has one.
pub fn host_name() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates on success when
    // the name fits, and the length is bounded by the buffer in any case.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return None;
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..end]).trim().to_owned();
    (!name.is_empty()).then_some(name)
}

/// The `iris-gateway` binary next to the running test or program, quoted for a command line.
fn demo_agent_program() -> String {
    format!("'{}'", gateway_program().unwrap_or_default().display())
}

/// The `iris-gateway` binary: this program, or, in a test binary (which lives in
/// `target/<profile>/deps`), the gateway binary one level up.
pub fn gateway_program() -> std::io::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    match exe.parent() {
        Some(deps) if deps.ends_with("deps") => {
            Ok(deps.parent().unwrap_or(deps).join("iris-gateway"))
        }
        _ => Ok(exe),
    }
}

/// The user's home directory.
pub fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_never_shows_in_debug_output() {
        let token = "s3cret-token-value";
        let config = Config::for_tests(Path::new("/tmp"), token);
        assert!(!format!("{config:?}").contains(token));
        let over = Overrides {
            token: Some(token.into()),
            ..Overrides::default()
        };
        assert!(!format!("{over:?}").contains(token));
        let file: FileConfig = toml::from_str(&format!("token = \"{token}\"")).expect("toml");
        assert!(!format!("{file:?}").contains(token));
        assert_eq!(file.token.as_ref().map(Secret::expose), Some(token));
    }

    fn resolve_file(text: &str) -> Result<Config, ConfigError> {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("iris.toml");
        std::fs::write(&path, text).expect("write config");
        Config::resolve(Overrides {
            config: Some(path),
            ..Overrides::default()
        })
    }

    #[test]
    fn named_agents_take_their_own_settings_and_the_agent_section_s_timeouts() {
        let config = resolve_file(
            "default_agent = \"claude\"\n\
             [agent]\nturn_idle_timeout_secs = 30\n\
             [agents.claude]\ncommand = \"claude-agent-acp\"\ncwd = \"/srv/code\"\n\
             approval_timeout_secs = 20\nenv = { ANTHROPIC_API_KEY = \"sk-secret\" }\n\
             [agents.hermes]\ncommand = \"hermes acp\"",
        )
        .expect("valid config");
        assert_eq!(config.default_agent.as_deref(), Some("claude"));
        let claude = &config.agents[0];
        assert_eq!(
            (claude.name.as_str(), claude.command.as_str()),
            ("claude", "claude-agent-acp")
        );
        assert_eq!(claude.cwd.as_deref(), Some(Path::new("/srv/code")));
        assert_eq!(claude.timeouts.approval, Duration::from_secs(20));
        assert_eq!(claude.timeouts.turn_idle, Duration::from_secs(30));
        assert_eq!(claude.env[0].0, "ANTHROPIC_API_KEY");
        assert!(!format!("{config:?}").contains("sk-secret"));
        assert_eq!(config.agents[1].timeouts.approval, Duration::from_secs(55));
    }

    #[test]
    fn out_of_range_and_malformed_values_are_clear_errors() {
        let cases = [
            ("[outbox]\nretention_days = 0", "outbox.retention_days"),
            (
                "[outbox]\nretention_days = 18446744073709551615",
                "outbox.retention_days",
            ),
            ("[outbox]\nretention_days = 36501", "outbox.retention_days"),
            ("trusted_proxies = [\"10.0.0.0/8\"]", "trusted_proxies"),
            ("allowed_origins = [\"evil.example\"]", "allowed_origins"),
            (
                "allowed_origins = [\"https://a.example/path\"]",
                "allowed_origins",
            ),
        ];
        for (text, key) in cases {
            match resolve_file(text) {
                Err(ConfigError::Invalid { key: k, .. }) => assert_eq!(k, key, "{text}"),
                other => panic!("{text}: expected an invalid {key}, got {other:?}"),
            }
        }
        let ok = resolve_file(
            "trusted_proxies = [\"127.0.0.1\"]\nallowed_origins = [\"https://App.example/\"]\n\
             [outbox]\nretention_days = 365",
        )
        .expect("valid config");
        assert_eq!(ok.allowed_origins, ["https://app.example"]);
        let cases = [
            ("[agents.Bad]\ncommand = \"x\"", "agents"),
            ("[agents.x]\ncommand = \"  \"", "agents"),
        ];
        for (text, key) in cases {
            match resolve_file(text) {
                Err(ConfigError::Invalid { key: k, .. }) => assert_eq!(k, key, "{text}"),
                other => panic!("{text}: expected an invalid {key}, got {other:?}"),
            }
        }
        assert!(matches!(
            resolve_file("[agents.x]\nkommand = \"x\""),
            Err(ConfigError::Parse { .. })
        ));
        assert_eq!(ok.retention, Duration::from_secs(365 * 86_400));
    }
}
