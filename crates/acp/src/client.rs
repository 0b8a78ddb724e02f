//! A typed ACP client: the methods a client calls on an agent, and the agent's messages decoded
//! into [`AgentEvent`]s. Knows nothing about who consumes them.

use std::path::Path;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::process::{AgentProcess, AgentSpec};
use crate::rpc::{Connection, Incoming, IncomingRx, Responder, INVALID_PARAMS};
use crate::types::*;
use crate::AcpError;

/// Talks ACP to one agent. Cheap to clone; when the agent is a process, the last clone to go
/// kills it.
#[derive(Debug, Clone)]
pub struct AgentClient {
    connection: Connection,
    process: Option<Arc<AgentProcess>>,
}

impl AgentClient {
    /// Spawns the agent process (see [`AgentProcess::spawn`]) and wraps it.
    pub fn spawn(spec: &AgentSpec) -> Result<(AgentClient, AgentEvents), AcpError> {
        let (process, incoming) = AgentProcess::spawn(spec)?;
        let client = AgentClient {
            connection: process.connection().clone(),
            process: Some(Arc::new(process)),
        };
        Ok((client, AgentEvents::new(incoming)))
    }

    /// Speaks ACP over an arbitrary transport (tests run the demo agent over `tokio::io::duplex`).
    pub fn over<R, W>(reader: R, writer: W) -> (AgentClient, AgentEvents)
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (connection, incoming) = Connection::new(reader, writer);
        (
            AgentClient {
                connection,
                process: None,
            },
            AgentEvents::new(incoming),
        )
    }

    /// The underlying JSON-RPC connection, for methods this type does not wrap.
    pub fn connection(&self) -> &Connection {
        &self.connection
    }

    /// The agent process, when there is one.
    pub fn process(&self) -> Option<&AgentProcess> {
        self.process.as_deref()
    }

    /// `initialize` as Iris does it: protocol 1, no client file system or terminal, form
    /// elicitation (`elicitation: {form: {}}`; agents that do not know it ignore it).
    pub async fn initialize(&self) -> Result<InitializeResponse, AcpError> {
        self.initialize_with(&InitializeRequest {
            protocol_version: PROTOCOL_VERSION,
            client_capabilities: ClientCapabilities {
                elicitation: Some(serde_json::json!({ "form": {} })),
                ..ClientCapabilities::default()
            },
            client_info: Some(Implementation {
                name: "iris-gateway".into(),
                version: env!("CARGO_PKG_VERSION").into(),
                title: Some("Iris Gateway".into()),
            }),
        })
        .await
    }

    /// `initialize` with explicit params.
    pub async fn initialize_with(
        &self,
        request: &InitializeRequest,
    ) -> Result<InitializeResponse, AcpError> {
        self.call(method::INITIALIZE, request).await
    }

    /// `session/new` in `cwd`, without MCP servers.
    pub async fn new_session(&self, cwd: &Path) -> Result<NewSessionResponse, AcpError> {
        let request = NewSessionRequest {
            cwd: cwd.to_string_lossy().into_owned(),
            mcp_servers: Vec::new(),
        };
        let response: NewSessionResponse = self.call(method::SESSION_NEW, &request).await?;
        Ok(response.with_config_models())
    }

    /// `session/load`. The agent replays the session's history as updates before answering;
    /// they arrive on [`AgentEvents`] like live ones.
    pub async fn load_session(
        &self,
        session_id: &str,
        cwd: &Path,
    ) -> Result<LoadSessionResponse, AcpError> {
        self.reopen(method::SESSION_LOAD, session_id, cwd).await
    }

    /// `session/prompt`: runs one turn and returns when it is over. Progress arrives meanwhile as
    /// [`AgentEvent::Update`]s. Never send a second prompt to a session whose turn is running.
    pub async fn prompt(
        &self,
        session_id: &str,
        prompt: Vec<ContentBlock>,
    ) -> Result<PromptResponse, AcpError> {
        let request = PromptRequest {
            session_id: session_id.into(),
            prompt,
        };
        self.call(method::SESSION_PROMPT, &request).await
    }

    /// `session/cancel`: asks the agent to end the running turn (the prompt then answers
    /// `cancelled`). Permission requests still pending must be answered by the caller.
    pub fn cancel(&self, session_id: &str) -> Result<(), AcpError> {
        let params = to_params(&CancelNotification {
            session_id: session_id.into(),
        });
        self.connection.notify(method::SESSION_CANCEL, params)
    }

    /// `session/resume`: reopens a session without replaying its history (only where the agent
    /// advertises `sessionCapabilities.resume`). The answer has the shape of `session/load`'s.
    pub async fn resume_session(
        &self,
        session_id: &str,
        cwd: &Path,
    ) -> Result<LoadSessionResponse, AcpError> {
        self.reopen(method::SESSION_RESUME, session_id, cwd).await
    }

    /// `session/load` or `session/resume`: same request, same answer. Some agents answer
    /// `null`; that is a success without details.
    async fn reopen(
        &self,
        method: &'static str,
        session_id: &str,
        cwd: &Path,
    ) -> Result<LoadSessionResponse, AcpError> {
        let request = LoadSessionRequest {
            session_id: session_id.into(),
            cwd: cwd.to_string_lossy().into_owned(),
            mcp_servers: Vec::new(),
        };
        let value = self.connection.request(method, to_params(&request)).await?;
        if value.is_null() {
            return Ok(LoadSessionResponse::default());
        }
        decode(method, value).map(LoadSessionResponse::with_config_models)
    }

    /// `session/fork`: a new session holding a copy of `session_id`'s history so far (only where
    /// the agent advertises `sessionCapabilities.fork`).
    pub async fn fork_session(
        &self,
        session_id: &str,
        cwd: &Path,
    ) -> Result<NewSessionResponse, AcpError> {
        let request = LoadSessionRequest {
            session_id: session_id.into(),
            cwd: cwd.to_string_lossy().into_owned(),
            mcp_servers: Vec::new(),
        };
        let response: NewSessionResponse = self.call(method::SESSION_FORK, &request).await?;
        Ok(response.with_config_models())
    }

    /// `session/list`: the sessions the agent holds (only where it advertises
    /// `sessionCapabilities.list`); the first page is enough for a count.
    pub async fn list_sessions(&self) -> Result<ListSessionsResponse, AcpError> {
        let value = self
            .connection
            .request(method::SESSION_LIST, serde_json::json!({}))
            .await?;
        decode(method::SESSION_LIST, value)
    }

    /// `session/close`: ends a session the client no longer needs (only where the agent
    /// advertises `sessionCapabilities.close`).
    pub async fn close_session(&self, session_id: &str) -> Result<(), AcpError> {
        let params = to_params(&CloseSessionRequest {
            session_id: session_id.into(),
        });
        self.connection
            .request(method::SESSION_CLOSE, params)
            .await
            .map(drop)
    }

    /// `session/set_model`.
    pub async fn set_model(&self, session_id: &str, model_id: &str) -> Result<(), AcpError> {
        let request = SetSessionModelRequest {
            session_id: session_id.into(),
            model_id: model_id.into(),
        };
        self.connection
            .request(method::SESSION_SET_MODEL, to_params(&request))
            .await
            .map(drop)
    }

    /// Switches the session's model to one of `models`: `session/set_config_option` where they
    /// came from a config option ([`SessionModelState::config_id`]), else `session/set_model`.
    pub async fn switch_model(
        &self,
        session_id: &str,
        models: Option<&SessionModelState>,
        model_id: &str,
    ) -> Result<(), AcpError> {
        let Some(config_id) = models.and_then(|m| m.config_id.as_deref()) else {
            return self.set_model(session_id, model_id).await;
        };
        let request = SetSessionConfigOptionRequest {
            session_id: session_id.into(),
            config_id: config_id.into(),
            value: model_id.into(),
        };
        self.connection
            .request(method::SESSION_SET_CONFIG_OPTION, to_params(&request))
            .await
            .map(drop)
    }

    /// `session/set_mode`.
    pub async fn set_mode(&self, session_id: &str, mode_id: &str) -> Result<(), AcpError> {
        let request = SetSessionModeRequest {
            session_id: session_id.into(),
            mode_id: mode_id.into(),
        };
        self.connection
            .request(method::SESSION_SET_MODE, to_params(&request))
            .await
            .map(drop)
    }

    async fn call<P: Serialize, R: DeserializeOwned>(
        &self,
        method: &str,
        params: &P,
    ) -> Result<R, AcpError> {
        let value = self.connection.request(method, to_params(params)).await?;
        decode(method, value)
    }
}

