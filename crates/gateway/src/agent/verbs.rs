//! The verbs of the agent layer, what request handlers ask of a lane: take a place for a
//! message ([`Agents::reserve`]) and hand it over once stored ([`Agents::submit`]), stop, steer,
//! answer a picker, retry. Handlers never see the lanes' mailboxes or their message types.
//!
//! The rule "a user's prompt for an idle lane stores `agent.busy` with the message" lives here
//! alone: the [`BusyMarker`] a [`Ticket`] hands out is written in the handler's own transaction,
//! so the turn needs no commit of its own before its prompt goes out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use iris_acp::ContentBlock;
use iris_store::{StoreError, WriteTx};
use tokio::sync::oneshot;

use super::bridge::Agents;
use super::error::AgentError;
use super::lane::{CommandJob, LaneCmd, PromptJob, Slot};
use super::recovery;
use crate::command::Command;
use crate::outbox::{Lane, Origin};

/// A place in a lane's queue for a message about to be stored; dropped unused, it frees the
/// place.
#[derive(Debug)]
pub struct Ticket {
    lane: Lane,
    slot: Slot,
    marker: BusyMarker,
}

impl Ticket {
    /// What the message's transaction writes for the lane (see [`BusyMarker::write`]).
    pub fn marker(&self) -> BusyMarker {
        self.marker.clone()
    }
}

/// The lane's busy state, stored with a user's prompt when the lane was idle.
#[derive(Debug, Clone)]
pub struct BusyMarker {
    lane: Lane,
    /// The message is a prompt and the lane held nothing else when its place was taken.
    wanted: bool,
    /// Set once `agent.busy` was appended in the message's transaction.
    stored: Arc<AtomicBool>,
}

impl BusyMarker {
    /// Whether the message is a prompt for a lane that held nothing else when its place was
    /// taken (its `agent.busy` is stored with it unless a turn is open in the store).
    pub fn wanted(&self) -> bool {
        self.wanted
    }

    /// Appends `agent.busy` (and opens the lane's running-turn marker) in the caller's
    /// transaction, when the message starts a turn in an idle lane; nothing otherwise.
    pub fn write(&self, tx: &mut WriteTx<'_>) -> Result<(), StoreError> {
        if self.wanted && recovery::busy_with_message(tx, &self.lane, &Origin::none())? {
            self.stored.store(true, Ordering::SeqCst);
        }
        Ok(())
    }
}

/// What a stored user message asks of its lane.
#[derive(Debug)]
pub enum Work {
    /// A prompt for the agent, with its attachments.
    Prompt {
        /// The text.
        text: String,
        /// Attachments as content blocks.
        blocks: Vec<ContentBlock>,
        /// An edit (`message.send {edit_of}`): the user message whose checkpoint the turn goes
        /// back to.
        rewind: Option<String>,
    },
    /// A gateway command.
    Command(Command),
}

/// A stored user message handed to its lane.
#[derive(Debug)]
pub struct Submission {
    /// The stored message.
    pub message_id: String,
    /// The connection that sent it (gets the receipt), 0 for none.
    pub origin_conn: u64,
    /// What to do.
    pub work: Work,
}

impl Agents {
    /// Takes a place in the lane's queue for a message about to be stored (`prompt`: a prompt
    /// for the agent, not a gateway command); refused when the lane holds [`super::LANE_QUEUE`]
    /// turns and commands already.
    pub fn reserve(&self, lane: &Lane, prompt: bool) -> Result<Ticket, AgentError> {
        let slot = self.take_slot(lane)?;
        let marker = BusyMarker {
            lane: lane.clone(),
            wanted: prompt && slot.first(),
            stored: Arc::default(),
        };
        Ok(Ticket {
            lane: lane.clone(),
            slot,
            marker,
        })
    }

