//! A voice note's transcription, the first step of its turn: before the prompt goes out and
//! before the `agent.busy` that takes the message out of the gateway's queue, so a note whose
//! transcription was cut off (a stop, a crash) is still `queued` and is transcribed again at the
//! next start. A failure is stored on the message (`message.transcript {state:"failed"}`), the
//! message's receipt is `failed`, the lane says why, and the agent is not prompted;
//! `message.retry` transcribes it again.

use iris_protocol::{TranscriptState, VoiceTranscript};
use tokio_util::sync::CancellationToken;

use super::parts::LaneParts;
use super::queue::{PromptJob, Slot};
use crate::outbox::from_stored;

/// What became of a job's voice note.
pub(super) enum Voice {
    /// Nothing to transcribe (not a voice note, or no transcription): the turn goes on.
    Ready,
    /// Transcribed (now or before): the transcript is the job's text, and the recording goes to
    /// the agent only as audio, where it takes audio (a link to a recording it cannot hear
    /// would only make it try to open the file).
    Transcribed,
    /// The transcription failed; the lane said so.
    Failed,
    /// The lane is closing (a stop of the gateway): the note stays queued.
    Closed,
}

/// The turn of a note whose transcription failed ends here: its place in the queue is freed
/// and a busy state stored with it ends.
pub(super) async fn failed(parts: &LaneParts, job: &PromptJob, slot: Option<Slot>) {
    parts.out.read_receipt(job.origin_conn, &job.message_id);
    drop(slot);
    if job.busy_stored {
        parts.out.idle().await;
    }
}

/// Transcribes the job's voice note when it has one without a transcript, and makes the
/// transcript the job's text. `close` ends the lane: the note then stays queued.
pub(super) async fn note(
    parts: &LaneParts,
    close: &CancellationToken,
    job: &mut PromptJob,
) -> Voice {
    if !job.text.is_empty() || job.blocks.is_empty() || job.message_id.is_empty() {
        return Voice::Ready;
    }
    let row = match parts.env.shared.store.get_message(&job.message_id).await {
        Ok(Some(row)) => row,
        Ok(None) => return Voice::Ready,
        Err(e) => {
            tracing::warn!(error = %e, "could not read a message before its turn");
            return Voice::Ready;
        }
    };
    let message = from_stored(&row);
    let Some(transcript) = message.transcript else {
        return Voice::Ready;
    };
    if transcript.state == TranscriptState::Done {
        job.text = transcript.text.unwrap_or_default();
        return Voice::Transcribed;
    }
    let id = job.message_id.clone();
    if transcript.state == TranscriptState::Failed {
        // A retry: devices show the note being transcribed again.
        parts
            .out
            .transcript(&id, VoiceTranscript::pending(), None)
            .await;
    }
    let note = match message.media.iter().find(|m| m.voice) {
        Some(info) => parts.env.media.get(&info.media_id).await.ok().flatten(),
        None => None,
    };
    let result = match note {
        None => Err(crate::media::TranscribeError(
            "the recording is no longer stored".into(),
        )),
        Some(row) => {
            tokio::select! {
                r = parts.env.media.transcribe(&row) => r,
                _ = close.cancelled() => return Voice::Closed,
            }
        }
    };
    match result {
        Ok(text) => {
            parts
                .out
                .transcript(&id, VoiceTranscript::done(text.clone()), None)
                .await;
            job.text = text;
            Voice::Transcribed
        }
        Err(e) => {
            tracing::warn!(lane = ?parts.lane(), agent = %parts.host().name, cause = %e, "a voice note could not be transcribed; its turn did not run");
            let notice = format!(
                "The voice note could not be transcribed: {e}. It was not sent to the agent; Retry transcribes it again."
            );
            parts
                .out
                .transcript(&id, VoiceTranscript::failed(e.0), Some(notice))
                .await;
            Voice::Failed
        }
    }
}
