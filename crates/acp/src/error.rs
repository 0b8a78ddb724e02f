//! The one error type of this crate.

use std::io;

/// Everything that can go wrong while talking to an agent.
#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    /// The agent answered a request with a JSON-RPC error object.
    #[error("agent error {code}: {message}")]
    Rpc {
        /// JSON-RPC error code (e.g. -32601 method not found, -32603 internal error).
        code: i64,
        /// Human-readable message from the agent.
        message: String,
        /// Optional structured details the agent attached.
        data: Option<serde_json::Value>,
    },
    /// The transport closed (the agent exited or its stdout ended) before an answer arrived.
    ///
    /// When the transport is a child process, `stderr_tail` holds the last lines it wrote to
    /// stderr, which usually explain why it died; it is empty otherwise.
    #[error("agent connection closed{}", render_tail(stderr_tail))]
    Closed {
        /// The last lines of the agent's stderr, or empty.
        stderr_tail: String,
    },
    /// The agent program could not be started.
    #[error("cannot start agent `{program}`: {source}")]
    Spawn {
        /// The program that was being started.
        program: String,
        /// Why the operating system refused.
        #[source]
        source: io::Error,
    },
    /// An answer from the agent did not have the shape the protocol promises.
    #[error("unexpected answer to {method}: {source}")]
    Decode {
        /// The request whose answer failed to decode.
        method: String,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
    /// A message could not be queued without waiting: the other side does not read its input
    /// (see [`crate::rpc::OUTGOING_QUEUE`]).
    #[error("the agent does not read its input")]
    Congested,
    /// Any other I/O failure.
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl AcpError {
    /// The JSON-RPC error code when the agent answered with an error object.
    pub fn rpc_code(&self) -> Option<i64> {
        match self {
            AcpError::Rpc { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// True when the failure is the transport going away, i.e. the agent must be restarted.
    pub fn is_closed(&self) -> bool {
        matches!(self, AcpError::Closed { .. })
    }
}

fn render_tail(tail: &str) -> String {
    if tail.is_empty() {
        String::new()
    } else {
        format!("; agent stderr ends with:\n{tail}")
    }
}
