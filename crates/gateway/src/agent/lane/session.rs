//! A lane's session slot: its ACP session on the agent of its channel, created on the first
//! turn, restored (`session/resume` where advertised, else `session/load`) after a restart of the
//! agent or the gateway, remembered in the store, and closed (`session/close`, where advertised)
//! when the lane moves to another agent or is deleted.

use std::sync::Arc;

use iris_acp::{SessionModelState, SessionUpdate};
use iris_store::Store;

use super::super::env::Hosts;
use super::super::error::AgentError;
use super::super::host::{AgentHost, EventRx, EventTx, Instance, LaneEvent};
use super::super::usage::{UsageKind, UsageMeter};
use crate::outbox::Lane;

/// How long a fork of the lane's session (a checkpoint, or the session a rewound turn runs in)
/// may take.
const FORK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// How long a model switch waits for the agent's answer.
const SET_MODEL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The lane's session on a running agent process.
pub(crate) struct Session {
    pub id: String,
    pub generation: u64,
    pub models: Option<SessionModelState>,
    /// Turns the agent's token reports into each turn's own count.
    pub usage: UsageMeter,
    /// Opened empty and no turn ran in it yet (a reopened session has a history).
    pub fresh: bool,
}

impl Session {
    fn new(id: String, instance: &Instance, models: Option<SessionModelState>) -> Session {
        Session {
            id,
            generation: instance.generation,
            models,
            usage: UsageMeter::new(UsageKind::of(instance.info.as_ref())),
            fresh: false,
        }
    }
}

/// The lane's agent and its session there.
pub(crate) struct SessionSlot {
    /// The agent of the lane's channel.
    host: Arc<AgentHost>,
    current: Option<Session>,
    /// The session id the store remembers for the lane.
    stored: Option<String>,
    /// The agent epoch when the lane last read its channel's agent.
    epoch: u64,
    /// Where the agent's events for the lane's session go.
    events: EventTx,
    store: Store,
    lane: Lane,
    /// The agent process whose spare this lane took or should start: refilled once the lane is
    /// idle (`refill_spare`), so that opening it never competes with the turn that needed it.
    refill: Option<Arc<Instance>>,
}

impl SessionSlot {
    pub(crate) fn new(host: Arc<AgentHost>, events: EventTx, store: Store, lane: Lane) -> Self {
        SessionSlot {
            host,
            current: None,
            stored: None,
            epoch: u64::MAX,
            events,
            store,
            lane,
            refill: None,
        }
    }

    pub(crate) fn host(&self) -> &Arc<AgentHost> {
        &self.host
    }

    /// Reads the session id the store remembers for the lane.
    pub(crate) async fn load_stored(&mut self) {
        self.stored = self
            .store
            .lane_session(&self.lane.chat_id, self.lane.thread_id.as_deref())
            .await
            .ok()
            .flatten();
    }

    pub(crate) fn current(&self) -> Option<&Session> {
        self.current.as_ref()
    }

    pub(crate) fn current_mut(&mut self) -> Option<&mut Session> {
        self.current.as_mut()
    }

    /// The session id `/status` shows: the open one, else the remembered one.
    pub(crate) fn shown_id(&self) -> Option<&str> {
        self.current
            .as_ref()
            .map(|s| s.id.as_str())
            .or(self.stored.as_deref())
    }

    pub(crate) fn current_model(&self) -> Option<String> {
        self.current
            .as_ref()
            .and_then(|s| s.models.as_ref())
            .map(|m| m.current_model_id.clone())
    }

    /// The session is gone with its process (a crash, or a stopped turn that restarted it).
    pub(crate) fn drop_current(&mut self) {
        self.current = None;
    }

    /// The process of this generation died: a session on it is gone.
    pub(crate) fn exited(&mut self, generation: u64) {
        if self.current.as_ref().map(|s| s.generation) == Some(generation) {
            self.current = None;
        }
    }

