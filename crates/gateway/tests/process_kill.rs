//! The real `iris-gateway` binary killed with SIGKILL in the middle of traffic: no frame is lost,
//! none is received twice, and every device catches up after the restart.

#[path = "common/binary.rs"]
mod binary;

use std::collections::{BTreeMap, BTreeSet, HashSet};

use binary::*;
use iris_client::{Client, ClientError, Event};
use iris_protocol::{ClientFrame, Header, HistoryRequest, MessageSend, RequestId, ServerFrame};

/// What a durable frame is, to compare a frame received live with its replay.
fn identity(event: &Event) -> String {
    match &event.body {
        ServerFrame::Message(m) => format!("message {}", m.message_id),
        other => iris_protocol::FrameBody::frame_type(other).to_owned(),
    }
}

/// Takes every frame a client still has, until its connection is gone.
async fn drain(client: &mut Client) -> Vec<Event> {
    let mut events = Vec::new();
    loop {
        match client.next_event_timeout(PATIENCE).await {
            Ok(event) => events.push(event),
            Err(ClientError::Closed(_) | ClientError::Ws(_)) => return events,
            Err(e) => panic!(
                "{}: the connection should end after the kill: {e}",
                client.device_id()
            ),
        }
    }
}

/// Durable frames by cursor, asserting each cursor at most once.
fn by_cursor(events: &[Event], what: &str) -> BTreeMap<u64, String> {
    let mut map = BTreeMap::new();
    for e in events.iter().filter(|e| e.is_durable()) {
        let cursor = e
            .cursor
            .unwrap_or_else(|| panic!("{what}: a durable frame without cursor: {}", e.raw));
        assert!(
            map.insert(cursor, identity(e)).is_none(),
            "{what}: cursor {cursor} received twice"
        );
    }
    map
}

fn assert_strictly_increasing(frames: &[Event], what: &str) {
    let cursors: Vec<u64> = frames
        .iter()
        .map(|e| e.cursor.expect("replayed frames carry a cursor"))
        .collect();
    assert!(
        cursors.windows(2).all(|w| w[0] < w[1]),
        "{what}: replayed cursors not strictly increasing: {cursors:?}"
    );
}

