//! The media service as the rest of the gateway sees it.

use std::path::PathBuf;
use std::sync::Arc;

use iris_store::{MediaRow, Store, StoreError};
use tokio_util::sync::CancellationToken;

use super::error::MediaError;
use super::files::{MediaFiles, TempBlob};
use super::names::short;
use super::names::{extension_of, recognize};
use super::quota::{Caps, Held, OpenUploads, Reservation};
use super::speech::{speech_of, SpeakError, SpeechError, MAX_SPEECH_BYTES};
use super::voice::{voice_kind, Recording, TranscribeError};
use crate::config::voice::VoiceConfig;
use crate::config::{Config, MediaConfig};
use crate::ids::{new_id, now_ms};
use crate::wire::WireError;
use iris_protocol::Speech;

/// The media service: the content-addressed files, the store rows that name them, and the
/// settings. Built once by the server and handed to the connections and the agent bridge.
pub struct Media {
    pub(super) files: MediaFiles,
    pub(super) store: Store,
    pub(super) config: MediaConfig,
    pub(super) data_dir: PathBuf,
    pub(super) open_uploads: OpenUploads,
    pub(super) transcriber: super::voice::Transcriber,
    pub(super) speaker: super::speech::Speaker,
}

impl Media {
    /// The media of a gateway with this configuration and store.
    pub fn new(config: &Config, store: Store) -> Arc<Media> {
        Arc::new(Media {
            files: MediaFiles::new(&config.data_dir),
            store,
            config: config.media.clone(),
            data_dir: config.data_dir.clone(),
            open_uploads: OpenUploads::default(),
            transcriber: super::voice::Transcriber::new(config.voice.clone()),
            speaker: super::speech::Speaker::new(config.voice.clone()),
        })
    }

    /// The file store.
    pub fn files(&self) -> &MediaFiles {
        &self.files
    }

    /// The settings.
    pub fn config(&self) -> &MediaConfig {
        &self.config
    }

    /// The media a device's upload references name, in order; an unknown reference is
    /// `not_found`.
    pub async fn resolve_refs(
        &self,
        device_id: &str,
        refs: &[String],
    ) -> Result<Vec<MediaRow>, WireError> {
        const MAX_REFS: usize = 32;
        if refs.len() > MAX_REFS {
            return Err(WireError::bad_request(format!(
                "at most {MAX_REFS} media_refs per message"
            )));
        }
        let mut rows = Vec::with_capacity(refs.len());
        for r in refs {
            match self.store.media_by_ref(device_id, r).await? {
                Some(row) => rows.push(row),
                None => {
                    return Err(WireError::not_found(format!(
                        "media_ref {:?} unknown",
                        short(r)
                    )))
                }
            }
        }
        Ok(rows)
    }

    /// Reserves room for an upload of `size` bytes from `device` under the upload quotas
    /// (`media_too_large` when it does not fit); the reservation lasts while the upload is open.
    pub async fn reserve(&self, device: &str, size: u64) -> Result<Reservation, WireError> {
        let (device_bytes, total) = self.store.unused_upload_bytes(device).await?;
        let held = Held {
            device: device_bytes,
            total,
        };
        let caps = Caps {
            device: self.config.max_pending_bytes_per_device,
            total: self.config.max_pending_bytes,
        };
        self.open_uploads.reserve(device, size, held, caps)
    }

    /// Removes the files of these hashes once no media row names them; errors are logged.
    pub async fn remove_unused(&self, shas: Vec<String>) {
        self.files.remove_unused(&self.store, shas).await;
    }

    /// Moves a finished upload into the store under its hash and inserts its row.
    pub async fn place(&self, temp: TempBlob, row: MediaRow) -> Result<MediaRow, MediaError> {
        self.files
            .place(&self.store, temp, row, |_, _| Ok(()))
            .await
    }

    /// The media row of this id, if any.
    pub async fn get(&self, media_id: &str) -> Result<Option<MediaRow>, StoreError> {
        self.store.get_media(media_id).await
    }

    /// Runs expiry once now (see [`MediaFiles::sweep`]).
    pub async fn sweep(&self) -> Result<usize, MediaError> {
        self.files
            .sweep(&self.store, self.config.unreferenced_ttl)
            .await
    }

