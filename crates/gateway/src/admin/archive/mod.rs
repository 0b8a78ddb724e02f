//! Data the owner takes away: `iris-gateway backup` (one tar file a new data dir is restored
//! from) and `iris-gateway export` (conversations as Markdown or JSON).
//!
//! Both read the store through [`iris_store::Snapshot`], one read transaction on a read-only
//! connection, so they run next to a live gateway without stopping it and without seeing a
//! half-written turn. Neither ever writes to the data dir.

mod access;
mod backup;
mod export;
mod harmless;
mod markdown;

pub use access::ArchiveError;
pub use backup::{backup, BackupSummary};
pub use export::{export, ExportFormat, ExportRequest, ExportSummary, EXPORT_VERSION};
