//! Delivery through the real server: broadcast, replay, sync across restarts, racing syncs.

mod common;

use std::collections::BTreeSet;

use common::*;
use iris_client::{Client, RawConnection};
use iris_protocol::{
    ChannelCreate, ClientFrame, Empty, Header, HistoryRequest, MessageDelete, Search, SearchScope,
    ServerFrame,
};

/// Sends `text` to the default channel; the cursor of its stored message.
async fn sent_cursor(client: &mut Client, text: &str) -> u64 {
    let echo = send_text(client, "default", text).await;
    echo.cursor.expect("a stored message has a cursor")
}

#[tokio::test]
async fn a_message_is_echoed_to_the_sender_and_broadcast_to_the_others() {
    let gw = TestGateway::start().await;
    let (mut a, _) = gw.connect("phone").await;
    let (mut b, _) = gw.connect("laptop").await;
    let echo = send_text(&mut a, "default", "hello there").await;
    assert!(
        echo.id().is_some(),
        "the sender gets its echo as the response"
    );
    assert_eq!(message_text(&echo), "hello there");
    let seen = b.next_event().await.unwrap();
    assert_eq!(
        seen.header.id, None,
        "other devices get the broadcast without id"
    );
    assert_eq!(message_id(&seen), message_id(&echo));
    assert_eq!(seen.cursor, echo.cursor, "both are the same outbox frame");
    match &seen.body {
        ServerFrame::Message(m) => assert_eq!(m.role, iris_protocol::Role::User),
        other => panic!("{other:?}"),
    }
    gw.stop().await;
}

/// Waits until the gateway has stored `cursor` (or more) as the device's delivery watermark.
async fn confirmed(
    gw: &TestGateway,
    rx: &mut tokio::sync::broadcast::Receiver<(String, u64)>,
    device: &str,
    cursor: u64,
) {
    let stored = gw
        .shared
        .store
        .get_device(device)
        .await
        .unwrap()
        .map(|d| d.confirmed_cursor)
        .unwrap_or(0);
    if stored >= cursor {
        return;
    }
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            let (d, c) = rx.recv().await.expect("confirmations");
            if d == device && c >= cursor {
                return;
            }
        }
    })
    .await
    .expect("watermark confirmed in time");
}

#[tokio::test]
async fn replay_after_a_disconnect_carries_exactly_the_missed_cursors() {
    let gw = TestGateway::start().await;
    let mut confirmations = gw.shared.hub.watermarks();
    let (mut a, _) = gw.connect("a").await;
    let (mut b, ack) = gw.connect("b").await;
    assert_eq!(ack.sync_cursor, 0, "a new device starts at 0");
    let first = send_text(&mut a, "default", "one").await;
    let c1 = first.cursor.expect("durable echo has a cursor");
    let live = b.next_event().await.unwrap();
    assert_eq!(live.cursor, Some(c1));
    confirmed(&gw, &mut confirmations, "b", c1).await;
    b.close().await.unwrap();

    let mut missed = Vec::new();
    for text in ["two", "three", "four"] {
        let echo = send_text(&mut a, "default", text).await;
        missed.push((echo.cursor.unwrap(), message_id(&echo)));
    }
    let (mut b, ack) = gw.connect("b").await;
    assert_eq!(ack.sync_cursor, c1, "the watermark is what b confirmed");
    let replay = b.sync(ack.sync_cursor).await.unwrap();
    let got: Vec<(u64, String)> = replay
        .frames
        .iter()
        .map(|e| (e.cursor.unwrap(), message_id(e)))
        .collect();
    assert_eq!(got, missed);
    assert!(replay
        .frames
        .iter()
        .all(|e| e.replayed && e.header.cursor.is_some()));
    assert_eq!(replay.cursor, missed.last().unwrap().0);
    assert!(!replay.gap);
    // Live frames continue right after the sync.done cursor.
    let echo = send_text(&mut a, "default", "five").await;
    let live = b.next_event().await.unwrap();
    assert_eq!(
        (live.cursor, live.header.cursor),
        (echo.cursor, None),
        "live frames carry no cursor"
    );
    assert_eq!(live.cursor, Some(replay.cursor + 1));
    gw.stop().await;
}

