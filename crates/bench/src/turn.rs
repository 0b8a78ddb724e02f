//! Scenario 5: turn overhead. A demo-agent turn through the gateway (message.send → the turn's
//! `message.stop` on the device) against the same demo agent spoken to directly over ACP
//! (`session/prompt` → its answer).

use std::time::{Duration, Instant};

use anyhow::Context;
use iris_acp::{AgentClient, AgentSpec, ContentBlock};
use iris_protocol::{ClientFrame, Header, MessageSend, ServerFrame};

use crate::gateway::{config, connect, gateway_binary, InProcess};
use crate::raw::{self, RawServer};
use crate::report::{percentile, Report};

/// Unmeasured turns first: the agent process starts and the session opens.
const WARM_UP: usize = 3;

/// Warm turns sent after a pause, as a person's next message comes: the gateway (and the
/// machine) have gone idle in between, as they have before the first turn after a start.
const PAUSED: usize = 20;

/// The pause before each of them.
const PAUSE: Duration = Duration::from_millis(100);

fn prompt(i: usize) -> String {
    format!("Hello there, this is turn number {i} of the turn overhead benchmark.")
}

/// Gateway turns, nanoseconds from sending `message.send` to the turn's `message.stop`.
struct GatewayTurns {
    p50: u64,
    p99: u64,
    /// The first turn after the gateway started, sent once its start-up (the agent's start and
    /// the default session) is over, as a device that connects a moment after a start would.
    first: u64,
    /// Warm turns each sent after [`PAUSE`], p50.
    paused_p50: u64,
    /// The agent's own start.
    agent_start: u64,
}

async fn through_gateway(turns: usize) -> anyhow::Result<GatewayTurns> {
    let dir = tempfile::tempdir()?;
    let gw = InProcess::start(config(dir.path()))?;
    let mut device = connect(gw.options("turns")).await?;
    tokio::time::timeout(Duration::from_secs(60), gw.agents.warmed())
        .await
        .context("the gateway's start-up did not end")?;
    let agent_start = gw.agents.last_start().unwrap_or_default().as_nanos() as u64;
    let mut samples = Vec::with_capacity(turns);
    let mut paused = Vec::with_capacity(PAUSED);
    let mut first = 0;
    for i in 0..WARM_UP + turns + PAUSED {
        let pause = i >= WARM_UP + turns;
        if pause {
            tokio::time::sleep(PAUSE).await;
        }
        let t = Instant::now();
        let frame = ClientFrame::MessageSend(MessageSend {
            text: prompt(i),
            ..Default::default()
        });
        device.request(Header::lane("default", None), frame).await?;
        device
            .wait_for_timeout(
                |e| matches!(e.body, ServerFrame::MessageStop(_)),
                Duration::from_secs(30),
            )
            .await
            .context("turn did not end")?;
        if i == 0 {
            first = t.elapsed().as_nanos() as u64;
        }
        if pause {
            paused.push(t.elapsed().as_nanos() as u64);
        } else if i >= WARM_UP {
            samples.push(t.elapsed().as_nanos() as u64);
        }
        // Let the turn's trailing frames (agent.idle) arrive before the next one starts.
        device
            .wait_for_timeout(|e| e.frame_type() == "agent.idle", Duration::from_secs(30))
            .await
            .context("no agent.idle")?;
        device.take_seen();
    }
    gw.stop();
    Ok(GatewayTurns {
        p50: percentile(&mut samples, 50.0),
        p99: percentile(&mut samples, 99.0),
        first,
        paused_p50: percentile(&mut paused, 50.0),
        agent_start,
    })
}