    /// The agent process and this lane's session on it, creating or restoring the session.
    /// `Ok((instance, true))`: a remembered session could not be restored, and a fresh one
    /// was opened (the lane says so). The agent's replay of a restored session is dropped from
    /// `rx`.
    pub(crate) async fn ensure(
        &mut self,
        rx: &mut EventRx,
    ) -> Result<(Arc<Instance>, bool), AgentError> {
        let instance = self.host.instance().await?;
        if self
            .current
            .as_ref()
            .is_some_and(|s| s.generation == instance.generation)
        {
            return Ok((instance, false));
        }
        if let Some(old) = self.current.take() {
            self.host.remove_route(&old.id);
        }
        if self.reopen(&instance, rx).await {
            self.refill = Some(instance.clone());
            return Ok((instance, false));
        }
        // Events still queued belong to no open session; dropped while waiting.
        let (id, models) = match drain_while(rx, self.host.spare.take(instance.generation)).await {
            Some(spare) => (spare.id, spare.models),
            None => {
                let cwd = self.host.cwd.clone();
                let opened = drain_while(rx, instance.client.new_session(&cwd)).await;
                let resp = opened.map_err(|e| {
                    AgentError::Unavailable(format!(
                        "{} could not open a session: {e}",
                        self.host.label
                    ))
                })?;
                (resp.session_id, resp.models)
            }
        };
        self.host
            .add_route(&id, instance.generation, self.events.clone());
        let had_one = self.stored.is_some();
        self.set_stored(Some(id.clone())).await;
        self.current = Some(Session {
            fresh: true,
            ..Session::new(id, &instance, models)
        });
        self.refill = Some(instance.clone());
        Ok((instance, had_one))
    }

    /// Whether the running agent can keep checkpoints: it forks sessions and closes the ones no
    /// longer needed (`sessionCapabilities.fork` and `close`). An agent that cannot close
    /// (Hermes 0.19) would keep every fork in its memory until it restarts.
    pub(crate) async fn can_checkpoint(&self) -> bool {
        self.host.running().await.is_some_and(|i| {
            i.caps.session_capability("fork") && i.caps.session_capability("close")
        })
    }

    /// A copy of the open session as it stands (`session/fork`), kept aside as a checkpoint;
    /// none where no session is open or the fork failed. What arrives for the lane's session
    /// meanwhile (a title sent after the answer, an exit) is returned for the lane to take.
    pub(crate) async fn fork_current(&self, rx: &mut EventRx) -> (Option<String>, Late) {
        let mut late = Late::default();
        let Some(session) = self.current.as_ref() else {
            return (None, late);
        };
        let Some(instance) = self.host.running().await else {
            return (None, late);
        };
        if instance.generation != session.generation {
            return (None, late);
        }
        let cwd = self.host.cwd.clone();
        let forking = tokio::time::timeout(
            FORK_TIMEOUT,
            instance.client.fork_session(&session.id, &cwd),
        );
        let forked = match wait_taking(rx, forking, |ev| late.keep(ev)).await {
            Ok(Ok(resp)) => Some(resp.session_id),
            Ok(Err(e)) => {
                tracing::info!(error = %e, "session/fork failed; no checkpoint for this turn");
                None
            }
            Err(_) => {
                tracing::info!("session/fork was not answered in time; no checkpoint");
                None
            }
        };
        (forked, late)
    }

    /// Ends a checkpoint session no longer needed, where the agent can (`session/close`).
    pub(crate) async fn close_checkpoint(&self, id: &str) {
        if let Some(instance) = self.host.running().await {
            instance.close_session(id).await;
        }
    }

