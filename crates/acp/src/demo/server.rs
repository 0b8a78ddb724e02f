//! The demo agent's side of the protocol: requests and notifications from the client, the
//! sessions in memory, and the start and end of every prompt turn.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::catalog::{available_commands, models_state, modes_state, MODELS, MODES};
use super::fixtures::{BUSY, DEFAULT_MODEL};
use crate::rpc::{Connection, Responder, INVALID_PARAMS, METHOD_NOT_FOUND};
use crate::types::*;

/// Context window the demo reports.
const CONTEXT_SIZE: u64 = 65536;

/// The demo agent on one connection.
pub(super) struct Demo {
    /// The client.
    pub(super) conn: Connection,
    state: Mutex<State>,
    /// Updates that found the connection's outgoing queue full, oldest first: sent before
    /// anything else, so that no update is lost and none overtakes another (see [`Demo::drain`]).
    backlog: Mutex<VecDeque<Value>>,
    /// Held while the backlog is being sent, so that two senders never reorder it.
    draining: tokio::sync::Mutex<()>,
}

/// Everything the demo remembers.
pub(super) struct State {
    /// Makes session ids unique across restarts of the demo.
    id_prefix: String,
    next_id: u64,
    sessions: HashMap<String, Session>,
    /// Sessions reopened with `session/resume` and with `session/load`, since the start.
    resumed: u64,
    loaded: u64,
}

/// One session.
struct Session {
    model_id: String,
    mode_id: String,
    /// `(user text, answer text)` per finished turn, for `session/load`.
    history: Vec<(String, String)>,
    /// Context tokens reported in `usage_update`.
    used: u64,
    /// Set while a turn runs; sending `true` cancels it.
    running: Option<watch::Sender<bool>>,
    /// The working directory the client gave for the session.
    cwd: String,
    /// Set by the `wedge` keyword: like Hermes after a cancel during a tool, every later prompt
    /// is answered "Queued for the next turn." and never runs.
    wedged: bool,
}

impl Session {
    /// A session with the default model and mode and no history.
    fn new() -> Session {
        Session {
            model_id: DEFAULT_MODEL.into(),
            mode_id: MODES[0].0.into(),
            history: Vec::new(),
            used: 1000,
            running: None,
            cwd: String::new(),
            wedged: false,
        }
    }
}

impl State {
    /// Empty memory with a fresh id prefix.
    fn new() -> State {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let seed = (nanos as u64) ^ u64::from(std::process::id()).rotate_left(32);
        State {
            id_prefix: format!("{:08x}", seed as u32),
            next_id: 1,
            sessions: HashMap::new(),
            resumed: 0,
            loaded: 0,
        }
    }

    /// What the `sessions` keyword answers: open sessions, and how many were resumed or loaded.
    pub(super) fn sessions_summary(&self) -> String {
        format!(
            "Open sessions: {}, resumed: {}, loaded: {}",
            self.sessions.len(),
            self.resumed,
            self.loaded
        )
    }

    /// The user text of each finished turn of a session, oldest first.
    pub(super) fn history_of(&self, session_id: &str) -> Vec<String> {
        self.sessions
            .get(session_id)
            .map(|s| s.history.iter().map(|(user, _)| user.clone()).collect())
            .unwrap_or_default()
    }

    /// A new session or tool call id, unique across restarts of the demo.
    pub(super) fn fresh_id(&mut self, kind: &str) -> String {
        let id = format!("demo-{kind}-{}-{}", self.id_prefix, self.next_id);
        self.next_id += 1;
        id
    }
}

/// With `DEMO_PROMPT_LOG=<file>` in the environment, every prompt the demo starts a turn for is
/// appended to that file as one JSON string per line (so that tests count the turns an agent
/// really ran). Written before the turn plays, with `O_APPEND`, one write per line.
pub(super) fn record_prompt(text: &str) {
    let Some(path) = std::env::var_os("DEMO_PROMPT_LOG") else {
        return;
    };
    let mut line = serde_json::to_string(text).unwrap_or_default();
    line.push('\n');
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes()));
    if let Err(e) = written {
        eprintln!("demo agent: could not record a prompt: {e}");
    }
}

