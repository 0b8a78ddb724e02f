//! Media benchmark: a 50 MiB upload and a pull by a device that reads slowly, against a gateway in
//! this process, with the process's peak memory checked to stay far below the file size.
//!
//! `cargo run --release -p iris-gateway --example bench_media [-- <MiB>]`
//!
//! The upload is generated and hashed chunk by chunk, and the pull is read through a raw
//! connection that takes one frame at a time with a pause, so neither side of the benchmark holds
//! the file: what the peak shows is what the gateway buffers.

use std::time::{Duration, Instant};

use iris_client::{Client, ConnectOptions, RawConnection, RawFrame};
use iris_gateway::{Config, Gateway};
use iris_protocol::{
    decode, encode, ClientFrame, Header, MediaPull, MediaUploadEnd, MediaUploadStart, MessageSend,
    RequestId, ServerFrame,
};
use sha2::{Digest, Sha256};

const TOKEN: &str = "bench-token-0123456789";
const CHUNK: usize = 1024 * 1024;

/// `VmRSS` or `VmHWM` of this process, in KiB.
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| {
            l.strip_prefix(field)?
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// Resets the peak (`VmHWM`) to the current resident size.
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn chunk(i: usize) -> Vec<u8> {
    let mut x = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..CHUNK)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mib: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(50);
    let dir = tempfile::tempdir()?;
    let mut config = Config::for_tests(dir.path(), TOKEN);
    config.agent_command = Some("none".into());
    let gateway = Gateway::bind(config).await?;
    let url = format!("ws://{}/ws", gateway.addr);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(gateway.serve(async move {
        let _ = stopped.await;
    }));

    let (mut phone, _) =
        Client::connect(ConnectOptions::new(url.clone(), TOKEN, "bench-phone")).await?;
    let baseline = status_kib("VmRSS:");
    reset_peak();

    // Upload, generated and hashed as it goes.
    let started = Instant::now();
    let size = (mib * CHUNK) as u64;
    let start = MediaUploadStart {
        media_ref: "mu_bench".into(),
        kind: "file".into(),
        mime: "application/octet-stream".into(),
        size,
        filename: "bench.bin".into(),
        voice: false,
    };
    phone
        .send(Header::default(), ClientFrame::MediaUploadStart(start))
        .await?;
    let mut hasher = Sha256::new();
    for i in 0..mib {
        let bytes = chunk(i);
        hasher.update(&bytes);
        phone.send_binary(bytes).await?;
    }
    let sha = hex::encode(hasher.finalize());
    let end = MediaUploadEnd {
        media_ref: "mu_bench".into(),
        sha256: sha.clone(),
    };
    phone
        .request_timeout(
            Header::default(),
            ClientFrame::MediaUploadEnd(end),
            Duration::from_secs(120),
        )
        .await?;
    let upload = started.elapsed();
    let send = MessageSend {
        text: "bench".into(),
        media_refs: vec!["mu_bench".into()],
        ..Default::default()
    };
    let echo = phone
        .request(
            Header::lane("default", None),
            ClientFrame::MessageSend(send),
        )
        .await?;
    let ServerFrame::Message(message) = echo.body else {
        anyhow::bail!("unexpected echo {}", echo.raw)
    };
    let media_id = message.media[0].media_id.clone();

    // Pull by a device that reads one frame at a time, slowly.
    let started = Instant::now();
    let mut raw = RawConnection::connect(&url).await?;
    raw.hello(TOKEN, "bench-laptop").await?;
    let pull = ClientFrame::MediaPull(MediaPull { media_id });
    raw.send_text(&encode(
        &Header {
            id: Some(RequestId::from(1)),
            ..Header::default()
        },
        &pull,
    ))
    .await?;
    let mut hasher = Sha256::new();
    let mut received = 0u64;
    let mut frames = 0u64;
    loop {
        match raw.recv_timeout(Duration::from_secs(30)).await? {
            RawFrame::Binary(b) => {
                received += b.len() as u64;
                hasher.update(&b);
                frames += 1;
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
            RawFrame::Text(t) => {
                if let Ok(d) = decode::<ServerFrame>(&t) {
                    if let ServerFrame::MediaPullEnd(e) = d.body {
                        anyhow::ensure!(e.ok, "pull ended with ok:false");
                        break;
                    }
                }
            }
            RawFrame::Close(c) => anyhow::bail!("closed during the pull: {c:?}"),
        }
    }
    let pulled = started.elapsed();
    anyhow::ensure!(received == size, "pulled {received} of {size} bytes");
    anyhow::ensure!(hex::encode(hasher.finalize()) == sha, "pulled bytes differ");

    let peak = status_kib("VmHWM:");
    let growth_mib = peak.saturating_sub(baseline) as f64 / 1024.0;
    println!(
        "upload {mib} MiB: {:.2} s ({:.0} MiB/s)",
        upload.as_secs_f64(),
        mib as f64 / upload.as_secs_f64()
    );
    println!(
        "slow pull {mib} MiB in {frames} frames: {:.2} s",
        pulled.as_secs_f64()
    );
    println!("peak resident growth: {growth_mib:.1} MiB (file: {mib} MiB)");
    let _ = stop.send(());
    server.await??;
    // The gateway streams both ways: its memory must not grow with the file.
    anyhow::ensure!(
        growth_mib < (mib as f64 / 2.0).max(24.0),
        "memory grew with the file size"
    );
    Ok(())
}