    /// Moves the lane to a new session that starts from a checkpoint: a fork of `from`, or an
    /// empty session for a checkpoint before the first turn. The session left behind is closed;
    /// the model chosen in it is chosen again in the new one.
    pub(crate) async fn rewind_to(
        &mut self,
        from: Option<&str>,
        rx: &mut EventRx,
    ) -> Result<(), AgentError> {
        let instance = self.host.instance().await?;
        let cwd = self.host.cwd.clone();
        let opened = match from {
            Some(id) => {
                let forking =
                    tokio::time::timeout(FORK_TIMEOUT, instance.client.fork_session(id, &cwd));
                drain_while(rx, forking).await
            }
            None => {
                let opening = tokio::time::timeout(FORK_TIMEOUT, instance.client.new_session(&cwd));
                drain_while(rx, opening).await
            }
        };
        let resp = match opened {
            Ok(Ok(resp)) => resp,
            Ok(Err(e)) => return Err(AgentError::Unavailable(format!("{e}"))),
            Err(_) => {
                return Err(AgentError::Unavailable(
                    "the agent did not answer in time".into(),
                ))
            }
        };
        let model = self.current_model();
        self.release(true).await;
        self.host
            .add_route(&resp.session_id, instance.generation, self.events.clone());
        self.set_stored(Some(resp.session_id.clone())).await;
        self.current = Some(Session {
            fresh: from.is_none(),
            ..Session::new(resp.session_id, &instance, resp.models)
        });
        if let Some(model) = model.filter(|m| Some(m) != self.current_model().as_ref()) {
            if let Err(e) = self.set_model(&model).await {
                tracing::info!(error = %e, "the model was not chosen again after a rewind");
            }
        }
        Ok(())
    }

    /// Starts opening the agent's next spare session, if this lane took one (or opened the
    /// first session) since the last call. Called when the lane has nothing to run: `hermes acp`
    /// answers one request at a time in effect, and a `session/new` sent with a prompt delays
    /// that prompt's first text by about as long as the session takes to build.
    pub(crate) fn refill_spare(&mut self) {
        if let Some(instance) = self.refill.take() {
            self.host.refill_spare(&instance);
        }
    }

    /// What `/status` says of the agent's spare session.
    pub(crate) async fn spare_text(&self) -> String {
        let generation = self.host.running().await.map(|i| i.generation);
        self.host.spare.describe(generation).await
    }

    /// Reopens the remembered session, where the agent can: `session/resume` reopens without
    /// replaying the history, else `session/load`, whose replay is dropped.
    async fn reopen(&mut self, instance: &Arc<Instance>, rx: &mut EventRx) -> bool {
        let Some(id) = self.stored.clone() else {
            return false;
        };
        let resume = instance.caps.session_capability("resume");
        if !resume && !instance.caps.load_session {
            return false;
        }
        let cwd = self.host.cwd.clone();
        self.host
            .add_route(&id, instance.generation, self.events.clone());
        let reopening = async {
            if resume {
                instance.client.resume_session(&id, &cwd).await
            } else {
                instance.client.load_session(&id, &cwd).await
            }
        };
        let reopened = drain_while(rx, reopening).await;
        match reopened {
            Ok(resp) => {
                // The agent replays the session's history before answering; drop it.
                drain_while(rx, instance.fence()).await;
                while rx.try_recv().is_ok() {}
                self.current = Some(Session::new(id, instance, resp.models));
                true
            }
            Err(e) => {
                self.host.remove_route(&id);
                tracing::warn!(error = %e, resume, "reopening the session failed; starting a fresh session");
                false
            }
        }
    }

