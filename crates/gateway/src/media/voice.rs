//! Voice notes: which recordings are one, and their transcription by an OpenAI-compatible
//! endpoint (`[voice] transcribe_url`, `POST /v1/audio/transcriptions`, multipart form data with
//! `file`, `model` and `response_format=json`, answered `{"text": "…"}`).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use reqwest::multipart::{Form, Part};
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::config::voice::VoiceConfig;

/// The most of an endpoint's answer read; a transcript is far smaller.
const MAX_ANSWER: usize = 1024 * 1024;

/// The longest transcript kept, in bytes: the longest message text.
pub const MAX_TRANSCRIPT: usize = 64 * 1024;

/// The kind and MIME type a voice note is stored with, from what its bytes were recognised as:
/// audio as it is, and a recording in a container browsers record to (WebM, MP4, Matroska,
/// which the magic bytes call video) as that container's audio type. `None`: not a recording.
pub fn voice_kind(kind: &str, mime: &str) -> Option<String> {
    match (kind, mime) {
        ("audio", m) => Some(m.to_owned()),
        ("video", "video/webm") => Some("audio/webm".into()),
        ("video", "video/mp4") => Some("audio/mp4".into()),
        ("video", "video/x-matroska") => Some("audio/x-matroska".into()),
        _ => None,
    }
}

/// Why a transcription failed, as a short human reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TranscribeError(pub String);

/// Transcriptions running at once across the gateway; the others wait their turn (their notes
/// stay `queued`). Each streams its recording from disk, so one costs little memory whatever its
/// size.
pub const MAX_TRANSCRIBING: usize = 2;

/// Recordings whose transcript is remembered, by content hash: a note attached to many messages
/// is transcribed once.
const MAX_HEARD: usize = 256;

/// A recording to transcribe: its bytes (streamed when a file) and what it is.
pub struct Recording {
    /// The bytes.
    pub body: reqwest::Body,
    /// How many.
    pub size: u64,
    /// The file name the service is told.
    pub filename: String,
    /// Its type, as its magic bytes named it.
    pub mime: String,
}

impl Recording {
    /// A recording held in memory (a short test recording).
    pub fn of_bytes(bytes: Vec<u8>, filename: &str, mime: &str) -> Recording {
        Recording {
            size: bytes.len() as u64,
            body: reqwest::Body::from(bytes),
            filename: filename.to_owned(),
            mime: mime.to_owned(),
        }
    }
}

/// The transcription client.
#[derive(Debug)]
pub struct Transcriber {
    config: VoiceConfig,
    http: reqwest::Client,
    running: Semaphore,
    /// Transcripts by the recording's content hash, oldest first in the queue.
    heard: Mutex<(HashMap<String, String>, VecDeque<String>)>,
}

