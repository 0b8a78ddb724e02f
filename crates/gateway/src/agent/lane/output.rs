//! A lane's output: every frame the lane sends, durable ones through the store (with the lane's
//! running-turn marker kept in the same transaction, see [`recovery::track`]) and ephemeral ones
//! straight to the hub; busy and idle, system messages, steering messages and read receipts.
//! Nothing is written for a lane that was deleted.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use iris_protocol::{
    AgentBusy, BusyReason, ChannelRenamed, DurableFrame, EphemeralFrame, Header, Message,
    MessageState, MessageTranscript, Notification, Role, Runtime, TranscriptState, VoiceTranscript,
};

use super::super::turn::Out;
use super::super::{receipts, recovery};
use super::checkpoint::Shown;
use crate::ids::{new_id, now_ms};
use crate::outbox::{self, Lane, Origin};
use crate::state::Shared;

/// Where a lane's frames go.
pub(crate) struct Output {
    shared: Arc<Shared>,
    lane: Lane,
    /// Set when the lane's channel was deleted: nothing more is written for it.
    deleted: Arc<AtomicBool>,
}

impl Output {
    pub(crate) fn new(shared: Arc<Shared>, lane: Lane, deleted: Arc<AtomicBool>) -> Output {
        Output {
            shared,
            lane,
            deleted,
        }
    }

    /// The lane written to.
    pub(crate) fn lane(&self) -> &Lane {
        &self.lane
    }

    pub(crate) fn header(&self) -> Header {
        self.lane.header()
    }

    pub(crate) fn is_deleted(&self) -> bool {
        self.deleted.load(Ordering::SeqCst)
    }

    /// Appends durable frames of the turn (filed under `message_id`) in one transaction.
    pub(crate) async fn durable(
        &self,
        frames: Vec<DurableFrame>,
        message_id: Option<String>,
        final_message: Option<Message>,
    ) {
        self.queue_durable(frames, message_id, final_message).await
    }

