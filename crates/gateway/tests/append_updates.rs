//! Append-form `message.update` (`hello.caps.append_updates`) through the real gateway and the
//! demo agent: a device that asked gets `offset` + new text and rebuilds the answer, one that did
//! not gets whole texts as before, a slow reader's appends merge without a gap or an overlap, and
//! a device that reconnects in the middle of an answer starts again from offset 0.

mod common;

use std::time::Duration;

use common::*;
use iris_client::{Client, RawConnection, RawFrame};
use iris_protocol::{decode, ClientCaps, Hello, ServerFrame, StreamText};

async fn connect(gw: &TestGateway, device: &str, append: bool) -> Client {
    let mut opts = gw.options(device);
    opts.append_updates = append;
    let (mut client, _) = Client::connect(opts).await.expect("connect");
    let status = client.next_event().await.expect("status");
    assert_eq!(status.frame_type(), "status");
    client
}

/// The `message.update` frames among `events`: (offset, text, bytes on the wire).
fn updates(events: &[iris_client::Event]) -> Vec<(Option<u64>, String, usize)> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            ServerFrame::MessageUpdate(u) => Some((u.offset, u.text.clone(), e.raw.len())),
            _ => None,
        })
        .collect()
}

fn stop_id(events: &[iris_client::Event]) -> String {
    events
        .iter()
        .find_map(|e| match &e.body {
            ServerFrame::MessageStop(s) => Some(s.message_id.clone()),
            _ => None,
        })
        .expect("a message.stop")
}

#[tokio::test]
async fn an_opted_in_device_gets_appends_and_the_others_whole_texts() {
    let gw = TestGateway::start_demo().await;
    let mut full = connect(&gw, "full", false).await;
    let mut append = connect(&gw, "append", true).await;
    send(&mut full, default_lane(), "bench 2000 200", false).await;
    let full_frames = until_idle(&mut full).await;
    let append_frames = until_idle(&mut append).await;
    let answer = final_text(&full_frames);
    assert_eq!(answer.split_whitespace().count(), 2000);
    let id = stop_id(&append_frames);

    let whole = updates(&full_frames);
    assert!(
        whole.len() > 1,
        "the answer streamed: {} updates",
        whole.len()
    );
    assert!(whole.iter().all(|u| u.0.is_none()), "no offsets unasked");
    assert_eq!(
        whole.last().unwrap().1,
        answer,
        "the last update is the answer"
    );

    let appended = updates(&append_frames);
    assert!(appended.len() > 1);
    assert_eq!(appended[0].0, Some(0), "the first update starts the bubble");
    assert!(appended.iter().all(|u| u.0.is_some()));
    assert_eq!(append.stream_text(&id), Some(answer.as_str()));
    assert_eq!(full.stream_text(&id), Some(answer.as_str()));

    let bytes = |u: &[(Option<u64>, String, usize)]| u.iter().map(|u| u.2).sum::<usize>();
    assert!(
        bytes(&appended) * 5 < bytes(&whole),
        "appends are smaller: {} against {} bytes",
        bytes(&appended),
        bytes(&whole)
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_bubble_cleared_by_a_tool_call_rebuilds_in_append_form() {
    let gw = TestGateway::start_demo().await;
    let mut append = connect(&gw, "append", true).await;
    send(&mut append, default_lane(), "tool", false).await;
    let frames = until_idle(&mut append).await;
    let answer = final_text(&frames);
    assert!(!answer.is_empty());
    assert_eq!(append.stream_text(&stop_id(&frames)), Some(answer.as_str()));
    gw.stop().await;
}

#[tokio::test]
async fn a_device_that_reconnects_mid_answer_starts_from_offset_zero() {
    let gw = TestGateway::start_demo().await;
    let mut driver = connect(&gw, "driver", false).await;
    let mut phone = connect(&gw, "phone", true).await;
    // 400 chunks 5 ms apart: about two seconds of streaming.
    send(&mut driver, default_lane(), "bench 400 5000", false).await;
    let before = until(
        &mut phone,
        |e| matches!(&e.body, ServerFrame::MessageUpdate(u) if u.offset.unwrap_or(0) > 0),
    )
    .await;
    let id = before
        .iter()
        .find_map(|e| match &e.body {
            ServerFrame::MessageUpdate(u) => Some(u.message_id.clone()),
            _ => None,
        })
        .unwrap();
    let held = phone.stream_text(&id).unwrap().to_owned();
    assert!(!held.is_empty());
    drop(phone);

    let mut again = connect(&gw, "phone", true).await;
    let frames = until_idle(&mut again).await;
    let first = updates(&frames);
    assert_eq!(
        first[0].0,
        Some(0),
        "the new connection starts the bubble again"
    );
    assert!(
        first[0].1.starts_with(&held),
        "offset 0 carries everything so far"
    );
    let answer = final_text(&until_idle(&mut driver).await);
    assert_eq!(again.stream_text(&id), Some(answer.as_str()));
    gw.stop().await;
}

/// A device that reads nothing while 4,000 chunks stream about a millisecond apart, each its own
/// update (interval 0), and only then reads everything: what it is written fits together exactly.
/// (On loopback the kernel's socket buffers hold all of these appends, about 600 KB, so its
/// queue rarely has to merge them here; the property test in `conn/stream.rs` merges them in the
/// real queue at every reading pace.)
#[tokio::test]
async fn a_slow_reader_gets_merged_appends_without_gap_or_overlap() {
    let gw = TestGateway::start_with(|c| {
        c.agent_command = Some(demo_agent());
        c.update_interval = Duration::ZERO;
    })
    .await;
    let mut fast = connect(&gw, "fast", true).await;
    let mut slow = RawConnection::connect(&gw.url).await.unwrap();
    slow.hello_with(Hello {
        token: TOKEN.into(),
        device_id: "slow".into(),
        caps: Some(ClientCaps {
            append_updates: Some(true),
            ..ClientCaps::default()
        }),
        ..Hello::default()
    })
    .await
    .unwrap();
    send(&mut fast, default_lane(), "bench 4000 100", false).await;
    let frames = until_idle(&mut fast).await;
    let answer = final_text(&frames);
    assert_eq!(fast.stream_text(&stop_id(&frames)), Some(answer.as_str()));
    let fast_updates = updates(&frames).len();

    let mut text = StreamText::new();
    let mut slow_updates = 0;
    let read = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let RawFrame::Text(raw) = slow.recv().await.expect("still connected") else {
                continue;
            };
            match decode::<ServerFrame>(&raw).expect("valid frame").body {
                ServerFrame::MessageUpdate(u) => {
                    slow_updates += 1;
                    assert!(u.offset.is_some());
                    text.apply(&u).expect("no gap, no overlap");
                }
                ServerFrame::AgentIdle(_) => return,
                _ => {}
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the slow device got the whole turn");
    assert_eq!(text.as_str(), answer);
    assert!(slow_updates > 1 && fast_updates > 1);
    gw.stop().await;
}
