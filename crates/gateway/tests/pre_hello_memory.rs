//! Memory held for strangers that never said `hello` stays bounded: 400 connections each
//! pushing a 2 MiB frame before `hello` are cut off after 16 KiB, so the gateway's peak memory
//! grows by a few MiB instead of 800. A test binary of its own, so that no other test's memory
//! is counted.

mod common;

use common::tcp::*;
use common::*;
use tokio::io::AsyncWriteExt;

/// A field of `/proc/self/status` in KiB.
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"))
}

/// One stranger: upgrade, then a frame promising 2 MiB, written in 64 KiB pieces from a shared
/// buffer until the gateway closes the connection.
async fn stranger(server: std::net::SocketAddr, from: String, chunk: &'static [u8]) -> bool {
    let mut tcp = connect_from(&from, server).await.expect("connect");
    upgrade(&mut tcp, server).await;
    let total = 2 * 1024 * 1024;
    if tcp.write_all(&frame_head(0x1, total as u64)).await.is_err() {
        return true;
    }
    let mut sent = 0;
    while sent < total {
        let write = tokio::time::timeout(ANSWER, tcp.write_all(chunk));
        match write.await {
            Ok(Ok(())) => sent += chunk.len(),
            Ok(Err(_)) => break,
            Err(_) => panic!("the gateway neither read nor closed"),
        }
    }
    closed_within(&mut tcp, ANSWER).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_hundred_strangers_pushing_2_mib_before_hello_add_a_few_mib() {
    let gw = TestGateway::start_with(|c| c.limits.max_connections_per_address = 1000).await;
    let server = server_addr(&gw.url);
    // Warm up: a connection of the owner's, so that what a first connection allocates once is
    // not counted.
    let (client, _) = gw.connect("owner-phone").await;
    drop(client);
    let chunk: &'static [u8] = Box::leak(vec![b'a'; 64 * 1024].into_boxed_slice());
    // Reset the peak (VmHWM) to the current resident size.
    std::fs::write("/proc/self/clear_refs", "5").expect("clear_refs");
    let before = status_kib("VmRSS:");
    let strangers: Vec<_> = (0..400)
        .map(|n| tokio::spawn(stranger(server, format!("127.0.1.{}", n % 200 + 1), chunk)))
        .collect();
    for s in strangers {
        assert!(
            s.await.expect("stranger"),
            "a stranger's connection stayed open"
        );
    }
    let peak = status_kib("VmHWM:");
    let grew_mib = peak.saturating_sub(before) as f64 / 1024.0;
    eprintln!("peak resident memory grew by {grew_mib:.1} MiB");
    assert!(grew_mib < 16.0, "grew by {grew_mib:.1} MiB");
    let (_client, ack) = gw.connect("owner-phone").await;
    assert_eq!(ack.device_id.as_deref(), Some("owner-phone"));
    gw.stop().await;
}
