//! A device that reads slowly while a long answer streams: its queue coalesces `message.update`
//! frames instead of growing, it still ends with the whole answer, and after it reconnects and
//! syncs it holds every durable frame.

mod common;

use std::time::Duration;

use common::*;
use iris_client::{RawConnection, RawFrame};
use iris_protocol::{decode, ServerFrame};

#[tokio::test]
async fn a_slow_reader_gets_coalesced_updates_and_every_durable_frame() {
    let gw = TestGateway::start_demo().await;
    let (mut fast, _) = gw.connect("fast").await;
    let mut slow = RawConnection::connect(&gw.url).await.unwrap();
    slow.hello(TOKEN, "slow").await.unwrap();

    // A long answer: 30 000 chunks over about three seconds, so message.update frames carry up to
    // ~600 KB of text, tens of MB in all: far more than the kernel's socket buffers hold, so the
    // slow device's queue must coalesce long before the answer ends.
    send(&mut fast, default_lane(), "bench 30000 100", false).await;
    let frames = until_idle(&mut fast).await;
    let fast_updates = frames
        .iter()
        .filter(|e| e.frame_type() == "message.update")
        .count();
    let answer = final_text(&frames);
    assert!(
        answer.len() > 150_000,
        "a long answer: {} bytes",
        answer.len()
    );

    // The slow device reads one frame every 50 ms until the turn is over for it: about four times
    // slower than updates are made (one per 12 ms at most), whatever the machine's speed.
    let mut slow_updates = 0;
    let mut slow_types = Vec::new();
    let mut last_text = String::new();
    let read = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            match slow
                .recv()
                .await
                .expect("the slow device keeps its connection")
            {
                RawFrame::Text(text) => {
                    let frame = decode::<ServerFrame>(&text).expect("valid frame");
                    match &frame.body {
                        ServerFrame::MessageUpdate(u) => {
                            slow_updates += 1;
                            last_text = u.text.clone();
                        }
                        ServerFrame::MessageStop(s) => last_text = s.final_text.clone(),
                        _ => {}
                    }
                    let idle = matches!(frame.body, ServerFrame::AgentIdle(_));
                    slow_types.push(frame.body);
                    if idle {
                        return;
                    }
                }
                RawFrame::Binary(_) => {}
                RawFrame::Close(c) => panic!("closed: {c:?}"),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the slow device got the whole turn");
    assert_eq!(
        last_text, answer,
        "the slow device ends with the whole answer"
    );
    assert!(
        slow_updates < fast_updates,
        "updates were coalesced: {slow_updates} of {fast_updates}"
    );
    assert!(
        gw.shared
            .metrics
            .frames_coalesced
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0
    );

    // Reconnecting, it syncs from its confirmed watermark and holds every durable frame.
    drop(slow);
    let (mut again, ack) = gw.connect("slow").await;
    let replay = again.sync(ack.sync_cursor).await.unwrap();
    let head = fast.durable_log().last().unwrap().0;
    let replayed: Vec<u64> = replay.frames.iter().map(|e| e.cursor.unwrap()).collect();
    assert_eq!(
        replayed,
        ((ack.sync_cursor + 1)..=head).collect::<Vec<u64>>(),
        "everything above the watermark"
    );
    let durable_seen = slow_types.iter().filter(|f| f.is_durable()).count() as u64;
    assert!(
        ack.sync_cursor <= durable_seen,
        "the watermark never claims more than the device read"
    );
    gw.stop().await;
}
