//! The `iris-gateway` binary: `serve` runs the gateway; `demo-agent` is the built-in demo ACP agent.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use iris_gateway::config::{Config, Overrides};
use iris_gateway::{Gateway, StartError, TokenSource};

#[derive(Parser)]
#[command(name = "iris-gateway", version, about = "Self-hosted gateway between the Iris app and an ACP agent")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway.
    Serve(ServeArgs),
    /// Run the built-in demo ACP agent on stdin/stdout (a deterministic stand-in for a real agent).
    #[command(hide = true)]
    DemoAgent,
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Address to listen on [default: 127.0.0.1:8765].
    #[arg(long, env = "IRIS_LISTEN")]
    listen: Option<String>,
    /// Directory for the database, the token and media [default: ~/.local/share/iris-gateway].
    #[arg(long, env = "IRIS_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Token devices authenticate with [default: generated on first start and kept in the data dir].
    #[arg(long, env = "IRIS_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// TOML config file; flags and IRIS_* variables override it.
    #[arg(long, env = "IRIS_CONFIG")]
    config: Option<PathBuf>,
    /// Agent command line (`demo` for the built-in demo agent).
    #[arg(long, env = "IRIS_AGENT")]
    agent: Option<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve(args),
        Command::DemoAgent => demo_agent(),
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime")
}

fn serve(args: ServeArgs) -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("IRIS_LOG").unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let over = Overrides {
        listen: args.listen,
        data_dir: args.data_dir,
        token: args.token,
        agent: args.agent,
        config: args.config,
    };
    let config = match Config::resolve(over) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("iris-gateway: {e}");
            return ExitCode::from(2);
        }
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
        println!("  Data dir:  {}", data_dir.display());
        println!("  Agent:     {}", gateway.agent_label());
        match &gateway.token_source {
            TokenSource::Generated(path) => {
                println!("  Token:     {}", gateway.token());
                println!("             (generated now and saved to {}; it is not printed again)", path.display());
            }
            TokenSource::Stored(path) => println!("  Token:     stored in {}", path.display()),
            TokenSource::Configured => println!("  Token:     as configured"),
        }
        println!("Pair a device by connecting to the WebSocket URL and sending hello with the token.");
        match gateway.serve(shutdown_signal()).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("iris-gateway: {e}");
                ExitCode::from(1)
            }
        }
    })
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
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    match rt.block_on(iris_acp::demo::run(tokio::io::stdin(), tokio::io::stdout())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("demo agent: {e}");
            ExitCode::from(1)
        }
    }
}
