//! What a lane keeps to take a turn back: its checkpoints of the agent session (used by
//! `super::rewind`, which explains them).

/// Where a turn taken back starts again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Base {
    /// A new, empty session: the turn was its session's first.
    Empty,
    /// A fork of this session, kept aside after the turn before ended.
    Fork(String),
    /// A new session whose first prompt carries the conversation before the message as text
    /// (no fork was made: the agent cannot close sessions, or the lane had no time for one).
    Replay,
}

impl Base {
    /// The agent session it holds, closed when the checkpoint is dropped.
    pub(super) fn session(&self) -> Option<&str> {
        match self {
            Base::Fork(id) => Some(id),
            Base::Empty | Base::Replay => None,
        }
    }
}

/// The agent session as it was before a user message ran.
pub(super) struct Checkpoint {
    /// Where a take-back starts.
    pub(super) base: Base,
    /// The user message whose turn started from here.
    pub(super) before: String,
    /// The answers of that turn, marked `replaced` when it is taken back.
    pub(super) answers: Vec<String>,
}

/// The lane's checkpoints.
#[derive(Default)]
pub(super) struct Rewind {
    /// Before the newest turn.
    pub(super) prev: Option<Checkpoint>,
    /// A fork made after the newest turn ended: the checkpoint of the next turn.
    pub(super) next: Option<String>,
    /// The newest turn ended and no fork was made since.
    pub(super) due: bool,
    /// The conversation as text, for the first prompt of a replayed take-back.
    pub(super) prelude: Option<String>,
}
