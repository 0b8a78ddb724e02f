//! What can go wrong in the agent layer, typed: the verbs' refusals (a full queue, no running
//! turn, an unknown picker), the agent failing to start, and the store. [`WireError`] is made from
//! it at the handlers' door, with the code an app sees.

use iris_protocol::ErrorCode;
use iris_store::StoreError;

use crate::wire::WireError;

/// An error of the agent layer.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The lane holds as many turns and commands as it may ([`super::LANE_QUEUE`]).
    #[error(
        "{0} messages are already waiting in this chat; try again when the agent has caught up"
    )]
    QueueFull(usize),
    /// The lane's mailbox is full of requests that act on it at once (stop, steer, pickers).
    #[error("too many requests for this chat at once; try again shortly")]
    MailboxFull,
    /// Stop or steer for a lane that runs no turn.
    #[error("no turn is running in this lane")]
    NoTurn,
    /// Steering while a scheduled job, not a user's turn, runs.
    #[error("a scheduled job is running in this lane; stop it or wait for it")]
    ScheduledRunning,
    /// A retry while the lane runs a turn.
    #[error("a turn is running in this chat; retry when it has ended")]
    RetryWhileBusy,
    /// Regenerate or edit where the lane holds no checkpoint before that message: it is not the
    /// newest answered one, the session moved on (`/new`, another agent), or the agent cannot
    /// fork its session.
    #[error("this answer can no longer be regenerated or edited: only the newest answer can, and only with an agent that can fork its session")]
    NoCheckpoint,
    /// The gateway runs without an agent (`--agent none`).
    #[error("no agent is configured")]
    NoAgent,
    /// A retry for a lane that has no agent to run it.
    #[error("no agent runs in this chat")]
    NoRunner,
    /// A picker answer for a picker that is not open.
    #[error("picker unknown or expired")]
    PickerUnknown,
    /// A picker answer that is not one of its choices.
    #[error("{0}")]
    BadChoice(&'static str),
    /// Steering without text.
    #[error("steering text is empty")]
    EmptySteer,
    /// The lane ended while a request waited for it.
    #[error("lane ended while steering")]
    LaneEnded,
    /// A channel switch to an agent this gateway does not have.
    #[error("there is no agent {name:?}; this gateway has: {known}")]
    UnknownAgent {
        /// The name asked for.
        name: String,
        /// The agents there are, comma-separated.
        known: String,
    },
    /// The gateway is stopping: a lane starts no new work. A message stored already stays
    /// `queued` and runs after the restart.
    #[error("the gateway is stopping; the message runs when it is back")]
    ShuttingDown,
    /// The agent could not be started or did not open a session.
    #[error("{0}")]
    Unavailable(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<AgentError> for WireError {
    fn from(e: AgentError) -> WireError {
        let message = e.to_string();
        match e {
            AgentError::QueueFull(_) | AgentError::MailboxFull | AgentError::RetryWhileBusy => {
                WireError::new(ErrorCode::RateLimited, message)
            }
            AgentError::NoTurn
            | AgentError::ScheduledRunning
            | AgentError::NoAgent
            | AgentError::NoRunner
            | AgentError::PickerUnknown
            | AgentError::UnknownAgent { .. } => WireError::not_found(message),
            AgentError::BadChoice(_) | AgentError::EmptySteer | AgentError::NoCheckpoint => {
                WireError::bad_request(message)
            }
            AgentError::LaneEnded | AgentError::Unavailable(_) | AgentError::ShuttingDown => {
                WireError::internal(message)
            }
            AgentError::Store(e) => e.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_refusal_reaches_the_app_with_its_code() {
        let wire = |e: AgentError| WireError::from(e).code;
        assert_eq!(wire(AgentError::QueueFull(32)), ErrorCode::RateLimited);
        assert_eq!(wire(AgentError::RetryWhileBusy), ErrorCode::RateLimited);
        assert_eq!(wire(AgentError::NoTurn), ErrorCode::NotFound);
        assert_eq!(wire(AgentError::PickerUnknown), ErrorCode::NotFound);
        assert_eq!(wire(AgentError::BadChoice("no")), ErrorCode::BadRequest);
        assert_eq!(wire(AgentError::EmptySteer), ErrorCode::BadRequest);
        assert_eq!(wire(AgentError::NoCheckpoint), ErrorCode::BadRequest);
        assert_eq!(wire(AgentError::ShuttingDown), ErrorCode::Internal);
        assert_eq!(
            wire(AgentError::Store(StoreError::Invalid("x".into()))),
            ErrorCode::BadRequest
        );
        let full = WireError::from(AgentError::QueueFull(32));
        assert!(full.message.starts_with("32 messages are already waiting"));
    }
}