    /// Hands a stored message to its lane. When the lane cannot take it, a busy state stored
    /// with the message ends here (`agent.idle`), and the refusal is returned.
    pub async fn submit(&self, ticket: Ticket, sub: Submission) -> Result<(), AgentError> {
        let busy_stored = ticket.marker.stored.load(Ordering::SeqCst);
        let Ticket { lane, slot, .. } = ticket;
        let slot = Some(slot);
        let message_id = sub.message_id.clone();
        let cmd = match sub.work {
            Work::Command(command) => LaneCmd::Command(CommandJob {
                command,
                origin_conn: sub.origin_conn,
                message_id: sub.message_id,
                slot,
            }),
            Work::Prompt {
                text,
                blocks,
                rewind,
            } => LaneCmd::Prompt(PromptJob {
                text,
                blocks,
                rewind,
                origin_conn: sub.origin_conn,
                message_id: sub.message_id,
                slot,
                retry: None,
                busy_stored,
            }),
        };
        if let Err(e) = self.send(&lane, cmd) {
            if matches!(e, AgentError::ShuttingDown) {
                // The message stays in the gateway's queue and runs after the restart.
                if busy_stored {
                    self.shared()
                        .store
                        .write(move |tx| recovery::requeue_unstarted(tx, &lane, &message_id))
                        .await?;
                }
            } else if busy_stored {
                // No turn will run: the busy state stored with the message ends here.
                self.shared()
                    .store
                    .write(move |tx| recovery::idle_without_turn(tx, &lane))
                    .await?;
            }
            return Err(e);
        }
        Ok(())
    }

    /// Stops the lane's running turn; refused when none runs.
    pub async fn stop(&self, lane: &Lane) -> Result<(), AgentError> {
        let (tx, rx) = oneshot::channel();
        self.send(lane, LaneCmd::Stop(tx))?;
        match rx.await {
            Ok(true) => Ok(()),
            _ => Err(AgentError::NoTurn),
        }
    }

    /// Redirects the lane's running turn with `text`.
    pub async fn steer(&self, lane: &Lane, text: String) -> Result<(), AgentError> {
        let (tx, rx) = oneshot::channel();
        self.send(lane, LaneCmd::Steer(text, tx))?;
        rx.await.unwrap_or(Err(AgentError::LaneEnded))
    }

    /// Answers an open picker with `value`; returns the lane it belongs to.
    pub async fn answer_picker(
        &self,
        picker_id: String,
        value: String,
        device: Option<String>,
    ) -> Result<Lane, AgentError> {
        let lane = self
            .env()
            .pickers
            .lane_of(&picker_id)
            .ok_or(AgentError::PickerUnknown)?;
        let (reply, rx) = oneshot::channel();
        let cmd = LaneCmd::Picker {
            picker_id,
            value,
            device,
            reply,
        };
        self.send(&lane, cmd)?;
        rx.await.unwrap_or(Err(AgentError::PickerUnknown))?;
        Ok(lane)
    }

    /// Whether the lane is idle and can take its turn for `message_id` back (regenerate, edit).
    pub fn can_rewind(&self, lane: &Lane, message_id: &str) -> bool {
        self.env().can_rewind(lane, message_id)
    }

    /// Runs a stored user message of the lane again as a new turn; refused while the lane runs
    /// a turn. With `rewind`, the turn starts from the agent session's checkpoint before the
    /// message (refused where the lane has none).
    pub async fn retry(
        &self,
        lane: &Lane,
        message_id: String,
        text: String,
        blocks: Vec<ContentBlock>,
        rewind: bool,
        origin_conn: u64,
    ) -> Result<(), AgentError> {
        let slot = Some(self.take_slot(lane)?);
        let (tx, rx) = oneshot::channel();
        let job = PromptJob {
            text,
            blocks,
            rewind: rewind.then(|| message_id.clone()),
            origin_conn,
            message_id,
            slot,
            retry: Some(tx),
            busy_stored: false,
        };
        self.send(lane, LaneCmd::Prompt(job))?;
        rx.await.unwrap_or(Err(AgentError::NoRunner))
    }
}