    /// [`Self::durable`], queued to the store at once: the returned future only waits for the
    /// commit (and logs a failure), and what the lane stores later is committed after it.
    pub(crate) fn queue_durable(
        &self,
        frames: Vec<DurableFrame>,
        message_id: Option<String>,
        final_message: Option<Message>,
    ) -> impl Future<Output = ()> + Send + 'static {
        self.commit(frames, message_id, final_message, None)
    }

    /// Queues durable frames and, after them, what the store must hold before the answer's text
    /// is shown: alone, that is a light commit (no fsync, see [`iris_store::Store::write_light`]).
    fn commit(
        &self,
        frames: Vec<DurableFrame>,
        message_id: Option<String>,
        final_message: Option<Message>,
        shown: Option<Shown>,
    ) -> impl Future<Output = ()> + Send + 'static {
        let wanted = (!frames.is_empty() || shown.is_some()) && !self.is_deleted();
        let light = frames.is_empty();
        let queued = wanted.then(|| {
            let header = self.header();
            let lane = self.lane.clone();
            let job = move |tx: &mut iris_store::WriteTx<'_>| {
                // A lane deleted meanwhile gets nothing more: checked in the same transaction.
                if tx.get_channel(lane.row_id())?.is_none() {
                    return Ok(());
                }
                if let Some(m) = &final_message {
                    tx.upsert_message(&outbox::to_stored(
                        &lane.chat_id,
                        lane.thread_id.as_deref(),
                        m,
                    ))?;
                }
                recovery::track(tx, &lane, &frames)?;
                for f in frames {
                    outbox::append(tx, &header, f, message_id.as_deref(), &Origin::none())?;
                }
                match &shown {
                    Some(shown) => shown.write(tx, &lane),
                    None => Ok(()),
                }
            };
            let store = &self.shared.store;
            let commit: std::pin::Pin<Box<dyn Future<Output = _> + Send>> = match light {
                true => Box::pin(store.write_light(job)),
                false => Box::pin(store.write_queued(job)),
            };
            commit
        });
        async move {
            if let Some(Err(e)) = match queued {
                Some(commit) => Some(commit.await),
                None => None,
            } {
                tracing::error!(error = %e, "could not store agent frames");
            }
        }
    }

    /// What the turn mapper made of an update: durable frames stored in order, ephemeral ones
    /// broadcast once what came before them is stored. `shown` is stored before a
    /// `message.update` goes out, so that no device is shown text the store does not hold.
    pub(crate) async fn emit(&self, outs: Vec<Out>, message_id: &str, mut shown: Option<Shown>) {
        if self.is_deleted() {
            return;
        }
        let mut batch = Vec::new();
        let mut final_message = None;
        for out in outs {
            match out {
                Out::Durable(f) => batch.push(f),
                Out::Final(f, m) => {
                    batch.push(f);
                    final_message = Some(m);
                }
                Out::Ephemeral(f, key) => {
                    let stamp = match f {
                        EphemeralFrame::MessageUpdate(_) => shown.take(),
                        _ => None,
                    };
                    self.commit(
                        std::mem::take(&mut batch),
                        Some(message_id.to_owned()),
                        final_message.take(),
                        stamp,
                    )
                    .await;
                    self.shared
                        .hub
                        .broadcast(&self.header(), f, Some(Arc::from(key.as_str())));
                }
            }
        }
        self.durable(batch, Some(message_id.to_owned()), final_message)
            .await;
    }

    /// `agent.busy`, stored; returns once committed.
    pub(crate) async fn busy(&self, reason: BusyReason) {
        let frames = vec![DurableFrame::AgentBusy(AgentBusy { reason })];
        self.queue_durable(frames, None, None).await
    }

    pub(crate) async fn idle(&self) {
        self.durable(vec![DurableFrame::AgentIdle], None, None)
            .await;
    }

    /// A system message in this lane, stored and delivered like any message.
    pub(crate) async fn system(&self, text: impl Into<String>) {
        self.post_system(outbox::system_message(text)).await
    }

    /// A system message that says the lane's model changed: its runtime names the agent and the
    /// model, as an answer's does, so a client shows the new model at once.
    pub(crate) async fn model_changed(&self, text: impl Into<String>, agent: &str, model: &str) {
        let bare = super::super::turn::bare_model(model);
        self.post_system(Message {
            model: Some(bare.clone()),
            runtime: Some(Runtime {
                model: Some(bare),
                agent: Some(agent.to_owned()),
                ..Runtime::default()
            }),
            ..outbox::system_message(text)
        })
        .await
    }

    async fn post_system(&self, message: Message) {
        let id = message.message_id.clone();
        self.durable(
            vec![DurableFrame::Message(message.clone())],
            Some(id),
            Some(message),
        )
        .await;
    }

    /// A voice note's transcript changed: kept on the message and announced by
    /// `message.transcript`, in one transaction. With a `notice` (a failed transcription) the
    /// message's receipt becomes `failed` and the notice is posted as a system message in the
    /// same transaction.
    pub(crate) async fn transcript(
        &self,
        message_id: &str,
        transcript: VoiceTranscript,
        notice: Option<String>,
    ) {
        if self.is_deleted() {
            return;
        }
        let lane = self.lane.clone();
        let id = message_id.to_owned();
        let written = self
            .shared
            .store
            .write(move |tx| {
                if tx.get_channel(lane.row_id())?.is_none() {
                    return Ok(());
                }
                let Some(row) = tx.get_message(&id)? else {
                    return Ok(());
                };
                let mut message = outbox::from_stored(&row);
                message.transcript = Some(transcript.clone());
                // A chat begun by a voice note is named from what was said.
                let title = transcript.text.as_deref().and_then(crate::text::chat_title);
                if let Some(title) = title.filter(|_| transcript.state == TranscriptState::Done) {
                    outbox::give_awaited_titles(tx, &lane, &title)?;
                }
                let stored = outbox::to_stored(&lane.chat_id, lane.thread_id.as_deref(), &message);
                tx.upsert_message(&stored)?;
                let frame = DurableFrame::MessageTranscript(MessageTranscript {
                    message_id: id.clone(),
                    transcript,
                });
                outbox::append(tx, &lane.header(), frame, Some(&id), &Origin::none())?;
                if let Some(text) = notice {
                    receipts::set(tx, &lane, &id, MessageState::Failed)?;
                    outbox::post(tx, &lane, outbox::system_message(text), &Origin::none())?;
                }
                Ok(())
            })
            .await;
        if let Err(e) = written {
            tracing::error!(error = %e, "could not store a voice note's transcript");
        }
    }

    /// Stores and announces steering text as a user message marked `steering`.
    pub(crate) async fn steering_message(&self, text: &str) {
        let message = Message {
            message_id: new_id("m_"),
            role: Role::User,
            text: text.to_owned(),
            ts: now_ms(),
            steering: true,
            ..Message::default()
        };
        let id = message.message_id.clone();
        let frame = DurableFrame::Message(message.clone());
        self.durable(vec![frame], Some(id), Some(message)).await;
    }

    /// Renames a channel or this lane's thread, with `channel.renamed` (and, when the agent named
    /// a thread, a notification) in the same transaction.
    pub(crate) async fn rename(&self, chat_id: &str, name: &str, by_user: bool) {
        let (chat, name) = (chat_id.to_owned(), name.to_owned());
        let parent = self.lane.chat_id.clone();
        let is_thread = self.lane.thread_id.as_deref() == Some(chat_id);
        let result = self
            .shared
            .store
            .write(move |tx| {
                if !tx.rename_channel(&chat, &name, by_user)? {
                    return Ok(false);
                }
                let filed = if is_thread {
                    (Some(parent.as_str()), Some(chat.as_str()))
                } else {
                    (Some(chat.as_str()), None)
                };
                let renamed = DurableFrame::ChannelRenamed(ChannelRenamed {
                    chat_id: chat.clone(),
                    name: name.clone(),
                });
                outbox::append_filed(
                    tx,
                    &Header::default(),
                    renamed,
                    filed,
                    None,
                    &Origin::none(),
                )?;
                if !by_user {
                    let note = DurableFrame::Notification(Notification {
                        kind: "channel_renamed".into(),
                        title: name.clone(),
                        body: Some(format!("Renamed topic to {name}")),
                        ts: now_ms(),
                    });
                    outbox::append_filed(
                        tx,
                        &Header::lane(parent.clone(), is_thread.then(|| chat.clone())),
                        note,
                        filed,
                        None,
                        &Origin::none(),
                    )?;
                }
                Ok(true)
            })
            .await;
        if let Err(e) = result {
            tracing::warn!(error = %e, "rename failed");
        }
    }

    /// Tells the sending connection that its message was taken.
    pub(crate) fn read_receipt(&self, conn: u64, message_id: &str) {
        if conn == 0 {
            return;
        }
        let frame = EphemeralFrame::Accepted {
            message_id: message_id.to_owned(),
        };
        self.shared.hub.send_to(conn, &self.header(), frame);
    }
}
