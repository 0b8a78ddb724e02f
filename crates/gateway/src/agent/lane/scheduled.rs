//! A scheduled job's run in its lane: a turn like any other for the lane's queue (it waits for a
//! running turn, and messages sent meanwhile wait for it), but in a fresh agent session of its
//! own, so that it starts without history and leaves the lane's conversation untouched.
//!
//! Nothing streams: the lane shows `agent.busy {reason:"cron"}` while the job runs, and the
//! answer arrives whole as a `cron` message with its notification (see [`crate::cron::finish`]).
//! Nobody watches a scheduled run, so the agent's permission requests are declined.

use std::sync::Arc;
use std::time::Instant;

use iris_acp::{AcpError, ContentBlock, PromptResponse, SessionModelState, StopReason};
use iris_protocol::{BusyReason, Role};
use tokio::sync::mpsc;
use tokio::time::Instant as TokioInstant;

use super::super::host::{Instance, LaneEvent};
use super::super::turn::{Ending, Out, TurnConfig, TurnMapper};
use super::{short, sleep_until, Job, LaneActor, LaneCmd, Stopping};
use crate::cron::{CronRun, Outcome};
use crate::handlers::WireError;
use crate::ids::new_id;

impl LaneActor {
    /// Runs a due job as this lane's turn.
    pub(super) async fn run_cron(&mut self, run: CronRun) {
        // The job may have been removed or paused while it waited behind another turn.
        if !crate::cron::still_wanted(&self.shared, &run).await {
            return;
        }
        self.busy(BusyReason::Cron).await;
        match self.cron_turn(&run.prompt).await {
            Some(outcome) => crate::cron::finish(&self.shared, &self.lane, run, outcome).await,
            // The lane closes (gateway shutdown or channel deletion): the run is not recorded, so
            // that a restart catches it up.
            None => tracing::info!(job_id = run.job_id, "scheduled run interrupted"),
        }
        self.idle().await;
    }

    /// Opens the job's own session, runs the prompt in it and forgets the session.
    async fn cron_turn(&mut self, prompt: &str) -> Option<Outcome> {
        let instance = match self.host.instance().await {
            Ok(i) => i,
            Err(e) => return Some(Outcome::Failed(format!("the agent is not available: {}", short(&e)))),
        };
        let session = match instance.client.new_session(&self.host.cwd).await {
            Ok(s) => s,
            Err(e) => return Some(Outcome::Failed(format!("the agent could not open a session: {}", short(&e.to_string())))),
        };
        let (tx, mut rx) = mpsc::unbounded_channel();
        self.host.add_route(&session.session_id, instance.generation, tx);
        let model = self.cron_model(&instance, &session.session_id, session.models).await;
        let outcome = self.cron_prompt(&instance, &session.session_id, model, prompt, &mut rx).await;
        self.host.remove_route(&session.session_id);
        outcome
    }

    /// The model of the run: the one chosen in this lane, when the agent offers it.
    async fn cron_model(&self, instance: &Instance, session_id: &str, models: Option<SessionModelState>) -> Option<String> {
        let offered = models?;
        let Some(wanted) = self.current_model().filter(|m| *m != offered.current_model_id) else {
            return Some(offered.current_model_id);
        };
        if !offered.available_models.iter().any(|m| m.model_id == wanted) {
            return Some(offered.current_model_id);
        }
        match instance.client.set_model(session_id, &wanted).await {
            Ok(()) => Some(wanted),
            Err(e) => {
                tracing::warn!(error = %e, "could not select the lane's model for a scheduled run");
                Some(offered.current_model_id)
            }
        }
    }

