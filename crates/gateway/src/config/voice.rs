//! `[voice]`: voice notes. An OpenAI-compatible transcription endpoint
//! (`/v1/audio/transcriptions`: whisper.cpp's server, speaches, LocalAI, hosted services) turns
//! a note into the prompt's text; an agent that takes audio (ACP `promptCapabilities.audio`)
//! gets the recording too. An OpenAI-compatible speech endpoint (`/v1/audio/speech`: piper,
//! kokoro, speaches, hosted services) reads answers aloud in the server's voice.

use std::time::Duration;

use serde::Deserialize;

use super::error::ConfigError;
use super::secret::Secret;

/// `[voice]` in the file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VoiceFileConfig {
    /// The full URL of the transcription endpoint, e.g.
    /// `http://127.0.0.1:8080/v1/audio/transcriptions` (none: no transcription).
    pub transcribe_url: Option<String>,
    /// The `model` form field (default `whisper-1`).
    pub model: Option<String>,
    /// Sent as `Authorization: Bearer <key>` when set.
    pub key: Option<Secret>,
    /// How long one transcription may take, in seconds (default 60).
    pub timeout_secs: Option<u64>,
    /// The largest voice note, in bytes (default 25 MiB).
    pub max_bytes: Option<u64>,
    /// Give the recording itself to an agent that takes audio (default true).
    pub send_audio: Option<bool>,
    /// The full URL of the speech endpoint, e.g. `http://127.0.0.1:8880/v1/audio/speech` (none:
    /// apps read aloud with their own voice).
    pub speech_url: Option<String>,
    /// The speech request's `model` (default `tts-1`).
    pub speech_model: Option<String>,
    /// The speech request's `voice` (default `alloy`).
    pub speech_voice: Option<String>,
    /// The speech request's `response_format` (default `mp3`).
    pub speech_format: Option<String>,
}

/// The voice notes' settings.
#[derive(Debug, Clone)]
pub struct VoiceConfig {
    /// The transcription endpoint; `None`: notes are not transcribed.
    pub transcribe_url: Option<String>,
    /// The model the endpoint is asked for.
    pub model: String,
    /// The endpoint's bearer key.
    pub key: Option<Secret>,
    /// How long one transcription may take.
    pub timeout: Duration,
    /// The largest voice note, in bytes.
    pub max_bytes: u64,
    /// Give the recording to an agent that takes audio.
    pub send_audio: bool,
    /// The speech endpoint; `None`: no server voice.
    pub speech_url: Option<String>,
    /// The speech model asked for.
    pub speech_model: String,
    /// The voice asked for.
    pub speech_voice: String,
    /// The audio format asked for.
    pub speech_format: String,
}

/// The default `[voice] max_bytes`: 25 MiB, the limit of OpenAI's own endpoint.
pub const DEFAULT_VOICE_MAX_BYTES: u64 = 25 * 1024 * 1024;

impl Default for VoiceConfig {
    fn default() -> Self {
        VoiceConfig {
            transcribe_url: None,
            model: "whisper-1".into(),
            key: None,
            timeout: Duration::from_secs(60),
            max_bytes: DEFAULT_VOICE_MAX_BYTES,
            send_audio: true,
            speech_url: None,
            speech_model: "tts-1".into(),
            speech_voice: "alloy".into(),
            speech_format: "mp3".into(),
        }
    }
}

impl VoiceConfig {
    /// Resolves `[voice]` of the config file.
    pub fn resolve(f: VoiceFileConfig) -> Result<VoiceConfig, ConfigError> {
        let d = VoiceConfig::default();
        let transcribe_url = http_url("voice.transcribe_url", f.transcribe_url)?;
        let speech_url = http_url("voice.speech_url", f.speech_url)?;
        let or = |v: Option<String>, default: String| {
            v.map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .unwrap_or(default)
        };
        let positive = |key: &'static str, v: Option<u64>, default: u64| match v {
            Some(0) => Err(ConfigError::Invalid {
                key,
                message: "must be at least 1".into(),
            }),
            v => Ok(v.unwrap_or(default)),
        };
        let timeout_secs = positive("voice.timeout_secs", f.timeout_secs, d.timeout.as_secs())?;
        Ok(VoiceConfig {
            transcribe_url,
            model: f.model.filter(|m| !m.trim().is_empty()).unwrap_or(d.model),
            key: f.key.filter(|k| !k.expose().trim().is_empty()),
            timeout: Duration::from_secs(timeout_secs),
            max_bytes: positive("voice.max_bytes", f.max_bytes, d.max_bytes)?,
            send_audio: f.send_audio.unwrap_or(d.send_audio),
            speech_url,
            speech_model: or(f.speech_model, d.speech_model),
            speech_voice: or(f.speech_voice, d.speech_voice),
            speech_format: or(f.speech_format, d.speech_format),
        })
    }

    /// Whether answers can be read aloud in the server's voice.
    pub fn speaks(&self) -> bool {
        self.speech_url.is_some()
    }

    /// Whether voice notes are transcribed.
    pub fn transcribes(&self) -> bool {
        self.transcribe_url.is_some()
    }
}

