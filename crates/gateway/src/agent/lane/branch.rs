//! What a lane keeps to take a turn back: its checkpoints of the agent session (used by
//! `super::rewind`, which explains them).

/// The agent session as it was before a user message ran.
pub(super) struct Checkpoint {
    /// A fork kept aside; none for the empty session before a session's first turn.
    pub(super) session: Option<String>,
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
}
