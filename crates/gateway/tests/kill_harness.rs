//! The kill harness: three devices exchange turns with the demo agent while the gateway process
//! is killed with SIGKILL at random points. After every restart each device reconnects and syncs
//! from the last cursor it holds, as an app does. At the end every device holds every durable
//! frame exactly once, with no gap, the same frame under the same cursor on every device, and
//! the outbox agrees with the messages table.
//!
//! The randomness comes from a seed printed at the start; `IRIS_KILL_SEED` replays a run and
//! `IRIS_KILLS` sets the number of kills (20 by default; the long run in BENCHMARKS.md uses 500).

#[path = "common/binary.rs"]
mod binary;

use std::collections::BTreeMap;
use std::time::Duration;

use binary::{serve, Running, BIN};
use iris_client::{Client, ConnectOptions};
use iris_protocol::{ClientFrame, Header, MessageSend, ServerFrame};
use rand::{rngs::StdRng, Rng, SeedableRng};

const TOKEN: &str = "kill-harness-token-0123";
const DEVICES: [&str; 3] = ["phone", "tablet", "laptop"];

async fn start(dir: &std::path::Path) -> Running {
    let config = dir.join("iris.toml");
    std::fs::write(&config, "[limits]\nsends_per_minute = 100000\n").unwrap();
    let data = dir.join("data");
    let agent = format!("'{BIN}' demo-agent");
    let mut cmd = serve(&[
        "--listen",
        "127.0.0.1:0",
        "--token",
        TOKEN,
        "--data-dir",
        data.to_str().expect("utf-8 path"),
        "--config",
        config.to_str().expect("utf-8 path"),
        "--agent",
        &agent,
    ]);
    cmd.env("IRIS_LOG", "error");
    Running::start(cmd).await
}

/// What one device holds, as an app would keep it: frames by cursor.
#[derive(Default)]
struct Device {
    frames: BTreeMap<u64, String>,
    /// Frames received again on a later connection after an interrupted sync (deduplicated by
    /// cursor, as the protocol lets an app do).
    redelivered: usize,
}

impl Device {
    /// The highest cursor below which this device holds every frame there is to hold.
    fn contiguous(&self, holes: &BTreeMap<u64, ()>) -> u64 {
        let mut c = 0;
        while self.frames.contains_key(&(c + 1)) || holes.contains_key(&(c + 1)) {
            c += 1;
        }
        c
    }
}

/// One connection's life: connect, sync from what the device holds, then send messages and read
/// until the gateway dies. Returns every durable frame with its cursor, in arrival order.
async fn session(
    url: String,
    device: &'static str,
    from: u64,
    seed: u64,
) -> Vec<(u64, String, bool)> {
    let mut rng = StdRng::seed_from_u64(seed);
    let Ok((mut client, _)) = Client::connect(ConnectOptions::new(url, TOKEN, device)).await else {
        return Vec::new();
    };
    let mut log = Vec::new();
    let take = |client: &mut Client, log: &mut Vec<(u64, String, bool)>| {
        for e in std::iter::from_fn(|| client.try_next_event()) {
            if let Some(c) = e.cursor {
                log.push((c, e.frame_type().to_owned(), e.replayed));
            }
        }
    };
    match client.sync(from).await {
        Ok(outcome) => {
            for e in outcome.frames {
                log.push((e.cursor.unwrap(), e.frame_type().to_owned(), true));
            }
        }
        Err(_) => return log,
    }
    take(&mut client, &mut log);
    for n in 0.. {
        let text = format!("{device} says {n}");
        let frame = ClientFrame::MessageSend(MessageSend {
            text,
            ..Default::default()
        });
        match client
            .request_timeout(Header::lane("default", None), frame, Duration::from_secs(5))
            .await
        {
            Ok(echo) => log.push((echo.cursor.unwrap(), echo.frame_type().to_owned(), false)),
            Err(_) => break,
        }
        take(&mut client, &mut log);
        // Read for a while so turns stream in between sends.
        let pause = Duration::from_millis(rng.random_range(5..60));
        let _ = tokio::time::timeout(pause, async {
            while let Ok(e) = client.next_event_timeout(Duration::from_secs(3600)).await {
                if let Some(c) = e.cursor {
                    log.push((c, e.frame_type().to_owned(), e.replayed));
                }
            }
        })
        .await;
    }
    take(&mut client, &mut log);
    log
}

