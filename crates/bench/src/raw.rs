//! The physical reference: a raw tokio-tungstenite server and clients on the same machine,
//! sending frames of the same sizes as the gateway scenarios, with no protocol, store or agent.
//!
//! The first text frame of a connection picks what the server does with it:
//! - `echo`: every later frame is sent back;
//! - `stream <count> <size>`: the server sends `count` frames of `size` bytes, then closes;
//! - `sub`: the connection receives every frame a `pub` connection sends;
//! - `pub`: every later frame is forwarded to every `sub` connection.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use futures_util::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

use crate::gateway::SERVER_WORKERS;
use crate::report::percentile;
use crate::unix_nanos;

type Subscribers = Arc<Mutex<Vec<mpsc::UnboundedSender<Message>>>>;

/// The gateway's WebSocket buffer sizes (crates/gateway/src/server.rs), for the raw server that
/// shows the memory floor of a connection with the same buffers.
const GATEWAY_READ_BUFFER: usize = 4 * 1024;
const GATEWAY_WRITE_BUFFER: usize = 16 * 1024;

/// Accepts connections until `stop` completes. `small_buffers` gives connections the gateway's
/// buffer sizes instead of tungstenite's defaults (128 KiB each).
async fn serve(
    listener: TcpListener,
    small_buffers: bool,
    stop: impl std::future::Future<Output = ()>,
) {
    let subs: Subscribers = Arc::default();
    let config = small_buffers.then(|| {
        WebSocketConfig::default()
            .read_buffer_size(GATEWAY_READ_BUFFER)
            .write_buffer_size(GATEWAY_WRITE_BUFFER)
    });
    tokio::pin!(stop);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(connection(stream, config, subs.clone()));
                }
            }
            _ = &mut stop => return,
        }
    }
}

