//! Receipts and idempotent requests: where a user message stands with the agent
//! ([`MessageState`], announced by the durable `message.state` frame and kept on the message in
//! history), and the bound of a device's own request id (`client_id`). Iris extensions; older
//! apps ignore them.

use serde::{Deserialize, Serialize};

/// A `client_id` is at most this many characters.
pub const MAX_CLIENT_ID: usize = 64;

/// Where a user message that asks the agent for a turn stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageState {
    /// Stored, waiting for its turn (another turn runs, or the gateway just restarted).
    Queued,
    /// The agent is working on it.
    Running,
    /// The agent answered it.
    Answered,
    /// The user stopped its turn.
    Stopped,
    /// The agent failed its turn, or could not take it.
    Failed,
    /// The gateway went down while the agent worked on it; its answer was cut off (Retry runs
    /// it again).
    Interrupted,
    /// Regenerated or edited away: a newer answer (or an edited message) took its place in the
    /// conversation the agent remembers. Also set on the answers that were replaced. Kept in the
    /// transcript.
    Replaced,
}

impl MessageState {
    /// Every state, for tests and documentation.
    pub const ALL: [MessageState; 7] = [
        MessageState::Queued,
        MessageState::Running,
        MessageState::Answered,
        MessageState::Stopped,
        MessageState::Failed,
        MessageState::Interrupted,
        MessageState::Replaced,
    ];

    /// The state's wire name, also the text the store keeps.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageState::Queued => "queued",
            MessageState::Running => "running",
            MessageState::Answered => "answered",
            MessageState::Stopped => "stopped",
            MessageState::Failed => "failed",
            MessageState::Interrupted => "interrupted",
            MessageState::Replaced => "replaced",
        }
    }

    /// The state named `s`, if any.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == s)
    }

    /// Whether the message still waits for or runs its turn.
    pub fn is_open(self) -> bool {
        matches!(self, MessageState::Queued | MessageState::Running)
    }
}

/// `message.state`: a user message moved to another state. Durable, filed under the message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageStateChanged {
    /// The user message.
    pub message_id: String,
    /// Its new state.
    pub state: MessageState,
}

impl Default for MessageStateChanged {
    fn default() -> Self {
        MessageStateChanged {
            message_id: String::new(),
            state: MessageState::Queued,
        }
    }
}

/// A turn running when a device connected (`hello.ack.running`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunningTurn {
    /// The lane's channel.
    pub chat_id: String,
    /// The lane's thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// The answer's bubble, once its `message.start` was sent (`message.update`s carry this id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// The user message the turn answers, when it is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    /// The answer's text as far as the store holds it.
    #[serde(default)]
    pub text: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_reads_back_from_its_name() {
        for s in MessageState::ALL {
            assert_eq!(MessageState::parse(s.as_str()), Some(s));
            let json = serde_json::to_string(&s).expect("json");
            assert_eq!(json, format!("\"{}\"", s.as_str()));
        }
        assert_eq!(MessageState::parse("nope"), None);
    }
}
