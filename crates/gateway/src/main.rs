//! The `iris-gateway` binary: `serve` runs the gateway, `pair` shows how to connect a device,
//! `devices` lists and revokes devices; `backup` and `export` copy the owner's data out;
//! `doctor` checks the setup; `reach` shows how the gateway is reached from away and `relay`
//! runs the relay for it;
//! `demo-agent` is the built-in demo ACP agent.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

mod cli;

use clap::Parser;
use cli::*;
use iris_gateway::config::Config;
use iris_gateway::text::count;
use iris_gateway::{Gateway, StartError, TokenSource};

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
    let listen_given = args.listen.is_some();
    let mut config = match args.resolve_with(agent) {
        Ok(c) => c,
        Err(code) => return code,
    };
    // A gateway running on this data dir says where and how it listens: the checks go there.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let running = rt.block_on(iris_gateway::admin::devices::running_address(
        &config.data_dir,
    ));
    if let Some(note) = running.and_then(|r| r.adopt(&mut config, listen_given)) {
        println!("warn: {note}");
    }
    match iris_gateway::admin::doctor::report(&config, trust.as_deref()) {
        true => ExitCode::SUCCESS,
        false => ExitCode::from(1),
    }
}

fn backup(file: &std::path::Path, args: DataArgs) -> ExitCode {
    let config = match args.resolve() {
        Ok(c) => c,
        Err(code) => return code,
    };
    match iris_gateway::admin::archive::backup(&config.data_dir, file) {
        Ok(done) => {
            println!(
                "Wrote {} ({} bytes: the store, {}, the keys).",
                done.path.display(),
                done.bytes,
                count(done.media_files, "media file", "media files")
            );
            if done.media_missing > 0 {
                println!(
                    "{} expired while the backup ran and {} not in it.",
                    count(done.media_missing, "media file", "media files"),
                    if done.media_missing == 1 { "is" } else { "are" }
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
                "Exported {} in {} to {} ({} copied).",
                count(done.messages, "message", "messages"),
                count(done.files.len(), "file", "files"),
                req.out.display(),
                count(done.media_files, "media file", "media files")
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
        let (ws, http) = match gateway.serves_tls() {
            true => ("wss", "https"),
            false => ("ws", "http"),
        };
        println!("  WebSocket: {ws}://{}/ws", gateway.addr);
        println!("  Health:    {http}://{}/healthz", gateway.addr);
        println!("  Web:       {http}://{}/", gateway.addr);
        if let Some(pin) = gateway.tls_pin() {
            println!("  TLS pin:   {pin} (self-signed; pairing links carry it)");
        }
        println!("  Data dir:  {}", data_dir.display());
        println!("  Agent:     {}", gateway.agent_label());
        println!(
            "  Sandbox:   {}",
            iris_gateway::harden::in_force().describe()
        );
        match &gateway.token_source {
            // On a terminal the owner reads it once; anywhere else (a service's journal, a log
            // file) it would stay on record, so only its file is named.
            TokenSource::Generated(path) if std::io::stdout().is_terminal() => {
                println!("  Token:     {}", gateway.token());
                println!(
                    "             (generated now and saved to {}; it is not printed again)",
                    path.display()
                );
            }
            TokenSource::Generated(path) => println!(
                "  Token:     generated now and saved to {} (not printed off a terminal; \
                 pair devices with a code, below)",
                path.display()
            ),
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
        println!(
            "Pair a device: run `{} pair` (a one-time code as QR code and link).",
            own_command()
        );
        match gateway.serve(shutdown_signal()).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("iris-gateway: {e}");
                ExitCode::from(1)
            }
        }
    })
}

/// How the owner's shell runs this binary: `iris-gateway` when that name on `PATH` is this very
/// file (installed with `cargo install`), else its full path (`cargo run` from a checkout).
fn own_command() -> String {
    let me = std::env::current_exe().and_then(std::fs::canonicalize).ok();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let on_path = std::env::split_paths(&path)
        .map(|dir| dir.join("iris-gateway"))
        .find(|p| p.is_file())
        .and_then(|p| std::fs::canonicalize(p).ok());
    match (me, on_path) {
        (Some(me), Some(found)) if me == found => "iris-gateway".to_owned(),
        (Some(me), _) => me.display().to_string(),
        (None, _) => "iris-gateway".to_owned(),
    }
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
        if let Some(note) = running.adopt(&mut config, listen_given) {
            eprintln!("iris-gateway: {note}");
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
