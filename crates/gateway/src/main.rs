//! The `iris-gateway` binary: `serve` runs the gateway, `pair` shows how to connect a device,
//! `devices` lists and revokes devices; `backup` and `export` copy the owner's data out;
//! `doctor` checks the setup; `reach` shows how the gateway is reached from away and `relay`
//! runs the relay for it;
//! `demo-agent` is the built-in demo ACP agent.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use iris_gateway::config::{Config, Overrides};
use iris_gateway::{Gateway, StartError, TokenSource};

#[derive(Parser)]
#[command(
    name = "iris-gateway",
    version,
    about = "Self-hosted gateway between the Iris app and an ACP agent"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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
        args: ConfigArgs,
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
struct RelayArgs {
    /// Where to listen: HTTPS with --tls-cert/--tls-key, otherwise plain HTTP (only for a relay
    /// on loopback, for tests and development).
    #[arg(long, default_value = "127.0.0.1:3340")]
    listen: std::net::SocketAddr,
    /// The certificate chain (PEM), e.g. the one the host's ACME client keeps renewed.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Where plain HTTP is served beside HTTPS (the relay answers captive-portal probes there).
    #[arg(long, default_value = "0.0.0.0:80")]
    http_listen: std::net::SocketAddr,
    /// An endpoint id the relay serves (repeat for each: the gateway's, from `iris-gateway
    /// reach`, and the devices'); none: it serves every endpoint.
    #[arg(long = "allow")]
    allow: Vec<iroh::EndpointId>,
}

#[derive(Subcommand)]
enum PairCommand {
    /// List the pairing codes waiting to be used: id, who made them, when they expire.
    List(ConfigArgs),
    /// Delete a pairing code waiting to be used (its id from `pair list`), or all of them.
    Revoke {
        /// The code's id (see `pair list`).
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        id: Option<String>,
        /// Delete every open code.
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        args: ConfigArgs,
    },
}

#[derive(clap::Args)]
struct PairArgs {
    #[command(flatten)]
    config: ConfigArgs,
    /// Show the shared token instead of a one-time code (for apps that do not keep a device
    /// token).
    #[arg(long)]
    shared: bool,
    /// Minutes the code stays valid [default: auth.pairing_code_minutes, 10].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1440))]
    minutes: Option<u64>,
}