/// Capabilities besides `loadSession` and prompts: `sessionCapabilities.close` and `list`
/// always, `fork` unless `DEMO_FORK=0` is in the environment, `resume` with `DEMO_RESUME=1`, and
/// one from a future ACP version that clients must ignore.
fn extra_capabilities() -> serde_json::Map<String, Value> {
    let mut session = serde_json::Map::new();
    session.insert("close".into(), serde_json::json!({}));
    session.insert("list".into(), serde_json::json!({}));
    if !std::env::var("DEMO_FORK").is_ok_and(|v| v == "0") {
        session.insert("fork".into(), serde_json::json!({}));
    }
    if std::env::var("DEMO_RESUME").is_ok_and(|v| v == "1") {
        session.insert("resume".into(), serde_json::json!({}));
    }
    let mut other = serde_json::Map::new();
    other.insert("sessionCapabilities".into(), Value::Object(session));
    other.insert(
        "futureCapability".into(),
        serde_json::json!({"since": "a newer ACP version", "enabled": true}),
    );
    other
}

/// Decodes request params; the error is the message of an `INVALID_PARAMS` answer.
fn parse<T: DeserializeOwned>(params: Value) -> Result<T, String> {
    serde_json::from_value(params).map_err(|e| format!("invalid params: {e}"))
}

/// Encodes a message for the wire.
pub(super) fn to_json<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

impl Demo {
    /// A demo agent that talks to the client over `conn`.
    pub(super) fn new(conn: Connection) -> Demo {
        Demo {
            conn,
            state: Mutex::new(State::new()),
            backlog: Mutex::default(),
            draining: tokio::sync::Mutex::new(()),
        }
    }

    /// The demo's memory; a panic elsewhere does not lock it for good.
    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The connection to the client.
    pub(super) fn conn(&self) -> &Connection {
        &self.conn
    }

    /// Sends a `session/update` notification.
    pub(super) fn send_update(&self, session_id: &str, update: SessionUpdate) {
        let notification = SessionNotification {
            session_id: session_id.into(),
            update,
        };
        self.send_params(to_json(&notification));
    }

    /// Sends a `session/update` whose update is raw JSON (fields no type of this crate has).
    pub(super) fn send_raw_update(&self, session_id: &str, update: Value) {
        self.send_params(serde_json::json!({"sessionId": session_id, "update": update}));
    }

    /// Sends a `session/update` at once, or keeps it in the backlog when the outgoing queue is
    /// full (many turns at once outrun a client that reads slower) or older updates wait there.
    /// A closed connection means the client is gone; the turn simply runs out.
    fn send_params(&self, params: Value) {
        let mut backlog = self.backlog.lock().unwrap_or_else(|e| e.into_inner());
        if backlog.is_empty() {
            match self.conn.notify(method::SESSION_UPDATE, params.clone()) {
                Err(crate::AcpError::Congested) => {}
                _ => return,
            }
        }
        backlog.push_back(params);
    }

