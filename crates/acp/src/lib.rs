//! Agent Client Protocol (ACP) client for Iris: JSON-RPC over an agent process's stdio, typed ACP
//! messages, and the built-in demo agent.
//!
//! Layers, bottom up:
//! - [`rpc`]: a JSON-RPC 2.0 peer over any `AsyncRead + AsyncWrite` (newline-delimited JSON);
//! - [`process`]: an agent child process in its own process group, with its stderr tail;
//! - [`types`]: serde types for the ACP messages a client needs;
//! - [`client`]: [`AgentClient`], typed calls plus the agent's messages as [`AgentEvent`]s;
//! - [`form`]: an elicitation's form as one question with choices and a typed answer;
//! - [`demo`]: a scripted agent (server side) for the quickstart and tests.
//!
//! This crate knows nothing of WebSockets, devices or storage.
#![warn(missing_docs)]

pub mod client;
pub mod confine;
pub mod demo;
mod error;
pub mod form;
mod lines;
pub mod process;
pub mod rpc;
pub mod types;

pub use client::{AgentClient, AgentEvent, AgentEvents, ElicitationResponder, PermissionResponder};
pub use confine::Confinement;
pub use error::AcpError;
pub use form::{Form, FormChoice};
pub use process::{AgentProcess, AgentSpec, ExitInfo};
pub use rpc::{Connection, Incoming, IncomingRx, RequestId, Responder};
pub use types::*;
