//! Focus (`hello.caps.focus`, `focus.set`): the lanes a device shows. Streaming updates of the
//! other lanes are not queued for it (see `Hub::broadcast`); a lane that comes into focus while
//! it answers gets its text so far at once, from the store, which holds every text a device
//! was shown (the lane commits before it broadcasts).

use std::sync::Arc;

use iris_protocol::{Ack, ErrorCode, FocusSet, Header, LaneRef, ResponseFrame, RunningTurn};

use crate::handlers::Context;
use crate::hub::{ConnQueue, Outgoing, StreamUpdate};
use crate::wire::{Reply, WireError};

/// Handles `focus.set` from `device` on the connection of `queue`.
pub(super) async fn set(
    ctx: &Context,
    device: &str,
    queue: &ConnQueue,
    req: FocusSet,
) -> Result<Reply, WireError> {
    if let Some(why) = LaneRef::focus_error(&req.lanes) {
        return Err(WireError::bad_request(why));
    }
    if !ctx.guard.take_request(device) {
        let per_minute = ctx.shared.config.limits.requests_per_minute;
        return Err(WireError::new(
            ErrorCode::RateLimited,
            format!("too many requests: at most {per_minute} a minute from one device"),
        ));
    }
    let shown = queue.set_focus(req.lanes);
    if !shown.is_empty() {
        catch_up(ctx, queue, &shown).await;
    }
    Ok(Reply::Direct(
        ResponseFrame::Ack(Ack::ok()),
        Header::default(),
    ))
}

/// Queues the text so far of every answer streaming in `lanes`, as the update the device would
/// have had. A live update queued meanwhile is newer or equal (the store is written first), and
/// one queued later replaces this one in place.
async fn catch_up(ctx: &Context, queue: &ConnQueue, lanes: &[LaneRef]) {
    match crate::agent::running_turns(&ctx.shared.store).await {
        Ok(running) => queue_text_so_far(queue, running, lanes),
        // The next update of the answer brings its whole text anyway.
        Err(e) => tracing::warn!(error = %e, "focus: reading the running answers failed"),
    }
}

/// Queues, for each turn of `running` in one of `lanes`, its text as a `message.update`.
fn queue_text_so_far(queue: &ConnQueue, running: Vec<RunningTurn>, lanes: &[LaneRef]) {
    for turn in running {
        let lane = LaneRef {
            chat_id: turn.chat_id,
            thread_id: turn.thread_id,
        };
        let Some(message_id) = turn.message_id else {
            continue;
        };
        if turn.text.is_empty() || !lanes.contains(&lane) {
            continue;
        }
        let key: Arc<str> = crate::agent::update_key(&message_id).into();
        let header = Header::lane(lane.chat_id, lane.thread_id);
        let update = StreamUpdate::new(header, message_id, turn.text.into());
        queue.push_live(Some(key), Outgoing::Update(Arc::new(update)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::stream::Appends;
    use crate::hub::Hub;
    use crate::metrics::Metrics;
    use iris_protocol::{decode, EphemeralFrame, MessageUpdate, ServerFrame, StreamText};
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        /// The answer in lane `0` or `1` grows by a chunk.
        Chunk(usize, String),
        /// The focused device shows lane `0`, lane `1`, or none.
        Focus(Option<usize>),
        /// The focused device's socket takes what is queued for it.
        Read,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0usize..2, "[a-zé😀 ]{1,4}").prop_map(|(l, t)| Op::Chunk(l, t)),
            1 => prop::option::of(0usize..2).prop_map(Op::Focus),
            2 => Just(Op::Read),
        ]
    }

    fn header(lane: usize) -> Header {
        Header::lane(format!("c{lane}"), None)
    }

    /// What an append-form device holds after writing everything queued for it.
    fn read(queue: &ConnQueue, appends: &mut Appends, held: &mut [StreamText; 2]) {
        for item in queue.drain().items {
            let Outgoing::Update(update) = item else {
                continue;
            };
            let Some(json) = appends.encode(&update) else {
                continue;
            };
            let ServerFrame::MessageUpdate(u) = decode::<ServerFrame>(&json).unwrap().body else {
                panic!("{json}")
            };
            let lane = usize::from(update.message_id == "m1");
            held[lane].apply(&u).expect("every append applies");
        }
    }

    proptest! {
        /// Whenever the focused device shows a lane and has read what was queued for it, it
        /// holds that lane's answer exactly as the store (and every unfocused device) holds it:
        /// streaming it missed out of focus comes back whole when the lane comes into focus.
        #[test]
        fn a_lane_in_focus_holds_the_text_everyone_holds(ops in prop::collection::vec(op(), 1..120)) {
            let hub = Hub::new(0);
            let queue = ConnQueue::new(1, "phone".into(), 1024, Arc::new(Metrics::default()));
            queue.set_focus(Vec::new());
            hub.attach(queue.clone());
            let mut stored = [String::new(), String::new()];
            let mut held = [StreamText::new(), StreamText::new()];
            let mut appends = Appends::default();
            let mut shown: Option<usize> = None;
            for op in ops {
                match op {
                    Op::Chunk(lane, text) => {
                        // As the lane does: stored first, then broadcast.
                        stored[lane].push_str(&text);
                        let update = EphemeralFrame::MessageUpdate(MessageUpdate {
                            message_id: format!("m{lane}"),
                            text: stored[lane].clone(),
                            offset: None,
                        });
                        let key = crate::agent::update_key(&format!("m{lane}"));
                        hub.broadcast(&header(lane), update, Some(key.into()));
                    }
                    Op::Focus(lane) => {
                        let lanes: Vec<LaneRef> = lane
                            .map(|l| LaneRef { chat_id: format!("c{l}"), thread_id: None })
                            .into_iter()
                            .collect();
                        let new = queue.set_focus(lanes.clone());
                        let running = (0..2)
                            .map(|l| RunningTurn {
                                chat_id: format!("c{l}"),
                                thread_id: None,
                                message_id: Some(format!("m{l}")),
                                reply_to: None,
                                text: stored[l].clone(),
                            })
                            .collect();
                        queue_text_so_far(&queue, running, &new);
                        shown = lane;
                    }
                    Op::Read => {
                        read(&queue, &mut appends, &mut held);
                        if let Some(l) = shown {
                            prop_assert_eq!(held[l].as_str(), stored[l].as_str());
                        }
                    }
                }
            }
        }
    }
}
