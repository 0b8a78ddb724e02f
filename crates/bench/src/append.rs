//! Scenario 4: durable append throughput with concurrent writers, group commit against one
//! fsync per frame: through the store API, and end to end through the gateway (`message.send`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use iris_protocol::{ClientFrame, Header, MessageSend, RequestId, ServerFrame};
use iris_store::{NewFrame, Store, StoreConfig};
use tokio::task::JoinSet;

use crate::gateway::{config, connect, InProcess};
use crate::raw::{self, RawServer, ECHO_FRAMES};
use crate::report::{Report, Target};

/// Devices sending at once through the gateway, and the requests each keeps in flight.
const SENDERS: usize = 64;
const SENDER_WINDOW: usize = 4;

fn frame(i: u64) -> NewFrame {
    NewFrame {
        frame_type: "message".into(),
        chat_id: Some("default".into()),
        message_id: Some(format!("m_{i:012}")),
        json: format!(
            r#"{{"type":"message","chat_id":"default","message_id":"m_{i:012}","role":"user","text":"append benchmark frame {i}","ts":1700000000000}}"#
        ),
        ..NewFrame::default()
    }
}

/// Frames committed per second by `writers` tasks, each appending one frame per write, for `secs`.
async fn store_rate(group_commit: bool, writers: usize, secs: f64) -> anyhow::Result<f64> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(
        StoreConfig {
            path: dir.path().join("iris.db"),
            group_commit,
            readers: 1,
        },
        Arc::new(|_| {}),
    )?;
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let started = Instant::now();
    let mut set = JoinSet::new();
    for w in 0..writers as u64 {
        let store = store.clone();
        set.spawn(async move {
            let mut n = 0u64;
            while Instant::now() < deadline {
                let i = w << 32 | n;
                store.write(move |tx| tx.append(frame(i))).await?;
                n += 1;
            }
            anyhow::Ok(n)
        });
    }
    let mut total = 0;
    while let Some(r) = set.join_next().await {
        total += r??;
    }
    let elapsed = started.elapsed().as_secs_f64();
    store.close();
    Ok(total as f64 / elapsed)
}

/// `message.send`s acknowledged per second by the gateway, from [`SENDERS`] devices at once. Each
/// message is also a row in the messages table (with its search index) and a frame delivered to
/// the other devices, so this is the end-to-end figure; the store figure isolates the append.
async fn gateway_rate(group_commit: bool, secs: f64) -> anyhow::Result<f64> {
    let dir = tempfile::tempdir()?;
    let mut cfg = config(dir.path());
    cfg.agent_command = Some("none".into());
    cfg.group_commit = group_commit;
    let gw = InProcess::start(cfg)?;
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let started = Instant::now();
    let mut set = JoinSet::new();
    for s in 0..SENDERS {
        let mut client = connect(gw.options(&format!("writer-{s}"))).await?;
        set.spawn(async move {
            let (mut sent, mut acked) = (0u64, 0u64);
            loop {
                while sent - acked < SENDER_WINDOW as u64 && Instant::now() < deadline {
                    sent += 1;
                    let header = Header {
                        id: Some(RequestId::from(sent)),
                        ..Header::lane("default", None)
                    };
                    let text = format!("append benchmark message {sent}");
                    client
                        .send(
                            header,
                            ClientFrame::MessageSend(MessageSend {
                                text,
                                ..Default::default()
                            }),
                        )
                        .await?;
                }
                if acked == sent {
                    return anyhow::Ok(acked);
                }
                let ev = client
                    .next_event_timeout(Duration::from_secs(60))
                    .await
                    .context("no answer")?;
                match &ev.body {
                    ServerFrame::Error(e) => bail!("message.send refused: {}", e.message),
                    _ if ev.id().is_some() => acked += 1,
                    _ => {}
                }
            }
        });
    }
    let mut total = 0;
    while let Some(r) = set.join_next().await {
        total += r??;
    }
    let elapsed = started.elapsed().as_secs_f64();
    gw.stop();
    Ok(total as f64 / elapsed)
}

/// Group commit on and off, through the store and through the gateway.
pub async fn run(
    report: &mut Report,
    secs: f64,
    writers: usize,
    runs: usize,
) -> anyhow::Result<()> {
    let sg = format!("store append, group commit, {writers} writers");
    let sf = format!("store append, fsync per frame, {writers} writers");
    let sr = "store append: group commit / fsync per frame".to_owned();
    let gg = format!("gateway message.send, group commit, {SENDERS} devices (each message also reaches the others)");
    let gf = format!("gateway message.send, fsync per write, {SENDERS} devices (each message also reaches the others)");
    let gr = "gateway message.send: group commit / fsync per write".to_owned();
    let echo = "raw echo frames/s (append frame size, 150 B)".to_owned();
    for run in 0..runs {
        println!("append: run {}", run + 1);
        let group = store_rate(true, writers, secs).await?;
        let single = store_rate(false, writers, secs).await?;
        report.add(&sg, "frames/s", group);
        report.add(&sf, "frames/s", single);
        report.add(&sr, "×", group / single);
        let group = gateway_rate(true, secs).await?;
        let single = gateway_rate(false, secs).await?;
        report.add(&gg, "messages/s", group);
        report.add(&gf, "messages/s", single);
        report.add(&gr, "×", group / single);
        let raw = RawServer::start()?;
        report.add(
            &echo,
            "frames/s",
            raw::echo_rate(&raw.url, 150, ECHO_FRAMES).await?,
        );
    }
    report.compare(&sg, "frames/s", &echo);
    report.compare(&gg, "messages/s", &echo);
    report.target(&sr, "×", Target::AtLeast(20.0));
    Ok(())
}
