//! The agent bridge: the agent process ([`host`]), one actor per lane ([`lane`]) that maps ACP
//! turns onto frames ([`turn`]), the bridge that starts and addresses the lane actors
//! ([`bridge`]), the verbs request handlers use ([`verbs`]), and the command catalog that mixes
//! the gateway's commands with the agent's. [`usage`] turns the agent's token reports into each
//! turn's own meters. Lanes see the gateway only through their environment ([`env`]).
//!
//! Layer: agent. Imports the ground floor and the services (media, cron); never the request
//! handlers or connections above it. Its modules are private: what the layers above use is
//! re-exported here, and nothing else of the room is theirs to reach.

mod bridge;
mod catalog;
mod choice;
mod env;
mod error;
mod host;
mod lane;
mod receipts;
mod recovery;
mod requeue;
mod spare;
mod switch;
mod tools;
mod turn;
mod usage;
mod verbs;

pub use bridge::{Agents, LANE_QUEUE};
pub use catalog::catalog;
pub use choice::{
    choose_agent, roster, split_command, without_gateway_env, AgentChoice, Roster, DEMO_NAME,
    DEMO_NOTICE,
};
pub use env::{AgentReport, BridgeConfig};
pub use error::AgentError;
pub use receipts::set as set_receipt;
pub use recovery::{lane_open, recover, running as running_turns};
pub use requeue::{restarted as interrupt_running, resume as requeue_waiting};
pub(crate) use turn::update_key;
pub use verbs::{BusyMarker, Submission, Ticket, Work};

/// The turn mapper, for the tests of the connection's stream that feed it updates.
#[cfg(test)]
pub(crate) use turn::{Ending, Out, TurnConfig, TurnMapper};