#[derive(clap::Args)]
struct ServeArgs {
    #[command(flatten)]
    config: ConfigArgs,
    /// Agent command line (`demo` for the built-in demo agent, `none` for no agent).
    #[arg(long, env = "IRIS_AGENT")]
    agent: Option<String>,
    /// How the log on stderr is written: `text` (coloured only on a terminal) or `json` (one
    /// object per line, for log collectors).
    #[arg(long, env = "IRIS_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

/// The log's shape on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// Starts the log on stderr: the level from `IRIS_LOG` (info by default); colours only when
/// stderr is a terminal and `NO_COLOR` is unset, so journald and files get plain lines.
fn start_log(format: LogFormat) {
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

/// The settings every subcommand reads: where the data dir and token are, and the addresses.
#[derive(clap::Args)]
struct ConfigArgs {
    /// Address the gateway listens on [default: 127.0.0.1:8765].
    #[arg(long, env = "IRIS_LISTEN")]
    listen: Option<String>,
    /// The gateway's data directory [default: ~/.local/share/iris-gateway].
    #[arg(long, env = "IRIS_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Token devices authenticate with [default: generated on first start, kept in the data dir].
    /// On the command line it is visible to every user in `ps`: prefer IRIS_TOKEN, the config
    /// file or the token file.
    #[arg(long, env = "IRIS_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// TOML config file; flags and IRIS_* variables override it.
    #[arg(long, env = "IRIS_CONFIG")]
    config: Option<PathBuf>,
    /// Base URL devices reach the gateway at, e.g. https://iris.example.com [default: from --listen].
    #[arg(long, env = "IRIS_PUBLIC_URL")]
    public_url: Option<String>,
    /// Serve TLS with this PEM certificate chain (reloaded when the file changes); needs
    /// --tls-key.
    #[arg(long, env = "IRIS_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, env = "IRIS_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Serve TLS with a self-signed certificate made on the first start (pairing links pin it).
    #[arg(long, conflicts_with = "tls_cert")]
    tls_self_signed: bool,
    /// Also listen for plain HTTP (e.g. 0.0.0.0:80): redirects to https, refuses WebSockets.
    #[arg(long, env = "IRIS_HTTP_LISTEN")]
    http_listen: Option<String>,
}

impl ConfigArgs {
    fn resolve(self) -> Result<Config, ExitCode> {
        self.resolve_with(None)
    }

    fn resolve_with(self, agent: Option<String>) -> Result<Config, ExitCode> {
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
struct ExportArgs {
    /// The chat to export (a channel with its threads, or one thread).
    #[arg(long, conflicts_with = "all", required_unless_present = "all")]
    chat: Option<String>,
    /// Export every chat.
    #[arg(long)]
    all: bool,
    /// File format.
    #[arg(long, value_enum, default_value = "md")]
    format: FormatArg,
    /// Directory to write into (created if missing).
    #[arg(long, default_value = "iris-export")]
    out: PathBuf,
    /// Copy attached media files next to the documents.
    #[arg(long)]
    media: bool,
    #[command(flatten)]
    args: ConfigArgs,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum FormatArg {
    Md,
    Json,
}

#[derive(Subcommand)]
enum DevicesCommand {
    /// List paired devices: name, last seen, push backends.
    List(ConfigArgs),
    /// Revoke a device: disconnect it, drop its push registration, refuse it from now on.
    Revoke {
        /// The device id (see `devices list`).
        device_id: String,
        #[command(flatten)]
        args: ConfigArgs,
    },
}

/// Said whenever a token was given with `--token`.
const TOKEN_ON_COMMAND_LINE: &str = "--token on the command line is visible to every user of \
    this machine (ps, /proc); prefer IRIS_TOKEN, `token` in the config file, or the token file in \
    the data dir";

fn main() -> ExitCode {
    let token_on_command_line =
        std::env::args().any(|a| a == "--token" || a.starts_with("--token="));
    let cli = Cli::parse();
    if token_on_command_line {
        if let Command::Serve(args) = &cli.command {
            // Into the log, whose format (JSON) a collector may depend on.
            start_log(args.log_format);
            tracing::warn!("{TOKEN_ON_COMMAND_LINE}");
        } else {
            eprintln!("iris-gateway: warning: {TOKEN_ON_COMMAND_LINE}");
        }
    }
    // Read now (clap took it): the value must not stay readable in /proc/<pid>/environ.
    iris_gateway::harden::scrub_env("IRIS_TOKEN");
    match cli.command {
        Command::Serve(args) => serve(args),
        Command::Pair {
            command: Some(command),
            ..
        } => pair_codes(command),
        Command::Pair {
            command: None,
            args,
        } => pair(args),
        Command::Devices { command } => devices(command),
        Command::Backup { file, args } => backup(&file, args),
        Command::Export(args) => export(args),
        Command::Doctor {
            args,
            agent,
            trust_cert,
        } => doctor(args, agent, trust_cert),
        Command::Discover { wait } => discover(wait),
        Command::Reach(args) => reach(args),
        Command::Relay(args) => relay(args),
        Command::DemoAgent => demo_agent(),
    }
}

fn reach(args: ConfigArgs) -> ExitCode {
    let config = match args.resolve() {
        Ok(c) => c,
        Err(code) => return code,
    };
    // Made now, with the data dir, when there is none yet: the id the gateway will have.
    let dir = &config.data_dir;
    let key = iris_gateway::server::prepare_data_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))
        .and_then(|()| iris_gateway::reach::key::load_or_create(dir).map_err(|e| e.to_string()));
    match key {
        Ok((key, _)) => println!("Endpoint id: {}", key.public()),
        Err(e) => {
            eprintln!("iris-gateway: {e}");
            return ExitCode::from(1);
        }
    }
    if config.reach.relays.is_empty() {
        println!("Relays:      none ([reach] relays is empty): not reachable from away, nothing is contacted");
    }
    for url in &config.reach.relays {
        println!("Relay:       {url}");
    }
    ExitCode::SUCCESS
}

fn relay(args: RelayArgs) -> ExitCode {
    start_log(LogFormat::Text);
    let tls = match (args.tls_cert, args.tls_key) {
        (Some(cert), Some(key)) => Some(iris_gateway::relay::RelayTls {
            cert,
            key,
            http_listen: args.http_listen,
        }),
        _ => None,
    };
    if tls.is_none() && !args.listen.ip().is_loopback() {
        eprintln!("iris-gateway: a relay beyond loopback needs TLS (--tls-cert and --tls-key)");
        return ExitCode::from(2);
    }
    let options = iris_gateway::relay::RelayOptions {
        listen: args.listen,
        tls,
        allow: args.allow,
    };
    runtime().block_on(async move {
        let relay = match iris_gateway::relay::Relay::start(options).await {
            Ok(relay) => relay,
            Err(e) => {
                eprintln!("iris-gateway: {e}");
                return ExitCode::from(1);
            }
        };
        println!("Relay: {}", relay.url());
        match relay.run(shutdown_signal()).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("iris-gateway: {e}");
                ExitCode::from(1)
            }
        }
    })
}

fn discover(wait: u64) -> ExitCode {
    let print = |g: &iris_gateway::announce::Found| {
        let tls = if g.tls { "TLS" } else { "no TLS" };
        let url = g.ws_url().unwrap_or_default();
        let answers = match g.answers {
            true => "answers from here",
            false => "does not answer from here (a firewall, or it listens elsewhere)",
        };
        println!("{}  id={}  {tls}  {url}  {answers}", g.name, g.id);
        for other in g.addresses.iter().skip(1) {
            println!("    also at {other}");
        }
    };
    match iris_gateway::announce::discover(std::time::Duration::from_secs(wait), print) {
        Ok(0) => {
            eprintln!("No Iris gateway answered within {wait} s. A gateway is announced when it listens beyond loopback (e.g. --listen 0.0.0.0:8765) and `mdns` is on; multicast must pass between here and there.");
            ExitCode::from(1)
        }
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("iris-gateway: cannot look for gateways: {e}");
            ExitCode::from(2)
        }
    }
}

