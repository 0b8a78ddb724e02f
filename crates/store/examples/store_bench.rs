//! Measures replay throughput of a large outbox and the effect of group commit.
//!
//! Usage: `cargo run --release -p iris-store --example store_bench [ROWS] [WRITES]`
//! (defaults: 1,000,000 outbox rows, 2,000 concurrent single-frame writes).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use iris_store::{CommitHook, NewFrame, Store, StoreConfig};

fn frame(i: usize) -> NewFrame {
    NewFrame {
        frame_type: "message_delta".into(),
        chat_id: Some("default".into()),
        message_id: Some(format!("m{}", i / 100)),
        json: format!(
            r#"{{"type":"message_delta","chat_id":"default","message_id":"m{}","delta":"token {i} of a streamed reply"}}"#,
            i / 100
        ),
        ..Default::default()
    }
}

fn open(path: &std::path::Path, group_commit: bool) -> (Store, Arc<AtomicUsize>) {
    let batches = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&batches);
    let hook: CommitHook = Arc::new(move |_| {
        counter.fetch_add(1, Ordering::Relaxed);
    });
    let cfg = StoreConfig {
        path: path.to_path_buf(),
        group_commit,
        readers: 2,
    };
    (Store::open(cfg, hook).expect("open store"), batches)
}

async fn replay_bench(rows: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, _) = open(&dir.path().join("replay.db"), true);
    let started = Instant::now();
    let chunk = 10_000;
    let mut written = 0;
    while written < rows {
        let n = chunk.min(rows - written);
        let base = written;
        store
            .write(move |tx| {
                for i in base..base + n {
                    tx.append(frame(i))?;
                }
                Ok(())
            })
            .await
            .expect("fill");
        written += n;
    }
    println!("filled {rows} rows in {:.2?}", started.elapsed());

    let started = Instant::now();
    let (mut after, mut total) = (0, 0usize);
    loop {
        let page = store.replay(after, 1000).await.expect("replay");
        let Some((last, _)) = page.last() else { break };
        after = *last;
        total += page.len();
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "replayed {total} frames in pages of 1000: {secs:.2}s, {:.0} frames/s",
        total as f64 / secs
    );
}

async fn commit_bench(writes: usize, group_commit: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, batches) = open(&dir.path().join("commit.db"), group_commit);
    let tasks = 100;
    let started = Instant::now();
    let mut handles = Vec::new();
    for t in 0..tasks {
        let store = store.clone();
        handles.push(tokio::spawn(async move {
            for i in (t..writes).step_by(tasks) {
                store
                    .write(move |tx| tx.append(frame(i)))
                    .await
                    .expect("write");
            }
        }));
    }
    for h in handles {
        h.await.expect("task");
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "group_commit={group_commit}: {writes} writes from {tasks} tasks in {secs:.2}s \
         ({:.0} writes/s, {} commits)",
        writes as f64 / secs,
        batches.load(Ordering::Relaxed)
    );
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let rows = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let writes = args.next().and_then(|a| a.parse().ok()).unwrap_or(2_000);
    replay_bench(rows).await;
    commit_bench(writes, true).await;
    commit_bench(writes, false).await;
}
