//! Scenario 7: Hermes behind its own WebSocket server against Hermes behind the gateway. The
//! same turns go (a) through `hermes serve` (the server Hermes' own apps use: JSON-RPC
//! `prompt.submit` on `/api/ws`) and (b) through the gateway with `hermes acp` as its agent,
//! both against one scripted fake model (the Hermes tests' `fake_llm.py`), and the whole
//! scenario runs in a loopback-only network namespace, so nothing leaves the machine.
//!
//! Each answer's chunks are stamped by the fake model with their write time, so every chunk's
//! **token → visible** time is measured on the client: from the model writing it to the first
//! frame that puts it on screen. Per side and run: the first turn after the server starts (sent
//! the moment the client is connected: send → first text), the start of the agent itself, paced
//! answers (one chunk per 5 ms) and burst answers (all chunks at once), CPU time per turn and
//! resident memory of the server and of the agent. The same turns also go (c) straight to
//! `hermes acp` over ACP from this program ([`direct`]): what Hermes' ACP adapter delivers by
//! itself, so that the gateway's own share of a token's time to the screen can be told apart.

mod chats;
mod direct;
mod long;
mod procs;
mod sides;
mod wire;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::json;

use crate::raw::{self, RawServer};
use crate::report::{median, percentile, Report};
use direct::AcpDirect;
use procs::FakeModel;
use sides::{GatewayHermes, HermesServe, Turn, Usage};

/// What to run.
pub struct Options {
    /// Measured paced turns and burst turns per side and run.
    pub turns: usize,
    /// Chunks of each measured answer.
    pub chunks: usize,
    /// Time between two chunks of a paced answer.
    pub gap: Duration,
    /// The venv Hermes runs from (default: `$IRIS_HERMES_VENV`, else `<workspace>/.venv`).
    pub venv: Option<PathBuf>,
    /// Chats answering at once in the [`chats`] part (none: skipped).
    pub chats: usize,
    /// Measured rounds of the [`chats`] part.
    pub rounds: usize,
    /// Turns of the one long chat of the [`long`] part (none: skipped).
    pub long: usize,
}

/// Chunks of the first turn's answer.
const FIRST_CHUNKS: usize = 20;
/// The first turn in a new channel may take this many times a warm turn (to its first text).
const NEW_CHAT_TARGET: f64 = 1.3;
/// The gateway's process tree may spend this many times the CPU of `hermes serve` per turn.
const TREE_CPU_TARGET: f64 = 1.1;
/// A burst answer may complete this many times later than through `hermes serve`.
const BURST_COMPLETE_TARGET: f64 = 1.3;
/// The slowest of N chats answering at once may complete this many times later.
const CHATS_MAX_TARGET: f64 = 1.0;

