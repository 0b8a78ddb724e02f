//! Additive fields that keep the transcript honest: how a turn ended ([`TurnEnd`]), and which
//! user messages steered a running turn (`Message::steering`). Older apps ignore them.

use serde::{Deserialize, Serialize};

/// How the turn behind a final assistant (or cron) message ended: the `ended` field of
/// `message`, `message.stop` and history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnEnd {
    /// The agent finished its answer.
    Completed,
    /// The user (or the gateway, for a lane being closed) stopped the turn.
    Stopped,
    /// The gateway itself went down during the turn; the text is the last checkpoint of it.
    CutOff,
    /// The agent failed the turn: it reported an error, crashed or went silent for too long.
    AgentFailed,
}
