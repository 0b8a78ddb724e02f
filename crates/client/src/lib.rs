//! A typed client for the Iris Gateway v1 protocol, over a WebSocket or dialed by the gateway's
//! endpoint id through a relay ([`Dial`]).
//!
//! It serves the gateway's integration tests (many devices at once), load tools, and app
//! developers who want a compact reference of how a device talks to the gateway.
//!
//! # Delivery bookkeeping
//!
//! Every durable frame (see [`ServerFrame::is_durable_type`]) lives in the gateway's outbox under
//! an integer cursor. Replayed frames carry it on the wire; live frames do not, but the gateway
//! guarantees that the live durable frames of a connection are exactly the outbox frames
//! `head_cursor + 1, head_cursor + 2, …` (from `hello.ack`), and after a `sync.done {cursor: H}`
//! exactly `H + 1, H + 2, …`. [`Client`] therefore infers the cursor of every live durable
//! frame by counting, and records every durable frame it received in
//! [`Client::durable_log`], so a test can prove exactly-once delivery without gaps.
//!
//! The gateway confirms delivery with WebSocket Ping/Pong. Both [`Client`] and
//! [`RawConnection`] answer Pings as soon as they read them, even when they never write.
//!
//! [`ServerFrame::is_durable_type`]: iris_protocol::ServerFrame::is_durable_type

#![deny(missing_docs)]

mod client;
mod conn;
mod error;
mod raw;
mod relay;

pub use client::{Client, ConnectOptions, Event, SyncOutcome, DEFAULT_TIMEOUT};
pub use error::ClientError;
pub use raw::{RawConnection, RawFrame};
pub use relay::Dial;

/// The iroh crate the relay dial is made with (its endpoint ids, relay URLs and keys).
pub use iroh;

/// The protocol crate, re-exported so that users of the client need not depend on it directly.
pub use iris_protocol as protocol;
