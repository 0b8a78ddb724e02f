//! The agent bridge: the agent process ([`host`]), one actor per lane ([`lane`]) that maps ACP
//! turns onto frames ([`turn`]), the bridge that starts and addresses the lane actors
//! ([`bridge`]), the verbs request handlers use ([`verbs`]), and the command catalog that mixes
//! the gateway's commands with the agent's. [`usage`] turns the agent's token reports into each
//! turn's own meters. Lanes see the gateway only through their environment ([`env`]).
//!
//! Layer: agent. Imports the ground floor and the services (media, cron); never the request
//! handlers or connections above it.

pub mod bridge;
mod catalog;
pub mod choice;
mod env;
mod error;
pub mod host;
mod lane;
pub mod receipts;
pub mod recovery;
pub mod requeue;
mod spare;
mod switch;
pub mod tools;
pub mod turn;
pub mod usage;
mod verbs;

pub use bridge::{Agents, LANE_QUEUE};
pub use catalog::catalog;
pub use choice::{
    choose_agent, roster, split_command, without_gateway_env, AgentChoice, Roster, DEMO_NAME,
    DEMO_NOTICE,
};
pub use env::{AgentReport, BridgeConfig};
pub use error::AgentError;
pub use verbs::{BusyMarker, Submission, Ticket, Work};