#[tokio::test]
async fn sync_works_across_a_restart_on_the_same_data_dir() {
    let dir = tempfile::tempdir().unwrap();
    let gw = TestGateway::start_in(dir.path(), |_| {}).await;
    let (mut a, _) = gw.connect("a").await;
    let mut sent = Vec::new();
    for i in 0..5 {
        sent.push(message_id(
            &send_text(&mut a, "default", &format!("before restart {i}")).await,
        ));
    }
    let head_before = a.durable_log().last().unwrap().0;
    drop(a);
    gw.stop().await;

    let gw = TestGateway::start_in(dir.path(), |_| {}).await;
    let (mut c, ack) = gw.connect("new-device").await;
    assert_eq!(ack.head_cursor, head_before);
    let replay = c.sync(0).await.unwrap();
    let ids: Vec<String> = replay.frames.iter().map(message_id).collect();
    assert_eq!(ids, sent);
    let cursors: Vec<u64> = replay.frames.iter().map(|e| e.cursor.unwrap()).collect();
    assert!(cursors.windows(2).all(|w| w[0] < w[1]));
    let echo = send_text(&mut c, "default", "after restart").await;
    assert_eq!(
        echo.cursor,
        Some(head_before + 1),
        "cursors continue, never reused"
    );
    let history = c
        .request(
            Header::lane("default", None),
            ClientFrame::History(HistoryRequest::default()),
        )
        .await
        .unwrap();
    match history.body {
        ServerFrame::History(h) => assert_eq!(h.messages.len(), 6),
        other => panic!("{other:?}"),
    }
    gw.stop().await;
}

#[tokio::test]
async fn a_sync_racing_with_new_traffic_loses_nothing_and_duplicates_nothing() {
    let gw = TestGateway::start_with(|c| c.limits.sends_per_minute = 100_000).await;
    let (mut a, _) = gw.connect("a").await;
    for i in 0..300 {
        send_text(&mut a, "default", &format!("backlog {i}")).await;
    }
    let (mut b, ack) = gw.connect("b").await;
    let writer = tokio::spawn(async move {
        let mut last = 0;
        for i in 0..200 {
            last = sent_cursor(&mut a, &format!("racing {i}")).await;
        }
        (a, last)
    });
    let replay = b.sync(ack.sync_cursor).await.unwrap();
    assert!(!replay.frames.is_empty());
    let (_a, last) = writer.await.unwrap();
    while b.durable_log().last().map(|l| l.0) < Some(last) {
        b.next_event().await.unwrap();
    }
    let cursors: Vec<u64> = b.durable_log().iter().map(|(c, _)| *c).collect();
    let unique: BTreeSet<u64> = cursors.iter().copied().collect();
    assert_eq!(unique.len(), cursors.len(), "no frame twice");
    assert_eq!(
        unique,
        (1..=last).collect::<BTreeSet<u64>>(),
        "every frame, no gap"
    );
    gw.stop().await;
}

fn history_req(before: Option<&str>, limit: Option<i64>) -> ClientFrame {
    ClientFrame::History(HistoryRequest {
        before_message_id: before.map(str::to_owned),
        limit,
    })
}