/// Sends up to 300 messages with `window` requests in flight until the connection dies. Returns
/// the client, every frame it received, and the ids of its echoed messages in order.
async fn write_until_gone(
    mut client: Client,
    prefix: &'static str,
    window: u64,
    progress: Option<tokio::sync::watch::Sender<u64>>,
) -> (Client, Vec<Event>, Vec<String>) {
    const FIRST_ID: u64 = 1000;
    let (mut sent, mut echoed) = (0u64, Vec::new());
    let mut events = Vec::new();
    loop {
        while sent < 300 && sent - (echoed.len() as u64) < window {
            let header = Header {
                id: Some(RequestId::from(FIRST_ID + sent)),
                ..Header::lane("default", None)
            };
            let text = format!("{prefix} traffic {sent}");
            if client
                .send(
                    header,
                    ClientFrame::MessageSend(MessageSend {
                        text,
                        ..Default::default()
                    }),
                )
                .await
                .is_err()
            {
                // Frames read before the failure are still buffered in the client.
                events.extend(drain(&mut client).await);
                return (client, events, echoed);
            }
            sent += 1;
        }
        if echoed.len() as u64 == sent {
            // Everything was sent and echoed; wait for the end of the connection.
            events.extend(drain(&mut client).await);
            return (client, events, echoed);
        }
        match client.next_event_timeout(PATIENCE).await {
            Ok(event) => {
                if let Some(id) = event.id() {
                    assert_eq!(
                        id,
                        FIRST_ID + echoed.len() as u64,
                        "echoes arrive in request order: {}",
                        event.raw
                    );
                    let ServerFrame::Message(m) = &event.body else {
                        panic!("send answered by {}", event.raw)
                    };
                    echoed.push(m.message_id.clone());
                    if let Some(p) = &progress {
                        p.send_replace(echoed.len() as u64);
                    }
                }
                events.push(event);
            }
            Err(ClientError::Closed(_) | ClientError::Ws(_)) => return (client, events, echoed),
            Err(e) => panic!("{}: {e}", client.device_id()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_traffic_loses_no_frame() {
    let seed: u64 = match std::env::var("IRIS_KILL_SEED") {
        Ok(s) => s.parse().expect("IRIS_KILL_SEED is a number"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_nanos() as u64,
    };
    let kill_after = 1 + seed % 150;
    let window = 1 + (seed / 150) % 8;
    println!(
        "kill seed {seed}: SIGKILL after {kill_after} echoes to phone-a, {window} sends in flight per writer \
         (rerun with IRIS_KILL_SEED={seed})"
    );

    let tmp = tempfile::tempdir().expect("tempdir");
    let config = write_config(
        tmp.path(),
        &format!(
            "listen = \"127.0.0.1:0\"\ndata_dir = \"{}\"\ntoken = \"{TOKEN}\"\n[limits]\nsends_per_minute = 1000000\n",
            tmp.path().join("data").display()
        ),
    );
    let mut gw = Running::start(serve(&["--config", &config])).await;
    let devices = ["phone-a", "phone-b", "tablet-c"];
    let mut clients = Vec::new();
    for device in devices {
        let (mut client, ack) = Client::connect(gw.options(TOKEN, device))
            .await
            .expect("connect");
        let replay = client.sync(ack.sync_cursor).await.expect("initial sync");
        assert!(
            replay.frames.is_empty(),
            "a new data dir has an empty outbox"
        );
        clients.push(client);
    }
    let mut c = clients.pop().expect("tablet-c");
    let b = clients.pop().expect("phone-b");
    let a = clients.pop().expect("phone-a");

    // Devices A and B write until the gateway dies under them; C only listens.
    let (progress, mut a_echoed) = tokio::sync::watch::channel(0u64);
    let writer_a = tokio::spawn(write_until_gone(a, "a", window, Some(progress)));
    let writer_b = tokio::spawn(write_until_gone(b, "b", window, None));
    tokio::time::timeout(PATIENCE, a_echoed.wait_for(|n| *n >= kill_after))
        .await
        .expect("enough echoes in time")
        .expect("the writer is running");
    gw.signal(libc::SIGKILL);
    let status = gw.wait().await;
    assert!(!status.success(), "killed: {status:?}");

    let c_events = drain(&mut c).await;
    let mut written = Vec::new();
    let mut received = Vec::new();
    for writer in [writer_a, writer_b] {
        let (client, events, echoed) = tokio::time::timeout(PATIENCE, writer)
            .await
            .expect("writer ends")
            .expect("writer");
        received.push((client, events));
        written.push(echoed);
    }
    received.push((c, c_events));
    println!(
        "echoed before the kill: {} to phone-a, {} to phone-b",
        written[0].len(),
        written[1].len()
    );
    assert!(written[0].len() as u64 >= kill_after);
    let mut before = Vec::new();
    for (client, events) in &received {
        let device = client.device_id();
        let got = by_cursor(events, &format!("{device} before the kill"));
        let logged: BTreeSet<u64> = client.durable_log().iter().map(|(c, _)| *c).collect();
        assert_eq!(
            logged,
            got.keys().copied().collect(),
            "{device}: the durable log matches the frames taken"
        );
        before.push(got);
    }
    drop(received);

    // Restart on the same data dir; every device catches up from its own watermark.
    let gw = Running::start(serve(&["--config", &config])).await;
    let (mut fresh, _) = Client::connect(gw.options(TOKEN, "fresh-device"))
        .await
        .expect("connect");
    let everything = fresh.sync(0).await.expect("replay from 0");
    assert_strictly_increasing(&everything.frames, "replay from 0");
    let outbox = by_cursor(&everything.frames, "replay from 0");
    let ids: Vec<&String> = outbox
        .values()
        .filter(|i| i.starts_with("message "))
        .collect();
    assert_eq!(
        ids.len(),
        ids.iter().collect::<HashSet<_>>().len(),
        "message ids are unique in the replay"
    );
    for (device, received) in devices.iter().zip(&before) {
        for (cursor, what) in received {
            assert_eq!(
                outbox.get(cursor),
                Some(what),
                "{device} got frame {cursor} before the kill; it is not replayable"
            );
        }
    }
    for (device, received) in devices.iter().zip(&before) {
        let (mut client, ack) = Client::connect(gw.options(TOKEN, device))
            .await
            .expect("reconnect");
        let replay = client
            .sync(ack.sync_cursor)
            .await
            .expect("sync after restart");
        assert_strictly_increasing(&replay.frames, &format!("{device} after restart"));
        let replayed = by_cursor(&replay.frames, &format!("{device} after restart"));
        println!(
            "{device}: watermark {}, {} frames replayed after the restart",
            ack.sync_cursor,
            replayed.len()
        );
        for (cursor, what) in &replayed {
            assert!(
                *cursor > ack.sync_cursor,
                "{device}: replayed {cursor} at or below its watermark"
            );
            assert_eq!(
                outbox.get(cursor),
                Some(what),
                "{device}: replay of {cursor} differs from the outbox"
            );
        }
        for (cursor, what) in &outbox {
            let has = received.get(cursor).or_else(|| replayed.get(cursor));
            assert_eq!(
                has,
                Some(what),
                "{device} (watermark {}) never gets frame {cursor}",
                ack.sync_cursor
            );
        }
        client.close().await.expect("close");
    }

    // Every message A or B saw echoed is in history, in the order it was sent.
    let mut history = Vec::new();
    let mut before_id = None;
    loop {
        let req = HistoryRequest {
            before_message_id: before_id.clone(),
            limit: Some(200),
        };
        let page = fresh
            .request(Header::lane("default", None), ClientFrame::History(req))
            .await
            .expect("history");
        let ServerFrame::History(page) = page.body else {
            panic!("{}", page.raw)
        };
        let mut ids: Vec<String> = page.messages.into_iter().map(|m| m.message_id).collect();
        ids.append(&mut history);
        history = ids;
        if !page.has_more {
            break;
        }
        before_id = page.oldest_message_id;
    }
    let position: std::collections::HashMap<&String, usize> =
        history.iter().enumerate().map(|(i, id)| (id, i)).collect();
    for (device, echoed) in devices.iter().zip(&written) {
        let at: Vec<usize> = echoed
            .iter()
            .map(|id| {
                *position
                    .get(id)
                    .unwrap_or_else(|| panic!("{device}: echoed message {id} is not in history"))
            })
            .collect();
        assert!(
            at.windows(2).all(|w| w[0] < w[1]),
            "{device}: its messages keep their order in history"
        );
    }
    assert!(
        history.len() <= 600,
        "{} messages in history",
        history.len()
    );
    fresh.close().await.expect("close");
    gw.stop().await;
}
