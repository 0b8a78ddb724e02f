//! The gateway's durable queue: the user messages whose receipt says `queued`.
//!
//! A prompt taken while its lane is busy waits in the lane's memory, and in the store as a
//! `queued` message. When the gateway went down (a crash or a stop) before its turn, the next
//! start hands it to its lane again, in the order the messages were sent, after
//! [`super::recovery`] closed the turns that were cut off; a message that was `running` then is
//! `interrupted` (its answer ends `cut_off`, and Retry runs it again), never run again by itself.
//! Each lane that had such messages gets one system note saying what became of them.
//!
//! Exactly once: a message leaves `queued` in the transaction of the `agent.busy` that starts its
//! turn, and the lane gives the agent the prompt only after that commit, so a message is handed
//! over again only when the agent never got it.

use std::collections::BTreeMap;

use iris_protocol::MessageState;
use iris_store::{Store, StoreError, StoredMessage, WriteTx};

use super::bridge::Agents;
use super::receipts;
use super::verbs::{Submission, Work};
use crate::media::Media;
use crate::outbox::{self, from_stored, Lane, Origin};

/// Messages named in a note are cut to this many characters.
const EXCERPT: usize = 40;

fn lane_of(m: &StoredMessage) -> Lane {
    Lane {
        chat_id: m.chat_id.clone(),
        thread_id: m.thread_id.clone(),
    }
}

fn quoted(messages: &[StoredMessage]) -> String {
    messages
        .iter()
        .map(|m| match m.text.trim() {
            // A voice note, or attachments alone.
            "" if from_stored(m).transcript.is_some() => "a voice note".to_owned(),
            "" => "a message of attachments".to_owned(),
            text => format!("“{}”", crate::text::head(text, EXCERPT)),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A lane's messages a restart touched.
struct Affected {
    lane: Lane,
    cut: Vec<StoredMessage>,
    waiting: Vec<StoredMessage>,
}

fn affected<'a>(
    lanes: &'a mut BTreeMap<(String, String), Affected>,
    m: &StoredMessage,
) -> &'a mut Affected {
    let key = (m.chat_id.clone(), m.thread_id.clone().unwrap_or_default());
    lanes.entry(key).or_insert_with(|| Affected {
        lane: lane_of(m),
        cut: Vec::new(),
        waiting: Vec::new(),
    })
}

/// At start, after [`super::recovery::recover`] closed the cut-off turns: every message still
/// `running` is `interrupted`, and each lane with messages waiting or interrupted gets a note
/// saying what becomes of them. One transaction; a crash before it commits leaves it to the
/// next start.
pub async fn restarted(store: &Store) -> Result<(), StoreError> {
    store.write(noted).await
}

fn noted(tx: &mut WriteTx<'_>) -> Result<(), StoreError> {
    let mut lanes: BTreeMap<(String, String), Affected> = BTreeMap::new();
    for m in tx.messages_in_state(MessageState::Running.as_str())? {
        affected(&mut lanes, &m).cut.push(m);
    }
    for m in tx.messages_in_state(MessageState::Queued.as_str())? {
        affected(&mut lanes, &m).waiting.push(m);
    }
    for Affected { lane, cut, waiting } in lanes.into_values() {
        // The lane may have been deleted since (its messages go with it).
        if tx.get_channel(lane.row_id())?.is_none() {
            continue;
        }
        for m in &cut {
            receipts::set(tx, &lane, &m.message_id, MessageState::Interrupted)?;
        }
        let mut text = String::from("The gateway restarted.");
        if !cut.is_empty() {
            text.push_str(&format!(
                " Interrupted while the agent worked on it: {} (Retry runs it again).",
                quoted(&cut)
            ));
        }
        if !waiting.is_empty() {
            text.push_str(&format!(
                " Still waiting, and now run in order: {}.",
                quoted(&waiting)
            ));
        }
        outbox::post(tx, &lane, outbox::system_message(text), &Origin::none())?;
    }
    Ok(())
}

/// Hands every `queued` message to its lane, oldest first. A message its lane cannot take (its
/// queue is full) is `failed`, with a note. Returns how many were handed over.
pub async fn resume(agents: &Agents, media: &Media, store: &Store) -> Result<usize, StoreError> {
    let waiting = store
        .messages_in_state(MessageState::Queued.as_str())
        .await?;
    let mut handed = 0;
    for row in waiting {
        let lane = lane_of(&row);
        let message = from_stored(&row);
        let mut attachments = Vec::new();
        for m in &message.media {
            if let Some(r) = media.get(&m.media_id).await? {
                attachments.push(r);
            }
        }
        // The lane's `agent.busy` is its turn's own: nothing is stored with the message now.
        let sent = match agents.reserve(&lane, true) {
            Ok(ticket) => {
                let submission = Submission {
                    message_id: message.message_id.clone(),
                    origin_conn: 0,
                    work: Work::Prompt {
                        text: message.text.clone(),
                        blocks: media.prompt_links(&attachments),
                        rewind: None,
                    },
                };
                agents.submit(ticket, submission).await
            }
            Err(e) => Err(e),
        };
        match sent {
            Ok(()) => handed += 1,
            Err(e) => {
                tracing::warn!(message_id = %message.message_id, error = %e, "a waiting message could not be queued again");
                let id = message.message_id.clone();
                store
                    .write(move |tx| {
                        receipts::set(tx, &lane, &id, MessageState::Failed)?;
                        let note = outbox::system_message(
                            "A message that waited across the restart could not be queued again; send it again.",
                        );
                        outbox::post(tx, &lane, note, &Origin::none()).map(|_| ())
                    })
                    .await?;
            }
        }
    }
    Ok(handed)
}