fn to_params<P: Serialize>(params: &P) -> Value {
    // Our request types are plain structs of strings and values; they always serialize.
    serde_json::to_value(params).unwrap_or(Value::Null)
}

fn decode<R: DeserializeOwned>(method: &str, value: Value) -> Result<R, AcpError> {
    serde_json::from_value(value).map_err(|source| AcpError::Decode {
        method: method.into(),
        source,
    })
}

/// A message from the agent, decoded.
#[derive(Debug)]
pub enum AgentEvent {
    /// A `session/update`.
    Update(SessionNotification),
    /// A `session/request_permission` to put to the user.
    Permission {
        /// What the agent asks.
        request: RequestPermissionRequest,
        /// Where the answer goes.
        responder: PermissionResponder,
    },
    /// An `elicitation/create`: a form to put to the user.
    Elicitation {
        /// What the agent asks.
        request: CreateElicitationRequest,
        /// Where the answer goes.
        responder: ElicitationResponder,
    },
    /// Any other request (e.g. `fs/*`, `terminal/*`); answer it, typically with
    /// [`crate::rpc::METHOD_NOT_FOUND`].
    Request {
        /// The method.
        method: String,
        /// Its params.
        params: Value,
        /// Where the answer goes.
        responder: Responder,
    },
    /// Any other notification.
    Notification {
        /// The method.
        method: String,
        /// Its params.
        params: Value,
    },
}