async fn page(
    c: &mut Client,
    lane: Header,
    before: Option<&str>,
    limit: Option<i64>,
) -> iris_protocol::History {
    match c
        .request(lane, history_req(before, limit))
        .await
        .unwrap()
        .body
    {
        ServerFrame::History(h) => h,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn history_pages_from_newest_to_oldest_with_exact_edges() {
    let gw = TestGateway::start().await;
    let (mut a, _) = gw.connect("a").await;
    let lane = || Header::lane("default", None);
    let empty = page(&mut a, lane(), None, None).await;
    assert!(empty.messages.is_empty() && !empty.has_more && empty.oldest_message_id.is_none());
    let mut ids = Vec::new();
    for i in 0..7 {
        ids.push(message_id(
            &send_text(&mut a, "default", &format!("message {i}")).await,
        ));
    }
    let texts = |h: &iris_protocol::History| {
        h.messages
            .iter()
            .map(|m| m.message_id.clone())
            .collect::<Vec<_>>()
    };
    let p1 = page(&mut a, lane(), None, Some(3)).await;
    assert_eq!(texts(&p1), ids[4..7]);
    assert!(p1.has_more);
    assert_eq!(p1.oldest_message_id.as_deref(), Some(ids[4].as_str()));
    let p2 = page(&mut a, lane(), p1.oldest_message_id.as_deref(), Some(3)).await;
    assert_eq!(texts(&p2), ids[1..4]);
    assert!(p2.has_more);
    let p3 = page(&mut a, lane(), p2.oldest_message_id.as_deref(), Some(3)).await;
    assert_eq!(texts(&p3), ids[0..1]);
    assert!(!p3.has_more);
    let p4 = page(&mut a, lane(), Some(&ids[0]), Some(3)).await;
    assert!(p4.messages.is_empty() && !p4.has_more);
    let exact = page(&mut a, lane(), None, Some(7)).await;
    assert_eq!(texts(&exact), ids);
    assert!(
        !exact.has_more,
        "a page that ends exactly at the oldest message has no more"
    );
    let big = page(&mut a, lane(), None, Some(10_000)).await;
    assert_eq!(
        big.messages.len(),
        7,
        "limits above 200 are clamped, not refused"
    );

    // A thread is its own lane.
    let created = a
        .request(
            Header::default(),
            ClientFrame::ChannelCreate(ChannelCreate {
                name: "side".into(),
                kind: Some("thread".into()),
                parent_chat_id: Some("default".into()),
                agent: None,
            }),
        )
        .await
        .unwrap();
    let thread = match created.body {
        ServerFrame::ChannelCreated(c) => c.chat_id,
        other => panic!("{other:?}"),
    };
    let frame = ClientFrame::MessageSend(iris_protocol::MessageSend {
        text: "in the thread".into(),
        ..Default::default()
    });
    a.request(Header::lane("default", Some(thread.clone())), frame)
        .await
        .unwrap();
    let in_thread = page(&mut a, Header::lane("default", Some(thread)), None, None).await;
    assert_eq!(in_thread.messages.len(), 1);
    assert_eq!(page(&mut a, lane(), None, None).await.messages.len(), 7);
    gw.stop().await;
}

async fn search(
    c: &mut Client,
    query: &str,
    scope: SearchScope,
    lane: Header,
) -> Vec<iris_protocol::SearchHit> {
    let frame = ClientFrame::Search(Search {
        query: query.into(),
        scope,
        limit: None,
    });
    match c.request(lane, frame).await.unwrap().body {
        ServerFrame::SearchResults(r) => r.hits,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn deleted_messages_vanish_from_search_history_and_sync() {
    let gw = TestGateway::start().await;
    let (mut a, _) = gw.connect("a").await;
    let (mut b, _) = gw.connect("b").await;
    let keep = message_id(&send_text(&mut a, "default", "please deploy the service tonight").await);
    let gone = message_id(&send_text(&mut a, "default", "deploy again tomorrow").await);
    send_text(&mut a, "default", "something unrelated").await;
    let hits = search(&mut a, "deploy", SearchScope::All, Header::default()).await;
    assert_eq!(hits.len(), 2);
    assert!(
        hits.iter().all(|h| h.snippet.contains("[deploy]")),
        "{hits:?}"
    );
    let prefix = search(
        &mut a,
        "depl*",
        SearchScope::Chat,
        Header::lane("default", None),
    )
    .await;
    assert_eq!(prefix.len(), 2);
    let phrase = search(
        &mut a,
        "\"deploy the service\"",
        SearchScope::All,
        Header::default(),
    )
    .await;
    assert_eq!(
        phrase
            .iter()
            .map(|h| h.message_id.clone())
            .collect::<Vec<_>>(),
        vec![keep.clone()]
    );

    let del = ClientFrame::MessageDelete(MessageDelete {
        message_ids: vec![gone.clone()],
    });
    let resp = a
        .request(Header::lane("default", None), del.clone())
        .await
        .unwrap();
    assert_eq!(resp.frame_type(), "message.deleted");
    let seen = b
        .wait_for(|e| e.frame_type() == "message.deleted")
        .await
        .unwrap();
    assert!(
        matches!(&seen.body, ServerFrame::MessageDeleted(d) if d.message_ids == vec![gone.clone()])
    );
    let hits = search(&mut a, "deploy", SearchScope::All, Header::default()).await;
    assert_eq!(
        hits.iter()
            .map(|h| h.message_id.clone())
            .collect::<Vec<_>>(),
        vec![keep.clone()]
    );
    let history = page(&mut a, Header::lane("default", None), None, None).await;
    assert!(history.messages.iter().all(|m| m.message_id != gone));
    // Deleting again is fine and announced again, so stale caches drop it too.
    let again = a.request(Header::lane("default", None), del).await.unwrap();
    assert_eq!(again.frame_type(), "message.deleted");

    let (mut c, _) = gw.connect("late").await;
    let replay = c.sync(0).await.unwrap();
    assert!(
        !replay.frames.iter().any(|e| e.raw.contains("deploy again")),
        "no trace of the text remains in the outbox"
    );
    assert!(replay
        .frames
        .iter()
        .any(|e| e.frame_type() == "message.deleted"));
    gw.stop().await;
}

#[tokio::test]
async fn deleting_a_channel_wipes_its_threads_messages_and_frames() {
    let gw = TestGateway::start().await;
    let (mut a, _) = gw.connect("a").await;
    let (mut b, _) = gw.connect("b").await;
    let created = a
        .request(
            Header::default(),
            ClientFrame::ChannelCreate(ChannelCreate {
                name: "Secret plans".into(),
                kind: None,
                parent_chat_id: None,
                agent: None,
            }),
        )
        .await
        .unwrap();
    let chan = match &created.body {
        ServerFrame::ChannelCreated(c) => c.chat_id.clone(),
        other => panic!("{other:?}"),
    };
    let seen = b
        .wait_for(|e| e.frame_type() == "channel.created")
        .await
        .unwrap();
    assert_eq!(seen.header.id, None);
    let thread = match a
        .request(
            Header::default(),
            ClientFrame::ChannelCreate(ChannelCreate {
                name: "sub".into(),
                kind: None,
                parent_chat_id: Some(chan.clone()),
                agent: None,
            }),
        )
        .await
        .unwrap()
        .body
    {
        ServerFrame::ChannelCreated(c) => c.chat_id,
        other => panic!("{other:?}"),
    };
    send_text(&mut a, &chan, "zebra crossing at noon").await;
    let frame = ClientFrame::MessageSend(iris_protocol::MessageSend {
        text: "zebra in a thread".into(),
        ..Default::default()
    });
    a.request(Header::lane(chan.clone(), Some(thread.clone())), frame)
        .await
        .unwrap();
    send_text(&mut a, "default", "zebra elsewhere").await;
    assert_eq!(
        search(&mut a, "zebra", SearchScope::All, Header::default())
            .await
            .len(),
        3
    );

    let del = a
        .request(
            Header::lane(chan.clone(), None),
            ClientFrame::ChannelDelete(Empty {}),
        )
        .await
        .unwrap();
    match &del.body {
        ServerFrame::ChannelDeleted(d) => assert_eq!(
            (d.chat_id.clone(), d.thread_ids.clone()),
            (chan.clone(), vec![thread.clone()])
        ),
        other => panic!("{other:?}"),
    }
    b.wait_for(|e| e.frame_type() == "channel.deleted")
        .await
        .unwrap();
    assert_eq!(
        search(&mut a, "zebra", SearchScope::All, Header::default())
            .await
            .len(),
        1
    );
    let err = a
        .request(Header::lane(chan.clone(), None), history_req(None, None))
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        iris_client::ClientError::Server {
            code: iris_protocol::ErrorCode::NotFound,
            ..
        }
    ));
    let (mut c, ack) = gw.connect("late").await;
    assert!(ack
        .channels
        .iter()
        .all(|ch| ch.chat_id != chan && ch.chat_id != thread));
    let replay = c.sync(0).await.unwrap();
    for e in &replay.frames {
        assert!(
            !e.raw.contains("zebra crossing")
                && !e.raw.contains("Secret plans")
                && !e.raw.contains("\"sub\""),
            "trace left: {}",
            e.raw
        );
    }
    assert_eq!(
        replay.frames.last().unwrap().frame_type(),
        "channel.deleted"
    );
    // The default channel cannot be deleted.
    let err = a
        .request(
            Header::lane("default", None),
            ClientFrame::ChannelDelete(Empty {}),
        )
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        iris_client::ClientError::Server {
            code: iris_protocol::ErrorCode::BadRequest,
            ..
        }
    ));
    gw.stop().await;
}

