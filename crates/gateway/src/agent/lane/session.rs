//! The lane's ACP session: created on the first turn, restored with `session/load` after a
//! restart of the agent or the gateway, and remembered in the store.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::super::host::{Instance, LaneEvent};
use super::super::usage::{UsageKind, UsageMeter};
use super::{LaneActor, Session};

impl LaneActor {
    /// The agent process and this lane's session on it, creating or restoring the session.
    pub(super) async fn ensure_session(&mut self) -> Result<Arc<Instance>, String> {
        let instance = self.host().instance().await?;
        if self
            .session
            .as_ref()
            .is_some_and(|s| s.generation == instance.generation)
        {
            return Ok(instance);
        }
        if let Some(old) = self.session.take() {
            self.host().remove_route(&old.id);
        }
        let cwd = self.host().cwd.clone();
        if let Some(id) = self.stored_session.clone() {
            // `session/resume` reopens without replaying the history; else `session/load`.
            let resume = instance.caps.session_capability("resume");
            if resume || instance.caps.load_session {
                self.host()
                    .add_route(&id, instance.generation, self.ev_tx.clone());
                let reopened = if resume {
                    instance.client.resume_session(&id, &cwd).await
                } else {
                    instance.client.load_session(&id, &cwd).await
                };
                match reopened {
                    Ok(resp) => {
                        // The agent replays the session's history before answering; drop it.
                        instance.fence().await;
                        self.drain_replay().await;
                        self.session = Some(Session {
                            id,
                            generation: instance.generation,
                            models: resp.models,
                            usage: UsageMeter::new(UsageKind::of(instance.info.as_ref())),
                        });
                        return Ok(instance);
                    }
                    Err(e) => {
                        self.host().remove_route(&id);
                        tracing::warn!(error = %e, resume, "reopening the session failed; starting a fresh session");
                    }
                }
            }
        }
        let resp = instance
            .client
            .new_session(&cwd)
            .await
            .map_err(|e| format!("{} could not open a session: {e}", self.host().label))?;
        self.host()
            .add_route(&resp.session_id, instance.generation, self.ev_tx.clone());
        let had_one = self.stored_session.is_some();
        self.set_stored_session(Some(resp.session_id.clone())).await;
        self.session = Some(Session {
            id: resp.session_id,
            generation: instance.generation,
            models: resp.models,
            usage: UsageMeter::new(UsageKind::of(instance.info.as_ref())),
        });
        if had_one {
            self.system("The agent restarted and could not restore this conversation; it continues in a fresh session.").await;
        }
        Ok(instance)
    }

    /// Takes the agent of the lane's channel, when the bridge says some channel changed its
    /// agent since the lane last looked (and once at the start): a session on the old agent is
    /// closed there and forgotten, and the next turn opens one on the new agent.
    pub(super) async fn follow_agent(&mut self) {
        let epoch = self.bridge.agent_epoch.load(Ordering::SeqCst);
        if epoch == self.epoch {
            return;
        }
        self.epoch = epoch;
        let agent = match self
            .bridge
            .shared
            .store
            .get_channel(self.lane.row_id())
            .await
        {
            Ok(Some(row)) => row.agent,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the lane's agent");
                return;
            }
        };
        let host = self.bridge.host(agent.as_deref()).clone();
        if Arc::ptr_eq(&host, &self.host) {
            return;
        }
        if let Some(old) = self.session.take() {
            self.host.remove_route(&old.id);
            self.close_session(&old).await;
        }
        self.stored_session = None;
        self.host = host;
    }

    /// Ends a session of this lane on the agent (`session/close`, where advertised), when the
    /// process that holds it still runs.
    pub(super) async fn close_session(&self, session: &Session) {
        if let Some(instance) = self.host().running().await {
            if instance.generation == session.generation {
                instance.close_session(&session.id).await;
            }
        }
    }

    pub(super) async fn drain_replay(&mut self) {
        while let Ok(ev) = self.ev_rx.try_recv() {
            match ev {
                LaneEvent::Update(_) => {}
                other => self.idle_event(other).await,
            }
        }
    }

    pub(super) async fn set_stored_session(&mut self, id: Option<String>) {
        self.stored_session = id.clone();
        let lane = self.lane.clone();
        let result = self
            .bridge
            .shared
            .store
            .write(move |tx| {
                tx.set_lane_session(&lane.chat_id, lane.thread_id.as_deref(), id.as_deref())
            })
            .await;
        if let Err(e) = result {
            tracing::warn!(error = %e, "could not store the lane's session id");
        }
    }

    pub(super) fn current_model(&self) -> Option<String> {
        self.session
            .as_ref()
            .and_then(|s| s.models.as_ref())
            .map(|m| m.current_model_id.clone())
    }
}
