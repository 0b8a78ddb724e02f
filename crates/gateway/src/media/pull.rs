//! Serving `media.pull` from disk: one task per connection takes the connection's pulls in order
//! and hands their frames to the connection through a channel of two items.
//!
//! The connection writes each item to its socket before taking the next, between its other
//! frames. A device that reads slowly therefore stalls the socket write, the channel fills, and
//! the task stops reading the file: the gateway holds at most a few chunks of a pull in memory,
//! whatever the file's size.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use iris_protocol::{
    encode, ErrorCode, ErrorPayload, Header, MediaPullEnd, MediaPullHeader, RequestId, ServerFrame,
};
use iris_store::MediaRow;
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::service::Media;
use crate::wire::WireError;

/// Size of the binary frames of a pull.
pub const CHUNK: usize = 256 * 1024;
/// Pulls a connection may have waiting behind the running one.
const MAX_QUEUED: usize = 64;

/// A frame of a pull, ready to write.
#[derive(Debug)]
pub enum PullItem {
    /// A JSON frame (the header, `media.pull.end`, or an error).
    Text(String),
    /// Bytes of the file.
    Binary(Bytes),
}

struct PullRequest {
    id: Option<RequestId>,
    source: Source,
}

/// What a pull streams: a stored media item, or a file opened elsewhere (the file browser's
/// `files.pull`) with the header frame that announces it.
enum Source {
    Stored(MediaRow),
    Opened {
        header: Box<ServerFrame>,
        file: std::fs::File,
        size: u64,
    },
}

/// A connection's pull task. Dropping it stops the task.
#[derive(Debug)]
pub struct PullWorker {
    requests: mpsc::Sender<PullRequest>,
    items: mpsc::Receiver<PullItem>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for PullRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match &self.source {
            Source::Stored(row) => row.media_id.as_str(),
            Source::Opened { .. } => "(opened file)",
        };
        f.debug_struct("PullRequest").field("media", &what).finish()
    }
}

impl PullWorker {
    /// Starts the task.
    pub fn spawn(media: Arc<Media>) -> PullWorker {
        let (requests, rx) = mpsc::channel(MAX_QUEUED);
        let (tx, items) = mpsc::channel(2);
        let task = tokio::spawn(run(media, rx, tx));
        PullWorker {
            requests,
            items,
            task,
        }
    }

    /// Queues a pull; refused when too many are waiting.
    pub fn queue(&self, id: Option<RequestId>, row: MediaRow) -> Result<(), WireError> {
        self.queue_source(id, Source::Stored(row))
    }

    /// Queues the pull of a file already opened (read-only, a regular file), announced by
    /// `header`; at most `size` bytes of it are sent.
    pub fn queue_opened(
        &self,
        id: Option<RequestId>,
        header: ServerFrame,
        file: std::fs::File,
        size: u64,
    ) -> Result<(), WireError> {
        let header = Box::new(header);
        self.queue_source(id, Source::Opened { header, file, size })
    }

    fn queue_source(&self, id: Option<RequestId>, source: Source) -> Result<(), WireError> {
        self.requests
            .try_send(PullRequest { id, source })
            .map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => WireError::new(
                    ErrorCode::RateLimited,
                    format!("at most {MAX_QUEUED} pulls may wait at once"),
                ),
                mpsc::error::TrySendError::Closed(_) => WireError::internal("pull task ended"),
            })
    }

    /// The next item to write; pending while there is none.
    pub async fn next(&mut self) -> PullItem {
        match self.items.recv().await {
            Some(item) => item,
            None => std::future::pending().await,
        }
    }
}

impl Drop for PullWorker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn run(
    media: Arc<Media>,
    mut requests: mpsc::Receiver<PullRequest>,
    out: mpsc::Sender<PullItem>,
) {
    while let Some(req) = requests.recv().await {
        if serve(&media, req, &out).await.is_err() {
            // The connection is gone.
            return;
        }
    }
}

/// Streams one pull. `Err` only when the connection stopped taking items.
async fn serve(media: &Media, req: PullRequest, out: &mpsc::Sender<PullItem>) -> Result<(), ()> {
    let text = |frame: ServerFrame| {
        PullItem::Text(encode(&Header::default().with_id(req.id.clone()), &frame))
    };
    let (header, file, size) = match req.source {
        Source::Opened { header, file, size } => (*header, tokio::fs::File::from_std(file), size),
        Source::Stored(row) => {
            let path = media.files().blob_path(&row.sha256);
            let file = match tokio::fs::File::open(&path).await {
                Ok(f) => f,
                Err(e) => {
                    // The media row outlived its file (removed meanwhile, or lost).
                    tracing::warn!(error = %e, media_id = %row.media_id, "media file missing");
                    let err = ErrorPayload {
                        code: ErrorCode::NotFound,
                        message: "media is no longer available".into(),
                    };
                    return out.send(text(ServerFrame::Error(err))).await.map_err(drop);
                }
            };
            let header = MediaPullHeader {
                media_id: row.media_id.clone(),
                kind: row.kind.clone(),
                mime: row.mime.clone(),
                size: row.size,
                filename: row.filename.clone(),
                sha256: row.sha256.clone(),
            };
            (ServerFrame::MediaPullHeader(header), file, row.size)
        }
    };
    out.send(text(header)).await.map_err(drop)?;
    let mut reader = file.take(size);
    let mut sent = 0u64;
    let ok = loop {
        let mut buf = BytesMut::with_capacity(CHUNK);
        let filled = loop {
            match reader.read_buf(&mut buf).await {
                Ok(0) => break Ok(buf.len()),
                Ok(_) if buf.len() >= CHUNK => break Ok(buf.len()),
                Ok(_) => continue,
                Err(e) => break Err(e),
            }
        };
        match filled {
            Ok(0) => break sent == size,
            Ok(n) => {
                sent += n as u64;
                out.send(PullItem::Binary(buf.freeze()))
                    .await
                    .map_err(drop)?;
            }
            Err(e) => {
                tracing::warn!(error = %e, "reading a pulled file failed");
                break false;
            }
        }
    };
    out.send(text(ServerFrame::MediaPullEnd(MediaPullEnd { ok })))
        .await
        .map_err(drop)
}
