//! Checkpoints of a streaming answer: its text so far, written to the store now and then so that a
//! crash of the gateway keeps what devices already saw (see `agent::recovery`).
//!
//! A checkpoint is due when the text changed and a second has passed since the last one (or since
//! the turn started: a short answer is stored by its `message.stop` alone, and its commit does not
//! queue behind a checkpoint's), or 4 KiB of new text arrived, or the turn's steps changed (a beat, a tool call, the plan, a picker: rare
//! next to text). It holds the text and the steps, is written by a task of its own, never awaited
//! by the turn, and at most one is in flight per lane: a due checkpoint waits while the previous
//! one is being written.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use iris_store::Store;

use super::super::recovery;
use super::super::turn::TurnMapper;
use crate::media::agent as media_agent;
use crate::outbox::Lane;

/// Longest time streamed text waits for its checkpoint.
const INTERVAL: Duration = Duration::from_secs(1);
/// New text that makes a checkpoint due at once.
const BYTES: usize = 4096;

/// When a lane's running answer was last checkpointed, and how much of it.
#[derive(Default)]
struct Marks {
    /// When the last checkpoint was started (or postponed).
    last: Option<Instant>,
    /// Length of the text last checkpointed.
    saved_len: usize,
    /// Revision of the steps last checkpointed.
    saved_steps: u64,
    /// A checkpoint is being written.
    in_flight: Arc<AtomicBool>,
}

impl Marks {
    /// The state of a turn that starts at `now`: its first text checkpoint is due a second later.
    fn started(now: Instant) -> Marks {
        Marks {
            last: Some(now),
            ..Marks::default()
        }
    }

    /// When the text of `mapper` needs its next checkpoint (`now` when overdue), if it changed
    /// since the last one.
    fn next_due(&self, mapper: &TurnMapper, now: Instant) -> Option<Instant> {
        let len = mapper.text().len();
        let steps_changed = mapper.steps_revision() != self.saved_steps;
        if len == self.saved_len && !steps_changed {
            return None;
        }
        // While a checkpoint is being written, the next one waits its interval whatever the size.
        let busy = self.in_flight.load(Ordering::Acquire);
        let at = match self.last {
            Some(last) if busy || (len < self.saved_len + BYTES && !steps_changed) => {
                (last + INTERVAL).max(now)
            }
            _ => now,
        };
        Some(at)
    }
}

/// The checkpoints of a lane's running answer.
pub(crate) struct Checkpoints {
    store: Store,
    lane: Lane,
    marks: Marks,
}

impl Checkpoints {
    pub(crate) fn new(store: Store, lane: Lane) -> Checkpoints {
        Checkpoints {
            store,
            lane,
            marks: Marks::default(),
        }
    }

    /// A turn starts at `now`: its first text checkpoint is due a second later.
    pub(crate) fn start(&mut self, now: Instant) {
        self.marks = Marks::started(now);
    }

    /// When the text of `mapper` needs its next checkpoint (`now` when overdue), if it changed
    /// since the last one.
    pub(crate) fn next_due(&self, mapper: &TurnMapper, now: Instant) -> Option<Instant> {
        self.marks.next_due(mapper, now)
    }

    /// Starts a checkpoint of the running answer when one is due; returns at once.
    pub(crate) fn write_due(&mut self, mapper: &TurnMapper) {
        let now = Instant::now();
        let marks = &mut self.marks;
        let Some(due) = marks.next_due(mapper, now) else {
            return;
        };
        if due > now {
            return;
        }
        if marks.in_flight.load(Ordering::Acquire) {
            // Try again after another interval, when the store has caught up.
            marks.last = Some(now);
            return;
        }
        let text = mapper.text();
        let (steps, revision) = mapper.steps();
        marks.last = Some(now);
        marks.saved_len = text.len();
        marks.saved_steps = revision;
        let text = media_agent::split_media_lines(text).0;
        let steps = iris_protocol::Step::list_to_stored(&steps);
        let in_flight = marks.in_flight.clone();
        in_flight.store(true, Ordering::Release);
        let store = self.store.clone();
        let lane = self.lane.clone();
        let id = mapper.message_id().to_owned();
        tokio::spawn(async move {
            let result = store
                .write(move |tx| recovery::checkpoint(tx, &lane, &id, &text, &steps))
                .await;
            in_flight.store(false, Ordering::Release);
            if let Err(e) = result {
                tracing::warn!(error = %e, "could not checkpoint a streaming answer");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::turn::TurnConfig;
    use iris_protocol::Role;

    fn mapper_with(text: &str) -> TurnMapper {
        let mut m = TurnMapper::new(TurnConfig {
            message_id: "m_1".into(),
            role: Role::Assistant,
            model: None,
            cwd: "~".into(),
            show_reasoning: false,
            update_interval: Duration::from_millis(50),
        });
        let chunk = serde_json::json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}});
        m.on_update(&serde_json::from_value(chunk).unwrap(), Instant::now());
        m
    }

    #[test]
    fn a_checkpoint_is_due_a_second_into_the_turn_then_a_second_apart_or_after_4_kib() {
        let now = Instant::now();
        let mut c = Marks::started(now);
        assert_eq!(
            c.next_due(&mapper_with("hi"), now),
            Some(now + INTERVAL),
            "the first text waits a second: a short answer needs no checkpoint"
        );
        assert_eq!(
            c.next_due(&mapper_with(&"x".repeat(BYTES)), now),
            Some(now),
            "4 KiB at once"
        );
        c.last = Some(now);
        c.saved_len = 2;
        assert_eq!(c.next_due(&mapper_with("hi"), now), None, "nothing new");
        assert_eq!(
            c.next_due(&mapper_with("hi there"), now),
            Some(now + INTERVAL)
        );
        let long = "x".repeat(2 + BYTES);
        assert_eq!(c.next_due(&mapper_with(&long), now), Some(now));
        c.in_flight.store(true, Ordering::Release);
        assert_eq!(
            c.next_due(&mapper_with(&long), now),
            Some(now + INTERVAL),
            "one checkpoint in flight at a time"
        );
    }
}
