//! Scenario 6: an answer streaming to devices, as a person sees it. The demo agent streams
//! `bench <n> <gap_us>` (each chunk its send time in unix nanoseconds) at one chunk per 5 ms, a
//! fast model; one device asked for append-form `message.update` (`hello.caps.append_updates`)
//! and one did not. Each device rebuilds the text from what it receives, and every chunk's
//! **visible latency** is the time from its send to the first frame that puts it on the device's
//! screen (not only the newest chunk of each update: a chunk that waited for the interval counts
//! with its whole wait). At the end each device's text must equal `message.stop`'s.
//!
//! First the interval sweep (`update_interval` 0 to 50 ms, short answers) from
//! which the gateway's default interval was chosen, then a 10,000-chunk answer with the default
//! interval: bytes and frames per device in both forms, and the latencies.

use std::time::Duration;

use anyhow::{bail, Context};
use iris_client::{RawConnection, RawFrame};
use iris_protocol::{ClientCaps, ClientFrame, Header, Hello, MessageSend, RequestId};

use crate::gateway::{config, InProcess, TOKEN};
use crate::report::{percentile, Report, Target};
use crate::unix_nanos;

/// Longest wait for any one frame.
const FRAME_TIMEOUT: Duration = Duration::from_secs(60);

/// The targets of the issue: a chunk is on screen within 10 ms at the median, 25 ms at p95.
const TARGET_P50_MS: f64 = 10.0;
const TARGET_P95_MS: f64 = 25.0;

/// What one device received of one answer.
struct Seen {
    /// Bytes of `message.update` frames.
    update_bytes: u64,
    /// `message.update` frames.
    updates: u64,
    /// Visible latency of every chunk, in nanoseconds.
    samples: Vec<u64>,
    /// Send times of the first and the last chunk, for the real spacing of the chunks.
    first_sent: u64,
    last_sent: u64,
    device: RawConnection,
}

impl Seen {
    /// The mean time between two chunks as the agent sent them (a 5 ms sleep takes a little
    /// longer), in milliseconds.
    fn spacing_ms(&self) -> f64 {
        let n = self.samples.len().max(2) as f64 - 1.0;
        self.last_sent.saturating_sub(self.first_sent) as f64 / n / 1e6
    }
}

/// The text of a JSON string field written by the gateway (`"name":"…"`); the benchmark's texts
/// are digits and spaces, so nothing needs unescaping.
fn string_field<'a>(json: &'a str, name: &str) -> Option<&'a str> {
    let key = format!("\"{name}\":\"");
    let rest = &json[json.find(&key)? + key.len()..];
    Some(&rest[..rest.find('"')?])
}