    /// Takes the agent of the lane's channel, when some channel changed its agent since the
    /// lane last looked (`epoch`, and once at the start): a session on the old agent is closed
    /// there and forgotten, and the next turn opens one on the new agent. Returns whether the
    /// lane moved to another agent.
    pub(crate) async fn follow(&mut self, hosts: &Hosts, epoch: u64) -> bool {
        if epoch == self.epoch {
            return false;
        }
        self.epoch = epoch;
        let agent = match self.store.get_channel(self.lane.row_id()).await {
            Ok(Some(row)) => row.agent,
            Ok(None) => return false,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the lane's agent");
                return false;
            }
        };
        let host = hosts.host(agent.as_deref()).clone();
        if Arc::ptr_eq(&host, &self.host) {
            return false;
        }
        self.release(true).await;
        self.stored = None;
        self.host = host;
        true
    }

    /// Forgets the session (`/new`): closed on the agent, and no longer remembered.
    pub(crate) async fn forget(&mut self) {
        self.release(true).await;
        self.set_stored(None).await;
    }

    /// Stops routing the session's events; `close` also ends it on the agent (`session/close`,
    /// where advertised), when the process that holds it still runs.
    pub(crate) async fn release(&mut self, close: bool) {
        let Some(session) = self.current.take() else {
            return;
        };
        self.host.remove_route(&session.id);
        if !close {
            return;
        }
        if let Some(instance) = self.host.running().await {
            if instance.generation == session.generation {
                instance.close_session(&session.id).await;
            }
        }
    }

    /// Switches the session's model (`session/set_model`, or `session/set_config_option` where
    /// the agent offers its models as a config option); returns what the lane says about
    /// it: `Ok` once switched, `Err` when it was not.
    pub(crate) async fn set_model(&mut self, model_id: &str) -> Result<String, String> {
        let Some(session) = self.current.as_mut() else {
            return Err("The agent is not running; send a message first.".into());
        };
        let instance = match self.host.instance().await {
            Ok(i) if i.generation == session.generation => i,
            _ => return Err("The agent restarted; try again.".into()),
        };
        // Bounded: during a turn the lane reads no events while it waits here, and the agent
        // may be waiting for room to send them.
        let switched = tokio::time::timeout(
            SET_MODEL_TIMEOUT,
            instance
                .client
                .switch_model(&session.id, session.models.as_ref(), model_id),
        );
        match switched.await {
            Err(_) => Err("The agent did not answer in time; the model was not switched.".into()),
            Ok(Ok(())) => {
                if let Some(m) = session.models.as_mut() {
                    m.current_model_id = model_id.to_owned();
                }
                Ok(format!("Model switched to {model_id}."))
            }
            Ok(Err(e)) => Err(format!(
                "Could not switch the model: {}",
                crate::text::tail(e.to_string().trim(), 300)
            )),
        }
    }

    /// How many sessions the lane's agent holds (`session/list`), where it offers that and runs.
    pub(crate) async fn agent_sessions(&self) -> Option<usize> {
        let instance = self.host.running().await?;
        if !instance.caps.session_capability("list") {
            return None;
        }
        let listed = tokio::time::timeout(
            std::time::Duration::from_secs(3),
            instance.client.list_sessions(),
        )
        .await;
        match listed {
            Ok(Ok(list)) => Some(list.sessions.len()),
            Ok(Err(e)) => {
                tracing::info!(error = %e, "session/list failed");
                None
            }
            Err(_) => None,
        }
    }

    async fn set_stored(&mut self, id: Option<String>) {
        self.stored = id.clone();
        let lane = self.lane.clone();
        let result = self
            .store
            .write(move |tx| {
                tx.set_lane_session(&lane.chat_id, lane.thread_id.as_deref(), id.as_deref())
            })
            .await;
        if let Err(e) = result {
            tracing::warn!(error = %e, "could not store the lane's session id");
        }
    }
}

/// Waits for `fut` while dropping what arrives on `rx` meanwhile (a replayed history), so that a
/// full event queue never holds up the answer `fut` waits for.
async fn drain_while<T>(rx: &mut EventRx, fut: impl std::future::Future<Output = T>) -> T {
    wait_taking(rx, fut, drop).await
}