impl Transcriber {
    /// A client for these settings.
    pub fn new(config: VoiceConfig) -> Transcriber {
        let http = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout.min(Duration::from_secs(10)))
            .build()
            .unwrap_or_default();
        Transcriber {
            config,
            http,
            running: Semaphore::new(MAX_TRANSCRIBING),
            heard: Mutex::default(),
        }
    }

    /// A place among the transcriptions running at once; waits for one.
    pub async fn place(&self) -> Option<SemaphorePermit<'_>> {
        self.running.acquire().await.ok()
    }

    /// The transcript of the recording with this content hash, if one was made.
    pub fn remembered(&self, sha256: &str) -> Option<String> {
        let heard = self.heard.lock().unwrap_or_else(|e| e.into_inner());
        heard.0.get(sha256).cloned()
    }

    /// Remembers a recording's transcript; the oldest is forgotten beyond [`MAX_HEARD`].
    pub fn remember(&self, sha256: &str, text: &str) {
        let mut heard = self.heard.lock().unwrap_or_else(|e| e.into_inner());
        let (by_sha, order) = &mut *heard;
        if by_sha.insert(sha256.to_owned(), text.to_owned()).is_none() {
            order.push_back(sha256.to_owned());
        }
        while order.len() > MAX_HEARD {
            if let Some(old) = order.pop_front() {
                by_sha.remove(&old);
            }
        }
    }

    /// The settings.
    pub fn config(&self) -> &VoiceConfig {
        &self.config
    }

    /// Transcribes the file's bytes; `Ok` is never empty.
    pub async fn transcribe(&self, recording: Recording) -> Result<String, TranscribeError> {
        let text = self.heard(recording).await?;
        if text.is_empty() {
            return Err(TranscribeError(
                "no speech was recognised in the note".into(),
            ));
        }
        Ok(text)
    }

    /// What the service heard in the file's bytes, trimmed (empty for silence): `doctor` checks
    /// the service with a moment of silence.
    pub async fn heard(&self, recording: Recording) -> Result<String, TranscribeError> {
        let Recording {
            body,
            size,
            filename,
            mime,
        } = recording;
        let fail = |s: &str| Err(TranscribeError(s.to_owned()));
        let Some(url) = &self.config.transcribe_url else {
            return fail(
                "voice notes are not transcribed here ([voice] transcribe_url is not set)",
            );
        };
        // The type is one the magic bytes named, so always a valid one.
        let Ok(part) = Part::stream_with_length(body, size)
            .file_name(filename)
            .mime_str(&mime)
        else {
            return fail("the recording's type could not be named");
        };
        let form = Form::new()
            .part("file", part)
            .text("model", self.config.model.clone())
            .text("response_format", "json");
        let mut request = self.http.post(url).multipart(form);
        if let Some(key) = &self.config.key {
            request = request.bearer_auth(key.expose());
        }
        let secs = self.config.timeout.as_secs();
        let response = match request.send().await {
            Ok(r) => r,
            Err(e) if e.is_timeout() => {
                return fail(&format!(
                    "the transcription service did not answer within {secs} s"
                ))
            }
            Err(e) => {
                tracing::warn!(error = %e, "transcription request failed");
                return fail("the transcription service could not be reached");
            }
        };
        let status = response.status();
        let body = match read_capped(response).await {
            Ok(b) => b,
            Err(timeout) if timeout => {
                return fail(&format!(
                    "the transcription service did not answer within {secs} s"
                ))
            }
            Err(_) => return fail("the transcription service's answer could not be read"),
        };
        if status.is_client_error() {
            return fail(&format!(
                "the transcription service refused the note (HTTP {})",
                status.as_u16()
            ));
        }
        if !status.is_success() {
            return fail(&format!(
                "the transcription service failed (HTTP {})",
                status.as_u16()
            ));
        }
        let text = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.get("text").and_then(|t| t.as_str()).map(str::to_owned));
        let Some(text) = text else {
            return fail("the transcription service did not answer with a transcript");
        };
        Ok(crate::text::prefix_bytes(text.trim(), MAX_TRANSCRIPT).to_owned())
    }
}

/// The body of an answer, at most [`MAX_ANSWER`] bytes of it; `Err(true)` on a timeout.
async fn read_capped(mut response: reqwest::Response) -> Result<Vec<u8>, bool> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.is_timeout())? {
        let room = MAX_ANSWER.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= MAX_ANSWER {
            break;
        }
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recordings_are_audio_and_other_kinds_are_not() {
        assert_eq!(
            voice_kind("audio", "audio/x-wav").as_deref(),
            Some("audio/x-wav")
        );
        assert_eq!(
            voice_kind("video", "video/webm").as_deref(),
            Some("audio/webm")
        );
        assert_eq!(
            voice_kind("video", "video/mp4").as_deref(),
            Some("audio/mp4")
        );
        assert_eq!(voice_kind("video", "video/x-msvideo"), None);
        assert_eq!(voice_kind("image", "image/png"), None);
        assert_eq!(voice_kind("file", "text/plain"), None);
    }
}
