//! Scenario 1: N idle devices. The gateway runs as its own process; its resident memory is read
//! from `/proc/<pid>/status` before and after N devices said hello and went quiet.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::gateway::{connect, ServerProcess, TOKEN};
use crate::raw;
use crate::report::Report;

/// Connections opened at once while filling up.
const CONNECT_CONCURRENCY: usize = 128;
/// Connections opened and dropped before the first reading, so that the allocator's and the
/// store's one-off growth is not charged to the measured connections.
const WARM_UP: usize = 64;
/// Time given to the server to finish its side of the last handshakes before reading its memory.
const SETTLE: Duration = Duration::from_secs(2);

/// Resident bytes per idle connection of the gateway and of the raw server, for each count.
pub async fn run(report: &mut Report, counts: &[usize], runs: usize) -> anyhow::Result<()> {
    for &n in counts {
        let name = format!("idle memory per connection, {n} devices");
        let base =
            format!("raw idle memory per connection, {n} connections, gateway's buffer sizes");
        let defaults =
            format!("raw idle memory per connection, {n} connections, tungstenite defaults");
        for run in 0..runs {
            println!("idle: {n} connections, run {}", run + 1);
            report.add(&defaults, "bytes", raw_per_connection(n, false).await?);
            report.add(&base, "bytes", raw_per_connection(n, true).await?);
            report.add(&name, "bytes", gateway_per_connection(n).await?);
        }
        report.compare(&name, "bytes", &base);
        report.target(&name, "bytes", crate::report::Target::AtMost(16.0 * 1024.0));
    }
    Ok(())
}

async fn gateway_per_connection(n: usize) -> anyhow::Result<f64> {
    let dir = tempfile::tempdir()?;
    let server = ServerProcess::gateway(&dir.path().join("data")).await?;
    let url = server.url.clone();
    let open = |i: usize, tag: &'static str| {
        let url = url.clone();
        async move {
            connect(iris_client::ConnectOptions::new(
                url,
                TOKEN,
                format!("{tag}-{i}"),
            ))
            .await
        }
    };
    // Each device registers once (a row in the store); the warm-up registers its own ids.
    let warm = fill(WARM_UP, |i| open(i, "warm")).await?;
    drop(warm);
    tokio::time::sleep(SETTLE).await;
    let before = server.rss_kib()?;
    let started = Instant::now();
    let devices = fill(n, |i| open(i, "idle")).await?;
    let connect_secs = started.elapsed().as_secs_f64();
    tokio::time::sleep(SETTLE).await;
    let after = server.rss_kib()?;
    println!(
        "  gateway: {n} devices connected in {connect_secs:.1}s; VmRSS {before} KiB -> {after} KiB"
    );
    drop(devices);
    server.stop().await;
    Ok(after.saturating_sub(before) as f64 * 1024.0 / n as f64)
}

async fn raw_per_connection(n: usize, small_buffers: bool) -> anyhow::Result<f64> {
    let server = ServerProcess::raw(small_buffers).await?;
    let url = server.url.clone();
    let open = |_: usize| {
        let url = url.clone();
        async move { raw::idle_connection(&url).await }
    };
    drop(fill(WARM_UP, open).await?);
    tokio::time::sleep(SETTLE).await;
    let before = server.rss_kib()?;
    let conns = fill(n, open).await?;
    tokio::time::sleep(SETTLE).await;
    let after = server.rss_kib()?;
    println!("  raw: VmRSS {before} KiB -> {after} KiB");
    drop(conns);
    server.stop().await;
    Ok(after.saturating_sub(before) as f64 * 1024.0 / n as f64)
}

/// Opens `n` connections, at most [`CONNECT_CONCURRENCY`] at a time; fails on the first failure.
async fn fill<T, F, Fut>(n: usize, open: F) -> anyhow::Result<Vec<T>>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<T>> + Send + 'static,
{
    let permits = Arc::new(Semaphore::new(CONNECT_CONCURRENCY));
    let mut set = JoinSet::new();
    for i in 0..n {
        let permit = permits.clone().acquire_owned().await?;
        let fut = open(i);
        set.spawn(async move {
            let r = tokio::time::timeout(Duration::from_secs(60), fut).await;
            drop(permit);
            r.context("connect timed out")?
        });
    }
    let mut out = Vec::with_capacity(n);
    while let Some(r) = set.join_next().await {
        out.push(r??);
    }
    Ok(out)
}
