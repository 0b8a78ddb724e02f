//! Back-pressure at the agent's edge: while the consumer of a connection does not take what the
//! other side sends, the connection stops reading the pipe, so the other side's writes wait
//! instead of the reader's memory growing; nothing is lost once the consumer reads again.

use iris_acp::rpc::{Connection, Incoming, INCOMING_QUEUE};
use serde_json::json;
use tokio::io::AsyncWriteExt;

#[tokio::test]
async fn a_consumer_that_does_not_read_stops_the_pipe_and_loses_nothing() {
    // A small pipe, so that the writer fills it quickly once nobody reads.
    let (ours, mut theirs) = tokio::io::duplex(4096);
    let (reader, writer) = tokio::io::split(ours);
    let (_conn, mut incoming) = Connection::new(reader, writer);
    let lines = 20 * INCOMING_QUEUE;
    let line = |i: usize| {
        let msg = json!({"jsonrpc": "2.0", "method": "session/update", "params": {"n": i, "pad": "x".repeat(200)}});
        format!("{msg}\n")
    };
    let mut writing = tokio::spawn(async move {
        for i in 0..lines {
            theirs.write_all(line(i).as_bytes()).await.expect("write");
        }
        theirs
    });
    // The consumer reads one message, so the connection is known to run; then it stops.
    let Some(Incoming::Notification { params, .. }) = incoming.recv().await else {
        panic!("a notification");
    };
    assert_eq!(params["n"], 0);
    // The writer is held up: the queue and the pipe hold far less than it has to write.
    let held = tokio::time::timeout(std::time::Duration::from_millis(300), &mut writing).await;
    assert!(held.is_err(), "the writer finished although nobody read");
    // Reading again lets everything through, in order.
    for i in 1..lines {
        let Some(Incoming::Notification { params, .. }) = incoming.recv().await else {
            panic!("notification {i}");
        };
        assert_eq!(params["n"], i);
    }
    writing.await.expect("writer");
}
