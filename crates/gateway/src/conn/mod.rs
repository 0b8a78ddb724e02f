//! One device connection: `hello` ([`hello`]: the handshake, then registering the device),
//! then the connection's loop ([`live`]: writing the queue, reading requests, replaying `sync`,
//! confirming delivery with pings). Both read and write a [`Duplex`] of frames, made from a
//! WebSocket or from a stream through a relay ([`duplex`]), and never know which.

mod budget;
mod close;
mod duplex;
mod focus;
mod hello;
mod live;
mod stream;

pub use budget::ReadBudget;
pub use duplex::{max_message_bytes, Duplex, Frame};
pub use hello::{serve, Peer};
