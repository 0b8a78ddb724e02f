//! Durable store of the Iris Gateway: an append-only outbox of frames, chat messages
//! with full-text search, channels, devices, read receipts and agent lane sessions,
//! all in one SQLite file (WAL, `synchronous=FULL`).
//!
//! # Invariants
//!
//! * **Cursors are never reused.** The outbox cursor is an `AUTOINCREMENT` key, so a
//!   committed cursor stays unique even after its row is deleted, and
//!   [`Store::outbox_head`] never goes backwards. Cursors of rolled-back jobs were
//!   never visible to anyone and may be assigned again.
//! * **Publish after commit, answer after publish.** One writer thread owns the write
//!   connection. It takes every queued job (up to a batch limit), runs each in its own
//!   savepoint inside a single `BEGIN IMMEDIATE` transaction, commits once (one fsync),
//!   then passes the frames of the successful jobs to the [`CommitHook`] in cursor
//!   order, and only then answers the callers. So when [`Store::write`] returns `Ok`,
//!   the job is durable and its frames have already been handed to the hook; a failed
//!   job's writes and frames are discarded without affecting the rest of its batch.
//!   A lazy job ([`Store::write_lazy`]) has no commit of its own: it joins the next batch of
//!   other jobs, or is committed alone 200 ms after it came. A light job
//!   ([`Store::write_light`]) is committed before it is answered but, when only light jobs make
//!   up a batch, without an fsync (`synchronous=NORMAL`): it survives a killed process, not a
//!   power cut, until the next ordinary commit.
//! * **Search is transactional.** The FTS5 index is maintained by triggers on the
//!   messages table, so it changes in the same transaction as the rows and a deleted
//!   message can never be found.
//! * **No blocking on async threads.** SQLite work runs on the writer thread and a
//!   small pool of read-only connections on their own threads; the async API only
//!   waits on channels.

mod credentials;
mod cron;
mod error;
mod media;
mod push;
mod push_log;
mod queries;
mod requests;
mod schema;
mod search;
mod snapshot;
mod store;
mod tx;
mod types;
mod writer;

pub use credentials::{DeviceAddress, OpenCode, PairingCodeRow, SHARED_TOKEN_LOCAL_KEY};
pub use cron::{CronJobRow, CronRunRecord, NewCronJob};
pub use error::StoreError;
pub use media::MediaRow;
pub use push::{PushItem, PushPending, WebPushRow};
pub use push_log::PushLogEntry;
pub use requests::ClientRequest;
pub use search::MAX_TERMS as SEARCH_MAX_TERMS;
pub use snapshot::Snapshot;
pub use store::Store;
pub use tx::WriteTx;
pub use types::{
    ChannelActivity, ChannelRow, CommitHook, Committed, DeletedChannel, DeviceRow, FrameMeta,
    HistoryPage, LaneUsage, NewFrame, SearchHit, StoreConfig, StoredMessage,
};
pub use writer::COMMIT_DELAY_VAR;
