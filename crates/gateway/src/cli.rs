//! The command line of `iris-gateway`: its subcommands and their arguments (clap), how the
//! shared ones resolve into a [`Config`], and the log on stderr.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use iris_gateway::config::{Config, Overrides};

#[derive(Parser)]
#[command(
    name = "iris-gateway",
    version,
    about = "Self-hosted gateway between the Iris app and an ACP agent"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run the gateway.
    Serve(ServeArgs),
    /// Create a one-time pairing code and show it as a QR code and URLs for a phone or a browser;
    /// `pair list` and `pair revoke` show and delete codes waiting to be used.
    #[command(args_conflicts_with_subcommands = true)]
    Pair {
        #[command(subcommand)]
        command: Option<PairCommand>,
        #[command(flatten)]
        args: PairArgs,
    },
    /// List or revoke paired devices.
    Devices {
        #[command(subcommand)]
        command: DevicesCommand,
    },
    /// Write a backup of the data dir (store, media, keys) to one tar file, while the gateway runs.
    Backup {
        /// The archive to write; it must not exist yet.
        file: PathBuf,
        #[command(flatten)]
        args: DataArgs,
    },
    /// Export conversations as Markdown or JSON files.
    Export(ExportArgs),
    /// Check the setup the way a phone comes in: private data dir, TLS, public_url and a
    /// WebSocket through it, the agents, credentials. Exits 1 when something is broken.
    Doctor {
        #[command(flatten)]
        args: ConfigArgs,
        /// Agent command line, as given to `serve`.
        #[arg(long, env = "IRIS_AGENT")]
        agent: Option<String>,
        /// A certificate (PEM) to trust for public_url besides the public roots: the one a
        /// proxy in front serves, when it is self-signed.
        #[arg(long)]
        trust_cert: Option<PathBuf>,
    },
    /// List the Iris gateways on this network (announced over mDNS as `_iris._tcp`). Exits 1
    /// when none answered.
    Discover {
        /// How long to listen for answers, in seconds.
        #[arg(long, default_value_t = 5)]
        wait: u64,
    },
    /// Show how devices reach this gateway from away: its endpoint id (made now if the data dir
    /// has none) and the relays of `[reach] relays`.
    Reach(ConfigArgs),
    /// Run a relay for reaching the gateway from away (iroh's relay server), e.g. on a small
    /// server with a domain. It never sees the frames: they are end-to-end encrypted.
    Relay(RelayArgs),
    /// Run the built-in demo ACP agent on stdin/stdout (a deterministic stand-in for a real agent).
    #[command(hide = true)]
    DemoAgent,
}

#[derive(clap::Args)]
pub struct RelayArgs {
    /// Where to listen: HTTPS with --tls-cert/--tls-key, otherwise plain HTTP (only for a relay
    /// on loopback, for tests and development).
    #[arg(long, default_value = "127.0.0.1:3340")]
    pub listen: std::net::SocketAddr,
    /// The certificate chain (PEM), e.g. the one the host's ACME client keeps renewed.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Where plain HTTP is served beside HTTPS (the relay answers captive-portal probes there).
    #[arg(long, default_value = "0.0.0.0:80")]
    pub http_listen: std::net::SocketAddr,
    /// An endpoint id the relay serves (repeat for each: the gateway's, from `iris-gateway
    /// reach`, and the devices'); none: it serves every endpoint.
    #[arg(long = "allow")]
    pub allow: Vec<iroh::EndpointId>,
}

#[derive(Subcommand)]
pub enum PairCommand {
    /// List the pairing codes waiting to be used: id, who made them, when they expire.
    List(DataArgs),
    /// Delete a pairing code waiting to be used (its id from `pair list`), or all of them.
    Revoke {
        /// The code's id (see `pair list`).
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        id: Option<String>,
        /// Delete every open code.
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        args: DataArgs,
    },
}

#[derive(clap::Args)]
pub struct PairArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Show the shared token instead of a one-time code (for apps that do not keep a device
    /// token).
    #[arg(long)]
    pub shared: bool,
    /// Minutes the code stays valid [default: auth.pairing_code_minutes, 10].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1440))]
    pub minutes: Option<u64>,
}

#[derive(clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Agent command line (`demo` for the built-in demo agent, `none` for no agent).
    #[arg(long, env = "IRIS_AGENT")]
    pub agent: Option<String>,
    /// How the log on stderr is written: `text` (coloured only on a terminal) or `json` (one
    /// object per line, for log collectors).
    #[arg(long, env = "IRIS_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// The log's shape on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Starts the log on stderr: the level from `IRIS_LOG` (info by default); colours only when
