//! Voice notes (Iris extensions): the transcript a message of one voice recording carries, and
//! the durable `message.transcript` frame that announces each change of it. Older apps ignore
//! both and show the recording as audio.

use serde::{Deserialize, Serialize};

/// Where a voice note's transcript stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TranscriptState {
    /// The gateway transcribes it (before its turn begins).
    #[default]
    Pending,
    /// Transcribed: `text` is the transcript, the prompt the agent got.
    Done,
    /// The transcription failed (`error` says why); `message.retry` transcribes it again.
    Failed,
}

/// The `transcript` field of a voice note's message.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VoiceTranscript {
    /// Where it stands.
    pub state: TranscriptState,
    /// The transcript (`done` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// A short human reason (`failed` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl VoiceTranscript {
    /// A transcript being made.
    pub fn pending() -> Self {
        VoiceTranscript::default()
    }

    /// A finished transcript.
    pub fn done(text: impl Into<String>) -> Self {
        VoiceTranscript {
            state: TranscriptState::Done,
            text: Some(text.into()),
            error: None,
        }
    }

    /// A failed transcription and why.
    pub fn failed(error: impl Into<String>) -> Self {
        VoiceTranscript {
            state: TranscriptState::Failed,
            text: None,
            error: Some(error.into()),
        }
    }
}

/// `message.transcript`: a voice note's transcript changed (done or failed). Durable, filed
/// under the message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MessageTranscript {
    /// The voice note.
    pub message_id: String,
    /// The transcript as it stands now.
    #[serde(flatten)]
    pub transcript: VoiceTranscript,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{encode, DurableFrame, Header, Message, ServerFrame};

    #[test]
    fn the_frame_and_the_field_have_the_documented_shape() {
        let frame: ServerFrame = DurableFrame::MessageTranscript(MessageTranscript {
            message_id: "m_1".into(),
            transcript: VoiceTranscript::done("hello"),
        })
        .into();
        assert!(frame.is_durable());
        let json: serde_json::Value =
            serde_json::from_str(&encode(&Header::default(), &frame)).unwrap();
        assert_eq!(json["type"], "message.transcript");
        assert_eq!(
            json["payload"],
            serde_json::json!({"message_id": "m_1", "state": "done", "text": "hello"})
        );
        let failed = serde_json::to_value(VoiceTranscript::failed("timeout")).unwrap();
        assert_eq!(
            failed,
            serde_json::json!({"state": "failed", "error": "timeout"})
        );
        let pending = serde_json::to_value(VoiceTranscript::pending()).unwrap();
        assert_eq!(pending, serde_json::json!({"state": "pending"}));
    }

    #[test]
    fn a_message_keeps_its_transcript_in_the_store() {
        let m = Message {
            message_id: "m_2".into(),
            transcript: Some(VoiceTranscript::done("kept")),
            ..Message::default()
        };
        let back = Message::from_stored(
            m.message_id.clone(),
            "user",
            String::new(),
            0,
            &m.extra_json(),
        );
        assert_eq!(back.transcript, m.transcript);
        assert!(m
            .extra_json()
            .contains(r#""transcript":{"state":"done","text":"kept"}"#));
    }
}
