//! The Iris v1 wire protocol: the envelope, every frame in both directions, and their JSON.
//!
//! This is the only crate that knows the JSON shape of a frame. Everything else speaks in the
//! typed [`ClientFrame`] (app → server) and [`ServerFrame`] (server → app) enums.
//!
//! A frame on the wire is an envelope:
//! `{"v":1,"id":42,"type":"…","chat_id":"…","thread_id":"…","cursor":7,"payload":{…}}`.
//! `type` selects the payload; `id` is present on requests and their responses; `cursor` only on
//! frames replayed by `sync`. Unknown payload fields are ignored; unknown types decode to an
//! `Unknown` variant so that callers can ignore them (or answer `unsupported` when an `id` asks
//! for a response).
#![deny(missing_docs)]

pub mod binding;
mod caps;
mod client;
mod codec;
mod commands;
mod delivery;
mod export;
mod files;
mod pairing;
mod pickers;
mod push;
mod receipts;
mod search;
mod server;
mod speech;
mod stored;
mod stream;
mod tools;
mod transcript;
mod usage;
mod voice;

pub use caps::*;
pub use client::*;
pub use codec::*;
pub use delivery::*;
pub use export::*;
pub use files::*;
pub use pairing::*;
pub use push::*;
pub use receipts::*;
pub use server::*;
pub use speech::*;
pub use stream::*;
pub use transcript::*;
pub use usage::*;
pub use voice::*;

/// The protocol major version this crate speaks.
pub const PROTOCOL_VERSION: u32 = 1;