impl AgentEvent {
    /// Decodes a raw incoming message. A malformed permission request is answered with an
    /// invalid-params error here, since it cannot be shown to anyone; `None` is returned then.
    pub fn from_incoming(incoming: Incoming) -> Option<AgentEvent> {
        match incoming {
            Incoming::Notification { method, params } if method == method::SESSION_UPDATE => {
                match SessionNotification::deserialize(&params) {
                    Ok(update) => Some(AgentEvent::Update(update)),
                    Err(error) => {
                        tracing::warn!(%error, "session/update without a session id; passed on raw");
                        Some(AgentEvent::Notification { method, params })
                    }
                }
            }
            Incoming::Notification { method, params } => {
                Some(AgentEvent::Notification { method, params })
            }
            Incoming::Request {
                method,
                params,
                responder,
                ..
            } if method == method::SESSION_REQUEST_PERMISSION => {
                match serde_json::from_value::<RequestPermissionRequest>(params) {
                    Ok(request) => Some(AgentEvent::Permission {
                        request,
                        responder: PermissionResponder {
                            responder: Some(responder),
                        },
                    }),
                    Err(error) => {
                        tracing::warn!(%error, "malformed permission request");
                        responder.error(INVALID_PARAMS, format!("invalid params: {error}"));
                        None
                    }
                }
            }
            Incoming::Request {
                method,
                params,
                responder,
                ..
            } if method == method::ELICITATION_CREATE => {
                match serde_json::from_value::<CreateElicitationRequest>(params) {
                    Ok(request) => Some(AgentEvent::Elicitation {
                        request,
                        responder: ElicitationResponder {
                            responder: Some(responder),
                        },
                    }),
                    Err(error) => {
                        tracing::warn!(%error, "malformed elicitation request");
                        responder.error(INVALID_PARAMS, format!("invalid params: {error}"));
                        None
                    }
                }
            }
            Incoming::Request {
                method,
                params,
                responder,
                ..
            } => Some(AgentEvent::Request {
                method,
                params,
                responder,
            }),
        }
    }
}

/// Answers a permission request once. Dropped unanswered, it answers `cancelled`, which agents
/// treat as a refusal.
#[derive(Debug)]
pub struct PermissionResponder {
    responder: Option<Responder>,
}

impl PermissionResponder {
    /// Answers with the option the user picked.
    pub fn select(mut self, option_id: &str) {
        self.send(RequestPermissionResponse::selected(option_id));
    }

    /// Answers `cancelled` (the turn was cancelled, or nobody can decide).
    pub fn cancel(mut self) {
        self.send(RequestPermissionResponse::cancelled());
    }

    fn send(&mut self, response: RequestPermissionResponse) {
        if let Some(responder) = self.responder.take() {
            responder.respond(to_params(&response));
        }
    }
}

impl Drop for PermissionResponder {
    fn drop(&mut self) {
        self.send(RequestPermissionResponse::cancelled());
    }
}

/// Answers an elicitation once. Dropped unanswered, it answers `cancel`.
#[derive(Debug)]
pub struct ElicitationResponder {
    responder: Option<Responder>,
}

impl ElicitationResponder {
    /// Answers with the filled-in form.
    pub fn accept(mut self, content: serde_json::Map<String, Value>) {
        self.send(CreateElicitationResponse::Accept { content });
    }

    /// Answers `decline` (refused, or a form the client cannot show).
    pub fn decline(mut self) {
        self.send(CreateElicitationResponse::Decline);
    }

    /// Answers `cancel` (the turn was stopped, or nobody answered in time).
    pub fn cancel(mut self) {
        self.send(CreateElicitationResponse::Cancel);
    }

    fn send(&mut self, response: CreateElicitationResponse) {
        if let Some(responder) = self.responder.take() {
            responder.respond(to_params(&response));
        }
    }
}

impl Drop for ElicitationResponder {
    fn drop(&mut self) {
        self.send(CreateElicitationResponse::Cancel);
    }
}

/// The agent's messages, decoded. Ends when the agent's output ends.
#[derive(Debug)]
pub struct AgentEvents {
    incoming: IncomingRx,
}

impl AgentEvents {
    /// Wraps a raw incoming channel.
    pub fn new(incoming: IncomingRx) -> Self {
        AgentEvents { incoming }
    }

    /// The next event; `None` once the connection has closed and everything was received.
    pub async fn recv(&mut self) -> Option<AgentEvent> {
        loop {
            let incoming = self.incoming.recv().await?;
            if let Some(event) = AgentEvent::from_incoming(incoming) {
                return Some(event);
            }
        }
    }

    /// The next event if one is already queued.
    pub fn try_recv(&mut self) -> Option<AgentEvent> {
        loop {
            let incoming = self.incoming.try_recv().ok()?;
            if let Some(event) = AgentEvent::from_incoming(incoming) {
                return Some(event);
            }
        }
    }

    /// The raw channel.
    pub fn into_inner(self) -> IncomingRx {
        self.incoming
    }
}
