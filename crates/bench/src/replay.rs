//! Scenario 3: sync replay. The outbox is filled with a million `message` frames through the
//! store API in big batches, then a device replays it from cursor 0.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use iris_client::{RawConnection, RawFrame};
use iris_protocol::{encode, ClientFrame, Header, Message, RequestId, Role, ServerFrame, Sync};
use iris_store::{NewFrame, Store, StoreConfig};

use crate::gateway::{config, InProcess, TOKEN};
use crate::raw::{self, RawServer};
use crate::report::{Report, Target};

/// Frames appended per store transaction while filling.
const FILL_BATCH: usize = 20_000;

/// A realistic outboxed assistant message of about 250 bytes.
fn frame(i: usize) -> NewFrame {
    let message_id = format!("m_{i:012}");
    let body = ServerFrame::Message(Message {
        message_id: message_id.clone(),
        role: if i.is_multiple_of(2) {
            Role::User
        } else {
            Role::Assistant
        },
        text: format!(
            "Message number {i} of the replay benchmark: a sentence of ordinary length for a chat."
        ),
        ts: 1_700_000_000_000 + i as i64,
        ..Message::default()
    });
    NewFrame {
        frame_type: "message".into(),
        chat_id: Some("default".into()),
        message_id: Some(message_id),
        json: encode(&Header::lane("default", None), &body),
        ..NewFrame::default()
    }
}

async fn fill(data_dir: &std::path::Path, frames: usize) -> anyhow::Result<()> {
    std::fs::create_dir_all(data_dir)?;
    let cfg = StoreConfig {
        path: data_dir.join("iris.db"),
        group_commit: true,
        readers: 1,
    };
    let store = Store::open(cfg, Arc::new(|_| {}))?;
    let started = Instant::now();
    let mut done = 0;
    while done < frames {
        let (from, to) = (done, (done + FILL_BATCH).min(frames));
        store
            .write(move |tx| {
                for i in from..to {
                    tx.append(frame(i))?;
                }
                Ok(())
            })
            .await?;
        done = to;
    }
    store.close();
    println!(
        "  filled {frames} frames in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Replays from 0 on a fresh device; returns (frames/s, mean frame size).
async fn replay_once(url: &str, device: &str, expected: usize) -> anyhow::Result<(f64, usize)> {
    let mut conn = RawConnection::connect(url).await?;
    conn.hello(TOKEN, device).await?;
    let header = Header {
        id: Some(RequestId::from(1)),
        ..Header::default()
    };
    let started = Instant::now();
    conn.send(&header, &ClientFrame::Sync(Sync { cursor: 0 }))
        .await?;
    let (mut count, mut bytes, mut last) = (0usize, 0u64, 0u64);
    loop {
        let text = match conn
            .recv_timeout(Duration::from_secs(30))
            .await
            .context("replay stalled")?
        {
            RawFrame::Text(t) => t,
            other => bail!("unexpected frame during replay: {other:?}"),
        };
        // Replayed frames start with the cursor the gateway spliced in: `{"cursor":N,…`.
        if let Some(rest) = text.strip_prefix("{\"cursor\":") {
            let end = rest.find([',', '}']).unwrap_or(rest.len());
            let cursor: u64 = rest[..end].parse().context("cursor")?;
            if cursor != last + 1 {
                bail!("replay skipped from cursor {last} to {cursor}");
            }
            last = cursor;
            count += 1;
            bytes += text.len() as u64;
        } else if text.contains("\"sync.done\"") {
            break;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    if count != expected {
        bail!("replayed {count} frames, expected {expected}");
    }
    let _ = conn.close().await;
    Ok((count as f64 / secs, (bytes / count.max(1) as u64) as usize))
}

/// Fills once, then replays `runs` times, each beside a raw one-way stream of as many frames of
/// the same size.
pub async fn run(report: &mut Report, frames: usize, runs: usize) -> anyhow::Result<()> {
    let name = format!("sync replay of {frames} frames");
    let base = format!("raw one-way stream of {frames} frames");
    println!("replay: filling the outbox");
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("data");
    fill(&data, frames).await?;
    let mut cfg = config(&data);
    cfg.agent_command = Some("none".into());
    let gw = InProcess::start(cfg)?;
    for run in 0..runs {
        println!("replay: run {}", run + 1);
        let (rate, size) = replay_once(&gw.url, &format!("replay-{run}"), frames).await?;
        println!("  mean frame {size} B");
        report.add(&name, "frames/s", rate);
        let raw = RawServer::start()?;
        report.add(
            &base,
            "frames/s",
            raw::stream_rate(&raw.url, size, frames).await?,
        );
    }
    gw.stop();
    report.compare(&name, "frames/s", &base);
    report.target(&name, "frames/s", Target::AtLeast(100_000.0));
    Ok(())
}
