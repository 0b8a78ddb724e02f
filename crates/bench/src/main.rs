//! `iris-bench`: load scenarios against the real Iris Gateway, each beside a raw WebSocket
//! baseline measured in the same run on the same machine, with medians over several runs.
//!
//! Everything runs on loopback and stops by itself: every scenario has fixed counts or a fixed
//! duration, and every wait has a timeout. Build in release mode first:
//! `cargo build --release -p iris-gateway -p iris-bench`, then `target/release/iris-bench all`.
//! BENCHMARKS.md at the repository root records the figures and what they mean.

mod append;
mod fanout;
mod gateway;
mod hermes;
mod idle;
mod lanes;
mod raw;
mod replay;
mod report;
mod stream;
mod turn;

use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "iris-bench",
    about = "Load and benchmark scenarios for the Iris Gateway (loopback only)"
)]
struct Cli {
    /// Runs of each scenario; the table shows the median and every run.
    #[arg(long, default_value_t = 3, global = true)]
    runs: usize,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Every scenario below with its defaults (the BENCHMARKS.md run).
    All,
    /// N idle devices: resident memory per connection of the gateway process.
    Idle {
        /// Connection counts, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
        conns: Vec<usize>,
    },
    /// One lane streaming to N devices, and one device's messages broadcast to N devices.
    Fanout {
        /// Device counts, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "10,100")]
        devices: Vec<usize>,
    },
    /// N devices and N chats answering at once, devices showing every chat against devices
    /// showing one chat each (focus): frames and bytes delivered in the round.
    Lanes {
        /// N values, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "50")]
        n: Vec<usize>,
    },
    /// One device replays a pre-filled outbox from cursor 0.
    Replay {
        /// Frames in the outbox.
        #[arg(long, default_value_t = 1_000_000)]
        frames: usize,
    },
    /// Durable appends with concurrent writers: group commit against one fsync per frame.
    Append {
        /// Seconds each configuration runs.
        #[arg(long, default_value_t = 3.0)]
        secs: f64,
        /// Concurrent writer tasks on the store.
        #[arg(long, default_value_t = 64)]
        writers: usize,
    },
    /// A demo-agent turn through the gateway against the same agent over ACP directly.
    Turn {
        /// Measured turns per run.
        #[arg(long, default_value_t = 100)]
        turns: usize,
    },
    /// An answer streaming at one chunk per `gap_us` to a device that asked for append-form
    /// updates and one that did not: visible latency per chunk, bytes and frames per device; first
    /// over several update intervals, then one long answer with the default interval.
    Stream {
        /// `update_interval` values to sweep, in milliseconds, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "0,8,10,12,16,25,33,50")]
        intervals: Vec<u64>,
        /// Chunks of each sweep answer.
        #[arg(long, default_value_t = 1000)]
        chunks: usize,
        /// Chunks of the long answer.
        #[arg(long, default_value_t = 10_000)]
        long_chunks: usize,
        /// Microseconds between two chunks.
        #[arg(long, default_value_t = 5000)]
        gap_us: u64,
    },
    /// The same turns through Hermes' own WebSocket server (`hermes serve`) and through the
    /// gateway with `hermes acp`, against one scripted fake model, in a loopback-only network
    /// namespace: first turn, token → visible for paced and burst answers, CPU and memory.
    Hermes {
        /// Measured paced turns and burst turns per side and run.
        #[arg(long, default_value_t = 5)]
        turns: usize,
        /// Chunks of each measured answer.
        #[arg(long, default_value_t = 200)]
        chunks: usize,
        /// Microseconds between two chunks of a paced answer.
        #[arg(long, default_value_t = 5000)]
        gap_us: u64,
        /// The venv Hermes runs from [default: $IRIS_HERMES_VENV, else <workspace>/.venv].
        #[arg(long)]
        venv: Option<std::path::PathBuf>,
        /// Chats answering at once, each way, after the single-chat turns (0: skipped).
        #[arg(long, default_value_t = 50)]
        chats: usize,
        /// Measured rounds of the chats at once (after one round that warms up).
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Turns of one long chat, both through the gateway and to `hermes acp` directly, for
        /// the agent's memory (0: skipped).
        #[arg(long, default_value_t = 500)]
        long: usize,
    },
    /// The raw WebSocket server as a process of its own (used by `idle`).
    #[command(hide = true)]
    RawServer {
        /// Use the gateway's WebSocket buffer sizes instead of tungstenite's defaults.
        #[arg(long)]
        small_buffers: bool,
    },
}

/// The `stream` scenario's defaults: the intervals swept and one chunk per 5 ms.
const STREAM_INTERVALS: [u64; 8] = [0, 8, 10, 12, 16, 25, 33, 50];
const STREAM_GAP: Duration = Duration::from_millis(5);

/// Now, in unix nanoseconds (the clock the demo agent stamps its `bench` chunks with).
pub fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::RawServer { small_buffers } = cli.command {
        return match raw::run_process(small_buffers) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("raw-server: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    if let Some(code) = matches!(cli.command, Command::Hermes { .. })
        .then(hermes::outside_namespace)
        .flatten()
    {
        return code;
    }
    let limit = gateway::raise_nofile_limit();
    let runs = cli.runs.max(1);
    // The load generator's own runtime; the servers run on runtimes of their own.
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("load")
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("iris-bench: runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut report = report::Report::default();
    let started = Instant::now();
    println!("iris-bench: {runs} run(s) per scenario, open-file limit {limit}");
    let result = rt.block_on(async {
        gateway::gateway_binary()?;
        match cli.command {
            Command::All => {
                idle::run(&mut report, &[1000, 10_000], runs).await?;
                fanout::run(&mut report, &[10, 100], runs).await?;
                lanes::run(&mut report, &[50], runs).await?;
                replay::run(&mut report, 1_000_000, runs).await?;
                append::run(&mut report, 3.0, 64, runs).await?;
                turn::run(&mut report, 100, runs).await?;
                stream::run(
                    &mut report,
                    &STREAM_INTERVALS,
                    1000,
                    10_000,
                    STREAM_GAP,
                    runs,
                )
                .await
            }
            Command::Idle { conns } => idle::run(&mut report, &conns, runs).await,
            Command::Fanout { devices } => fanout::run(&mut report, &devices, runs).await,
            Command::Lanes { n } => lanes::run(&mut report, &n, runs).await,
            Command::Replay { frames } => replay::run(&mut report, frames, runs).await,
            Command::Append { secs, writers } => {
                append::run(&mut report, secs, writers, runs).await
            }
            Command::Turn { turns } => turn::run(&mut report, turns, runs).await,
            Command::Stream {
                intervals,
                chunks,
                long_chunks,
                gap_us,
            } => {
                let gap = Duration::from_micros(gap_us);
                stream::run(&mut report, &intervals, chunks, long_chunks, gap, runs).await
            }
            Command::Hermes {
                turns,
                chunks,
                gap_us,
                venv,
                chats,
                rounds,
                long,
            } => {
                let opts = hermes::Options {
                    turns,
                    chunks,
                    gap: Duration::from_micros(gap_us),
                    venv,
                    chats,
                    rounds,
                    long,
                };
                hermes::run(&mut report, &opts, runs).await
            }
            Command::RawServer { .. } => unreachable!("handled above"),
        }
    });
    println!("\n{}", report.table());
    println!("total time {:.0}s", started.elapsed().as_secs_f64());
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("iris-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}
