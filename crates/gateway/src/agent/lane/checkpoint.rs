//! Checkpoints of a streaming answer: its text and steps so far, in the store so that a gateway
//! that goes down keeps what devices already saw (see `agent::recovery`).
//!
//! Before a `message.update` goes out, the text it shows is stored ([`Checkpoints::shown`],
//! committed by the lane's output with a light commit, no fsync): no device is shown text the
//! store does not hold. Between updates, a checkpoint is also due when the steps changed (a
//! beat, a tool call, the plan, a picker) or, for text not yet shown, a second after the last one
//! or after 4 KiB; such a checkpoint is written by a task of its own, never awaited by the turn,
//! at most one in flight per lane. At a graceful shutdown the lane stores one last checkpoint
//! ([`Checkpoints::save`]) and leaves the turn open for the next start.

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

/// What the store holds of a running answer before a device is shown its text: the text so far
/// (its `MEDIA:` lines left out) and the steps, as [`recovery::checkpoint`] stores them.
pub(crate) struct Shown {
    message_id: String,
    text: String,
    steps: String,
}

impl Shown {
    /// Stores it (in the caller's transaction, after the frames that opened the answer).
    pub(crate) fn write(
        &self,
        tx: &mut iris_store::WriteTx<'_>,
        lane: &Lane,
    ) -> Result<(), iris_store::StoreError> {
        recovery::checkpoint(tx, lane, &self.message_id, &self.text, &self.steps)
    }
}

/// The checkpoints of a lane's running answer.
pub(crate) struct Checkpoints {
    store: Store,
    lane: Lane,
    marks: Marks,
    /// The steps as last stored, kept while their revision stays.
    steps: String,
}

impl Checkpoints {
    pub(crate) fn new(store: Store, lane: Lane) -> Checkpoints {
        Checkpoints {
            store,
            lane,
            marks: Marks::default(),
            steps: String::new(),
        }
    }

    /// A turn starts at `now`: its first text checkpoint is due a second later.
    pub(crate) fn start(&mut self, now: Instant) {
        self.marks = Marks::started(now);
        self.steps.clear();
    }

    /// What the store must hold before the answer's text as `mapper` has it now is shown, when
    /// it changed since the last checkpoint; counts as a checkpoint.
    pub(crate) fn shown(&mut self, mapper: &TurnMapper) -> Option<Shown> {
        let text = mapper.text();
        let revision = mapper.steps_revision();
        let marks = &mut self.marks;
        if text.len() == marks.saved_len && revision == marks.saved_steps {
            return None;
        }
        if revision != marks.saved_steps || self.steps.is_empty() {
            self.steps = iris_protocol::Step::list_to_stored(&mapper.steps().0);
        }
        marks.last = Some(Instant::now());
        marks.saved_len = text.len();
        marks.saved_steps = revision;
        Some(Shown {
            message_id: mapper.message_id().to_owned(),
            text: media_agent::split_media_lines(text).0,
            steps: self.steps.clone(),
        })
    }

    /// When the text of `mapper` needs its next checkpoint (`now` when overdue), if it changed
    /// since the last one.
    pub(crate) fn next_due(&self, mapper: &TurnMapper, now: Instant) -> Option<Instant> {
        self.marks.next_due(mapper, now)
    }

    /// Checkpoints the running answer now and waits for the commit (the gateway is stopping).
    pub(crate) async fn save(&mut self, mapper: &TurnMapper) {
        let text = media_agent::split_media_lines(mapper.text()).0;
        let steps = iris_protocol::Step::list_to_stored(&mapper.steps().0);
        let (lane, id) = (self.lane.clone(), mapper.message_id().to_owned());
        let result = self
            .store
            .write(move |tx| recovery::checkpoint(tx, &lane, &id, &text, &steps))
            .await;
        if let Err(e) = result {
            tracing::warn!(error = %e, "could not checkpoint an answer at shutdown");
        }
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
        let lane = self.lane.clone();
        let id = mapper.message_id().to_owned();
        // Queued now, so that what the lane stores later (text it shows) lands after it.
        let commit = self
            .store
            .write_queued(move |tx| recovery::checkpoint(tx, &lane, &id, &text, &steps));
        tokio::spawn(async move {
            let result = commit.await;
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
            agent: None,
            cwd: "~".into(),
            workdir: std::path::PathBuf::new(),
            show_reasoning: false,
            update_interval: Duration::from_millis(50),
            rewind: false,
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
