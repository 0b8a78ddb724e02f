//! A connection's media state: at most one open upload, and a queue of pulls served in order.
//!
//! An upload is one request that spans several frames: `media.upload.start` (answered only when
//! refused), the raw bytes as binary frames, then `media.upload.end`, answered by
//! `media.upload.ack` or an `error`. Bytes go straight to a temporary file while being hashed,
//! so memory does not grow with the file; a refused, failed or abandoned upload (including a
//! disconnect) deletes that file.

use std::sync::Arc;

use bytes::Bytes;
use iris_protocol::{
    ErrorCode, Header, MediaPull, MediaUploadAck, MediaUploadEnd, MediaUploadStart, RequestId,
    ResponseFrame,
};
use iris_store::MediaRow;

use super::files::{is_sha256, TempBlob};
use super::names::{clean_mime, display_name, recognize, short};
use super::pull::{PullItem, PullWorker};
use super::quota::Reservation;
use super::service::Media;
use super::voice::voice_kind;
use crate::ids::{new_id, now_ms};
use crate::wire::{Reply, WireError};

/// Longest accepted `media_ref`, in bytes.
const MAX_REF: usize = 128;

/// A connection's uploads and pulls.
#[derive(Debug, Default)]
pub struct ConnMedia {
    upload: UploadState,
    pulls: Option<PullWorker>,
}

#[derive(Debug, Default)]
enum UploadState {
    #[default]
    Idle,
    Open(Box<Upload>),
    /// The open upload failed while its bytes were arriving: the rest of its bytes are dropped
    /// quietly and its `media.upload.end` is refused.
    Failed {
        media_ref: String,
        reason: String,
    },
}

#[derive(Debug)]
struct Upload {
    id: Option<RequestId>,
    media_ref: String,
    /// The MIME type the app declared; the stored one comes from the bytes.
    mime: String,
    filename: String,
    size: u64,
    /// A voice note: its bytes must be a recording.
    voice: bool,
    temp: TempBlob,
    /// The upload's share of the quotas, given back when the upload is dropped.
    quota: Reservation,
}

/// A voice note's start: refused when voice notes are off, or when the note is larger than
/// `[voice] max_bytes`.
fn check_voice(media: &Media, size: u64, voice_on: bool) -> Result<(), WireError> {
    if !voice_on {
        return Err(WireError::new(
            ErrorCode::Unsupported,
            "voice notes are off: set [voice] transcribe_url, or use an agent that takes audio",
        ));
    }
    let limit = media.voice().max_bytes;
    if size > limit {
        return Err(WireError::new(
            ErrorCode::MediaTooLarge,
            format!("a voice note of {size} bytes is above the limit of {limit} bytes"),
        ));
    }
    Ok(())
}

fn valid_ref(r: &str) -> bool {
    !r.is_empty() && r.len() <= MAX_REF && r.chars().all(|c| !c.is_control())
}

impl ConnMedia {
    /// `media.upload.start`: opens the upload. Success has no response of its own. `voice_on`:
    /// whether voice notes are accepted now (transcribed, or an agent takes audio).
    pub async fn start(
        &mut self,
        media: &Media,
        device_id: &str,
        header: &Header,
        req: MediaUploadStart,
        voice_on: bool,
    ) -> Result<Reply, WireError> {
        if let UploadState::Open(open) = &self.upload {
            return Err(WireError::bad_request(format!(
                "upload {:?} is still open: one upload at a time per connection",
                short(&open.media_ref)
            )));
        }
        if !valid_ref(&req.media_ref) {
            return Err(WireError::bad_request(format!(
                "media_ref must be 1-{MAX_REF} bytes without control characters"
            )));
        }
        let limit = media.config().max_upload_bytes;
        if req.size > limit {
            return Err(WireError::new(
                ErrorCode::MediaTooLarge,
                format!("{} bytes is above the limit of {limit} bytes", req.size),
            ));
        }
        if req.voice {
            check_voice(media, req.size, voice_on)?;
        }
        let quota = media.reserve(device_id, req.size).await?;
        let mime = clean_mime(&req.mime);
        let upload = Upload {
            id: header.id.clone(),
            media_ref: req.media_ref,
            filename: display_name(&req.filename, "file"),
            mime,
            size: req.size,
            voice: req.voice,
            temp: media.files().temp().await?,
            quota,
        };
        tracing::debug!(size = upload.size, "upload started");
        self.upload = UploadState::Open(Box::new(upload));
        Ok(Reply::Nothing)
    }

    /// A binary frame: the next bytes of the open upload. Returns the error to send, if any.
    pub async fn on_binary(&mut self, bytes: Bytes) -> Option<(Option<RequestId>, WireError)> {
        let open = match &mut self.upload {
            UploadState::Open(open) => open,
            UploadState::Failed { .. } => return None,
            UploadState::Idle => {
                return Some((
                    None,
                    WireError::bad_request("binary frame without an open upload"),
                ))
            }
        };
        let total = open.temp.len() + bytes.len() as u64;
        if total > open.size {
            let id = open.id.clone();
            let reason = format!("more bytes than the declared size of {}", open.size);
            self.fail(reason.clone()).await;
            return Some((id, WireError::bad_request(reason)));
        }
        if let Err(e) = open.temp.write(bytes).await {
            let id = open.id.clone();
            self.fail("the upload could not be stored".into()).await;
            return Some((id, WireError::internal(e)));
        }
        None
    }

