//! Driving one `session/prompt` to its end: the single loop every turn of a lane runs, whether
//! the user is watching it stream (a live turn) or not (a scheduled run).
//!
//! While the prompt runs, the loop takes the agent's updates, the lane's commands (stop, steer,
//! pickers; anything else is queued), the rate-limited `message.update` flush, the idle and
//! cancel deadlines and picker expiry. When the prompt answers, it waits for the updates the agent
//! sent before its answer ([`Instance::fence`]) and takes them too.

use std::sync::Arc;
use std::time::Instant;

use iris_acp::{AcpError, ContentBlock, PromptResponse, SessionUpdate, StopReason};
use iris_protocol::BusyReason;
use tokio::sync::mpsc;
use tokio::time::Instant as TokioInstant;

use super::super::host::{Instance, LaneEvent};
use super::super::turn::TurnMapper;
use super::{is_steer_ack, short, sleep_until, Job, LaneActor, LaneCmd, Pending};
use crate::handlers::WireError;

/// Who sees the turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// A user's turn: it streams, asks for approvals and can be steered.
    Live,
    /// A scheduled run: only the whole answer is kept; nobody answers approvals.
    Scheduled,
}

/// How the prompt ended.
#[derive(Debug)]
pub(super) enum Ended {
    /// The agent answered (`cancelled` when the turn was stopped or the agent says so).
    Answered {
        cancelled: bool,
        tokens: Option<u64>,
    },
    /// The turn was stopped and the agent failed it or did not end it; the agent was restarted.
    Stopped,
    /// The agent process died.
    Crashed(String),
    /// The agent answered the prompt with an error.
    Failed(String),
}

/// The outcome of [`LaneActor::drive`].
pub(super) struct Driven {
    pub ended: Ended,
    /// The turn was cancelled because the agent sent nothing for too long.
    pub timed_out: bool,
    /// Steering handed to the agent, and how many tool calls the turn had made by then.
    pub steered: Option<(String, usize)>,
}

/// A running turn's cancellation state.
#[derive(Default)]
pub(super) struct Stopping {
    /// `session/cancel` was sent at this time.
    pub since: Option<Instant>,
    /// The agent did not end the cancelled turn in time and was killed.
    pub killed: bool,
}