/// A numeric field (`"name":N`).
fn number_field(json: &str, name: &str) -> Option<usize> {
    let key = format!("\"{name}\":");
    let rest = &json[json.find(&key)? + key.len()..];
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

fn frame_type(json: &str) -> &str {
    string_field(json, "type").unwrap_or("")
}

/// A device that said hello (asking for appends or not) and took its `status online`.
async fn device(gw: &InProcess, id: &str, append: bool) -> anyhow::Result<RawConnection> {
    let mut device = RawConnection::connect(&gw.url).await?;
    device
        .hello_with(Hello {
            token: TOKEN.into(),
            device_id: id.into(),
            caps: Some(ClientCaps {
                append_updates: append.then_some(true),
                ..ClientCaps::default()
            }),
            ..Hello::default()
        })
        .await?;
    match device.recv().await? {
        RawFrame::Text(t) if frame_type(&t) == "status" => Ok(device),
        other => bail!("expected status after hello.ack, got {other:?}"),
    }
}

async fn prompt(driver: &mut RawConnection, text: String) -> anyhow::Result<()> {
    let header = Header {
        id: Some(RequestId::from(unix_nanos())),
        ..Header::lane("default", None)
    };
    let frame = ClientFrame::MessageSend(MessageSend {
        text,
        ..Default::default()
    });
    Ok(driver.send(&header, &frame).await?)
}

/// Reads one answer up to its `agent.idle`, rebuilding the text from the updates.
async fn watch(mut device: RawConnection) -> anyhow::Result<Seen> {
    let (mut update_bytes, mut updates) = (0u64, 0u64);
    let mut samples = Vec::new();
    let (mut first_sent, mut last_sent) = (None, 0);
    let mut text = String::new();
    let mut stopped = false;
    loop {
        let json = match device
            .recv_timeout(FRAME_TIMEOUT)
            .await
            .context("stream stalled")?
        {
            RawFrame::Text(t) => t,
            other => bail!("unexpected frame: {other:?}"),
        };
        let now = unix_nanos();
        match frame_type(&json) {
            "message.update" => {
                updates += 1;
                update_bytes += json.len() as u64;
                let part = string_field(&json, "text").context("update without text")?;
                let before = text.len();
                match number_field(&json, "offset") {
                    // Append form (the texts are ASCII: UTF-16 units are bytes).
                    Some(offset) if offset <= text.len() => {
                        text.truncate(offset);
                        text.push_str(part);
                    }
                    Some(offset) => bail!("offset {offset} beyond the {} held", text.len()),
                    None => {
                        text.clear();
                        text.push_str(part);
                    }
                }
                for word in text.get(before..).unwrap_or("").split_whitespace() {
                    if let Ok(sent) = word.parse::<u64>() {
                        samples.push(now.saturating_sub(sent));
                        first_sent.get_or_insert(sent);
                        last_sent = sent;
                    }
                }
            }
            "message.stop" => {
                let last = string_field(&json, "final_text").context("stop without text")?;
                if last != text {
                    bail!(
                        "the rebuilt text ({} bytes) differs from the final text ({} bytes)",
                        text.len(),
                        last.len()
                    );
                }
                stopped = true;
            }
            "agent.idle" if stopped => {
                return Ok(Seen {
                    update_bytes,
                    updates,
                    samples,
                    first_sent: first_sent.unwrap_or(0),
                    last_sent,
                    device,
                })
            }
            "error" => bail!("gateway error: {json}"),
            _ => {}
        }
    }
}

/// One answer of `chunks` chunks `gap` apart to an appending and a whole-text device (the
/// appending one drives); returns (appending, whole).
async fn answer(
    append: RawConnection,
    whole: RawConnection,
    chunks: usize,
    gap: Duration,
) -> anyhow::Result<(Seen, Seen)> {
    let mut append = append;
    prompt(&mut append, format!("bench {chunks} {}", gap.as_micros())).await?;
    let a = tokio::spawn(watch(append));
    let w = tokio::spawn(watch(whole));
    Ok((a.await??, w.await??))
}

/// A gateway with `interval`, its agent started by an unmeasured answer, and the two devices.
async fn setup(
    interval: Duration,
) -> anyhow::Result<(InProcess, RawConnection, RawConnection, tempfile::TempDir)> {
    let dir = tempfile::tempdir()?;
    let mut cfg = config(dir.path());
    cfg.update_interval = interval;
    let gw = InProcess::start(cfg)?;
    let append = device(&gw, "append", true).await?;
    let whole = device(&gw, "whole", false).await?;
    let (a, w) = answer(append, whole, 5, Duration::ZERO).await?;
    Ok((gw, a.device, w.device, dir))
}

fn ms(nanos: u64) -> f64 {
    nanos as f64 / 1e6
}

/// The sweep over `intervals` with answers of `chunks`, then one answer of `long_chunks` with the
/// gateway's default interval; chunks `gap` apart.
pub async fn run(
    report: &mut Report,
    intervals: &[u64],
    chunks: usize,
    long_chunks: usize,
    gap: Duration,
    runs: usize,
) -> anyhow::Result<()> {
    let gap_ms = gap.as_secs_f64() * 1e3;
    for &interval in intervals {
        let name = |what: &str| {
            format!(
                "stream, update_interval {interval} ms, {chunks} chunks {gap_ms} ms apart: {what}"
            )
        };
        for run in 0..runs {
            println!(
                "stream: update_interval {interval} ms, {chunks} chunks, run {}",
                run + 1
            );
            let (gw, append, whole, _dir) = setup(Duration::from_millis(interval)).await?;
            let (mut a, mut w) = answer(append, whole, chunks, gap).await?;
            gw.stop();
            report.add(
                &name("visible p50, appending device"),
                "ms",
                ms(percentile(&mut a.samples, 50.0)),
            );
            report.add(
                &name("visible p95, appending device"),
                "ms",
                ms(percentile(&mut a.samples, 95.0)),
            );
            report.add(
                &name("visible p50, whole-text device"),
                "ms",
                ms(percentile(&mut w.samples, 50.0)),
            );
            report.add(
                &name("visible p95, whole-text device"),
                "ms",
                ms(percentile(&mut w.samples, 95.0)),
            );
            report.add(
                &name("message.update frames per device"),
                "frames",
                a.updates as f64,
            );
            println!("  mean chunk spacing {:.2} ms", a.spacing_ms());
        }
    }

    let default = iris_gateway::config::DEFAULT_UPDATE_INTERVAL;
    let interval = default.as_millis();
    let name = |what: &str| {
        format!("stream, {long_chunks}-chunk answer, default update_interval {interval} ms: {what}")
    };
    for run in 0..runs {
        println!(
            "stream: {long_chunks} chunks {gap_ms} ms apart, default interval, run {}",
            run + 1
        );
        let (gw, append, whole, _dir) = setup(default).await?;
        let (mut a, mut w) = answer(append, whole, long_chunks, gap).await?;
        gw.stop();
        report.add(&name("mean chunk spacing"), "ms", a.spacing_ms());
        report.add(
            &name("message.update bytes, appending device"),
            "bytes",
            a.update_bytes as f64,
        );
        report.add(
            &name("message.update bytes, whole-text device"),
            "bytes",
            w.update_bytes as f64,
        );
        report.add(
            &name("message.update frames, appending device"),
            "frames",
            a.updates as f64,
        );
        report.add(
            &name("message.update frames, whole-text device"),
            "frames",
            w.updates as f64,
        );
        for (who, seen) in [("appending", &mut a), ("whole-text", &mut w)] {
            for p in [50.0, 95.0, 99.0] {
                report.add(
                    &name(&format!("visible p{p}, {who} device")),
                    "ms",
                    ms(percentile(&mut seen.samples, p)),
                );
            }
        }
    }
    for who in ["appending", "whole-text"] {
        report.target(
            &name(&format!("visible p50, {who} device")),
            "ms",
            Target::AtMost(TARGET_P50_MS),
        );
        report.target(
            &name(&format!("visible p95, {who} device")),
            "ms",
            Target::AtMost(TARGET_P95_MS),
        );
    }
    report.compare(
        &name("message.update bytes, appending device"),
        "bytes",
        &name("message.update bytes, whole-text device"),
    );
    Ok(())
}