#[tokio::test]
async fn a_device_that_stops_reading_is_dropped_and_catches_up_by_sync() {
    let gw = TestGateway::start_with(|c| {
        c.limits.max_queued_frames = 16;
        c.limits.sends_per_minute = 100_000;
    })
    .await;
    let (mut a, _) = gw.connect("a").await;
    let mut slow = RawConnection::connect(&gw.url).await.unwrap();
    slow.hello(TOKEN, "slow").await.unwrap();
    // Large frames fill the socket buffers quickly; then the queue overflows.
    let big = "x".repeat(60 * 1024);
    let mut last = 0;
    for i in 0..400 {
        last = sent_cursor(&mut a, &format!("{i} {big}")).await;
        if i % 50 == 49 && !gw.shared.hub.is_online("slow") {
            break;
        }
    }
    assert!(
        !gw.shared.hub.is_online("slow"),
        "the slow device was disconnected"
    );
    // The sender was never held up, and the slow device still gets everything by sync.
    let (mut slow, ack) = gw.connect("slow").await;
    slow.sync(ack.sync_cursor).await.unwrap();
    let mut have: BTreeSet<u64> = (1..=ack.sync_cursor).collect();
    have.extend(slow.durable_log().iter().map(|(c, _)| *c));
    assert_eq!(have, (1..=last).collect::<BTreeSet<u64>>());
    gw.stop().await;
}

