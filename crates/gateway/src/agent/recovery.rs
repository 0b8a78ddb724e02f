//! Turns cut off by a crash of the gateway itself.
//!
//! Devices were told `agent.busy` (and maybe `message.start`) for a turn whose process then died
//! with the gateway. Every lane with a running turn keeps a marker in the store, written in the
//! same transaction as the frames that open and close the turn; at the next start, each marker
//! left over is closed with `message.stop` (when a bubble was open), a system message and
//! `agent.idle`, so no device shows a turn that runs forever.
//!
//! While an answer streams, its text and steps are checkpointed now and then ([`checkpoint`],
//! under meta keys of their own, dropped when the turn closes); a turn closed here keeps the last
//! checkpointed text and steps, marked `cut_off`, rather than an empty bubble.

use std::collections::BTreeMap;

use iris_protocol::{
    AgentBusy, BusyReason, DurableFrame, Message, MessageStop, PickerClosed, PickerOutcome, Role,
    RunningTurn, Step, TurnEnd,
};
use iris_store::{Store, StoreError, WriteTx};
use serde::{Deserialize, Serialize};

use super::receipts;
use crate::ids::now_ms;
use crate::outbox::{self, Lane, Origin};

const KEY: &str = "open_turns";

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct OpenTurn {
    chat_id: String,
    thread_id: Option<String>,
    /// The answer bubble, once `message.start` was sent.
    message_id: Option<String>,
    /// The turn's final answer was written; only `agent.idle` may be missing.
    #[serde(default)]
    answered: bool,
    /// The user message the turn runs (`running` in its receipt), until its answer is written.
    #[serde(default)]
    prompt: Option<String>,
}

fn lane_key(lane: &Lane) -> String {
    format!(
        "{}/{}",
        lane.chat_id,
        lane.thread_id.as_deref().unwrap_or("")
    )
}

/// The meta key of a running answer's checkpointed text.
fn text_key(message_id: &str) -> String {
    format!("turn_text/{message_id}")
}

/// The meta key of a running answer's checkpointed steps.
fn steps_key(message_id: &str) -> String {
    format!("turn_steps/{message_id}")
}

/// Keeps the text streamed so far of a lane's running answer and its steps (as stored JSON), so
/// that a crash of the gateway does not lose them. Checkpoints are written off the streaming path
/// and may land after the turn was closed: then nothing is written.
pub fn checkpoint(
    tx: &mut WriteTx<'_>,
    lane: &Lane,
    message_id: &str,
    text: &str,
    steps: &str,
) -> Result<(), StoreError> {
    let turns = load(tx)?;
    let open = turns
        .get(&lane_key(lane))
        .is_some_and(|t| t.message_id.as_deref() == Some(message_id) && !t.answered);
    if open {
        tx.set_meta(&text_key(message_id), text)?;
        tx.set_meta(&steps_key(message_id), steps)?;
    }
    Ok(())
}

/// Drops the checkpointed text of a turn that is closed.
fn drop_text(tx: &mut WriteTx<'_>, turn: Option<&OpenTurn>) -> Result<(), StoreError> {
    match turn.and_then(|t| t.message_id.as_deref()) {
        Some(id) => {
            tx.delete_meta(&text_key(id))?;
            tx.delete_meta(&steps_key(id))
        }
        None => Ok(()),
    }
}

fn load(tx: &WriteTx<'_>) -> Result<BTreeMap<String, OpenTurn>, StoreError> {
    Ok(tx
        .get_meta(KEY)?
        .and_then(|v| serde_json::from_str(&v).ok())
        .unwrap_or_default())
}

fn save(tx: &mut WriteTx<'_>, turns: &BTreeMap<String, OpenTurn>) -> Result<(), StoreError> {
    let text = serde_json::to_string(turns).map_err(|e| StoreError::Internal(e.to_string()))?;
    tx.set_meta(KEY, &text)
}

/// `agent.busy` for a user's message that will start a turn in an idle lane, appended in the
/// message's own transaction (so the turn needs no commit of its own before its prompt) and
/// opening the lane's marker. Returns false, appending nothing, when the lane has a turn open
/// already (its busy state stays as it is).
pub fn busy_with_message(
    tx: &mut WriteTx<'_>,
    lane: &Lane,
    origin: &Origin,
) -> Result<bool, StoreError> {
    if load(tx)?.contains_key(&lane_key(lane)) {
        return Ok(false);
    }
    let frame = DurableFrame::AgentBusy(AgentBusy {
        reason: BusyReason::Processing,
    });
    track(tx, lane, std::slice::from_ref(&frame))?;
    outbox::append(tx, &lane.header(), frame, None, origin)?;
    Ok(true)
}

