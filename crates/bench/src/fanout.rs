//! Scenario 2: fan-out. One lane streams to N devices (the demo agent's `bench` turns, whose
//! chunks carry their send time), and a few devices' messages are broadcast to N devices (durable
//! frames through the outbox).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use iris_client::{RawConnection, RawFrame};
use iris_protocol::{ClientFrame, Header, MessageSend, RequestId, ServerFrame};

use crate::gateway::{config, connect, InProcess, TOKEN};
use crate::raw::{self, RawServer};
use crate::report::{percentile, Report, Target};
use crate::unix_nanos;

/// Streaming run for throughput: turns of this many chunks, sent back to back.
const BURST_TURNS: usize = 10;
const BURST_CHUNKS: usize = 100;
/// Streaming run for latency: chunks this far apart (a fast model streams ~50–100 tokens/s;
/// one chunk per 10 ms is at the fast end of that).
const PACED_TURNS: usize = 2;
const PACED_CHUNKS: usize = 300;
const PACED_GAP: Duration = Duration::from_millis(10);
/// Longest wait for any one frame before a run is declared stuck.
const FRAME_TIMEOUT: Duration = Duration::from_secs(60);
/// Devices sending in the durable fan-out, and the requests each keeps in flight. A device's
/// requests are answered one after the other, each after its commit, so one sender alone would
/// measure the fsync latency rather than the fan-out; several let group commit batch them.
const SENDERS: usize = 8;
const SEND_WINDOW: usize = 4;

/// What one device received during a run.
struct Tally {
    device: RawConnection,
    frames: u64,
    bytes: u64,
    updates: u64,
    samples: Vec<u64>,
    /// The samples without each turn's first chunk, which waits for `message.start` to be
    /// committed (one fsync) before it may be sent.
    later: Vec<u64>,
    done: Instant,
}

/// The `type` of an encoded server frame (the envelope's first `"type"` key; see
/// `iris_protocol::encode`).
fn frame_type(text: &str) -> &str {
    let Some(at) = text.find("\"type\":\"") else {
        return "";
    };
    let rest = &text[at + 8..];
    &rest[..rest.find('"').unwrap_or(0)]
}

/// The payload's `text` string (the benchmark's texts need no unescaping: digits, spaces, `x`).
fn payload_text(text: &str) -> &str {
    let Some(at) = text.find("\"text\":\"") else {
        return "";
    };
    let rest = &text[at + 8..];
    &rest[..rest.find('"').unwrap_or(0)]
}

/// Reads frames until `stops` `message.stop` frames arrived; measures each `message.update`'s
/// newest chunk: receipt time minus the send time the demo agent wrote into it. Devices read
/// through [`RawConnection`] and look only at the fields they need, so that the load generator,
/// which shares the machine's two cores with the gateway, spends little on decoding.
async fn collect_stream(mut device: RawConnection, stops: usize) -> anyhow::Result<Tally> {
    let (mut frames, mut bytes, mut updates, mut seen) = (0, 0, 0, 0);
    let (mut samples, mut later) = (Vec::new(), Vec::new());
    let mut first = true;
    loop {
        let text = match device
            .recv_timeout(FRAME_TIMEOUT)
            .await
            .context("stream stalled")?
        {
            RawFrame::Text(t) => t,
            other => bail!("unexpected frame: {other:?}"),
        };
        let now = unix_nanos();
        frames += 1;
        bytes += text.len() as u64;
        match frame_type(&text) {
            "message.update" => {
                updates += 1;
                if let Some(sent) = payload_text(&text)
                    .split_whitespace()
                    .last()
                    .and_then(|w| w.parse::<u64>().ok())
                {
                    samples.push(now.saturating_sub(sent));
                    if !first {
                        later.push(now.saturating_sub(sent));
                    }
                    first = false;
                }
            }
            "message.start" => first = true,
            "message.stop" => {
                seen += 1;
                if seen == stops {
                    return Ok(Tally {
                        device,
                        frames,
                        bytes,
                        updates,
                        samples,
                        later,
                        done: Instant::now(),
                    });
                }
            }
            "error" => bail!("gateway error: {text}"),
            _ => {}
        }
    }
}