    /// Ends the open upload as failed; its file is deleted before this returns.
    async fn fail(&mut self, reason: String) {
        if let UploadState::Open(open) = std::mem::take(&mut self.upload) {
            self.upload = UploadState::Failed {
                media_ref: open.media_ref,
                reason,
            };
            open.temp.discard().await;
        }
    }

    /// `media.upload.end`: checks size and hash, stores the file and answers `media.upload.ack`.
    pub async fn end(
        &mut self,
        media: &Media,
        device_id: &str,
        req: MediaUploadEnd,
    ) -> Result<Reply, WireError> {
        let open = match std::mem::take(&mut self.upload) {
            UploadState::Idle => return Err(WireError::bad_request("no upload is open")),
            UploadState::Failed { media_ref, reason } => {
                if media_ref != req.media_ref {
                    return Err(WireError::bad_request(
                        "media_ref does not name the open upload",
                    ));
                }
                return Err(WireError::bad_request(format!(
                    "the upload failed: {reason}"
                )));
            }
            UploadState::Open(open) if open.media_ref != req.media_ref => {
                self.upload = UploadState::Open(open);
                return Err(WireError::bad_request(
                    "media_ref does not name the open upload",
                ));
            }
            UploadState::Open(open) => open,
        };
        let Upload {
            media_ref,
            mime,
            filename,
            size,
            voice,
            mut temp,
            quota,
            ..
        } = *open;
        if temp.len() != size {
            let got = temp.len();
            temp.discard().await;
            return Err(WireError::bad_request(format!(
                "received {got} bytes of the declared {size}"
            )));
        }
        let sha = temp.finish().await?;
        if !sha.eq_ignore_ascii_case(req.sha256.trim()) {
            temp.discard().await;
            return Err(WireError::bad_request(
                "sha256 does not match the received bytes",
            ));
        }
        // The app's `kind` is not trusted: what the bytes are decides how apps may show them.
        let (mut kind, mut mime) = recognize(&mime, temp.head());
        if voice {
            let Some(audio) = voice_kind(kind, &mime) else {
                temp.discard().await;
                return Err(WireError::bad_request(format!(
                    "a voice note must be an audio recording; these bytes are {mime}"
                )));
            };
            (kind, mime) = ("audio", audio);
        }
        let row = MediaRow {
            media_id: new_id("md_"),
            sha256: sha,
            kind: kind.to_owned(),
            mime,
            size,
            filename,
            created_at: now_ms(),
            device_id: Some(device_id.to_owned()),
            media_ref: Some(media_ref.clone()),
            voice,
        };
        media.place(temp, row).await?;
        // Stored and counted by the store from now on.
        drop(quota);
        tracing::debug!(size, "upload stored");
        Ok(Reply::Direct(
            ResponseFrame::MediaUploadAck(MediaUploadAck {
                ok: true,
                media_ref,
            }),
            Header::default(),
        ))
    }

    /// `media.pull`: queues the pull behind the connection's earlier ones. Its header, bytes and
    /// `media.pull.end` arrive through [`ConnMedia::next_pull_item`].
    pub async fn pull(
        &mut self,
        media: &Arc<Media>,
        header: &Header,
        req: MediaPull,
    ) -> Result<Reply, WireError> {
        if req.media_id.is_empty() {
            return Err(WireError::bad_request("media_id is required"));
        }
        let row = media.get(&req.media_id).await?;
        let Some(row) = row.filter(|r| is_sha256(&r.sha256)) else {
            return Err(WireError::not_found("media_id unknown"));
        };
        let worker = self
            .pulls
            .get_or_insert_with(|| PullWorker::spawn(media.clone()));
        worker.queue(header.id.clone(), row)?;
        Ok(Reply::Nothing)
    }

    /// Queues the pull of a file opened elsewhere (`files.pull`), announced by `header`, behind
    /// the connection's earlier pulls.
    pub fn pull_opened(
        &mut self,
        media: &Arc<Media>,
        id: Option<RequestId>,
        header: iris_protocol::ServerFrame,
        file: std::fs::File,
        size: u64,
    ) -> Result<(), WireError> {
        let worker = self
            .pulls
            .get_or_insert_with(|| PullWorker::spawn(media.clone()));
        worker.queue_opened(id, header, file, size)
    }

    /// The next frame of the running pull; pending while nothing is being pulled.
    pub async fn next_pull_item(&mut self) -> PullItem {
        match &mut self.pulls {
            Some(worker) => worker.next().await,
            None => std::future::pending().await,
        }
    }

    /// Ends the connection's media work: an open upload's file is deleted, pulls stop.
    pub async fn close(&mut self) {
        self.pulls = None;
        if let UploadState::Open(open) = std::mem::take(&mut self.upload) {
            tracing::debug!(received = open.temp.len(), "upload abandoned");
            open.temp.discard().await;
        }
    }
}