    /// Sweeps expired media at start and then every `sweep_interval` until `shutdown`.
    pub fn spawn_sweeper(self: &Arc<Self>, shutdown: CancellationToken) {
        let media = self.clone();
        let every = self.config.sweep_interval;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = shutdown.cancelled() => return,
                }
                match media.sweep().await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(removed = n, "media expiry"),
                    Err(e) => tracing::warn!(error = %e, "media expiry failed"),
                }
            }
        });
    }
}

impl Media {
    /// The voice notes' settings.
    pub fn voice(&self) -> &VoiceConfig {
        self.transcriber.config()
    }

    /// Transcribes a stored voice note, streamed from its file, once at most
    /// [`super::voice::MAX_TRANSCRIBING`] others run; a recording transcribed before (the same
    /// note attached to another message) is not sent again.
    pub async fn transcribe(&self, row: &MediaRow) -> Result<String, TranscribeError> {
        if let Some(text) = self.transcriber.remembered(&row.sha256) {
            return Ok(text);
        }
        let _place = self.transcriber.place().await;
        // The same recording may have been transcribed while this one waited.
        if let Some(text) = self.transcriber.remembered(&row.sha256) {
            return Ok(text);
        }
        let path = self.files.blob_path(&row.sha256);
        let file = match tokio::fs::File::open(&path).await {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(error = %e, "a voice note could not be read");
                return Err(TranscribeError("the recording could not be read".into()));
            }
        };
        let recording = Recording {
            body: reqwest::Body::from(file),
            size: row.size,
            filename: row.filename.clone(),
            mime: row.mime.clone(),
        };
        let text = self.transcriber.transcribe(recording).await?;
        self.transcriber.remember(&row.sha256, &text);
        Ok(text)
    }
}

impl Media {
    /// Whether answers can be read aloud in the server's voice.
    pub fn speaks(&self) -> bool {
        self.speaker.on()
    }

    /// A recording of `text` (trimmed, not empty) for `device`, stored as the device's media of
    /// no message: the one made before for the same text and voice while it is kept, else a new
    /// one from the endpoint. A new one needs room for the largest recording in the device's
    /// and the gateway's upload quotas (it then counts there until it expires), and waits for a
    /// place among the recordings made at once. A failure inside the gateway is logged and said
    /// briefly.
    pub async fn speak(&self, text: &str, device: &str) -> Result<Speech, SpeakError> {
        let key = self.speaker.key(text);
        if let Some(id) = self.speaker.remembered(&key) {
            if let Ok(Some(row)) = self.get(&id).await {
                return Ok(speech_of(&row));
            }
        }
        let _room = self
            .reserve(device, MAX_SPEECH_BYTES as u64)
            .await
            .map_err(SpeakError::Quota)?;
        let _place = self.speaker.speaking.acquire().await;
        let audio = self
            .speaker
            .synthesize(text)
            .await
            .map_err(SpeakError::Failed)?;
        let (kind, mime) = recognize("application/octet-stream", &audio);
        let Some(mime) = voice_kind(kind, &mime) else {
            tracing::warn!(%mime, size = audio.len(), "the speech service answered no audio");
            return Err(SpeakError::Failed(SpeechError(
                "the speech service did not answer with audio".into(),
            )));
        };
        let row = self.keep(audio, mime, device).await.map_err(|e| {
            tracing::warn!(error = %e, "a recording could not be stored");
            SpeakError::Failed(SpeechError("the recording could not be stored".into()))
        })?;
        self.speaker.remember(key, row.media_id.clone());
        Ok(speech_of(&row))
    }

    /// Stores a recording under its hash with a row of the device's and no message.
    async fn keep(
        &self,
        audio: Vec<u8>,
        mime: String,
        device: &str,
    ) -> Result<MediaRow, MediaError> {
        let size = audio.len() as u64;
        let mut temp = self.files.temp().await?;
        temp.write(audio.into()).await?;
        let sha256 = temp.finish().await?;
        let row = MediaRow {
            media_id: new_id("md_"),
            sha256,
            kind: "audio".into(),
            filename: format!("speech.{}", extension_of(&mime)),
            mime,
            size,
            created_at: now_ms(),
            device_id: Some(device.to_owned()),
            media_ref: None,
            voice: false,
        };
        self.place(temp, row).await
    }
}