/// A device that said hello and took its `status online`.
async fn raw_device(gw: &InProcess, id: &str) -> anyhow::Result<RawConnection> {
    let mut device = RawConnection::connect(&gw.url).await?;
    device.hello(TOKEN, id).await?;
    match device.recv().await? {
        RawFrame::Text(t) if frame_type(&t) == "status" => Ok(device),
        other => bail!("expected status after hello.ack, got {other:?}"),
    }
}

/// Sends `turns` prompts `bench <chunks> <gap_us>` at once (they queue in the lane and run one
/// after the other).
async fn send_prompts(
    driver: &mut RawConnection,
    turns: usize,
    chunks: usize,
    gap: Duration,
) -> anyhow::Result<()> {
    for i in 0..turns {
        let header = Header {
            id: Some(RequestId::from(1_000_000 + i as u64)),
            ..Header::lane("default", None)
        };
        let text = format!("bench {chunks} {}", gap.as_micros());
        driver
            .send(
                &header,
                &ClientFrame::MessageSend(MessageSend {
                    text,
                    ..Default::default()
                }),
            )
            .await?;
    }
    Ok(())
}

struct StreamRun {
    devices: Vec<RawConnection>,
    secs: f64,
    frames_per_sec: f64,
    updates_per_sec: f64,
    mean_size: usize,
    p50: u64,
    p99: u64,
    later_p99: u64,
    max: u64,
    coalesced: u64,
}

async fn stream_run(
    gw: &InProcess,
    mut devices: Vec<RawConnection>,
    turns: usize,
    chunks: usize,
    gap: Duration,
) -> anyhow::Result<StreamRun> {
    let coalesced_before = gw.shared.metrics.frames_coalesced.load(Ordering::Relaxed);
    let started = Instant::now();
    send_prompts(&mut devices[0], turns, chunks, gap).await?;
    let tasks: Vec<_> = devices
        .into_iter()
        .map(|c| tokio::spawn(collect_stream(c, turns)))
        .collect();
    let (mut frames, mut bytes, mut updates) = (0u64, 0u64, 0u64);
    let (mut samples, mut later) = (Vec::new(), Vec::new());
    let mut last = started;
    let mut devices = Vec::new();
    for t in tasks {
        let tally = t.await??;
        frames += tally.frames;
        bytes += tally.bytes;
        updates += tally.updates;
        samples.extend(tally.samples);
        later.extend(tally.later);
        last = last.max(tally.done);
        devices.push(tally.device);
    }
    let secs = (last - started).as_secs_f64();
    Ok(StreamRun {
        devices,
        secs,
        frames_per_sec: frames as f64 / secs,
        updates_per_sec: updates as f64 / secs,
        mean_size: (bytes / frames.max(1)) as usize,
        p50: percentile(&mut samples, 50.0),
        p99: percentile(&mut samples, 99.0),
        later_p99: percentile(&mut later, 99.0),
        max: percentile(&mut samples, 100.0),
        coalesced: gw.shared.metrics.frames_coalesced.load(Ordering::Relaxed) - coalesced_before,
    })
}

/// Starts a gateway with the demo agent and `message.update` unthrottled, warms the lane up,
/// and connects `n` devices (the first one drives).
async fn streaming_setup(
    n: usize,
) -> anyhow::Result<(InProcess, Vec<RawConnection>, tempfile::TempDir)> {
    let dir = tempfile::tempdir()?;
    let mut cfg = config(dir.path());
    // Every chunk becomes its own `message.update` (the default sends at most one per 12 ms).
    cfg.update_interval = Duration::ZERO;
    let gw = InProcess::start(cfg)?;
    let mut driver = raw_device(&gw, "fan-0").await?;
    // The first turn starts the agent process and its session; it is not measured.
    send_prompts(&mut driver, 1, 5, Duration::ZERO).await?;
    let mut driver = collect_stream(driver, 1).await?.device;
    // Its last frame (agent.idle) follows message.stop.
    loop {
        match driver.recv_timeout(FRAME_TIMEOUT).await? {
            RawFrame::Text(t) if frame_type(&t) == "agent.idle" => break,
            RawFrame::Text(_) => {}
            other => bail!("unexpected frame: {other:?}"),
        }
    }
    let mut devices = vec![driver];
    for i in 1..n {
        devices.push(raw_device(&gw, &format!("fan-{i}")).await?);
    }
    Ok((gw, devices, dir))
}

