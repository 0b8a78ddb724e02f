//! Read aloud in the server's voice (an Iris extension): `speech.create {text}` asks the
//! gateway's speech endpoint for a recording of the text, answered `speech` with a media item
//! the app plays with `media.pull`.

use serde::{Deserialize, Serialize};

/// The longest text of one `speech.create`, in characters (after trimming).
pub const MAX_SPEECH_CHARS: usize = 4096;

/// `speech.create`: a recording of this text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpeechCreate {
    /// What to say: plain text, at most [`MAX_SPEECH_CHARS`] characters after trimming.
    pub text: String,
}

/// `speech` (the answer): the stored recording, a media item as `media.pull` takes it. It
/// belongs to no message, so it expires like an unsent upload.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Speech {
    /// Id to pull it with.
    pub media_id: String,
    /// Always `audio`.
    pub kind: String,
    /// Its MIME type, from its bytes.
    pub mime: String,
    /// Size in bytes.
    pub size: u64,
    /// Display name (`speech.mp3`, `speech.wav`, …).
    pub filename: String,
    /// Lowercase hex SHA-256 of its bytes.
    pub sha256: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{decode, encode, ClientFrame, ErrorCode, Header, ResponseFrame, ServerFrame};

    #[test]
    fn the_request_and_the_answer_have_the_documented_shape() {
        let req = decode::<ClientFrame>(
            r#"{"v":1,"type":"speech.create","id":4,"payload":{"text":"Hello."}}"#,
        )
        .expect("decode");
        let ClientFrame::SpeechCreate(r) = &req.body else {
            panic!("{req:?}")
        };
        assert_eq!(r.text, "Hello.");
        let missing =
            decode::<ClientFrame>(r#"{"v":1,"type":"speech.create","id":5,"payload":{}}"#)
                .expect_err("no text");
        assert_eq!(missing.code, ErrorCode::BadRequest);
        let speech = Speech {
            media_id: "md_1".into(),
            kind: "audio".into(),
            mime: "audio/mpeg".into(),
            size: 3,
            filename: "speech.mp3".into(),
            sha256: "ab".repeat(32),
        };
        let frame = ServerFrame::from(ResponseFrame::Speech(speech.clone()));
        assert!(!frame.is_durable());
        let text = encode(&Header::default(), &frame);
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(json["type"], "speech");
        assert_eq!(json["payload"]["media_id"], "md_1");
        assert_eq!(json["payload"]["kind"], "audio");
        let back = decode::<ServerFrame>(&text).expect("decode");
        assert_eq!(back.body, ServerFrame::Speech(speech));
    }
}
