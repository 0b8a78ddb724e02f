//! Read aloud in the server's voice: `speech.create {text}` answered `speech` with a recording
//! to pull. Budgeted like a write: each may cost the speech endpoint a synthesis; the recordings
//! are the device's, counted in its upload quota and the gateway's.

use iris_protocol::{ErrorCode, Header, ResponseFrame, SpeechCreate, MAX_SPEECH_CHARS};

use super::context::Context;
use crate::media::SpeakError;
use crate::wire::{Reply, Result, WireError};

/// `speech.create`.
pub async fn create(
    ctx: &Context,
    device: &str,
    header: &Header,
    req: SpeechCreate,
) -> Result<Reply> {
    if header.id.is_none() {
        return Err(WireError::bad_request("speech.create needs an id"));
    }
    if !ctx.media.speaks() {
        return Err(WireError::new(
            ErrorCode::Unsupported,
            "there is no server voice here: set [voice] speech_url",
        ));
    }
    let text = req.text.trim();
    if text.is_empty() {
        return Err(WireError::bad_request("there is no text to read"));
    }
    if text.chars().count() > MAX_SPEECH_CHARS {
        return Err(WireError::bad_request(format!(
            "at most {MAX_SPEECH_CHARS} characters are read at once"
        )));
    }
    match ctx.media.speak(text, device).await {
        Ok(speech) => Ok(Reply::Direct(
            ResponseFrame::Speech(speech),
            Header::default(),
        )),
        Err(SpeakError::Quota(e)) => Err(e),
        Err(SpeakError::Failed(e)) => Err(WireError::new(ErrorCode::Unavailable, e.0)),
    }
}