/// Durable fan-out: [`SENDERS`] devices' `message.send`s, each broadcast to `n` receivers as a
/// `message` frame appended to the outbox first. Returns (frames/s delivered to the receivers,
/// p50, p99 send-to-receipt, mean frame size).
async fn durable_run(n: usize, messages: usize) -> anyhow::Result<(f64, u64, u64, usize)> {
    let dir = tempfile::tempdir()?;
    let mut cfg = config(dir.path());
    cfg.agent_command = Some("none".into());
    let gw = InProcess::start(cfg)?;
    let mut receivers = Vec::with_capacity(n);
    for i in 0..n {
        receivers.push(raw_device(&gw, &format!("recv-{i}")).await?);
    }
    let mut senders = Vec::with_capacity(SENDERS);
    for i in 0..SENDERS {
        senders.push(connect(gw.options(&format!("sender-{i}"))).await?);
    }
    let per_sender = messages.div_ceil(SENDERS);
    let total = per_sender * SENDERS;
    let tasks: Vec<_> = receivers
        .into_iter()
        .map(|mut c| {
            tokio::spawn(async move {
                let (mut got, mut bytes) = (0usize, 0u64);
                let mut samples = Vec::with_capacity(total);
                while got < total {
                    let text = match c
                        .recv_timeout(FRAME_TIMEOUT)
                        .await
                        .context("durable fan-out stalled")?
                    {
                        RawFrame::Text(t) => t,
                        other => bail!("unexpected frame: {other:?}"),
                    };
                    let now = unix_nanos();
                    if frame_type(&text) == "message" {
                        got += 1;
                        bytes += text.len() as u64;
                        if let Some(sent) = payload_text(&text)
                            .get(..20)
                            .and_then(|s| s.parse::<u64>().ok())
                        {
                            samples.push(now.saturating_sub(sent));
                        }
                    }
                }
                anyhow::Ok((samples, bytes, Instant::now(), c))
            })
        })
        .collect();
    let started = Instant::now();
    let send_tasks: Vec<_> = senders
        .into_iter()
        .map(|mut sender| {
            tokio::spawn(async move {
                let filler = "x".repeat(120);
                let (mut sent, mut acked) = (0usize, 0usize);
                while acked < per_sender {
                    while sent < per_sender && sent - acked < SEND_WINDOW {
                        sent += 1;
                        let header = Header {
                            id: Some(RequestId::from(sent as u64)),
                            ..Header::lane("default", None)
                        };
                        let text = format!("{:020} {filler}", unix_nanos());
                        sender
                            .send(
                                header,
                                ClientFrame::MessageSend(MessageSend {
                                    text,
                                    ..Default::default()
                                }),
                            )
                            .await?;
                    }
                    let ev = sender
                        .next_event_timeout(FRAME_TIMEOUT)
                        .await
                        .context("sender got no answer")?;
                    match &ev.body {
                        ServerFrame::Error(e) => bail!("message.send refused: {}", e.message),
                        _ if ev.id().is_some() => acked += 1,
                        _ => {}
                    }
                }
                anyhow::Ok(sender)
            })
        })
        .collect();
    let mut senders = Vec::new();
    for t in send_tasks {
        senders.push(t.await??);
    }
    let mut samples = Vec::new();
    let (mut bytes, mut last) = (0u64, started);
    for t in tasks {
        let (s, b, done, _client) = t.await??;
        samples.extend(s);
        bytes += b;
        last = last.max(done);
    }
    drop(senders);
    let delivered = samples.len();
    let rate = delivered as f64 / (last - started).as_secs_f64();
    gw.stop();
    Ok((
        rate,
        percentile(&mut samples, 50.0),
        percentile(&mut samples, 99.0),
        (bytes / delivered.max(1) as u64) as usize,
    ))
}

