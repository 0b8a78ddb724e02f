//! Scenario: N devices and N chats answering at once (the "N × N round"). Every chat gets one
//! prompt whose answer streams for about half a second; every device reads until it has every
//! chat's `message.stop`. Measured twice: devices that show every chat (no focus, the seed's
//! behaviour) and devices that each show one chat (the focus extension, as Iris Web opts in).
//! Reported: frames and bytes delivered in the round, per device and in all, and whether every
//! device got every final answer.

use std::time::Duration;

use anyhow::{bail, Context};
use iris_client::{Client, RawConnection, RawFrame};
use iris_protocol::{
    ChannelCreate, ClientCaps, ClientFrame, Header, Hello, LaneRef, MessageSend, Ping, RequestId,
};

use crate::gateway::{config, connect, InProcess, TOKEN};
use crate::report::{Report, Target};

/// The answer every chat streams: 100 chunks, one per 5 ms (about 0.5 s, so that the default
/// update interval sends a dozen or more `message.update`s per answer, as a model would).
const PROMPT: &str = "bench 100 5000";
/// Longest wait for any one frame before a run is declared stuck.
const FRAME_TIMEOUT: Duration = Duration::from_secs(60);
/// The target for the 50 × 50 round with focus.
const FOCUS_TARGET_FRAMES: f64 = 20_000.0;

/// What one device received in a round.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    frames: u64,
    bytes: u64,
    updates: u64,
    stops: u64,
}

/// The `type` of an encoded server frame (the envelope's first `"type"` key).
fn frame_type(text: &str) -> &str {
    let Some(at) = text.find("\"type\":\"") else {
        return "";
    };
    let rest = &text[at + 8..];
    &rest[..rest.find('"').unwrap_or(0)]
}

/// A device showing `focus` (or every chat, `None`), its `status online` taken.
async fn device(
    gw: &InProcess,
    id: &str,
    focus: Option<Vec<LaneRef>>,
) -> anyhow::Result<RawConnection> {
    let mut conn = RawConnection::connect(&gw.url).await?;
    conn.hello_with(Hello {
        token: TOKEN.to_owned(),
        device_id: id.to_owned(),
        caps: Some(ClientCaps {
            focus,
            ..ClientCaps::default()
        }),
        ..Hello::default()
    })
    .await?;
    match conn.recv().await? {
        RawFrame::Text(t) if frame_type(&t) == "status" => Ok(conn),
        other => bail!("expected status after hello.ack, got {other:?}"),
    }
}

/// Reads until `chats` answers ended and their lanes went idle, then until the `pong` of a ping
/// sent after that (so frames queued behind the last `agent.idle` are counted too).
async fn collect(mut conn: RawConnection, chats: u64) -> anyhow::Result<Tally> {
    let mut tally = Tally::default();
    let mut idle = 0;
    let mut pinged = false;
    loop {
        if !pinged && tally.stops == chats && idle == chats {
            let header = Header {
                id: Some(RequestId::from(7)),
                ..Header::default()
            };
            conn.send(&header, &ClientFrame::Ping(Ping { ts: None }))
                .await?;
            pinged = true;
        }
        let text = match conn
            .recv_timeout(FRAME_TIMEOUT)
            .await
            .context("round stalled")?
        {
            RawFrame::Text(t) => t,
            other => bail!("unexpected frame: {other:?}"),
        };
        match frame_type(&text) {
            "pong" => return Ok(tally),
            "message.update" => tally.updates += 1,
            "message.stop" => tally.stops += 1,
            "agent.idle" => idle += 1,
            "error" => bail!("gateway error: {text}"),
            _ => {}
        }
        tally.frames += 1;
        tally.bytes += text.len() as u64;
    }
}

/// One round on a fresh gateway: `n` chats, `n` devices, focused or not.
async fn round(n: usize, focused: bool) -> anyhow::Result<Vec<Tally>> {
    let dir = tempfile::tempdir()?;
    let gw = InProcess::start(config(dir.path()))?;
    // The chats, made by a device of their own that stays out of the round; each chat's first
    // answer (its agent session opening) is not measured.
    let mut maker: Client = connect(gw.options("maker")).await?;
    let mut chats = vec!["default".to_owned()];
    for i in 1..n {
        let frame = ClientFrame::ChannelCreate(ChannelCreate {
            name: format!("chat {i}"),
            ..ChannelCreate::default()
        });
        let created = maker.request(Header::default(), frame).await?;
        let id = created.json()["payload"]["chat_id"]
            .as_str()
            .context("channel.create gave no chat_id")?
            .to_owned();
        chats.push(id);
    }
    let mut warm = device(&gw, "warm", None).await?;
    for chat in &chats {
        send(&mut warm, chat, "bench 1 0").await?;
    }
    collect(warm, n as u64).await?;
    drop(maker);

    let mut devices = Vec::with_capacity(n);
    for i in 0..n {
        let focus = focused.then(|| {
            vec![LaneRef {
                chat_id: chats[i % chats.len()].clone(),
                thread_id: None,
            }]
        });
        devices.push(device(&gw, &format!("dev-{i}"), focus).await?);
    }
    // The prompts come from a device outside the round, so every device's count is the same
    // kind of count: what the gateway sends to a device that only watches.
    let mut sender = device(&gw, "sender", None).await?;
    let tasks: Vec<_> = devices
        .into_iter()
        .map(|d| tokio::spawn(collect(d, n as u64)))
        .collect();
    for chat in &chats {
        send(&mut sender, chat, PROMPT).await?;
    }
    let mut tallies = Vec::with_capacity(n);
    for t in tasks {
        tallies.push(t.await??);
    }
    drop(sender);
    gw.stop();
    Ok(tallies)
}

async fn send(conn: &mut RawConnection, chat: &str, text: &str) -> anyhow::Result<()> {
    let header = Header {
        id: Some(RequestId::from(1)),
        ..Header::lane(chat, None)
    };
    let frame = ClientFrame::MessageSend(MessageSend {
        text: text.to_owned(),
        ..Default::default()
    });
    conn.send(&header, &frame).await?;
    Ok(())
}

/// Runs the round `runs` times each way for every `n` in `sizes`.
pub async fn run(report: &mut Report, sizes: &[usize], runs: usize) -> anyhow::Result<()> {
    for &n in sizes {
        println!("lanes: {n} devices × {n} chats, every chat answering at once");
        for _ in 0..runs {
            for focused in [false, true] {
                let tallies = round(n, focused).await?;
                let way = if focused {
                    "each device showing one chat (focus)"
                } else {
                    "every device showing every chat"
                };
                let frames: u64 = tallies.iter().map(|t| t.frames).sum();
                let bytes: u64 = tallies.iter().map(|t| t.bytes).sum();
                let updates: u64 = tallies.iter().map(|t| t.updates).sum();
                let all_final = tallies.iter().all(|t| t.stops == n as u64);
                if !all_final {
                    bail!("a device missed a final answer ({way})");
                }
                let name = format!("{n}×{n} round, {way}: frames delivered");
                report.add(&name, "frames", frames as f64);
                if focused && n == 50 {
                    report.target(&name, "frames", Target::AtMost(FOCUS_TARGET_FRAMES));
                }
                report.add(
                    &format!("{n}×{n} round, {way}: message.update frames"),
                    "frames",
                    updates as f64,
                );
                report.add(
                    &format!("{n}×{n} round, {way}: KiB per device"),
                    "KiB",
                    bytes as f64 / 1024.0 / n as f64,
                );
            }
        }
    }
    Ok(())
}
