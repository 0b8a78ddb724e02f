//! N chats answering at once, both ways: one `hermes serve` with N WebSocket clients, each in a
//! session of its own (as N apps would be), against the gateway with `hermes acp` and N
//! devices, each in a channel of its own and showing only it (`focus.set`). In every round all N send a burst prompt at the same
//! moment; a chat's completion is from its send to its answer's end on its screen. A first round
//! warms both sides (sessions and agents built) and is not counted; then per measured round:
//! the slowest and the median completion, and the CPU time of the side's whole process tree.

use futures_util::future::join_all;

use super::sides::{Device, GatewayHermes, HermesServe, Turn};
use super::{ms, Options};
use crate::report::median;

/// One side's figures over the measured rounds (medians of the rounds).
pub struct Chats {
    /// The slowest chat's completion.
    pub max_ms: f64,
    /// The median chat's completion.
    pub p50_ms: f64,
    /// CPU time of the side's processes (server and agent) per round.
    pub cpu_ms: f64,
    /// Resident memory of the side's processes after the rounds.
    pub rss_mib: f64,
}

/// The completions of one round, and its CPU time.
struct Round {
    completions: Vec<f64>,
    cpu_ms: f64,
}

fn completions(turns: Vec<anyhow::Result<Turn>>) -> anyhow::Result<Vec<f64>> {
    turns
        .into_iter()
        .map(|t| t.map(|t| ms(t.complete)))
        .collect()
}

fn summary(rounds: &[Round], rss_mib: f64) -> Chats {
    let max: Vec<f64> = rounds
        .iter()
        .map(|r| r.completions.iter().copied().fold(0.0, f64::max))
        .collect();
    let p50: Vec<f64> = rounds.iter().map(|r| median(&r.completions)).collect();
    let cpu: Vec<f64> = rounds.iter().map(|r| r.cpu_ms).collect();
    Chats {
        max_ms: median(&max),
        p50_ms: median(&p50),
        cpu_ms: median(&cpu),
        rss_mib,
    }
}

/// `opts.chats` clients of `hermes serve`, each with a session, `opts.rounds` measured rounds.
pub async fn through_hermes(serve: &HermesServe, opts: &Options) -> anyhow::Result<Chats> {
    let mut clients = Vec::new();
    for _ in 0..opts.chats {
        clients.push(serve.client().await?);
    }
    let mut rounds = Vec::new();
    for round in 0..=opts.rounds {
        let before = serve.usage().server_cpu_ms;
        let turns = clients.iter_mut().enumerate().map(|(i, c)| {
            let text = format!("burst turn {round} of chat {i}");
            async move { c.turn(&text, opts.chunks).await }
        });
        let completions = completions(join_all(turns).await)?;
        let cpu_ms = serve.usage().server_cpu_ms - before;
        if round > 0 {
            rounds.push(Round {
                completions,
                cpu_ms,
            });
        }
    }
    Ok(summary(&rounds, serve.usage().server_rss_mib))
}

/// `opts.chats` devices of the gateway, each in a channel of its own, `opts.rounds` measured
/// rounds.
pub async fn through_gateway(gateway: &GatewayHermes, opts: &Options) -> anyhow::Result<Chats> {
    let mut devices: Vec<(Device, String)> = Vec::new();
    for i in 0..opts.chats {
        let mut device = gateway.device(&format!("chats-{i}")).await?;
        let chat = device.new_channel(&format!("chat {i}")).await?;
        device.focus(&chat).await?;
        devices.push((device, chat));
    }
    let tree = |g: &GatewayHermes| {
        let u = g.usage();
        u.server_cpu_ms + u.agent_cpu_ms
    };
    let mut rounds = Vec::new();
    for round in 0..=opts.rounds {
        let before = tree(gateway);
        let turns = devices.iter_mut().enumerate().map(|(i, (d, chat))| {
            let text = format!("burst turn {round} of chat {i}");
            async move { d.turn_in(chat, &text, opts.chunks).await }
        });
        let completions = completions(join_all(turns).await)?;
        let cpu_ms = tree(gateway) - before;
        if round > 0 {
            rounds.push(Round {
                completions,
                cpu_ms,
            });
        }
    }
    let u = gateway.usage();
    Ok(summary(&rounds, u.server_rss_mib + u.agent_rss_mib))
}
