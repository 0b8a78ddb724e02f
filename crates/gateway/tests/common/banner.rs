//! The startup banner of a gateway spawned as a process: where it listens.
//!
//! Standalone (no `common` module): also included with `#[path = "common/banner.rs"] mod banner;`.

use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

/// Reads a spawned gateway's stdout (piped) until its banner names the WebSocket URL, and then
/// keeps reading it in the background, so the process never blocks on a full pipe.
pub async fn ws_url(child: &mut Child) -> String {
    let mut lines = BufReader::new(child.stdout.take().expect("stdout piped")).lines();
    let url = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.expect("read stdout") {
            if let Some(url) = line.trim().strip_prefix("WebSocket: ") {
                return url.to_owned();
            }
        }
        panic!("gateway exited before printing its URL");
    })
    .await
    .expect("gateway started");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    url
}
