//! The lane's parts, owned by its actor and borrowed by a running turn ([`super::run::TurnRun`])
//! and by the gateway's commands ([`super::commands`]): every frame the lane sends, its picker
//! book, its session slot, the checkpoints of a streaming answer and those of taking a turn back,
//! with the lane session's events and the lane's own settings.
//!
//! What is here serves both an idle lane and a running turn: the session made ready, the lane
//! session's events between turns, picker expiry and closing, and the files a turn produced.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use iris_acp::SessionUpdate;
use iris_protocol::DurableFrame;

use super::super::env::LaneEnv;
use super::super::error::AgentError;
use super::super::host::{event_channel, AgentHost, EventRx, Instance, LaneEvent};
use super::super::turn::TurnMapper;
use super::branch::Rewind;
use super::checkpoint::Checkpoints;
use super::output::Output;
use super::pickers::PickerBook;
use super::session::SessionSlot;
use super::titles::{self, AGENT_TITLES_PER_TURN};
use crate::outbox::Lane;

/// What a lane owns besides its mailbox and queue.
pub(crate) struct LaneParts {
    pub(super) env: Arc<LaneEnv>,
    pub(super) out: Output,
    pub(super) pickers: PickerBook,
    pub(super) session: SessionSlot,
    pub(super) checkpoints: Checkpoints,
    pub(super) rewind: Rewind,
    /// The events of the lane's session (a live turn takes them while it runs).
    pub(super) events: EventRx,
    pub(super) show_reasoning: bool,
    /// Titles the agent may still give the thread before the next turn starts
    /// ([`AGENT_TITLES_PER_TURN`]).
    pub(super) agent_titles_left: u8,
}

impl LaneParts {
    pub(crate) fn new(env: Arc<LaneEnv>, lane: Lane, deleted: Arc<AtomicBool>) -> LaneParts {
        let (ev_tx, events) = event_channel();
        let store = env.shared.store.clone();
        LaneParts {
            out: Output::new(env.shared.clone(), lane.clone(), deleted),
            pickers: PickerBook::new(lane.clone(), env.pickers.clone()),
            session: SessionSlot::new(
                env.hosts.host(None).clone(),
                ev_tx,
                store.clone(),
                lane.clone(),
            ),
            checkpoints: Checkpoints::new(store, lane),
            rewind: Rewind::default(),
            events,
            show_reasoning: true,
            agent_titles_left: AGENT_TITLES_PER_TURN,
            env,
        }
    }

    pub(super) fn host(&self) -> &Arc<AgentHost> {
        self.session.host()
    }

    pub(super) fn lane(&self) -> &Lane {
        self.out.lane()
    }

    /// The agent process and this lane's session on it (see [`SessionSlot::ensure`]).
    pub(super) async fn ensure_session(&mut self) -> Result<Arc<Instance>, AgentError> {
        let (instance, fresh) = self.session.ensure(&mut self.events).await?;
        if fresh {
            self.out.system("The agent restarted and could not restore this conversation; it continues in a fresh session.").await;
        }
        Ok(instance)
    }

    /// An event of the lane's session while no turn of it runs: only a title is taken.
    pub(super) async fn idle_event(&mut self, ev: LaneEvent) {
        match ev {
            LaneEvent::Update(SessionUpdate::SessionInfoUpdate(info)) => {
                if let Some(title) = info.title {
                    self.agent_title(&title).await;
                }
            }
            LaneEvent::Update(_) => {}
            LaneEvent::Permission(_, responder) => responder.cancel(),
            LaneEvent::Elicitation(_, responder) => responder.cancel(),
            LaneEvent::Exited { generation, .. } => self.session.exited(generation),
        }
    }

    /// The agent named the session (see [`titles::agent_title`]).
    pub(super) async fn agent_title(&mut self, title: &str) {
        titles::agent_title(&self.out, &mut self.agent_titles_left, title).await;
    }

    pub(super) async fn expire_pickers(&mut self) {
        let expired = self.pickers.expire(Instant::now());
        for _ in 0..expired {
            self.out
                .system("The approval request expired without an answer and was cancelled.")
                .await;
        }
    }

    /// Sends `picker.closed` for the pickers closed since the last call (one transaction), and
    /// records their outcomes in the running turn's steps.
    pub(super) async fn flush_closed(&mut self, mapper: Option<&mut TurnMapper>) {
        let closed = self.pickers.take_closed();
        if closed.is_empty() {
            return;
        }
        if let Some(mapper) = mapper {
            for (c, label) in &closed {
                mapper.picker_closed(c, label.clone());
            }
        }
        let frames = closed
            .into_iter()
            .map(|(c, _)| DurableFrame::PickerClosed(c))
            .collect();
        self.out.durable(frames, None, None).await;
    }

    /// Stores the files the agent produced so far in the turn and adds them to its answer.
    pub(super) async fn collect_files(&self, mapper: &mut TurnMapper) {
        let files = mapper.take_files();
        if files.is_empty() {
            return;
        }
        let cwd = self.host().cwd.clone();
        self.env
            .media
            .collect(&self.out.header(), &cwd, files, mapper)
            .await;
    }
}