async fn connection(stream: TcpStream, config: Option<WebSocketConfig>, subs: Subscribers) {
    let Ok(ws) = tokio_tungstenite::accept_async_with_config(stream, config).await else {
        return;
    };
    let (mut sink, mut source) = ws.split();
    let mode = match source.next().await {
        Some(Ok(Message::Text(t))) => t.to_string(),
        _ => return,
    };
    let words: Vec<&str> = mode.split_whitespace().collect();
    match words.as_slice() {
        ["echo"] => {
            while let Some(Ok(msg)) = source.next().await {
                let echo = match msg {
                    Message::Text(_) | Message::Binary(_) => msg,
                    Message::Close(_) => return,
                    _ => continue,
                };
                if sink.send(echo).await.is_err() {
                    return;
                }
            }
        }
        ["stream", count, size] => {
            let (Ok(count), Ok(size)) = (count.parse::<usize>(), size.parse::<usize>()) else {
                return;
            };
            let body = "x".repeat(size.saturating_sub(24));
            for i in 0..count {
                let text = format!("{{\"n\":{i:>12},\"b\":\"{body}\"}}");
                if sink.feed(Message::text(text)).await.is_err() {
                    return;
                }
                if i % 64 == 63 && sink.flush().await.is_err() {
                    return;
                }
            }
            let _ = sink.close().await;
            // Read until the client's close answers ours.
            while let Some(Ok(_)) = source.next().await {}
        }
        ["sub"] => {
            let (tx, mut rx) = mpsc::unbounded_channel();
            subs.lock().expect("subscribers").push(tx);
            // Say "ready" so the client knows it is registered before anything is published.
            if sink.send(Message::text("ready")).await.is_err() {
                return;
            }
            loop {
                tokio::select! {
                    msg = rx.recv() => {
                        let Some(msg) = msg else { return };
                        if sink.feed(msg).await.is_err() {
                            return;
                        }
                        while let Ok(more) = rx.try_recv() {
                            if sink.feed(more).await.is_err() {
                                return;
                            }
                        }
                        if sink.flush().await.is_err() {
                            return;
                        }
                    }
                    incoming = source.next() => match incoming {
                        Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                        _ => {}
                    },
                }
            }
        }
        ["pub"] => {
            while let Some(Ok(msg)) = source.next().await {
                match msg {
                    Message::Text(_) => {
                        let mut subs = subs.lock().expect("subscribers");
                        subs.retain(|s| s.send(msg.clone()).is_ok());
                    }
                    Message::Close(_) => return,
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// The raw server in this process, on a runtime of its own shaped like the gateway's.
pub struct RawServer {
    /// `ws://127.0.0.1:<port>`.
    pub url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RawServer {
    /// Binds a loopback port and serves.
    pub fn start() -> anyhow::Result<RawServer> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<anyhow::Result<SocketAddr>>();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("raw-runtime".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(SERVER_WORKERS)
                    .thread_name("raw")
                    .enable_all()
                    .build()
                    .expect("raw runtime");
                rt.block_on(async move {
                    let listener = match TcpListener::bind("127.0.0.1:0").await {
                        Ok(l) => l,
                        Err(e) => {
                            let _ = ready_tx.send(Err(e.into()));
                            return;
                        }
                    };
                    let _ = ready_tx.send(listener.local_addr().map_err(Into::into));
                    serve(listener, false, async move {
                        let _ = stop_rx.await;
                    })
                    .await;
                });
            })?;
        let addr = ready_rx.recv().context("raw server thread died")??;
        Ok(RawServer {
            url: format!("ws://{addr}"),
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// `iris-bench raw-server`: the raw server as a process of its own (for per-connection memory),
/// printing `listening ws://…` and serving until it is terminated.
pub fn run_process(small_buffers: bool) -> anyhow::Result<()> {
    crate::gateway::raise_nofile_limit();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(SERVER_WORKERS)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        println!("listening ws://{}", listener.local_addr()?);
        serve(listener, small_buffers, std::future::pending()).await;
        Ok(())
    })
}

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>>;

async fn open(url: &str, mode: &str) -> anyhow::Result<Ws> {
    // Configured like the iris-client connections the gateway scenarios use (16 KiB read
    // buffer, TCP_NODELAY), so both sides of every comparison pay the same client costs.
    let config = WebSocketConfig::default().read_buffer_size(16 * 1024);
    let (mut ws, _) = tokio_tungstenite::connect_async_with_config(url, Some(config), true)
        .await
        .context("raw connect")?;
    ws.send(Message::text(mode)).await?;
    Ok(ws)
}

/// A text frame of exactly `size` bytes (at least 20) that starts with its send time.
fn stamped(size: usize) -> String {
    let mut text = format!("{:020}", unix_nanos());
    text.push_str(&"x".repeat(size.saturating_sub(20)));
    text
}

fn stamp_of(text: &str) -> Option<u64> {
    text.get(..20)?.parse().ok()
}

/// Frames of an echo throughput measurement: enough for a few tenths of a second, so that one
/// scheduling hiccup does not decide the figure.
pub const ECHO_FRAMES: usize = 200_000;

/// Echo throughput: `count` frames of `size` bytes written back to back (the writer never waits
/// for an answer), each echoed; frames per second received back.
pub async fn echo_rate(url: &str, size: usize, count: usize) -> anyhow::Result<f64> {
    let ws = open(url, "echo").await?;
    let (mut sink, mut source) = ws.split();
    let started = Instant::now();
    let writer = tokio::spawn(async move {
        for i in 0..count {
            sink.feed(Message::text(stamped(size))).await?;
            if i % 16 == 15 {
                sink.flush().await?;
            }
        }
        sink.flush().await?;
        anyhow::Ok(sink)
    });
    let mut got = 0;
    while got < count {
        match tokio::time::timeout(Duration::from_secs(30), source.next()).await {
            Ok(Some(Ok(Message::Text(_)))) => got += 1,
            Ok(Some(Ok(_))) => {}
            other => bail!("echo ended after {got} frames: {other:?}"),
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let mut sink = writer.await??;
    let _ = sink.close().await;
    Ok(count as f64 / secs)
}

/// Round trips of one `size`-byte frame at a time: (p50, p99) in nanoseconds.
pub async fn echo_rtt(url: &str, size: usize, count: usize) -> anyhow::Result<(u64, u64)> {
    let mut ws = open(url, "echo").await?;
    let mut samples = Vec::with_capacity(count);
    for _ in 0..count {
        let t = Instant::now();
        ws.send(Message::text(stamped(size))).await?;
        loop {
            match tokio::time::timeout(Duration::from_secs(10), ws.next()).await {
                Ok(Some(Ok(Message::Text(_)))) => break,
                Ok(Some(Ok(_))) => {}
                other => bail!("echo ended: {other:?}"),
            }
        }
        samples.push(t.elapsed().as_nanos() as u64);
    }
    let _ = ws.close(None).await;
    Ok((
        percentile(&mut samples, 50.0),
        percentile(&mut samples, 99.0),
    ))
}

/// One-way stream: the server writes `count` frames of `size` bytes as fast as it can; frames
/// per second read by the client.
pub async fn stream_rate(url: &str, size: usize, count: usize) -> anyhow::Result<f64> {
    let mut ws = open(url, &format!("stream {count} {size}")).await?;
    let started = Instant::now();
    let mut got = 0;
    while got < count {
        match tokio::time::timeout(Duration::from_secs(30), ws.next()).await {
            Ok(Some(Ok(Message::Text(_)))) => got += 1,
            Ok(Some(Ok(_))) => {}
            other => bail!("stream ended after {got} frames: {other:?}"),
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(Ok(_)) = ws.next().await {}
    })
    .await;
    Ok(count as f64 / secs)
}

/// What a raw fan-out delivered.
#[derive(Debug, Clone, Copy)]
pub struct FanOut {
    /// Frames received per second, summed over the subscribers.
    pub rate: f64,
    /// Publish-to-receipt latency percentiles, nanoseconds.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
}

/// One publisher sends `count` frames of `size` bytes, `gap` apart (none: back to back), and the
/// server forwards each to `subs` subscribers.
pub async fn fan_out(
    url: &str,
    subs: usize,
    size: usize,
    count: usize,
    gap: Duration,
) -> anyhow::Result<FanOut> {
    let mut tasks = Vec::with_capacity(subs);
    for _ in 0..subs {
        let mut ws = open(url, "sub").await?;
        match tokio::time::timeout(Duration::from_secs(10), ws.next()).await {
            Ok(Some(Ok(Message::Text(t)))) if t.as_str() == "ready" => {}
            other => bail!("subscriber not registered: {other:?}"),
        }
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::with_capacity(count);
            while samples.len() < count {
                match tokio::time::timeout(Duration::from_secs(30), ws.next()).await {
                    Ok(Some(Ok(Message::Text(t)))) => {
                        let now = unix_nanos();
                        samples.push(now.saturating_sub(stamp_of(t.as_str()).unwrap_or(now)));
                    }
                    Ok(Some(Ok(_))) => {}
                    other => {
                        return Err(anyhow!(
                            "subscriber ended after {} frames: {other:?}",
                            samples.len()
                        ))
                    }
                }
            }
            let _ = ws.close(None).await;
            Ok((samples, Instant::now()))
        }));
    }
    let mut publisher = open(url, "pub").await?;
    let started = Instant::now();
    for i in 0..count {
        if !gap.is_zero() {
            tokio::time::sleep(gap).await;
        }
        publisher.feed(Message::text(stamped(size))).await?;
        if gap.is_zero() && i % 16 != 15 {
            continue;
        }
        publisher.flush().await?;
    }
    publisher.flush().await?;
    let mut all = Vec::with_capacity(subs * count);
    let mut last = started;
    for t in tasks {
        let (samples, done) = t.await??;
        all.extend(samples);
        last = last.max(done);
    }
    let _ = publisher.close(None).await;
    let rate = all.len() as f64 / (last - started).as_secs_f64();
    Ok(FanOut {
        rate,
        p50: percentile(&mut all, 50.0),
        p99: percentile(&mut all, 99.0),
    })
}

/// An idle raw connection, after one echoed frame (as a device after `hello`/`hello.ack`).
pub async fn idle_connection(url: &str) -> anyhow::Result<Ws> {
    let mut ws = open(url, "echo").await?;
    ws.send(Message::text(stamped(200))).await?;
    match tokio::time::timeout(Duration::from_secs(30), ws.next()).await {
        Ok(Some(Ok(Message::Text(_)))) => Ok(ws),
        other => bail!("idle connection got no echo: {other:?}"),
    }
}