fn doctor(args: ConfigArgs, agent: Option<String>, trust: Option<PathBuf>) -> ExitCode {
    let config = match args.resolve_with(agent) {
        Ok(c) => c,
        Err(code) => return code,
    };
    match iris_gateway::admin::doctor::report(&config, trust.as_deref()) {
        true => ExitCode::SUCCESS,
        false => ExitCode::from(1),
    }
}

fn backup(file: &std::path::Path, args: ConfigArgs) -> ExitCode {
    let config = match args.resolve() {
        Ok(c) => c,
        Err(code) => return code,
    };
    match iris_gateway::admin::archive::backup(&config.data_dir, file) {
        Ok(done) => {
            println!(
                "Wrote {} ({} bytes: the store, {} media files, the keys).",
                done.path.display(),
                done.bytes,
                done.media_files
            );
            if done.media_missing > 0 {
                println!(
                    "{} media files expired while the backup ran and are not in it.",
                    done.media_missing
                );
            }
            println!(
                "Restore: stop the gateway, `tar -xf FILE -C <empty data dir>`, start it there."
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("iris-gateway: {e}");
            ExitCode::from(1)
        }
    }
}

fn export(args: ExportArgs) -> ExitCode {
    use iris_gateway::admin::archive::{ExportFormat, ExportRequest};
    let config = match args.args.resolve() {
        Ok(c) => c,
        Err(code) => return code,
    };
    let req = ExportRequest {
        chat: args.chat,
        format: match args.format {
            FormatArg::Md => ExportFormat::Markdown,
            FormatArg::Json => ExportFormat::Json,
        },
        out: args.out,
        media: args.media,
    };
    let now = iris_gateway::ids::now_ms();
    match iris_gateway::admin::archive::export(&config.data_dir, &req, now) {
        Ok(done) => {
            println!(
                "Exported {} messages in {} files to {} ({} media files copied).",
                done.messages,
                done.files.len(),
                req.out.display(),
                done.media_files
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("iris-gateway: {e}");
            ExitCode::from(1)
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn serve(args: ServeArgs) -> ExitCode {
    start_log(args.log_format);
    raise_nofile_limit();
    let config = match args.config.resolve_with(args.agent) {
        Ok(c) => c,
        Err(code) => return code,
    };
    runtime().block_on(async move {
        let data_dir = config.data_dir.clone();
        let gateway = match Gateway::bind(config).await {
            Ok(g) => g,
            Err(e) => {
                eprintln!("iris-gateway: {e}");
                return match e {
                    StartError::AddrInUse(_) | StartError::Bind { .. } => ExitCode::from(3),
                    _ => ExitCode::from(1),
                };
            }
        };
        println!("Iris Gateway {} is running.", env!("CARGO_PKG_VERSION"));
        println!("  WebSocket: ws://{}/ws", gateway.addr);
        println!("  Health:    http://{}/healthz", gateway.addr);
        println!("  Web:       http://{}/", gateway.addr);
        println!("  Data dir:  {}", data_dir.display());
        println!("  Agent:     {}", gateway.agent_label());
        println!(
            "  Sandbox:   {}",
            iris_gateway::harden::in_force().describe()
        );
        match &gateway.token_source {
            TokenSource::Generated(path) => {
                println!("  Token:     {}", gateway.token());
                println!(
                    "             (generated now and saved to {}; it is not printed again)",
                    path.display()
                );
            }
            TokenSource::Stored(path) => println!("  Token:     stored in {}", path.display()),
            TokenSource::Configured => println!("  Token:     as configured"),
        }
        if !gateway.shared_token_enabled() {
            println!("             (switched off: auth.shared_token = false)");
        }
        if let Some(reach) = gateway.reach() {
            println!("  Endpoint:  {}", reach.id());
            let relays: Vec<String> = reach.relays().iter().map(|r| r.to_string()).collect();
            println!("  Relays:    {}", relays.join(", "));
        }
        println!("Pair a device: run `iris-gateway pair` (a one-time code as QR code and link).");
        match gateway.serve(shutdown_signal()).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("iris-gateway: {e}");
                ExitCode::from(1)
            }
        }
    })
}

/// Raises the soft limit on open files to the hard limit. Every connected device holds a socket,
/// and the usual soft limit (1024) would refuse connections long before memory or CPU run out;
/// the hard limit is what the administrator allows, so taking all of it is safe.
fn raise_nofile_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed by pointer.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 || limit.rlim_cur >= limit.rlim_max
        {
            return;
        }
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) != 0 {
            tracing::warn!(soft = limit.rlim_cur, "could not raise the open-file limit");
        }
    }
}