    /// Whether updates wait in the backlog.
    fn backlogged(&self) -> bool {
        !self
            .backlog
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// Sends the backlog, in order, waiting for room in the outgoing queue. Every answer to a
    /// request waits for this first: an answer never overtakes the updates sent before it.
    pub(super) async fn drain(&self) {
        let _one = self.draining.lock().await;
        loop {
            // The update leaves the backlog only once it is queued, so that a new one sent
            // meanwhile goes behind it rather than before.
            let front = self
                .backlog
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .front()
                .cloned();
            let Some(params) = front else { break };
            if self
                .conn
                .notify_paced(method::SESSION_UPDATE, params)
                .await
                .is_err()
            {
                self.backlog
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clear();
                break;
            }
            self.backlog
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pop_front();
        }
    }

    /// Acts on a notification from the client: only `session/cancel` means something.
    pub(super) fn handle_notification(&self, method: &str, params: Value) {
        if method != method::SESSION_CANCEL {
            tracing::debug!(method, "demo agent ignores notification");
            return;
        }
        let Ok(cancel) = parse::<CancelNotification>(params) else {
            return;
        };
        if let Some(running) = self
            .state()
            .sessions
            .get(&cancel.session_id)
            .and_then(|s| s.running.as_ref())
        {
            running.send_replace(true);
        }
    }

    /// Answers a request from the client, except a prompt the session takes: that is returned,
    /// for the caller to play as a turn. Answers that wait for a backlog wait in `turns`.
    pub(super) fn handle_request(
        self: &Arc<Self>,
        method: &str,
        params: Value,
        responder: Responder,
        turns: &mut JoinSet<()>,
    ) -> Option<Prompt> {
        let result = match method {
            method::INITIALIZE => self.initialize(),
            method::SESSION_NEW => self.new_session(params),
            method::SESSION_LOAD => self.load_session(params),
            method::SESSION_RESUME => self.resume_session(params),
            method::SESSION_CLOSE => self.close_session(params),
            method::SESSION_FORK => self.fork_session(params),
            method::SESSION_LIST => self.list_sessions(),
            method::SESSION_SET_MODEL => self.set_model(params),
            method::SESSION_SET_MODE => self.set_mode(params),
            method::SESSION_PROMPT => match self.start_turn(params) {
                Ok((request, cancel)) => {
                    return Some(Prompt {
                        request,
                        cancel,
                        responder,
                    })
                }
                Err(error) => Err(error),
            },
            _ => {
                responder.error(METHOD_NOT_FOUND, "Method not found");
                return None;
            }
        };
        let answer = move |demo: &Demo| match result {
            Ok((result, after)) => {
                responder.respond(result);
                // Like Hermes, session-level updates follow the answer.
                if let Some((session_id, updates)) = after {
                    for update in updates {
                        demo.send_update(&session_id, update);
                    }
                }
            }
            Err((code, message)) => responder.error(code, message),
        };
        // A `session/load` replays the history before its answer: when that filled the
        // outgoing queue, the answer waits for the replay.
        if self.backlogged() {
            let demo = self.clone();
            turns.spawn(async move {
                demo.drain().await;
                answer(&demo);
            });
        } else {
            answer(self);
        }
        None
    }

    /// `initialize`: who the demo is and what it supports (audio in prompts with `DEMO_AUDIO=1`
    /// in the environment).
    fn initialize(&self) -> Handled {
        let response = InitializeResponse {
            protocol_version: PROTOCOL_VERSION,
            agent_capabilities: AgentCapabilities {
                load_session: true,
                prompt_capabilities: PromptCapabilities {
                    image: true,
                    audio: std::env::var("DEMO_AUDIO").is_ok_and(|v| v == "1"),
                    embedded_context: true,
                },
                other: extra_capabilities(),
            },
            agent_info: Some(Implementation {
                name: "iris-demo-agent".into(),
                version: env!("CARGO_PKG_VERSION").into(),
                title: Some("Iris demo agent (scripted, no model)".into()),
            }),
            auth_methods: Vec::new(),
        };
        Ok((to_json(&response), None))
    }

    /// `session/new`: a fresh session, followed by the command list.
    fn new_session(&self, params: Value) -> Handled {
        let request = parse::<NewSessionRequest>(params).map_err(|e| (INVALID_PARAMS, e))?;
        let mut state = self.state();
        let session_id = state.fresh_id("session");
        let session = Session {
            cwd: request.cwd,
            ..Session::new()
        };
        state.sessions.insert(session_id.clone(), session);
        let response = NewSessionResponse {
            session_id: session_id.clone(),
            models: Some(models_state(DEFAULT_MODEL)),
            modes: Some(modes_state(MODES[0].0)),
            config_options: Vec::new(),
        };
        Ok((
            to_json(&response),
            Some((session_id, vec![available_commands()])),
        ))
    }

    /// `session/resume` (advertised with `DEMO_RESUME=1`): like `session/load` without the
    /// replay.
    fn resume_session(&self, params: Value) -> Handled {
        let request: LoadSessionRequest = parse(params).map_err(|e| (INVALID_PARAMS, e))?;
        let id = request.session_id;
        let mut state = self.state();
        state.resumed += 1;
        let session = state
            .sessions
            .entry(id.clone())
            .or_insert_with(Session::new);
        session.cwd = request.cwd;
        let response = LoadSessionResponse {
            models: Some(models_state(&session.model_id)),
            modes: Some(modes_state(&session.mode_id)),
            config_options: Vec::new(),
        };
        Ok((to_json(&response), Some((id, vec![available_commands()]))))
    }

    /// `session/fork`: a new session with a copy of the history, model and mode of an open one
    /// (an unknown id is an error: there is nothing to copy).
    fn fork_session(&self, params: Value) -> Handled {
        let request: LoadSessionRequest = parse(params).map_err(|e| (INVALID_PARAMS, e))?;
        let mut state = self.state();
        let Some(from) = state.sessions.get(&request.session_id) else {
            return Err((
                INVALID_PARAMS,
                format!("unknown session {}", request.session_id),
            ));
        };
        let session = Session {
            model_id: from.model_id.clone(),
            mode_id: from.mode_id.clone(),
            history: from.history.clone(),
            used: from.used,
            cwd: request.cwd,
            ..Session::new()
        };
        let session_id = state.fresh_id("session");
        let response = NewSessionResponse {
            session_id: session_id.clone(),
            models: Some(models_state(&session.model_id)),
            modes: Some(modes_state(&session.mode_id)),
            config_options: Vec::new(),
        };
        state.sessions.insert(session_id.clone(), session);
        Ok((
            to_json(&response),
            Some((session_id, vec![available_commands()])),
        ))
    }

    /// `session/list`: every open session with its working directory.
    fn list_sessions(&self) -> Handled {
        let state = self.state();
        let mut sessions: Vec<Value> = state
            .sessions
            .iter()
            .map(|(id, s)| serde_json::json!({"sessionId": id, "cwd": s.cwd}))
            .collect();
        sessions.sort_by(|a, b| a["sessionId"].as_str().cmp(&b["sessionId"].as_str()));
        Ok((serde_json::json!({"sessions": sessions}), None))
    }

    /// `session/close`: forgets the session (a running turn is cancelled).
    fn close_session(&self, params: Value) -> Handled {
        let request: CloseSessionRequest = parse(params).map_err(|e| (INVALID_PARAMS, e))?;
        let removed = self.state().sessions.remove(&request.session_id);
        if let Some(running) = removed.and_then(|s| s.running) {
            let _ = running.send(true);
        }
        Ok((Value::Null, None))
    }

    /// `session/load`: replays the history of the session (a new one for an unknown id), then
    /// answers and sends the command list.
    fn load_session(&self, params: Value) -> Handled {
        let request: LoadSessionRequest = parse(params).map_err(|e| (INVALID_PARAMS, e))?;
        let id = request.session_id;
        let (replay, response) = {
            let mut state = self.state();
            state.loaded += 1;
            let session = state.sessions.entry(id.clone()).or_insert_with(|| {
                tracing::debug!(session = %id, "demo agent loads an unknown session as empty");
                Session::new()
            });
            session.cwd = request.cwd.clone();
            let response = LoadSessionResponse {
                models: Some(models_state(&session.model_id)),
                modes: Some(modes_state(&session.mode_id)),
                config_options: Vec::new(),
            };
            (session.history.clone(), response)
        };
        for (user, answer) in replay {
            let chunk = |text: String| ContentChunk {
                content: ContentBlock::text(text),
            };
            self.send_update(&id, SessionUpdate::UserMessageChunk(chunk(user)));
            self.send_update(&id, SessionUpdate::AgentMessageChunk(chunk(answer)));
        }
        Ok((to_json(&response), Some((id, vec![available_commands()]))))
    }

    /// `session/set_model`.
    fn set_model(&self, params: Value) -> Handled {
        let request: SetSessionModelRequest = parse(params).map_err(|e| (INVALID_PARAMS, e))?;
        if !MODELS.iter().any(|(id, _, _)| *id == request.model_id) {
            return Err((
                INVALID_PARAMS,
                format!("unknown model {}", request.model_id),
            ));
        }
        self.with_session(&request.session_id, |session| {
            session.model_id = request.model_id.clone()
        })?;
        Ok((json!({}), None))
    }

    /// `session/set_mode`, followed by a `current_mode_update`.
    fn set_mode(&self, params: Value) -> Handled {
        let request: SetSessionModeRequest = parse(params).map_err(|e| (INVALID_PARAMS, e))?;
        if !MODES.iter().any(|(id, _)| *id == request.mode_id) {
            return Err((INVALID_PARAMS, format!("unknown mode {}", request.mode_id)));
        }
        self.with_session(&request.session_id, |session| {
            session.mode_id = request.mode_id.clone()
        })?;
        let update = SessionUpdate::CurrentModeUpdate(CurrentModeUpdate {
            current_mode_id: request.mode_id,
        });
        Ok((json!({}), Some((request.session_id, vec![update]))))
    }

    /// Runs `f` on the session, or fails as an unknown session.
    fn with_session<T>(
        &self,
        session_id: &str,
        f: impl FnOnce(&mut Session) -> T,
    ) -> Result<T, (i64, String)> {
        match self.state().sessions.get_mut(session_id) {
            Some(session) => Ok(f(session)),
            None => Err((INVALID_PARAMS, format!("unknown session {session_id}"))),
        }
    }

    /// Marks the session busy, or refuses the prompt.
    fn start_turn(
        &self,
        params: Value,
    ) -> Result<(PromptRequest, watch::Receiver<bool>), (i64, String)> {
        let request: PromptRequest = parse(params).map_err(|e| (INVALID_PARAMS, e))?;
        self.with_session(&request.session_id, |session| {
            if session.running.is_some() {
                return Err((BUSY, "busy".to_string()));
            }
            let (cancel_tx, cancel_rx) = watch::channel(false);
            session.running = Some(cancel_tx);
            Ok(cancel_rx)
        })?
        .map(|cancel| (request, cancel))
    }

    /// The session's model and working directory, for a turn about to play.
    pub(super) fn model_and_cwd(&self, session_id: &str) -> (String, String) {
        self.with_session(session_id, |s| (s.model_id.clone(), s.cwd.clone()))
            .unwrap_or_default()
    }

    /// Marks the session's turn ended without an answer of its own (the prompt failed).
    pub(super) fn end_turn(&self, session_id: &str) {
        let _ = self.with_session(session_id, |session| session.running = None);
    }

    /// True when the `wedge` keyword wedged the session.
    pub(super) fn is_wedged(&self, session_id: &str) -> bool {
        self.with_session(session_id, |s| s.wedged).unwrap_or(false)
    }

    /// Wedges the session: from now on every prompt is only queued.
    pub(super) fn wedge(&self, session_id: &str) {
        let _ = self.with_session(session_id, |s| s.wedged = true);
    }

    /// Ends a turn that ran to its end or was cancelled: records it in the history, reports
    /// the context usage, and answers the prompt with the token counts.
    pub(super) async fn answer(
        &self,
        session_id: &str,
        text: String,
        said: String,
        stop_reason: StopReason,
        responder: Responder,
    ) {
        let used = self
            .with_session(session_id, |session| {
                session.running = None;
                session.used += 50 + (text.len() + said.len()) as u64 / 4;
                session.history.push((text.clone(), said.clone()));
                session.used
            })
            .unwrap_or_default();
        let usage = UsageUpdate {
            size: Some(CONTEXT_SIZE),
            used: Some(used),
            cost: None,
        };
        self.send_update(session_id, SessionUpdate::UsageUpdate(usage));
        self.drain().await;

        let input_tokens = text.len() as u64 / 4 + 1;
        let output_tokens = said.len() as u64 / 4 + 1;
        let response = PromptResponse {
            stop_reason,
            usage: Some(Usage {
                input_tokens,
                output_tokens,
                total_tokens: input_tokens + output_tokens,
                thought_tokens: Some(0),
                cached_read_tokens: Some(0),
                cached_write_tokens: None,
            }),
        };
        responder.respond(to_json(&response));
    }
}

/// A prompt the session took: played as a turn by [`super::turn::play`].
pub(super) struct Prompt {
    pub(super) request: PromptRequest,
    /// Becomes true when the client cancels the turn.
    pub(super) cancel: watch::Receiver<bool>,
    pub(super) responder: Responder,
}

/// Result of a request handler: the answer and updates to send after it, or an error.
type Handled = Result<(Value, Option<(String, Vec<SessionUpdate>)>), (i64, String)>;