    async fn cron_prompt(
        &mut self,
        instance: &Arc<Instance>,
        session_id: &str,
        model: Option<String>,
        prompt: &str,
        rx: &mut mpsc::UnboundedReceiver<LaneEvent>,
    ) -> Option<Outcome> {
        let mut mapper = TurnMapper::new(TurnConfig {
            message_id: new_id("m_"),
            role: Role::Cron,
            model,
            cwd: self.agents.cwd_display.clone(),
            show_reasoning: self.show_reasoning,
            update_interval: self.agents.update_interval,
        });
        let client = instance.client.clone();
        let sid = session_id.to_owned();
        let blocks = vec![ContentBlock::text(prompt.to_owned())];
        let answer = async move { client.prompt(&sid, blocks).await };
        tokio::pin!(answer);
        let mut stopping = Stopping::default();
        let mut crashed: Option<String> = None;
        let mut last_activity = Instant::now();
        let mut timed_out = false;
        let result: Option<Result<PromptResponse, AcpError>> = loop {
            let cancel_deadline = stopping.since.map(|t| TokioInstant::from_std(t + self.agents.cancel_grace));
            let idle_deadline =
                stopping.since.is_none().then(|| TokioInstant::from_std(last_activity + self.agents.turn_idle_timeout));
            let expiry = self.next_picker_deadline();
            tokio::select! {
                res = &mut answer => break Some(res),
                Some(ev) = rx.recv() => match ev {
                    // Only the whole answer is delivered; the mapper keeps the text after the
                    // last tool call, like a normal turn's final message.
                    LaneEvent::Update(update) => {
                        last_activity = Instant::now();
                        drop(mapper.on_update(&update, Instant::now()));
                    }
                    LaneEvent::Permission(_, responder) => responder.cancel(),
                    LaneEvent::Exited { generation, detail } => {
                        if generation == instance.generation {
                            crashed = Some(detail);
                            break None;
                        }
                    }
                },
                Some(ev) = self.ev_rx.recv() => self.idle_event(ev).await,
                cmd = self.rx.recv() => match cmd {
                    None | Some(LaneCmd::Close) => {
                        self.closing = true;
                        self.cancel_turn(instance, session_id, &mut stopping, &[]);
                    }
                    Some(LaneCmd::Stop(reply)) => {
                        self.cancel_turn(instance, session_id, &mut stopping, &[]);
                        let _ = reply.send(true);
                    }
                    Some(LaneCmd::Steer(_, reply)) => {
                        let _ = reply.send(Err(WireError::not_found("a scheduled job is running in this lane; stop it or wait for it")));
                    }
                    Some(LaneCmd::Prompt(p)) => self.queue.push_back(Job::Prompt(p)),
                    Some(LaneCmd::Command(c)) if c.name == "/stop" => {
                        self.read_receipt(c.origin_conn, &c.message_id);
                        self.cancel_turn(instance, session_id, &mut stopping, &[]);
                    }
                    Some(LaneCmd::Command(c)) if matches!(c.name, "/status" | "/help" | "/reasoning" | "/title" | "/cron") => self.command(c).await,
                    Some(LaneCmd::Command(c)) => self.queue.push_back(Job::Command(c)),
                    Some(LaneCmd::Cron(c)) => self.queue.push_back(Job::Cron(c)),
                    Some(LaneCmd::Picker { picker_id, value, reply }) => {
                        let result = self.answer_picker(&picker_id, &value).await;
                        let _ = reply.send(result);
                    }
                },
                _ = sleep_until(cancel_deadline) => {
                    tracing::warn!(lane = ?self.lane, "the agent did not end a cancelled scheduled run; restarting it");
                    self.host.kill(instance.generation).await;
                    stopping.since = None;
                }
                _ = sleep_until(idle_deadline) => {
                    tracing::warn!(lane = ?self.lane, "the agent sent nothing for too long; cancelling the scheduled run");
                    timed_out = true;
                    self.cancel_turn(instance, session_id, &mut stopping, &[]);
                }
                _ = sleep_until(expiry) => self.expire_pickers().await,
            }
        };
        if result.is_some() {
            // Updates sent before the answer may still be on their way: take them first.
            instance.fence().await;
            while let Ok(ev) = rx.try_recv() {
                if let LaneEvent::Update(update) = ev {
                    drop(mapper.on_update(&update, Instant::now()));
                }
            }
        }
        if self.closing {
            return None;
        }
        let mut cancelled = stopping.since.is_some();
        let mut tokens = None;
        match result {
            Some(Ok(resp)) => {
                cancelled |= resp.stop_reason == StopReason::Cancelled;
                tokens = resp.usage.map(|u| instance.usage_delta(u.total_tokens)).filter(|t| *t > 0);
            }
            Some(Err(e)) if cancelled => {
                // As with a normal turn: an agent that fails a cancelled prompt may be wedged.
                tracing::warn!(error = %e, "cancelled scheduled run failed; restarting the agent");
                self.host.kill(instance.generation).await;
                self.session = None;
            }
            Some(Err(e)) => {
                if e.is_closed() {
                    self.session = None;
                    return Some(Outcome::Failed(format!("the agent stopped unexpectedly ({})", short(&e.to_string()))));
                }
                return Some(Outcome::Failed(format!("the agent reported an error: {}", short(&e.to_string()))));
            }
            None => {
                self.session = None;
                let detail = crashed.unwrap_or_default();
                return Some(Outcome::Failed(format!("the agent stopped unexpectedly ({})", short(&detail))));
            }
        }
        if timed_out {
            let secs = self.agents.turn_idle_timeout.as_secs();
            return Some(Outcome::Failed(format!("the agent sent nothing for {secs} s, so the run was cancelled")));
        }
        if cancelled {
            return Some(Outcome::Cancelled);
        }
        let ending = Ending { tokens, ..Ending::default() };
        let answer = mapper.finish(&ending, Instant::now()).into_iter().find_map(|o| match o {
            Out::Final(_, message) if !message.text.trim().is_empty() => Some(message),
            _ => None,
        });
        Some(answer.map_or(Outcome::Empty, |m| Outcome::Answer(Box::new(m))))
    }
}