#[tokio::test]
async fn without_an_agent_messages_are_kept_and_commands_say_why_they_cannot_run() {
    let gw = TestGateway::start().await;
    let (mut a, _) = gw.connect("a").await;
    send_text(&mut a, "default", "just a note").await;
    a.expect_quiet(QUIET)
        .await
        .expect("nobody answers a plain message");
    send_text(&mut a, "default", "/status").await;
    let reply = a.next_event().await.unwrap();
    match &reply.body {
        ServerFrame::Message(m) => {
            assert_eq!(m.role, iris_protocol::Role::System);
            assert!(m.text.contains("--agent none"), "{}", m.text);
        }
        other => panic!("{other:?}"),
    }
    gw.stop().await;
}

/// The watermark a device proved is stored in the background; it still reaches the store, and a
/// restart keeps it: the device is not replayed what it confirmed.
#[tokio::test]
async fn a_confirmed_watermark_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let gw = TestGateway::start_in(dir.path(), |_| {}).await;
    let mut confirmations = gw.shared.hub.watermarks();
    let (mut a, _) = gw.connect("a").await;
    let (mut b, _) = gw.connect("b").await;
    let mut last = 0;
    for i in 0..5 {
        last = sent_cursor(&mut a, &format!("m{i}")).await;
    }
    while b.durable_log().last().map(|l| l.0) < Some(last) {
        b.next_event().await.unwrap();
    }
    confirmed(&gw, &mut confirmations, "b", last).await;
    drop((a, b));
    gw.stop().await;

    let gw = TestGateway::start_in(dir.path(), |_| {}).await;
    let (mut b, ack) = gw.connect("b").await;
    assert_eq!(
        ack.sync_cursor, last,
        "the stored watermark is what b confirmed"
    );
    let replay = b.sync(ack.sync_cursor).await.unwrap();
    assert!(replay.frames.is_empty(), "nothing confirmed comes again");
    assert_eq!(replay.cursor, last);
    gw.stop().await;
}

/// Stopping the gateway right after a burst reached a device: whatever watermark was stored, it
/// is not ahead of what the device holds, and the replay after the restart brings exactly the
/// frames above it (frames the device confirmed but that were not stored come again, and the
/// device drops them by id; none is skipped).
#[tokio::test]
async fn a_restart_right_after_delivery_skips_no_frame() {
    let dir = tempfile::tempdir().unwrap();
    let gw = TestGateway::start_in(dir.path(), |c| c.limits.sends_per_minute = 100_000).await;
    let (mut a, _) = gw.connect("a").await;
    let (mut b, _) = gw.connect("b").await;
    let mut sent = Vec::new();
    for i in 0..50 {
        let echo = send_text(&mut a, "default", &format!("burst {i}")).await;
        sent.push((echo.cursor.unwrap(), message_id(&echo)));
    }
    let last = sent.last().unwrap().0;
    while b.durable_log().last().map(|l| l.0) < Some(last) {
        b.next_event().await.unwrap();
    }
    gw.stop().await;
    drop((a, b));

    let gw = TestGateway::start_in(dir.path(), |_| {}).await;
    let (mut b, ack) = gw.connect("b").await;
    assert!(ack.sync_cursor <= last, "never ahead of the device");
    let replay = b.sync(ack.sync_cursor).await.unwrap();
    let got: Vec<(u64, String)> = replay
        .frames
        .iter()
        .map(|e| (e.cursor.unwrap(), message_id(e)))
        .collect();
    let expected: Vec<(u64, String)> = sent
        .iter()
        .filter(|(c, _)| *c > ack.sync_cursor)
        .cloned()
        .collect();
    assert_eq!(got, expected);
    gw.stop().await;
}