/// The first turn sent the moment a device is connected to a gateway that has just started
/// (while the agent may still be starting): nanoseconds from `message.send` to `message.stop`.
async fn first_during_start() -> anyhow::Result<u64> {
    let dir = tempfile::tempdir()?;
    let gw = InProcess::start(config(dir.path()))?;
    let mut device = connect(gw.options("early")).await?;
    let t = Instant::now();
    let frame = ClientFrame::MessageSend(MessageSend {
        text: prompt(0),
        ..Default::default()
    });
    device.request(Header::lane("default", None), frame).await?;
    device
        .wait_for_timeout(
            |e| matches!(e.body, ServerFrame::MessageStop(_)),
            Duration::from_secs(60),
        )
        .await
        .context("turn did not end")?;
    let took = t.elapsed().as_nanos() as u64;
    gw.stop();
    Ok(took)
}

/// Direct ACP turns: (p50, p99) nanoseconds from `session/prompt` to its answer.
async fn direct(turns: usize) -> anyhow::Result<(u64, u64)> {
    let dir = tempfile::tempdir()?;
    let spec = AgentSpec::new(gateway_binary()?.to_string_lossy())
        .arg("demo-agent")
        .cwd(dir.path());
    let (client, mut events) = AgentClient::spawn(&spec)?;
    // Updates are consumed as they come, as the gateway does.
    let drain = tokio::spawn(async move { while events.recv().await.is_some() {} });
    client.initialize().await?;
    let session = client.new_session(dir.path()).await?.session_id;
    let mut samples = Vec::with_capacity(turns);
    for i in 0..WARM_UP + turns {
        let t = Instant::now();
        client
            .prompt(&session, vec![ContentBlock::text(prompt(i))])
            .await?;
        if i >= WARM_UP {
            samples.push(t.elapsed().as_nanos() as u64);
        }
    }
    drop(client);
    drain.abort();
    Ok((
        percentile(&mut samples, 50.0),
        percentile(&mut samples, 99.0),
    ))
}

/// Both, beside the raw echo round trip of a frame of the prompt's size.
pub async fn run(report: &mut Report, turns: usize, runs: usize) -> anyhow::Result<()> {
    let g50 = "turn through the gateway p50".to_owned();
    let g99 = "turn through the gateway p99".to_owned();
    let d50 = "turn direct over ACP p50".to_owned();
    let d99 = "turn direct over ACP p99".to_owned();
    let over = "turn overhead of the gateway (p50 difference)".to_owned();
    let rtt = "raw echo round trip p50 (200 B)".to_owned();
    let first = "first turn after the gateway started (start-up over)".to_owned();
    let early = "first turn sent while the gateway starts".to_owned();
    let start = "agent start (spawn to initialize answered)".to_owned();
    let paused = format!(
        "turn through the gateway after {} ms idle p50",
        PAUSE.as_millis()
    );
    for run in 0..runs {
        println!("turn: run {}", run + 1);
        let (dp50, dp99) = direct(turns).await?;
        let g = through_gateway(turns).await?;
        let g_early = first_during_start().await?;
        report.add(&d50, "ms", dp50 as f64 / 1e6);
        report.add(&d99, "ms", dp99 as f64 / 1e6);
        report.add(&g50, "ms", g.p50 as f64 / 1e6);
        report.add(&g99, "ms", g.p99 as f64 / 1e6);
        report.add(&over, "ms", (g.p50 as f64 - dp50 as f64) / 1e6);
        report.add(&first, "ms", g.first as f64 / 1e6);
        report.add(&paused, "ms", g.paused_p50 as f64 / 1e6);
        report.add(&early, "ms", g_early as f64 / 1e6);
        report.add(&start, "ms", g.agent_start as f64 / 1e6);
        let raw = RawServer::start()?;
        let (r50, _) = raw::echo_rtt(&raw.url, 200, 2000).await?;
        report.add(&rtt, "ms", r50 as f64 / 1e6);
    }
    report.compare(&g50, "ms", &d50);
    report.compare(&over, "ms", &rtt);
    report.compare(&first, "ms", &g50);
    report.compare(&paused, "ms", &g50);
    report.compare(&early, "ms", &g50);
    Ok(())
}