impl LaneActor {
    /// Runs `blocks` as a prompt of `session_id` until it ends. `rx` carries the session's events.
    pub(super) async fn drive(
        &mut self,
        mode: Mode,
        instance: &Arc<Instance>,
        session_id: &str,
        blocks: Vec<ContentBlock>,
        mapper: &mut TurnMapper,
        rx: &mut mpsc::UnboundedReceiver<LaneEvent>,
    ) -> Driven {
        let live = mode == Mode::Live;
        let turn_id = mapper.message_id().to_owned();
        let client = instance.client.clone();
        let sid = session_id.to_owned();
        let prompt = async move { client.prompt(&sid, blocks).await };
        tokio::pin!(prompt);
        let mut stopping = Stopping::default();
        let mut turn_pickers: Vec<String> = Vec::new();
        let mut crashed: Option<String> = None;
        let mut last_activity = Instant::now();
        let mut timed_out = false;
        let mut steered: Option<(String, usize)> = None;
        let result: Option<Result<PromptResponse, AcpError>> = loop {
            let flush_at = if live {
                mapper.next_flush().map(TokioInstant::from_std)
            } else {
                None
            };
            let cancel_deadline = stopping
                .since
                .filter(|_| !stopping.killed)
                .map(|t| TokioInstant::from_std(t + self.agents.cancel_grace));
            // Waiting for the user is not the agent hanging.
            let waiting_for_user = self
                .pickers
                .values()
                .any(|p| matches!(p, Pending::Approval { .. }));
            let idle_deadline = (stopping.since.is_none() && !waiting_for_user)
                .then(|| TokioInstant::from_std(last_activity + self.agents.turn_idle_timeout));
            let expiry = self.next_picker_deadline();
            tokio::select! {
                res = &mut prompt => break Some(res),
                Some(ev) = rx.recv() => match ev {
                    LaneEvent::Update(update) => {
                        last_activity = Instant::now();
                        self.take_update(mode, update, mapper, &turn_id, steered.is_some()).await;
                    }
                    LaneEvent::Permission(request, responder) => {
                        if !live || stopping.since.is_some() {
                            responder.cancel();
                        } else if let Some(id) = self.open_permission(request, responder).await {
                            turn_pickers.push(id);
                        }
                    }
                    LaneEvent::Exited { generation, detail } => {
                        if generation == instance.generation {
                            crashed = Some(detail);
                            break None;
                        }
                    }
                },
                // A scheduled run has a session of its own; the lane's session may still speak.
                Some(ev) = self.ev_rx.recv(), if !live => self.idle_event(ev).await,
                cmd = self.rx.recv() => match cmd {
                    None | Some(LaneCmd::Close) => {
                        self.closing = true;
                        self.cancel_turn(instance, session_id, &mut stopping, &turn_pickers);
                    }
                    Some(LaneCmd::Stop(reply)) => {
                        self.cancel_turn(instance, session_id, &mut stopping, &turn_pickers);
                        let _ = reply.send(true);
                    }
                    Some(LaneCmd::Steer(text, reply)) if live => {
                        let result = self.steer(instance, session_id, text, &mut stopping, &turn_pickers);
                        if let Ok(Some(text)) = &result {
                            steered = Some((text.clone(), mapper.tool_count()));
                        }
                        let _ = reply.send(result.map(|_| ()));
                    }
                    Some(LaneCmd::Steer(_, reply)) => {
                        let _ = reply.send(Err(WireError::not_found("a scheduled job is running in this lane; stop it or wait for it")));
                    }
                    Some(LaneCmd::Prompt(p)) => self.queue.push_back(Job::Prompt(p)),
                    Some(LaneCmd::Command(c)) if c.name == "/stop" => {
                        self.read_receipt(c.origin_conn, &c.message_id);
                        self.cancel_turn(instance, session_id, &mut stopping, &turn_pickers);
                    }
                    Some(LaneCmd::Command(c)) if matches!(c.name, "/status" | "/help" | "/reasoning" | "/title" | "/cron") => self.command(c).await,
                    Some(LaneCmd::Command(c)) => self.queue.push_back(Job::Command(c)),
                    Some(LaneCmd::Cron(c)) => self.queue.push_back(Job::Cron(c)),
                    Some(LaneCmd::Picker { picker_id, value, reply }) => {
                        let result = self.answer_picker(&picker_id, &value).await;
                        if live && result.is_ok() && !self.pickers.values().any(|p| matches!(p, Pending::Approval { .. })) {
                            let reason = if mapper.tool_open() { BusyReason::Tool } else { BusyReason::Processing };
                            self.busy(reason).await;
                        }
                        let _ = reply.send(result);
                    }
                },
                _ = sleep_until(flush_at) => {
                    if let Some(out) = mapper.flush_due(Instant::now()) {
                        self.emit(vec![out], &turn_id).await;
                    }
                }
                _ = sleep_until(idle_deadline) => {
                    tracing::warn!(lane = ?self.lane, "the agent sent nothing for too long; cancelling the turn");
                    timed_out = true;
                    self.cancel_turn(instance, session_id, &mut stopping, &turn_pickers);
                }
                _ = sleep_until(cancel_deadline) => {
                    tracing::warn!(lane = ?self.lane, "the agent did not end a cancelled turn; restarting it");
                    stopping.killed = true;
                    self.host.kill(instance.generation).await;
                }
                _ = sleep_until(expiry) => self.expire_pickers().await,
            }
        };
        if result.is_some() {
            // The agent's last updates may still be on their way to this lane when its answer
            // arrives: wait until everything it sent before has been routed, then take it.
            instance.fence().await;
            while let Ok(ev) = rx.try_recv() {
                match ev {
                    LaneEvent::Update(update) => {
                        self.take_update(mode, update, mapper, &turn_id, steered.is_some())
                            .await
                    }
                    LaneEvent::Permission(_, responder) => responder.cancel(),
                    other => self.idle_event(other).await,
                }
            }
        }
        // Whatever is still pending belongs to this turn and cannot be answered any more.
        for id in turn_pickers {
            if let Some(Pending::Approval { responder, .. }) = self.pickers.remove(&id) {
                responder.cancel();
            }
            self.agents.forget_pickers(std::iter::once(&id));
        }
        let cancelled = stopping.since.is_some();
        let ended = match result {
            Some(Ok(resp)) => {
                self.host.mark_healthy(instance.generation).await;
                let tokens = resp
                    .usage
                    .map(|u| instance.usage_delta(u.total_tokens))
                    .filter(|t| *t > 0);
                Ended::Answered {
                    cancelled: cancelled || resp.stop_reason == StopReason::Cancelled,
                    tokens,
                }
            }
            Some(Err(e)) if cancelled => {
                // Hermes fails a prompt cancelled during a tool or a permission prompt and then
                // queues every later prompt forever: start over with a fresh process.
                tracing::warn!(error = %e, "cancelled turn failed; restarting the agent");
                self.host.kill(instance.generation).await;
                Ended::Stopped
            }
            // A process killed because it did not end a stopped turn ended as the user asked.
            None if stopping.killed => Ended::Stopped,
            Some(Err(e)) if e.is_closed() => Ended::Crashed(short(&e.to_string())),
            Some(Err(e)) => Ended::Failed(short(&e.to_string())),
            None => Ended::Crashed(short(&crashed.unwrap_or_default())),
        };
        if matches!(ended, Ended::Stopped | Ended::Crashed(_)) {
            self.session = None;
        }
        Driven {
            ended,
            timed_out,
            steered,
        }
    }

    /// One update of the running prompt: streamed to the devices in a live turn, only collected
    /// for the final answer in a scheduled one.
    async fn take_update(
        &mut self,
        mode: Mode,
        update: SessionUpdate,
        mapper: &mut TurnMapper,
        turn_id: &str,
        steered: bool,
    ) {
        match (mode, update) {
            (Mode::Live, SessionUpdate::SessionInfoUpdate(info)) => {
                if let Some(title) = info.title {
                    self.agent_title(&title).await;
                }
            }
            (Mode::Live, update) => {
                if steered && is_steer_ack(&update) {
                    return;
                }
                let outs = mapper.on_update(&update, Instant::now());
                self.emit(outs, turn_id).await;
                crate::media::agent::collect(&self.shared, &self.header(), mapper).await;
            }
            (Mode::Scheduled, update) => drop(mapper.on_update(&update, Instant::now())),
        }
    }
}