/// stderr is a terminal and `NO_COLOR` is unset, so journald and files get plain lines.
pub fn start_log(format: LogFormat) {
    use std::io::IsTerminal;
    static STARTED: std::sync::Once = std::sync::Once::new();
    let mut first = false;
    STARTED.call_once(|| first = true);
    if !first {
        return;
    }
    let filter =
        tracing_subscriber::EnvFilter::try_from_env("IRIS_LOG").unwrap_or_else(|_| "info".into());
    let log = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => log.json().init(),
        LogFormat::Text => {
            let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            log.with_ansi(colour).init();
        }
    }
}

/// The settings of the commands that only work on the data dir (`backup`, `export`, `devices`,
/// `pair list` and `pair revoke`): where it is, given directly or by the config file.
#[derive(clap::Args)]
pub struct DataArgs {
    /// The gateway's data directory [default: $XDG_DATA_HOME/iris-gateway, else
    /// ~/.local/share/iris-gateway].
    #[arg(long, env = "IRIS_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// TOML config file (its `data_dir`); --data-dir and IRIS_DATA_DIR override it.
    #[arg(long, env = "IRIS_CONFIG")]
    pub config: Option<PathBuf>,
}

impl DataArgs {
    pub fn resolve(self) -> Result<Config, ExitCode> {
        ConfigArgs {
            data_dir: self.data_dir,
            config: self.config,
            ..ConfigArgs::default()
        }
        .resolve()
    }
}

/// The settings of the commands that serve or reach the gateway (`serve`, `pair`, `doctor`):
/// where the data dir and token are, and the addresses.
#[derive(clap::Args, Default)]
pub struct ConfigArgs {
    /// Address the gateway listens on [default: 127.0.0.1:8765].
    #[arg(long, env = "IRIS_LISTEN")]
    pub listen: Option<String>,
    /// The gateway's data directory [default: $XDG_DATA_HOME/iris-gateway, else
    /// ~/.local/share/iris-gateway].
    #[arg(long, env = "IRIS_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Token devices authenticate with [default: generated on first start, kept in the data dir].
    /// On the command line it is visible to every user in `ps`: prefer IRIS_TOKEN, the config
    /// file or the token file.
    #[arg(long, env = "IRIS_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// TOML config file; flags and IRIS_* variables override it.
    #[arg(long, env = "IRIS_CONFIG")]
    pub config: Option<PathBuf>,
    /// Base URL devices reach the gateway at, e.g. https://iris.example.com [default: from --listen].
    #[arg(long, env = "IRIS_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Serve TLS with this PEM certificate chain (reloaded when the file changes); needs
    /// --tls-key.
    #[arg(long, env = "IRIS_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, env = "IRIS_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Serve TLS with a self-signed certificate made on the first start (pairing links pin it).
    #[arg(long, conflicts_with = "tls_cert")]
    pub tls_self_signed: bool,
    /// Also listen for plain HTTP (e.g. 0.0.0.0:80): redirects to https, refuses WebSockets.
    #[arg(long, env = "IRIS_HTTP_LISTEN")]
    pub http_listen: Option<String>,
}

impl ConfigArgs {
    pub fn resolve(self) -> Result<Config, ExitCode> {
        self.resolve_with(None)
    }

    pub fn resolve_with(self, agent: Option<String>) -> Result<Config, ExitCode> {
        let over = Overrides {
            listen: self.listen,
            data_dir: self.data_dir,
            token: self.token.map(Into::into),
            config: self.config,
            public_url: self.public_url,
            agent,
            tls_cert: self.tls_cert,
            tls_key: self.tls_key,
            tls_self_signed: self.tls_self_signed,
            http_listen: self.http_listen,
        };
        Config::resolve(over).map_err(|e| {
            eprintln!("iris-gateway: {e}");
            ExitCode::from(2)
        })
    }
}

#[derive(clap::Args)]
pub struct ExportArgs {
    /// The chat to export (a channel with its threads, or one thread).
    #[arg(long, conflicts_with = "all", required_unless_present = "all")]
    pub chat: Option<String>,
    /// Export every chat.
    #[arg(long)]
    pub all: bool,
    /// File format.
    #[arg(long, value_enum, default_value = "md")]
    pub format: FormatArg,
    /// Directory to write into (created if missing).
    #[arg(long, default_value = "iris-export")]
    pub out: PathBuf,
    /// Copy attached media files next to the documents.
    #[arg(long)]
    pub media: bool,
    #[command(flatten)]
    pub args: DataArgs,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum FormatArg {
    Md,
    Json,
}

#[derive(Subcommand)]
pub enum DevicesCommand {
    /// List paired devices: name, last seen, push backends.
    List(DataArgs),
    /// Revoke a device: disconnect it, drop its push registration, refuse it from now on.
    Revoke {
        /// The device id (see `devices list`).
        device_id: String,
        #[command(flatten)]
        args: DataArgs,
    },
}