/// Whether the lane has a turn open (then a message sent to it waits).
pub fn lane_open(tx: &WriteTx<'_>, lane: &Lane) -> Result<bool, StoreError> {
    Ok(load(tx)?.contains_key(&lane_key(lane)))
}

/// `agent.idle` for a lane whose busy state was stored with a message that then could not be
/// handed to the lane (see [`busy_with_message`]).
pub fn idle_without_turn(tx: &mut WriteTx<'_>, lane: &Lane) -> Result<(), StoreError> {
    let frame = DurableFrame::AgentIdle;
    track(tx, lane, std::slice::from_ref(&frame))?;
    outbox::append(tx, &lane.header(), frame, None, &Origin::none()).map(|_| ())
}

/// A message stored `running` with its lane's `agent.busy` was not handed over (the gateway is
/// stopping): it goes back to `queued` and the busy state ends, so the next start runs it.
pub fn requeue_unstarted(
    tx: &mut WriteTx<'_>,
    lane: &Lane,
    message_id: &str,
) -> Result<(), StoreError> {
    receipts::set(tx, lane, message_id, iris_protocol::MessageState::Queued)?;
    idle_without_turn(tx, lane)
}

/// Keeps the lane's marker in step with frames being appended in this transaction, and the
/// receipts of the user messages its turns run ([`receipts`]).
pub fn track(tx: &mut WriteTx<'_>, lane: &Lane, frames: &[DurableFrame]) -> Result<(), StoreError> {
    let relevant = frames.iter().any(|f| {
        matches!(
            f,
            DurableFrame::AgentBusy(_)
                | DurableFrame::AgentIdle
                | DurableFrame::MessageStart(_)
                | DurableFrame::MessageStop(_)
        ) || matches!(f, DurableFrame::Message(m) if matches!(m.role, Role::Assistant | Role::Cron))
    });
    if !relevant {
        return Ok(());
    }
    let mut turns = load(tx)?;
    let key = lane_key(lane);
    let mut closed = Vec::new();
    for f in frames {
        match f {
            DurableFrame::AgentBusy(busy) if !turns.contains_key(&key) => {
                // A turn begins; a scheduled run answers no user message.
                let prompt = match busy.reason {
                    BusyReason::Cron => None,
                    _ => receipts::turn_begins(tx, lane)?,
                };
                let turn = OpenTurn {
                    chat_id: lane.chat_id.clone(),
                    thread_id: lane.thread_id.clone(),
                    message_id: None,
                    answered: false,
                    prompt,
                };
                turns.insert(key.clone(), turn);
            }
            DurableFrame::MessageStart(m) => {
                if let Some(t) = turns.get_mut(&key) {
                    t.message_id = Some(m.message_id.clone());
                    if let Some(reply_to) = &m.reply_to {
                        t.prompt =
                            receipts::answer_begins(tx, lane, reply_to, t.prompt.as_deref())?;
                    }
                }
            }
            DurableFrame::MessageStop(m) => {
                if let Some(t) = turns
                    .get_mut(&key)
                    .filter(|t| t.message_id.as_ref() == Some(&m.message_id))
                {
                    t.answered = true;
                    receipts::answered(tx, lane, &m.message_id, m.ended, t.prompt.as_deref())?;
                    t.prompt = None;
                    closed.push(t.clone());
                }
            }
            DurableFrame::Message(m) if matches!(m.role, Role::Assistant | Role::Cron) => {
                if let Some(t) = turns.get_mut(&key) {
                    t.answered = true;
                    receipts::answered(tx, lane, &m.message_id, m.ended, t.prompt.as_deref())?;
                    t.prompt = None;
                    closed.push(t.clone());
                }
            }
            DurableFrame::AgentIdle => {
                if let Some(t) = turns.remove(&key) {
                    if let Some(p) = &t.prompt {
                        receipts::turn_ends(tx, lane, p)?;
                    }
                    closed.push(t);
                }
            }
            _ => {}
        }
    }
    for t in &closed {
        drop_text(tx, Some(t))?;
    }
    save(tx, &turns)
}