fn pair(args: PairArgs) -> ExitCode {
    use iris_gateway::pair::{self, Pairing, Secret};
    let listen_given = args.config.listen.is_some();
    let mut config = match args.config.resolve() {
        Ok(c) => c,
        Err(code) => return code,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    // A gateway running on this data dir knows where it listens (and its public URL): its
    // word wins over the defaults and the config file, not over an explicit --listen.
    if let Some(running) = rt.block_on(iris_gateway::admin::devices::running_address(
        &config.data_dir,
    )) {
        if !listen_given {
            config.listen = running.listen;
        }
        if config.public_url.is_none() {
            config.public_url = running.public_url;
        }
    }
    let secret = if args.shared {
        if !config.auth.shared_token {
            eprintln!(
                "iris-gateway: the shared token is switched off (auth.shared_token = false); \
                 pair with a one-time code instead (without --shared)"
            );
            return ExitCode::from(2);
        }
        match shared_token(&config) {
            Ok(t) => Secret::Shared(t),
            Err(code) => return code,
        }
    } else {
        let ttl = args.minutes.map(|m| std::time::Duration::from_secs(m * 60));
        match rt.block_on(pair::create_code(&config, ttl)) {
            Ok(issued) => Secret::Code {
                code: issued.code,
                expires_at: issued.expires_at,
            },
            Err(e) => {
                eprintln!("iris-gateway: {e}");
                return ExitCode::from(1);
            }
        }
    };
    let now = iris_gateway::ids::now_ms();
    print!("{}", Pairing::new(&config, secret).text(now));
    ExitCode::SUCCESS
}

/// `pair list` and `pair revoke`.
fn pair_codes(command: PairCommand) -> ExitCode {
    use iris_gateway::admin::devices::{self, CodeSelector};
    use iris_gateway::credentials::printable;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let (args, result) = match command {
        PairCommand::List(args) => (args, None),
        PairCommand::Revoke { id, all, args } => {
            let which = match id {
                Some(id) if !all => CodeSelector::Id(id),
                _ => CodeSelector::All,
            };
            (args, Some(which))
        }
    };
    let config = match args.resolve() {
        Ok(c) => c,
        Err(code) => return code,
    };
    let now = iris_gateway::ids::now_ms();
    match result {
        None => match rt.block_on(devices::list_codes(&config.data_dir)) {
            Ok(codes) if codes.is_empty() => println!("No pairing codes are waiting to be used."),
            Ok(codes) => {
                println!("{:<14}{:<24}{:<14}EXPIRES", "CODE ID", "MADE BY", "MADE");
                for c in codes {
                    let by = c
                        .created_by
                        .as_deref()
                        .map_or("owner (pair)".to_owned(), printable);
                    let left = (c.expires_at - now).max(0) / 60_000;
                    println!(
                        "{:<14}{:<24}{:<14}in {left} min",
                        c.id,
                        by,
                        iris_gateway::admin::table::ago(now - c.created_at)
                    );
                }
            }
            Err(e) => {
                eprintln!("iris-gateway: {e}");
                return ExitCode::from(1);
            }
        },
        Some(which) => match rt.block_on(devices::revoke_codes(&config.data_dir, which)) {
            Ok(0) => {
                eprintln!(
                    "iris-gateway: no such pairing code waiting to be used (see `pair list`)"
                );
                return ExitCode::from(1);
            }
            Ok(n) => println!("Deleted {n} pairing code{}.", if n == 1 { "" } else { "s" }),
            Err(e) => {
                eprintln!("iris-gateway: {e}");
                return ExitCode::from(1);
            }
        },
    }
    ExitCode::SUCCESS
}

/// The shared token: configured, or the one kept in the data dir (made if there is none).
fn shared_token(config: &Config) -> Result<String, ExitCode> {
    match &config.token {
        Some(t) => Ok(t.expose().to_owned()),
        None => std::fs::create_dir_all(&config.data_dir)
            .and_then(|()| iris_gateway::server::load_or_create_token(&config.data_dir))
            .map(|(t, _)| t)
            .map_err(|e| {
                eprintln!("iris-gateway: data dir {}: {e}", config.data_dir.display());
                ExitCode::from(1)
            }),
    }
}

fn devices(command: DevicesCommand) -> ExitCode {
    use iris_gateway::admin::devices;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match command {
        DevicesCommand::List(args) => {
            let config = match args.resolve() {
                Ok(c) => c,
                Err(code) => return code,
            };
            match rt.block_on(devices::list(&config.data_dir)) {
                Ok(list) if list.is_empty() => println!("No devices have connected yet."),
                Ok(list) => print!("{}", iris_gateway::admin::table::devices(&list)),
                Err(e) => {
                    eprintln!("iris-gateway: {e}");
                    return ExitCode::from(1);
                }
            }
        }
        DevicesCommand::Revoke { device_id, args } => {
            let config = match args.resolve() {
                Ok(c) => c,
                Err(code) => return code,
            };
            match rt.block_on(devices::revoke(&config.data_dir, &device_id)) {
                Ok(r) => {
                    let what = if r.existed {
                        "Revoked"
                    } else {
                        "No such device; blocked the id"
                    };
                    let live = match (r.by_gateway, r.disconnected) {
                        (true, true) => "; it was connected and has been disconnected",
                        (true, false) => "; it was not connected",
                        (false, _) => {
                            " (the gateway is not running; it refuses the device when it starts)"
                        }
                    };
                    println!(
                        "{what} {}{live}.",
                        iris_gateway::credentials::printable(&device_id)
                    );
                    if !r.also.is_empty() {
                        let names: Vec<String> = r
                            .also
                            .iter()
                            .map(|d| iris_gateway::credentials::printable(d))
                            .collect();
                        println!(
                            "Also revoked, paired through a code it made: {}.",
                            names.join(", ")
                        );
                    }
                }
                Err(e) => {
                    eprintln!("iris-gateway: {e}");
                    return ExitCode::from(1);
                }
            }
        }
    }
    ExitCode::SUCCESS
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

fn demo_agent() -> ExitCode {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match rt.block_on(iris_acp::demo::run(tokio::io::stdin(), tokio::io::stdout())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("demo agent: {e}");
            ExitCode::from(1)
        }
    }
}