/// Waits for `fut`, handing what arrives on `rx` meanwhile to `take`.
async fn wait_taking<T>(
    rx: &mut EventRx,
    fut: impl std::future::Future<Output = T>,
    mut take: impl FnMut(LaneEvent),
) -> T {
    tokio::pin!(fut);
    loop {
        tokio::select! {
            out = &mut fut => return out,
            Some(ev) = rx.recv() => take(ev),
        }
    }
}

/// Events of the lane's own session that came while it waited on the agent and still matter
/// when it is idle: the newest title and an exit. Other updates are dropped and questions
/// cancelled, as while the lane is idle.
#[derive(Default)]
pub(crate) struct Late {
    title: Option<LaneEvent>,
    exited: Option<LaneEvent>,
}

impl Late {
    fn keep(&mut self, ev: LaneEvent) {
        match ev {
            LaneEvent::Update(SessionUpdate::SessionInfoUpdate(ref info))
                if info.title.is_some() =>
            {
                self.title = Some(ev);
            }
            LaneEvent::Exited { .. } => self.exited = Some(ev),
            LaneEvent::Permission(_, responder) => responder.cancel(),
            LaneEvent::Elicitation(_, responder) => responder.cancel(),
            LaneEvent::Update(_) => {}
        }
    }

    /// The kept events, in the order the lane takes them.
    pub(crate) fn into_events(self) -> impl Iterator<Item = LaneEvent> {
        self.title.into_iter().chain(self.exited)
    }
}

/// The picker group (provider) of an agent's model id and the id within it:
/// `openrouter:openai/gpt-5.4` → (`openrouter`, `openai/gpt-5.4`); an id without a provider is in
/// the group `default`.
pub(crate) fn provider_of(model_id: &str) -> (&str, &str) {
    model_id.split_once(':').unwrap_or(("default", model_id))
}

/// The model of `ids` (the agent's model ids) that `wanted` names, in the first of these forms
/// that matches: the agent's id itself (`demo:verbose`); `provider/model` as the seed's catalog
/// and model picker have it, the provider being the picker's group (`demo/verbose`, and
/// `demo/demo:verbose` for the id the picker lists); the model without its provider (`verbose`),
/// or without its vendor either (`gpt-5.4`).
pub(crate) fn find_model<'a>(
    ids: impl Iterator<Item = &'a str> + Clone,
    wanted: &str,
) -> Option<String> {
    let wanted = wanted.trim();
    let by_group = |provider: &str, model: &str| {
        ids.clone().find(|id| {
            let (p, m) = provider_of(id);
            p == provider && (m == model || *id == model)
        })
    };
    ids.clone()
        .find(|id| *id == wanted)
        .or_else(|| wanted.split_once('/').and_then(|(p, m)| by_group(p, m)))
        .or_else(|| ids.clone().find(|id| provider_of(id).1 == wanted))
        .or_else(|| {
            ids.clone()
                .find(|id| crate::agent::turn::bare_model(id) == wanted)
        })
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::find_model;

    #[test]
    fn a_model_is_found_by_its_id_provider_and_model_or_bare_name() {
        let ids = [
            "demo:echo",
            "demo:verbose",
            "openrouter:openai/gpt-5.4",
            "plain",
        ];
        let find = |w: &str| find_model(ids.iter().copied(), w);
        for (wanted, id) in [
            ("demo:verbose", "demo:verbose"),
            ("demo/verbose", "demo:verbose"),
            ("demo/demo:verbose", "demo:verbose"),
            ("openrouter/openai/gpt-5.4", "openrouter:openai/gpt-5.4"),
            ("openai/gpt-5.4", "openrouter:openai/gpt-5.4"),
            ("gpt-5.4", "openrouter:openai/gpt-5.4"),
            ("verbose", "demo:verbose"),
            ("default/plain", "plain"),
        ] {
            assert_eq!(find(wanted).as_deref(), Some(id), "{wanted}");
        }
        assert_eq!(
            find("other/verbose"),
            None,
            "the provider must be the model's group"
        );
        assert_eq!(find("nope"), None);
    }
}
