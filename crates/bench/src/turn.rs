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

fn prompt(i: usize) -> String {
    format!("Hello there, this is turn number {i} of the turn overhead benchmark.")
}

/// Gateway turns: (p50, p99) nanoseconds from sending `message.send` to the turn's `message.stop`.
async fn through_gateway(turns: usize) -> anyhow::Result<(u64, u64)> {
    let dir = tempfile::tempdir()?;
    let gw = InProcess::start(config(dir.path()))?;
    let mut device = connect(gw.options("turns")).await?;
    let mut samples = Vec::with_capacity(turns);
    for i in 0..WARM_UP + turns {
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
        if i >= WARM_UP {
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
    Ok((
        percentile(&mut samples, 50.0),
        percentile(&mut samples, 99.0),
    ))
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
    for run in 0..runs {
        println!("turn: run {}", run + 1);
        let (dp50, dp99) = direct(turns).await?;
        let (gp50, gp99) = through_gateway(turns).await?;
        report.add(&d50, "ms", dp50 as f64 / 1e6);
        report.add(&d99, "ms", dp99 as f64 / 1e6);
        report.add(&g50, "ms", gp50 as f64 / 1e6);
        report.add(&g99, "ms", gp99 as f64 / 1e6);
        report.add(&over, "ms", (gp50 as f64 - dp50 as f64) / 1e6);
        let raw = RawServer::start()?;
        let (r50, _) = raw::echo_rtt(&raw.url, 200, 2000).await?;
        report.add(&rtt, "ms", r50 as f64 / 1e6);
    }
    report.compare(&g50, "ms", &d50);
    report.compare(&over, "ms", &rtt);
    Ok(())
}