/// Outside the namespace, runs this command again inside one and returns its exit code.
pub fn outside_namespace() -> Option<ExitCode> {
    if procs::in_namespace() {
        return None;
    }
    Some(match procs::rerun_in_namespace() {
        Ok(status) if status.success() => ExitCode::SUCCESS,
        Ok(status) => {
            eprintln!("iris-bench hermes: {status}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("iris-bench hermes: {e:#}");
            ExitCode::FAILURE
        }
    })
}

/// The fake model's script: a short first answer, paced answers and burst answers.
fn script(opts: &Options) -> serde_json::Value {
    let gap = opts.gap.as_secs_f64();
    json!({"rules": [
        {"match": "first turn", "reply": {"chunks": wire::stamped_chunks(FIRST_CHUNKS), "delay": gap}},
        {"match": "paced turn", "reply": {"chunks": wire::stamped_chunks(opts.chunks), "delay": gap}},
        {"match": "burst turn", "reply": {"chunks": wire::stamped_chunks(opts.chunks), "delay": 0}},
        {"match": "long turn", "reply": {"chunks": wire::stamped_chunks(1), "delay": 0}},
    ]})
}

/// One side's figures of one run.
#[derive(Default)]
struct Figures {
    listening_ms: f64,
    agent_start_ms: f64,
    first_text_ms: f64,
    warm_text_ms: f64,
    /// The gateway's: the first turn in a channel made after the warm turns; for `hermes acp`
    /// alone, the first turn in a session opened after them (not counting `session/new`).
    new_chat_text_ms: Option<f64>,
    paced: Vec<u64>,
    burst: Vec<u64>,
    /// Each burst answer's send → complete, in milliseconds.
    burst_complete: Vec<f64>,
    burst_chunks: usize,
    burst_in_final: usize,
    server_cpu_ms: f64,
    agent_cpu_ms: f64,
    server_rss_mib: f64,
    agent_rss_mib: f64,
}

/// Either side, driven the same way.
enum Side {
    Hermes(HermesServe),
    Gateway(GatewayHermes),
    Direct(AcpDirect),
}

impl Side {
    async fn turn(&mut self, text: &str, chunks: usize) -> anyhow::Result<Turn> {
        match self {
            Side::Hermes(s) => s.turn(text, chunks).await,
            Side::Gateway(s) => s.turn(text, chunks).await,
            Side::Direct(s) => s.turn(text, chunks).await,
        }
    }

    fn usage(&self) -> Usage {
        match self {
            Side::Hermes(s) => s.usage(),
            Side::Gateway(s) => s.usage(),
            Side::Direct(s) => s.usage(),
        }
    }

    /// From spawning the server to it accepting connections (nothing for `hermes acp` alone).
    fn listening(&self) -> Option<Duration> {
        match self {
            Side::Hermes(s) => Some(s.listening),
            Side::Gateway(s) => Some(s.listening),
            Side::Direct(_) => None,
        }
    }

    /// The agent's own start (see [`record`]).
    fn agent_start(&self) -> Option<Duration> {
        match self {
            Side::Hermes(s) => s.agent_built(),
            Side::Gateway(s) => s.agent_start(),
            Side::Direct(_) => None,
        }
    }

    async fn stop(self) {
        match self {
            Side::Hermes(s) => s.stop().await,
            Side::Gateway(s) => s.stop().await,
            Side::Direct(s) => s.stop().await,
        }
    }
}

/// The first turn, then the paced and the burst turns, with the CPU time they took.
async fn measure(side: &mut Side, opts: &Options) -> anyhow::Result<Figures> {
    let mut f = Figures::default();
    let first = side.turn("first turn after start", FIRST_CHUNKS).await?;
    f.first_text_ms = ms(first.first_text);
    let before = side.usage();
    let mut warm = Vec::new();
    for i in 0..opts.turns {
        let turn = side.turn(&format!("paced turn {i}"), opts.chunks).await?;
        warm.push(ms(turn.first_text));
        f.paced.extend(turn.screen.latencies);
    }
    f.warm_text_ms = median(&warm);
    for i in 0..opts.turns {
        let turn = side.turn(&format!("burst turn {i}"), opts.chunks).await?;
        f.burst_chunks += turn.screen.latencies.len();
        f.burst_in_final += turn.screen.in_final;
        f.burst_complete.push(ms(turn.complete));
        f.burst.extend(turn.screen.latencies);
    }
    let after = side.usage();
    match side {
        Side::Gateway(s) => {
            let chat = s.new_channel("new chat").await?;
            let first = s
                .turn_in(&chat, "first turn in a new channel", FIRST_CHUNKS)
                .await?;
            f.new_chat_text_ms = Some(ms(first.first_text));
        }
        Side::Direct(s) => {
            s.new_session().await?;
            let first = s.turn("first turn in a new session", FIRST_CHUNKS).await?;
            f.new_chat_text_ms = Some(ms(first.first_text));
        }
        Side::Hermes(_) => {}
    }
    let turns = (2 * opts.turns).max(1) as f64;
    f.server_cpu_ms = (after.server_cpu_ms - before.server_cpu_ms) / turns;
    f.agent_cpu_ms = (after.agent_cpu_ms - before.agent_cpu_ms) / turns;
    f.server_rss_mib = after.server_rss_mib;
    f.agent_rss_mib = after.agent_rss_mib;
    Ok(f)
}

/// A side's turns, its start-up figures, then the side stopped.
async fn run_side(mut side: Side, opts: &Options) -> anyhow::Result<Figures> {
    let mut f = measure(&mut side, opts).await?;
    f.listening_ms = side.listening().map_or(f64::NAN, ms);
    f.agent_start_ms = side.agent_start().map_or(f64::NAN, ms);
    side.stop().await;
    Ok(f)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The 1-minute load average of the machine.
fn load() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

const HERMES: &str = "Hermes' own WebSocket";
const GATEWAY: &str = "gateway + hermes acp";
const DIRECT: &str = "hermes acp alone (read by an ACP client)";

/// Records one side's figures under `side`'s name.
fn record(report: &mut Report, side: &str, f: &mut Figures) {
    let row = |what: &str| format!("{side}: {what}");
    let warm = "later turn, send → first text (median of the paced turns)";
    if side == DIRECT {
        report.add(&row(warm), "ms", f.warm_text_ms);
        if let Some(new_session) = f.new_chat_text_ms {
            // Hermes' own share of a new channel's first turn: a fresh session's first prompt.
            let first = "first turn in a new session (opened before), send → first text";
            report.add(&row(first), "ms", new_session);
            let ratio = row("first turn in a new session / later turn");
            report.add(&ratio, "×", new_session / f.warm_text_ms);
        }
        latencies(report, side, f);
        report.add(&row("CPU per turn, agent"), "ms", f.agent_cpu_ms);
        report.add(&row("resident memory, agent"), "MiB", f.agent_rss_mib);
        return;
    }
    report.add(
        &row("first turn after start, send → first text"),
        "ms",
        f.first_text_ms,
    );
    report.add(&row(warm), "ms", f.warm_text_ms);
    if let Some(new_chat) = f.new_chat_text_ms {
        report.add(
            &row("first turn in a new channel, send → first text"),
            "ms",
            new_chat,
        );
        let ratio = row("first turn in a new channel / later turn");
        report.add(&ratio, "×", new_chat / f.warm_text_ms);
        report.target(&ratio, "×", crate::report::Target::AtMost(NEW_CHAT_TARGET));
    }
    report.add(
        &row("server start (spawn → accepting)"),
        "ms",
        f.listening_ms,
    );
    let agent = if side == GATEWAY {
        "agent start (hermes acp spawned → initialize answered)"
    } else {
        "agent start (server spawned → the session's agent built)"
    };
    report.add(&row(agent), "ms", f.agent_start_ms);
    latencies(report, side, f);
    report.add(
        &row("burst turn, send → complete (median)"),
        "ms",
        median(&f.burst_complete),
    );
    let in_final = 100.0 * f.burst_in_final as f64 / f.burst_chunks.max(1) as f64;
    report.add(
        &row("burst chunks first shown by the final frame"),
        "%",
        in_final,
    );
    report.add(&row("CPU per turn, server"), "ms", f.server_cpu_ms);
    report.add(&row("resident memory, server"), "MiB", f.server_rss_mib);
    if side == GATEWAY {
        report.add(
            &row("CPU per turn, agent (hermes acp)"),
            "ms",
            f.agent_cpu_ms,
        );
        report.add(
            &row("resident memory, agent (hermes acp)"),
            "MiB",
            f.agent_rss_mib,
        );
        let total = f.server_cpu_ms + f.agent_cpu_ms;
        report.add(&row("CPU per turn, server + agent"), "ms", total);
        let rss = f.server_rss_mib + f.agent_rss_mib;
        report.add(&row("resident memory, server + agent"), "MiB", rss);
    }
}

/// A side's token → visible percentiles, paced and burst.
fn latencies(report: &mut Report, side: &str, f: &mut Figures) {
    for (name, samples) in [("paced", &mut f.paced), ("burst", &mut f.burst)] {
        for p in [50.0, 95.0] {
            let v = percentile(samples, p) as f64 / 1e6;
            let row = format!("{side}: {name} token → visible p{p:.0}");
            report.add(&row, "ms", v);
        }
    }
}

/// The ratios of one run: the gateway's process tree against `hermes serve`.
fn ratios(report: &mut Report, hermes: &Figures, gateway: &Figures) {
    let cpu = "gateway + hermes acp / Hermes' own WebSocket: CPU per turn, whole process tree";
    let tree = gateway.server_cpu_ms + gateway.agent_cpu_ms;
    report.add(cpu, "×", tree / hermes.server_cpu_ms);
    report.target(cpu, "×", crate::report::Target::AtMost(TREE_CPU_TARGET));
    let burst = "gateway + hermes acp / Hermes' own WebSocket: burst turn, send → complete";
    let ratio = median(&gateway.burst_complete) / median(&hermes.burst_complete);
    report.add(burst, "×", ratio);
    report.target(
        burst,
        "×",
        crate::report::Target::AtMost(BURST_COMPLETE_TARGET),
    );
}

/// The figures of N chats answering at once, both sides, and their ratios.
fn record_chats(report: &mut Report, n: usize, own: &chats::Chats, ours: &chats::Chats) {
    for (side, c) in [(HERMES, own), (GATEWAY, ours)] {
        let row = |what: &str| format!("{side}: {n} chats at once, {what}");
        report.add(&row("completion max (median of rounds)"), "ms", c.max_ms);
        report.add(&row("completion p50"), "ms", c.p50_ms);
        report.add(&row("CPU per round, whole process tree"), "ms", c.cpu_ms);
        report.add(
            &row("resident memory, whole process tree"),
            "MiB",
            c.rss_mib,
        );
    }
    let max =
        format!("gateway + hermes acp / Hermes' own WebSocket: {n} chats at once, completion max");
    report.add(&max, "×", ours.max_ms / own.max_ms);
    report.target(&max, "×", crate::report::Target::AtMost(CHATS_MAX_TARGET));
    let cpu =
        format!("gateway + hermes acp / Hermes' own WebSocket: {n} chats at once, CPU per round");
    report.add(&cpu, "×", ours.cpu_ms / own.cpu_ms);
}

/// What the gateway adds to what `hermes acp` delivers by itself: the difference of the two
/// percentiles of one run.
fn added(report: &mut Report, gateway: &mut Figures, alone: &mut Figures) {
    let pairs = [
        ("paced", &mut gateway.paced, &mut alone.paced),
        ("burst", &mut gateway.burst, &mut alone.burst),
    ];
    for (name, g, a) in pairs {
        for p in [50.0, 95.0] {
            let diff = percentile(g, p) as f64 / 1e6 - percentile(a, p) as f64 / 1e6;
            let row = format!("{GATEWAY}: added to {DIRECT}, {name} p{p:.0}");
            report.add(&row, "ms", diff);
        }
    }
}

/// Both sides and the reference (`hermes acp` read directly), `runs` times, beside the raw
/// WebSocket echo round trip.
pub async fn run(report: &mut Report, opts: &Options, runs: usize) -> anyhow::Result<()> {
    let venv = procs::find_venv(opts.venv.clone())?;
    let dir = tempfile::Builder::new()
        .prefix("iris-bench-hermes-")
        .tempdir()?;
    let python = venv.join("bin/python3");
    let model = FakeModel::start(&python, dir.path(), &script(opts)).await?;
    println!("hermes: Hermes from {}, load {:.2}", venv.display(), load());
    let rtt = "raw echo round trip p50 (200 B)";
    for run in 0..runs {
        println!("hermes: run {}", run + 1);
        let raw = RawServer::start()?;
        let (r50, _) = raw::echo_rtt(&raw.url, 200, 2000).await?;
        drop(raw);
        report.add(rtt, "ms", r50 as f64 / 1e6);

        let root = dir.path().join(format!("serve-{run}"));
        let side = Side::Hermes(HermesServe::start(&venv, &root, model.port).await?);
        let mut hermes_figures = run_side(side, opts).await?;
        record(report, HERMES, &mut hermes_figures);

        let root = dir.path().join(format!("gateway-{run}"));
        let side = Side::Gateway(GatewayHermes::start(&venv, &root, model.port).await?);
        let mut through_gateway = run_side(side, opts).await?;
        record(report, GATEWAY, &mut through_gateway);

        ratios(report, &hermes_figures, &through_gateway);

        let root = dir.path().join(format!("direct-{run}"));
        let side = Side::Direct(AcpDirect::start(&venv, &root, model.port).await?);
        let mut f = run_side(side, opts).await?;
        record(report, DIRECT, &mut f);
        added(report, &mut through_gateway, &mut f);
        if opts.chats > 0 {
            let root = dir.path().join(format!("serve-chats-{run}"));
            let serve = HermesServe::start(&venv, &root, model.port).await?;
            let own = chats::through_hermes(&serve, opts).await?;
            serve.stop().await;
            let root = dir.path().join(format!("gateway-chats-{run}"));
            let gateway = GatewayHermes::start(&venv, &root, model.port).await?;
            let ours = chats::through_gateway(&gateway, opts).await?;
            gateway.stop().await;
            record_chats(report, opts.chats, &own, &ours);
        }
        if opts.long > 0 {
            let root = dir.path().join(format!("gateway-long-{run}"));
            let mut gateway = Side::Gateway(GatewayHermes::start(&venv, &root, model.port).await?);
            let ours = long::memory(&mut gateway, opts).await?;
            gateway.stop().await;
            let root = dir.path().join(format!("direct-long-{run}"));
            let mut alone = Side::Direct(AcpDirect::start(&venv, &root, model.port).await?);
            let theirs = long::memory(&mut alone, opts).await?;
            alone.stop().await;
            long::record(report, opts.long, ours, theirs);
        }
        report.add("machine load (1-minute average) after the run", "", load());
    }
    for what in [
        "first turn after start, send → first text",
        "later turn, send → first text (median of the paced turns)",
        "paced token → visible p50",
        "paced token → visible p95",
        "burst token → visible p50",
        "burst token → visible p95",
        "CPU per turn, server",
        "resident memory, server",
    ] {
        let (g, h) = (format!("{GATEWAY}: {what}"), format!("{HERMES}: {what}"));
        let unit = if what.starts_with("resident") {
            "MiB"
        } else {
            "ms"
        };
        report.compare(&g, unit, &h);
    }
    // `hermes serve` runs its agent in its own process: compare it with both of ours.
    let h = format!("{HERMES}: CPU per turn, server");
    report.compare(
        &format!("{GATEWAY}: CPU per turn, server + agent"),
        "ms",
        &h,
    );
    let h = format!("{HERMES}: resident memory, server");
    report.compare(
        &format!("{GATEWAY}: resident memory, server + agent"),
        "MiB",
        &h,
    );
    Ok(())
}
