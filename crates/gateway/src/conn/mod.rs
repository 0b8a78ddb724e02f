//! One WebSocket connection: `hello` ([`hello`]: the handshake, then registering the device),
//! then the connection's loop ([`live`]: writing the queue, reading requests, replaying `sync`,
//! confirming delivery with pings).

mod budget;
mod close;
mod focus;
mod hello;
mod live;
mod stream;

pub use budget::ReadBudget;
pub use hello::serve;