/// The turns running now, each with its answer's text as far as it was stored, for
/// `hello.ack.running`.
pub async fn running(store: &Store) -> Result<Vec<RunningTurn>, StoreError> {
    let turns: BTreeMap<String, OpenTurn> = store
        .get_meta(KEY)
        .await?
        .and_then(|v| serde_json::from_str(&v).ok())
        .unwrap_or_default();
    let mut out = Vec::new();
    for t in turns.into_values().filter(|t| !t.answered) {
        let text = match &t.message_id {
            Some(id) => store.get_meta(&text_key(id)).await?.unwrap_or_default(),
            None => String::new(),
        };
        out.push(RunningTurn {
            chat_id: t.chat_id,
            thread_id: t.thread_id,
            message_id: t.message_id,
            reply_to: t.prompt,
            text,
        });
    }
    Ok(out)
}

/// Closes every turn a previous run of the gateway left open. Returns how many.
pub async fn recover(store: &Store) -> Result<usize, StoreError> {
    store
        .write(|tx| {
            let turns = load(tx)?;
            for turn in turns.values() {
                close(tx, turn)?;
            }
            save(tx, &BTreeMap::new())?;
            Ok(turns.len())
        })
        .await
}

/// Closes one turn left open: its bubble (when one was open), a system message, `agent.idle`.
fn close(tx: &mut WriteTx<'_>, turn: &OpenTurn) -> Result<(), StoreError> {
    let lane = Lane {
        chat_id: turn.chat_id.clone(),
        thread_id: turn.thread_id.clone(),
    };
    let (text, mut steps) = match &turn.message_id {
        Some(id) => (
            tx.get_meta(&text_key(id))?.unwrap_or_default(),
            Step::list_from_stored(&tx.get_meta(&steps_key(id))?.unwrap_or_default()),
        ),
        None => Default::default(),
    };
    drop_text(tx, Some(turn))?;
    // The lane may have been deleted since.
    if tx.get_channel(lane.row_id())?.is_none() {
        return Ok(());
    }
    let header = lane.header();
    if !turn.answered {
        // Pickers still open died with the gateway: every device is told, and the answer says so.
        for step in &mut steps {
            if let Step::Picker(p) = step {
                if p.outcome.is_none() {
                    p.outcome = Some(PickerOutcome::Cancelled);
                    let closed = DurableFrame::PickerClosed(PickerClosed {
                        picker_id: p.picker_id.clone(),
                        outcome: PickerOutcome::Cancelled,
                        ..PickerClosed::default()
                    });
                    outbox::append(tx, &header, closed, None, &Origin::none())?;
                }
            }
        }
        if let Some(id) = &turn.message_id {
            // The answer keeps the text last checkpointed while it streamed, so that history,
            // the outbox and what devices saw agree as far as the crash allows.
            let answer = Message {
                message_id: id.clone(),
                role: Role::Assistant,
                text: text.clone(),
                ts: now_ms(),
                ended: Some(TurnEnd::CutOff),
                steps: steps.clone(),
                reply_to: turn.prompt.clone(),
                ..Message::default()
            };
            tx.upsert_message(&outbox::to_stored(
                &lane.chat_id,
                lane.thread_id.as_deref(),
                &answer,
            ))?;
            let stop = DurableFrame::MessageStop(MessageStop {
                message_id: id.clone(),
                final_text: text,
                ended: Some(TurnEnd::CutOff),
                steps,
                ..MessageStop::default()
            });
            outbox::append(tx, &header, stop, Some(id), &Origin::none())?;
        }
        let asked = match &turn.prompt {
            Some(p) => {
                receipts::set(tx, &lane, p, iris_protocol::MessageState::Interrupted)?;
                tx.get_message(p)?
                    .map(|m| format!(" on “{}”", crate::text::head(m.text.trim(), 40)))
                    .unwrap_or_default()
            }
            None => String::new(),
        };
        let note = outbox::system_message(format!(
            "The gateway restarted while the agent was working{asked}; that answer was cut off."
        ));
        outbox::post(tx, &lane, note, &Origin::none())?;
    }
    // When the answer was written, only this closing agent.idle was lost.
    outbox::append(tx, &header, DurableFrame::AgentIdle, None, &Origin::none())?;
    Ok(())
}