/// Both fan-outs for each device count, each beside its raw baseline.
pub async fn run(report: &mut Report, counts: &[usize], runs: usize) -> anyhow::Result<()> {
    for &n in counts {
        let fps = format!("fan-out {n} devices: frames/s delivered (streaming, update_interval 0)");
        let ups = format!("fan-out {n} devices: message.update frames/s delivered");
        let p50 = format!("fan-out {n} devices: chunk-to-device p50 (paced 10 ms)");
        let p99 = format!("fan-out {n} devices: chunk-to-device p99 (paced 10 ms)");
        let lp99 = format!("fan-out {n} devices: chunk-to-device p99 without each turn's first chunk (paced 10 ms)");
        let pmax = format!("fan-out {n} devices: chunk-to-device max (paced 10 ms)");
        let bp50 = format!("fan-out {n} devices: chunk-to-device p50 (back-to-back chunks)");
        let dur = format!("durable fan-out {n} devices: message frames/s delivered");
        let dp50 = format!("durable fan-out {n} devices: send-to-device p50 ({SENDERS} senders x {SEND_WINDOW} in flight)");
        let echo_s = format!("raw echo frames/s (streaming fan-out frame size, {n} devices run)");
        let echo_d = format!("raw echo frames/s (durable fan-out frame size, {n} devices run)");
        let raw_fan = format!("raw fan-out {n} subscribers: frames/s delivered");
        let raw_p50 = format!("raw fan-out {n} subscribers: p50 (paced 10 ms)");
        let raw_p99 = format!("raw fan-out {n} subscribers: p99 (paced 10 ms)");
        for run in 0..runs {
            println!("fan-out: {n} devices, run {}", run + 1);
            let (gw, devices, _dir) = streaming_setup(n).await?;
            let burst = stream_run(&gw, devices, BURST_TURNS, BURST_CHUNKS, Duration::ZERO).await?;
            println!(
                "  streaming: {:.1} ms per turn of {BURST_CHUNKS} chunks, mean frame {} B, {} of {} updates coalesced",
                burst.secs * 1e3 / BURST_TURNS as f64,
                burst.mean_size,
                burst.coalesced,
                BURST_TURNS * BURST_CHUNKS * n
            );
            let paced =
                stream_run(&gw, burst.devices, PACED_TURNS, PACED_CHUNKS, PACED_GAP).await?;
            drop(paced.devices);
            gw.stop();
            report.add(&fps, "frames/s", burst.frames_per_sec);
            report.add(&ups, "frames/s", burst.updates_per_sec);
            report.add(&bp50, "ms", burst.p50 as f64 / 1e6);
            report.add(&p50, "ms", paced.p50 as f64 / 1e6);
            report.add(&p99, "ms", paced.p99 as f64 / 1e6);
            report.add(&lp99, "ms", paced.later_p99 as f64 / 1e6);
            report.add(&pmax, "ms", paced.max as f64 / 1e6);

            let messages = (100_000 / n).clamp(1000, 5000);
            let (rate, d50, d99, dsize) = durable_run(n, messages).await?;
            println!(
                "  durable: {messages} messages, mean frame {dsize} B, p99 {:.1} ms",
                d99 as f64 / 1e6
            );
            report.add(&dur, "frames/s", rate);
            report.add(&dp50, "ms", d50 as f64 / 1e6);

            let raw = RawServer::start()?;
            report.add(
                &echo_s,
                "frames/s",
                raw::echo_rate(&raw.url, burst.mean_size, raw::ECHO_FRAMES).await?,
            );
            report.add(
                &echo_d,
                "frames/s",
                raw::echo_rate(&raw.url, dsize, raw::ECHO_FRAMES).await?,
            );
            let fan =
                raw::fan_out(&raw.url, n, burst.mean_size, 500_000 / n, Duration::ZERO).await?;
            report.add(&raw_fan, "frames/s", fan.rate);
            let fan = raw::fan_out(&raw.url, n, burst.mean_size, 200, PACED_GAP).await?;
            report.add(&raw_p50, "ms", fan.p50 as f64 / 1e6);
            report.add(&raw_p99, "ms", fan.p99 as f64 / 1e6);
        }
        report.compare(&fps, "frames/s", &echo_s);
        report.target(&fps, "frames/s", Target::RatioAtLeast(0.5));
        report.compare(&ups, "frames/s", &raw_fan);
        report.compare(&dur, "frames/s", &echo_d);
        report.target(&dur, "frames/s", Target::RatioAtLeast(0.5));
        report.compare(&p50, "ms", &raw_p50);
        report.compare(&p99, "ms", &raw_p99);
        report.compare(&lp99, "ms", &raw_p99);
        if n >= 100 {
            report.target(&p99, "ms", Target::AtMost(2.0));
        }
    }
    Ok(())
}
