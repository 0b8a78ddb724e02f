//! Media: uploads from devices, pulls to devices, files the agent produces, and their expiry.
//!
//! - [`files`]: the content-addressed file store under `<data_dir>/media/`.
//! - [`upload`]: a connection's upload state machine (`media.upload.start` → binary frames →
//!   `media.upload.end`) and its pulls (`media.pull`, served one at a time from disk).
//! - [`voice`]: voice notes and their transcription.
//! - [`speech`]: recordings of texts in the server's voice (read aloud).
//! - [`attached`]: the links through which a confined agent reads the files attached to its own
//!   prompts, and nothing else of the store.
//! - [`agent`]: attachments in prompts, and files in the agent's answers (ACP image/resource
//!   content and `MEDIA:<path>` lines), announced with `media.offer`.
//!
//! Names given by the app or the agent are display names only: every file on disk is named by
//! the hash of its content, so no name ever becomes a path.

pub mod agent;
pub mod attached;
mod error;
pub mod files;
mod names;
pub mod pull;
mod quota;
mod service;
pub mod speech;
pub mod upload;
pub mod voice;

pub use error::MediaError;
pub use files::MediaFiles;
pub use names::*;
pub use quota::Reservation;
pub use service::Media;
pub use speech::{SpeakError, SpeechError};
pub use upload::ConnMedia;
pub use voice::{voice_kind, TranscribeError};
