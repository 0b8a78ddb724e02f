//! Read aloud in the server's voice: an OpenAI-compatible speech endpoint (`[voice] speech_url`,
//! `POST /v1/audio/speech` with the JSON body `{model, input, voice, response_format}`, answered
//! with the audio's bytes) makes a recording of a text, which is stored as media that belongs to
//! no message: the app pulls it with `media.pull`, and expiry deletes it like an unsent upload.
//! The same text in the same voice is the same recording while it is kept.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use iris_protocol::Speech;
use iris_store::MediaRow;
use sha2::{Digest, Sha256};

use crate::config::voice::VoiceConfig;

/// The largest recording taken from the endpoint: 16 MiB, far more than 4096 characters take.
pub const MAX_SPEECH_BYTES: usize = 16 * 1024 * 1024;

/// How many texts' recordings are remembered; the oldest half is forgotten beyond it.
const MAX_REMEMBERED: usize = 512;

/// Why a recording could not be made, as a short human reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SpeechError(pub String);

/// Why `speech.create` was not answered with a recording.
#[derive(Debug)]
pub enum SpeakError {
    /// The device's or the gateway's media quota has no room for another recording.
    Quota(crate::wire::WireError),
    /// The speech service did not make one.
    Failed(SpeechError),
}

/// Recordings made at once across the gateway; each holds up to [`MAX_SPEECH_BYTES`] in memory
/// until it is stored, and the others wait.
pub const MAX_SPEAKING: usize = 2;

/// The speech client and the recordings it made, by text and voice.
#[derive(Debug)]
pub struct Speaker {
    config: VoiceConfig,
    http: reqwest::Client,
    /// A place among the recordings made at once ([`MAX_SPEAKING`]).
    pub(super) speaking: tokio::sync::Semaphore,
    /// The media id of each recording made, by [`Speaker::key`], in the order they were made.
    made: Mutex<(HashMap<String, String>, Vec<String>)>,
}

impl Speaker {
    /// A client for these settings.
    pub fn new(config: VoiceConfig) -> Speaker {
        let http = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout.min(Duration::from_secs(10)))
            .build()
            .unwrap_or_default();
        Speaker {
            config,
            http,
            speaking: tokio::sync::Semaphore::new(MAX_SPEAKING),
            made: Mutex::default(),
        }
    }

    /// Whether a speech endpoint is set.
    pub fn on(&self) -> bool {
        self.config.speaks()
    }

    /// What names a recording: the text with the model, voice and format it was asked in.
    pub(super) fn key(&self, text: &str) -> String {
        let c = &self.config;
        let mut h = Sha256::new();
        for part in [&c.speech_model, &c.speech_voice, &c.speech_format] {
            h.update(part.as_bytes());
            h.update([0]);
        }
        h.update(text.as_bytes());
        hex::encode(h.finalize())
    }

    pub(super) fn remembered(&self, key: &str) -> Option<String> {
        let made = self.made.lock().unwrap_or_else(|e| e.into_inner());
        made.0.get(key).cloned()
    }

    pub(super) fn remember(&self, key: String, media_id: String) {
        let mut made = self.made.lock().unwrap_or_else(|e| e.into_inner());
        let (by_key, order) = &mut *made;
        if by_key.insert(key.clone(), media_id).is_none() {
            order.push(key);
        }
        if order.len() > MAX_REMEMBERED {
            for old in order.drain(..MAX_REMEMBERED / 2) {
                by_key.remove(&old);
            }
        }
    }

    /// The endpoint's recording of `text`: its bytes, at most [`MAX_SPEECH_BYTES`].
    pub(super) async fn synthesize(&self, text: &str) -> Result<Vec<u8>, SpeechError> {
        let fail = |s: &str| Err(SpeechError(s.to_owned()));
        let Some(url) = &self.config.speech_url else {
            return fail("there is no server voice here ([voice] speech_url is not set)");
        };
        let c = &self.config;
        let body = serde_json::json!({
            "model": c.speech_model,
            "input": text,
            "voice": c.speech_voice,
            "response_format": c.speech_format,
        });
        let mut request = self.http.post(url).json(&body);
        if let Some(key) = &c.key {
            request = request.bearer_auth(key.expose());
        }
        let late = format!(
            "the speech service did not answer within {} s",
            c.timeout.as_secs()
        );
        let mut response = match request.send().await {
            Ok(r) => r,
            Err(e) if e.is_timeout() => return fail(&late),
            Err(e) => {
                tracing::warn!(error = %e, "speech request failed");
                return fail("the speech service could not be reached");
            }
        };
        let status = response.status();
        if status.is_client_error() {
            return fail(&format!(
                "the speech service refused the text (HTTP {})",
                status.as_u16()
            ));
        }
        if !status.is_success() {
            return fail(&format!(
                "the speech service failed (HTTP {})",
                status.as_u16()
            ));
        }
        let too_big = "the speech service's recording is larger than 16 MiB";
        if response
            .content_length()
            .is_some_and(|n| n > MAX_SPEECH_BYTES as u64)
        {
            return fail(too_big);
        }
        let mut audio = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) if audio.len() + chunk.len() > MAX_SPEECH_BYTES => {
                    return fail(too_big)
                }
                Ok(Some(chunk)) => audio.extend_from_slice(&chunk),
                Ok(None) => return Ok(audio),
                Err(e) if e.is_timeout() => return fail(&late),
                Err(_) => return fail("the speech service's answer could not be read"),
            }
        }
    }
}

/// The wire description of a stored recording.
pub(super) fn speech_of(row: &MediaRow) -> Speech {
    Speech {
        media_id: row.media_id.clone(),
        kind: row.kind.clone(),
        mime: row.mime.clone(),
        size: row.size,
        filename: row.filename.clone(),
        sha256: row.sha256.clone(),
    }
}