/// An http(s) URL of the file, trimmed; blank is none.
fn http_url(key: &'static str, url: Option<String>) -> Result<Option<String>, ConfigError> {
    let Some(u) = url.filter(|u| !u.trim().is_empty()) else {
        return Ok(None);
    };
    match reqwest::Url::parse(u.trim()) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => Ok(Some(u.trim().to_owned())),
        _ => Err(ConfigError::Invalid {
            key,
            message: format!("{u:?} is not an http(s) URL"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FileConfig;

    fn parse(toml: &str) -> Result<VoiceConfig, ConfigError> {
        let file: FileConfig = toml::from_str(toml).expect("toml");
        VoiceConfig::resolve(file.voice)
    }

    #[test]
    fn off_by_default_with_openai_defaults() {
        let d = parse("").expect("valid");
        assert!(!d.transcribes() && d.key.is_none() && d.send_audio);
        assert_eq!(d.model, "whisper-1");
        assert_eq!(d.timeout, Duration::from_secs(60));
        assert_eq!(d.max_bytes, 25 * 1024 * 1024);
        assert!(!d.speaks());
        assert_eq!(
            (
                d.speech_model.as_str(),
                d.speech_voice.as_str(),
                d.speech_format.as_str()
            ),
            ("tts-1", "alloy", "mp3")
        );
    }

    #[test]
    fn the_speech_keys_are_read() {
        let c = parse(
            "[voice]\nspeech_url = \"http://127.0.0.1:8880/v1/audio/speech\"\n\
             speech_model = \"kokoro\"\nspeech_voice = \"af_bella\"\nspeech_format = \"wav\"\n",
        )
        .expect("valid");
        assert!(c.speaks() && !c.transcribes());
        assert_eq!(
            c.speech_url.as_deref(),
            Some("http://127.0.0.1:8880/v1/audio/speech")
        );
        assert_eq!(
            (
                c.speech_model.as_str(),
                c.speech_voice.as_str(),
                c.speech_format.as_str()
            ),
            ("kokoro", "af_bella", "wav")
        );
    }

    #[test]
    fn every_key_is_read_and_the_key_stays_secret() {
        let c = parse(
            "[voice]\ntranscribe_url = \"http://127.0.0.1:8080/v1/audio/transcriptions\"\n\
             model = \"base.en\"\nkey = \"sk-local\"\ntimeout_secs = 5\nmax_bytes = 1000\n\
             send_audio = false\n",
        )
        .expect("valid");
        assert_eq!(
            c.transcribe_url.as_deref(),
            Some("http://127.0.0.1:8080/v1/audio/transcriptions")
        );
        assert_eq!(c.model, "base.en");
        assert_eq!(c.key.as_ref().map(Secret::expose), Some("sk-local"));
        assert!(!format!("{c:?}").contains("sk-local"));
        assert_eq!(c.timeout, Duration::from_secs(5));
        assert_eq!(c.max_bytes, 1000);
        assert!(!c.send_audio);
    }

    #[test]
    fn bad_values_are_refused() {
        for bad in [
            "[voice]\ntranscribe_url = \"ftp://127.0.0.1/x\"\n",
            "[voice]\ntranscribe_url = \"not a url\"\n",
            "[voice]\nspeech_url = \"file:///tmp/x\"\n",
            "[voice]\ntimeout_secs = 0\n",
            "[voice]\nmax_bytes = 0\n",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert!(toml::from_str::<FileConfig>("[voice]\nurl = \"x\"\n").is_err());
    }
}