/// Waits until no turn runs and no message waits for one (the restarted gateway runs the
/// messages that waited when it was killed).
async fn settle(url: &str) {
    let (mut watcher, _) = Client::connect(ConnectOptions::new(url, TOKEN, "watcher"))
        .await
        .unwrap();
    loop {
        let reply = watcher
            .request(
                Header::lane("default", None),
                ClientFrame::History(iris_protocol::HistoryRequest {
                    limit: Some(200),
                    ..Default::default()
                }),
            )
            .await
            .unwrap();
        let ServerFrame::History(h) = reply.body else {
            panic!("expected history");
        };
        let open = h
            .messages
            .iter()
            .any(|m| m.state.is_some_and(|s| s.is_open()));
        if !open {
            return;
        }
        let _ = watcher
            .wait_for_timeout(|e| e.frame_type() == "agent.idle", Duration::from_secs(2))
            .await;
    }
}

#[tokio::test]
async fn devices_hold_every_frame_exactly_once_across_random_kills() {
    let seed: u64 = std::env::var("IRIS_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    let kills: usize = std::env::var("IRIS_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    println!("kill harness: seed {seed} (replay with IRIS_KILL_SEED={seed}), {kills} kills");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut devices: Vec<Device> = DEVICES.iter().map(|_| Device::default()).collect();
    let no_holes = BTreeMap::new();
    for round in 0..kills {
        let mut gw = start(dir.path()).await;
        let tasks: Vec<_> = DEVICES
            .iter()
            .zip(&devices)
            .map(|(name, d)| {
                tokio::spawn(session(
                    gw.url.clone(),
                    name,
                    d.contiguous(&no_holes),
                    rng.random(),
                ))
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(rng.random_range(50..700))).await;
        gw.child.start_kill().unwrap();
        gw.child.wait().await.unwrap();
        for ((task, device), name) in tasks.into_iter().zip(devices.iter_mut()).zip(DEVICES) {
            let log = task.await.unwrap();
            let mut this_connection = std::collections::HashSet::new();
            for (cursor, ty, _replayed) in log {
                assert!(this_connection.insert(cursor), "round {round}: {name} got cursor {cursor} twice on one connection (seed {seed})");
                match device.frames.get(&cursor) {
                    Some(existing) => {
                        assert_eq!(
                            existing, &ty,
                            "round {round}: {name} cursor {cursor} changed type (seed {seed})"
                        );
                        device.redelivered += 1;
                    }
                    None => {
                        device.frames.insert(cursor, ty);
                    }
                }
            }
        }
    }

    // A last, undisturbed run: the messages still waiting run, everyone catches up, then a new
    // device replays everything.
    let gw = start(dir.path()).await;
    settle(&gw.url).await;
    let (mut fresh, ack) = Client::connect(ConnectOptions::new(gw.url.clone(), TOKEN, "auditor"))
        .await
        .unwrap();
    let everything = fresh.sync(0).await.unwrap();
    let outbox: BTreeMap<u64, String> = everything
        .frames
        .iter()
        .map(|e| (e.cursor.unwrap(), e.frame_type().to_owned()))
        .collect();
    let head = ack.head_cursor;
    assert_eq!(
        outbox.len() as u64,
        head,
        "no holes: nothing is ever deleted in this run (seed {seed})"
    );
    for (name, device) in DEVICES.iter().zip(devices.iter_mut()) {
        let (mut client, _) = Client::connect(ConnectOptions::new(gw.url.clone(), TOKEN, *name))
            .await
            .unwrap();
        let from = device.contiguous(&no_holes);
        let outcome = client.sync(from).await.unwrap();
        for e in outcome.frames {
            let cursor = e.cursor.unwrap();
            if device
                .frames
                .insert(cursor, e.frame_type().to_owned())
                .is_some()
            {
                device.redelivered += 1;
            }
        }
        for (cursor, ty) in client.durable_log() {
            device.frames.entry(*cursor).or_insert_with(|| ty.clone());
        }
        let mine: BTreeMap<u64, String> = device
            .frames
            .range(..=head)
            .map(|(c, t)| (*c, t.clone()))
            .collect();
        assert_eq!(
            mine, outbox,
            "{name} holds exactly the outbox, every frame once, no gap (seed {seed})"
        );
        println!(
            "{name}: {} frames, {} redelivered after interrupted syncs",
            mine.len(),
            device.redelivered
        );
    }

    // The outbox agrees with the messages table: every message frame has its row and every
    // stored message has its frame.
    let mut by_id: BTreeMap<String, &'static str> = BTreeMap::new();
    for e in &everything.frames {
        match &e.body {
            ServerFrame::Message(m) => {
                by_id.insert(m.message_id.clone(), "message");
            }
            ServerFrame::MessageStop(s) => {
                by_id.insert(s.message_id.clone(), "message.stop");
            }
            _ => {}
        }
    }
    let mut stored = Vec::new();
    let mut before: Option<String> = None;
    loop {
        let req = ClientFrame::History(iris_protocol::HistoryRequest {
            before_message_id: before.clone(),
            limit: Some(200),
        });
        let page = match fresh
            .request(Header::lane("default", None), req)
            .await
            .unwrap()
            .body
        {
            ServerFrame::History(h) => h,
            other => panic!("{other:?}"),
        };
        stored.extend(page.messages.iter().map(|m| m.message_id.clone()));
        if !page.has_more {
            break;
        }
        before = page.oldest_message_id;
    }
    let stored: std::collections::BTreeSet<String> = stored.into_iter().collect();
    let framed: std::collections::BTreeSet<String> = by_id.keys().cloned().collect();
    let only_stored: Vec<_> = stored.difference(&framed).collect();
    let only_framed: Vec<_> = framed
        .difference(&stored)
        .map(|id| (id, by_id[id]))
        .collect();
    assert!(
        only_stored.is_empty() && only_framed.is_empty(),
        "messages table and outbox disagree (seed {seed}): rows without frames {only_stored:?}, frames without rows {only_framed:?}"
    );
    println!(
        "kill harness: {kills} kills, {head} frames, {} messages",
        stored.len()
    );
    drop(gw);
}

#[tokio::test]
async fn a_turn_cut_off_by_a_kill_is_closed_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut gw = start(dir.path()).await;
    let (mut phone, _) = Client::connect(ConnectOptions::new(gw.url.clone(), TOKEN, "phone"))
        .await
        .unwrap();
    let frame = ClientFrame::MessageSend(MessageSend {
        text: "slow story".into(),
        ..Default::default()
    });
    phone
        .request(Header::lane("default", None), frame)
        .await
        .unwrap();
    let started = phone
        .wait_for(|e| e.frame_type() == "message.start")
        .await
        .unwrap();
    let bubble = started.json()["payload"]["message_id"]
        .as_str()
        .unwrap()
        .to_owned();
    phone
        .wait_for(|e| e.frame_type() == "message.update")
        .await
        .unwrap();
    let seen = phone.durable_log().last().unwrap().0;
    gw.child.start_kill().unwrap();
    gw.child.wait().await.unwrap();

    let gw = start(dir.path()).await;
    let (mut phone, _) = Client::connect(ConnectOptions::new(gw.url.clone(), TOKEN, "phone"))
        .await
        .unwrap();
    let replay = phone.sync(seen).await.unwrap();
    let types: Vec<&str> = replay.frames.iter().map(|e| e.frame_type()).collect();
    assert_eq!(
        types,
        ["message.stop", "message.state", "message", "agent.idle"],
        "{types:?}"
    );
    assert_eq!(
        replay.frames[0].json()["payload"]["message_id"],
        bubble.as_str()
    );
    assert_eq!(
        replay.frames[1].json()["payload"]["state"],
        "interrupted",
        "the question's receipt"
    );
    assert!(replay.frames[2].json()["payload"]["text"]
        .as_str()
        .unwrap()
        .contains("working on “slow story”; that answer was cut off"));
    // The lane works again.
    let frame = ClientFrame::MessageSend(MessageSend {
        text: "hello again".into(),
        ..Default::default()
    });
    phone
        .request(Header::lane("default", None), frame)
        .await
        .unwrap();
    let stop = phone
        .wait_for(|e| e.frame_type() == "message.stop")
        .await
        .unwrap();
    assert_eq!(stop.json()["payload"]["final_text"], "Echo: hello again");
    drop(gw);
}
