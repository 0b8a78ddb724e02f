//! The demo agent: a small, deterministic ACP agent with no model behind it, for the quickstart
//! (`iris-gateway demo-agent`) and for fast tests.
//!
//! Everything it says is scripted. It answers `Echo: <text>` and recognises keywords anywhere in
//! the prompt text (case-insensitive), which make it exercise one part of the protocol each:
//!
//! | keyword | what the turn does |
//! |---|---|
//! | (none) | `Echo: <text>` in a few `agent_message_chunk`s |
//! | `garbage` | first writes a line that is not JSON, then answers normally |
//! | `crash` | one chunk, then exits the whole process with status 3 (never use in-process) |
//! | `hang` | sends nothing and answers only when cancelled |
//! | `freeze` | sends nothing and ignores cancel: a hung agent (the client has to kill it) |
//! | `wedge` | a running `terminal: sleep 30` tool until cancelled; then, like Hermes, the prompt fails with -32603 and the session is wedged: every later prompt is answered "Queued for the next turn." and never runs |
//! | `think` | `agent_thought_chunk`s before the answer |
//! | `plan` | a `plan` update with three entries |
//! | `tool` | "Let me run a command.", a `tool_call` (`terminal: echo hello`, kind `execute`, status `pending`), `tool_call_update`s (`in_progress`, then `completed` with output `hello`), then text after it |
//! | `fail` | a `tool_call` (`terminal: false`) that ends `failed` |
//! | `permission` or `approve` | a `tool_call`, then `session/request_permission` (allow_once / allow_always / reject_once); answers `Permission granted: <optionId>.` or `Permission denied.`; a `cancelled` outcome ends the turn `cancelled` |
//! | `clarify` | a question put as a permission request (see below); answers `You chose <name>.` |
//! | `mkfile` | writes [`DEMO_FILE_NAME`] (a fixed text of [`demo_file_text`]) into the session's working directory and says `MEDIA:<its path>` on a line of its own |
//! | `mkimage` | "Here is an image.", then an `image` content block (a 1×1 PNG, [`DEMO_PNG_BASE64`]) in an `agent_message_chunk` |
//! | `slow` | 20 chunks 50 ms apart; `session/cancel` stops it (`cancelled`, chunks already sent stay sent) |
//! | `title` | a `session_info_update` with title "Demo title", sent just after the prompt's answer |
//! | `silent` | answers exactly `[SILENT] nothing to report` (the marker of a scheduled job with nothing to say) and nothing else; the other keywords are ignored |
//! | `bench <n> [<gap_us>]` | only as the whole prompt: `n` chunks (at most 100,000), each its send time in unix nanoseconds and a space, `gap_us` microseconds apart (default 0), and no echo; the load tool `iris-bench` measures chunk-to-device latency with them |
//!
//! An `image` block is acknowledged as `Received image <mime> (<n> bytes)`, a `resource_link` as
//! `Received file <name>`, an embedded `resource` as `Received resource <uri>`. Prompt text that
//! starts with `/` is a slash command (`/help`, `/tools`, `/model`) answered locally, without the
//! keywords or the echo. Every other turn that is not cut short ends with the echo, then a model
//! note `(model: <id>)` when the model is not the default. Every turn sends a `usage_update`
//! (`size` 65536, growing `used`) before its answer, and answers `{stopReason, usage:
//! {inputTokens, outputTokens, totalTokens, thoughtTokens, cachedReadTokens}}` like Hermes.
//! Several keywords combine, in the order of the table (attachments are acknowledged just before
//! `mkfile`).
//!
//! # Clarifying questions
//!
//! ACP has no request for asking the user a question. The demo asks one as a
//! `session/request_permission` whose `toolCall` has the title `clarify: <question>` and kind
//! `other`, and whose options are the possible answers (`red` "Red", `blue` "Blue"). Clients that
//! know the convention ([`crate::CLARIFY_TITLE_PREFIX`]) show a picker instead of an approval.
//!
//! # Sessions
//!
//! Sessions live in memory. `session/load` replays a known session's history (each user message
//! and the answer to it) before answering; an id the demo does not know, e.g. one issued before a
//! restart, loads as an empty session, so that restored sessions keep working. A second
//! `session/prompt` while a turn runs in the same session is refused with error -32000 "busy".

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::rpc::{Connection, Incoming, Responder, INVALID_PARAMS, METHOD_NOT_FOUND};
use crate::types::*;

/// The model a new session starts with.
pub const DEFAULT_MODEL: &str = "demo:echo";
/// JSON-RPC error code of a prompt sent while the session's turn is still running.
pub const BUSY: i64 = -32000;
/// Context window the demo reports.
const CONTEXT_SIZE: u64 = 65536;
/// The whole answer to a prompt containing `silent`.
pub const SILENT_ANSWER: &str = "[SILENT] nothing to report";
/// The file a `mkfile` turn writes into the session's working directory.
pub const DEMO_FILE_NAME: &str = "iris-demo-file.txt";
/// The image a `mkimage` turn sends: a 1×1 PNG, base64.
pub const DEMO_PNG_BASE64: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

/// The contents of [`DEMO_FILE_NAME`].
pub fn demo_file_text() -> String {
    (1..=200)
        .map(|i| format!("Iris demo file, line {i}\n"))
        .collect()
}

/// Chunks of a `slow` turn and the pause before each.
const SLOW_CHUNKS: usize = 20;
const SLOW_PAUSE: Duration = Duration::from_millis(50);

const MODELS: [(&str, &str, &str); 3] = [
    ("demo:echo", "Demo Echo", "Echoes the prompt"),
    (
        "demo:verbose",
        "Demo Verbose",
        "Echoes the prompt and names itself",
    ),
    (
        "other:mini",
        "Other Mini",
        "A second provider, to show grouping",
    ),
];
const MODES: [(&str, &str); 2] = [("default", "Default"), ("accept_edits", "Accept Edits")];
const COLORS: [(&str, &str); 2] = [("red", "Red"), ("blue", "Blue")];

/// Serves ACP as the demo agent on `input`/`output` until `input` ends.
pub async fn run<R, W>(input: R, output: W) -> io::Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (conn, mut incoming, io) = Connection::build(input, output, None);
    let io = tokio::spawn(io);
    let demo = Arc::new(Demo {
        conn: conn.clone(),
        state: Mutex::new(State::new()),
    });
    let mut turns = JoinSet::new();
    while let Some(message) = incoming.recv().await {
        match message {
            Incoming::Request {
                method,
                params,
                responder,
                ..
            } => demo.handle_request(&method, params, responder, &mut turns),
            Incoming::Notification { method, params } => demo.handle_notification(&method, params),
        }
        while turns.try_join_next().is_some() {}
    }
    // The client closed our input; answers already queued still go out if it reads.
    let _ = conn.flush().await;
    turns.shutdown().await;
    drop(demo);
    drop(conn);
    io.await.unwrap_or_else(|e| Err(io::Error::other(e)))
}

struct Demo {
    conn: Connection,
    state: Mutex<State>,
}

struct State {
    /// Makes session ids unique across restarts of the demo.
    id_prefix: String,
    next_id: u64,
    sessions: HashMap<String, Session>,
}

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
    fn new() -> State {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let seed = (nanos as u64) ^ u64::from(std::process::id()).rotate_left(32);
        State {
            id_prefix: format!("{:08x}", seed as u32),
            next_id: 1,
            sessions: HashMap::new(),
        }
    }

    fn fresh_id(&mut self, kind: &str) -> String {
        let id = format!("demo-{kind}-{}-{}", self.id_prefix, self.next_id);
        self.next_id += 1;
        id
    }
}

fn parse<T: DeserializeOwned>(params: Value) -> Result<T, String> {
    serde_json::from_value(params).map_err(|e| format!("invalid params: {e}"))
}

fn to_json<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn models_state(current: &str) -> SessionModelState {
    SessionModelState {
        available_models: MODELS
            .iter()
            .map(|(id, name, description)| ModelInfo {
                model_id: (*id).into(),
                name: (*name).into(),
                description: Some((*description).into()),
            })
            .collect(),
        current_model_id: current.into(),
    }
}

fn modes_state(current: &str) -> SessionModeState {
    SessionModeState {
        available_modes: MODES
            .iter()
            .map(|(id, name)| SessionMode {
                id: (*id).into(),
                name: (*name).into(),
                description: None,
            })
            .collect(),
        current_mode_id: current.into(),
    }
}

fn available_commands() -> SessionUpdate {
    let command = |name: &str, description: &str, hint: Option<&str>| AvailableCommand {
        name: name.into(),
        description: description.into(),
        input: hint.map(|hint| AvailableCommandInput { hint: hint.into() }),
    };
    SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate {
        available_commands: vec![
            command("help", "List available commands", None),
            command("tools", "List the demo's (simulated) tools", None),
            command("model", "Show the current model", Some("model id to show")),
        ],
    })
}

impl Demo {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn send_update(&self, session_id: &str, update: SessionUpdate) {
        let notification = SessionNotification {
            session_id: session_id.into(),
            update,
        };
        // A closed connection means the client is gone; the turn simply runs out.
        let _ = self
            .conn
            .notify(method::SESSION_UPDATE, to_json(&notification));
    }

    fn handle_notification(&self, method: &str, params: Value) {
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

    fn handle_request(
        self: &Arc<Self>,
        method: &str,
        params: Value,
        responder: Responder,
        turns: &mut JoinSet<()>,
    ) {
        let result = match method {
            method::INITIALIZE => self.initialize(),
            method::SESSION_NEW => self.new_session(params),
            method::SESSION_LOAD => self.load_session(params),
            method::SESSION_SET_MODEL => self.set_model(params),
            method::SESSION_SET_MODE => self.set_mode(params),
            method::SESSION_PROMPT => match self.start_turn(params) {
                Ok((request, cancel)) => {
                    turns.spawn(self.clone().turn(request, cancel, responder));
                    return;
                }
                Err(error) => Err(error),
            },
            _ => {
                responder.error(METHOD_NOT_FOUND, "Method not found");
                return;
            }
        };
        match result {
            Ok((result, after)) => {
                responder.respond(result);
                // Like Hermes, session-level updates follow the answer.
                if let Some((session_id, updates)) = after {
                    for update in updates {
                        self.send_update(&session_id, update);
                    }
                }
            }
            Err((code, message)) => responder.error(code, message),
        }
    }

    fn initialize(&self) -> Handled {
        let response = InitializeResponse {
            protocol_version: PROTOCOL_VERSION,
            agent_capabilities: AgentCapabilities {
                load_session: true,
                prompt_capabilities: PromptCapabilities {
                    image: true,
                    audio: false,
                    embedded_context: true,
                },
                other: Default::default(),
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
        };
        Ok((
            to_json(&response),
            Some((session_id, vec![available_commands()])),
        ))
    }

    fn load_session(&self, params: Value) -> Handled {
        let request: LoadSessionRequest = parse(params).map_err(|e| (INVALID_PARAMS, e))?;
        let id = request.session_id;
        let (replay, response) = {
            let mut state = self.state();
            let session = state.sessions.entry(id.clone()).or_insert_with(|| {
                tracing::debug!(session = %id, "demo agent loads an unknown session as empty");
                Session::new()
            });
            session.cwd = request.cwd.clone();
            let response = LoadSessionResponse {
                models: Some(models_state(&session.model_id)),
                modes: Some(modes_state(&session.mode_id)),
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

    async fn turn(
        self: Arc<Self>,
        request: PromptRequest,
        cancel: watch::Receiver<bool>,
        responder: Responder,
    ) {
        let session_id = request.session_id.clone();
        let (model_id, cwd) = self
            .with_session(&session_id, |s| (s.model_id.clone(), s.cwd.clone()))
            .unwrap_or_default();
        let mut turn = Turn {
            demo: &self,
            session_id: &session_id,
            cancel,
            said: String::new(),
            cwd,
        };
        let ending = turn.play(&request.prompt, &model_id).await;
        if let Some((code, message)) = ending.error {
            let _ = self.with_session(&session_id, |session| session.running = None);
            responder.error(code, message);
            return;
        }
        let text = prompt_text(&request.prompt);
        let said = std::mem::take(&mut turn.said);

        let used = self
            .with_session(&session_id, |session| {
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
        self.send_update(&session_id, SessionUpdate::UsageUpdate(usage));

        let input_tokens = text.len() as u64 / 4 + 1;
        let output_tokens = said.len() as u64 / 4 + 1;
        let response = PromptResponse {
            stop_reason: ending.stop_reason,
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
        if ending.title {
            let info = SessionInfoUpdate {
                title: Some("Demo title".into()),
                updated_at: None,
            };
            self.send_update(&session_id, SessionUpdate::SessionInfoUpdate(info));
        }
    }
}

/// Result of a request handler: the answer and updates to send after it, or an error.
type Handled = Result<(Value, Option<(String, Vec<SessionUpdate>)>), (i64, String)>;

fn prompt_text(prompt: &[ContentBlock]) -> String {
    prompt
        .iter()
        .filter_map(ContentBlock::as_text)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Bytes encoded by a base64 string, without decoding it.
fn base64_len(data: &str) -> usize {
    let symbols = data
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b'=')
        .count();
    symbols * 3 / 4
}

/// Most chunks one `bench` turn streams, and the longest pause between two.
const BENCH_MAX_CHUNKS: usize = 100_000;
const BENCH_MAX_GAP_US: u64 = 1_000_000;

/// `bench <n> [<gap_us>]` when it is the whole prompt. Matched only as the whole prompt so that
/// ordinary text ("a benchmark of 3 runs") is never taken for it.
fn bench_request(text: &str) -> Option<(usize, Duration)> {
    let mut words = text.split_whitespace();
    if words.next()? != "bench" {
        return None;
    }
    let count: usize = words.next()?.parse().ok()?;
    let gap_us: u64 = match words.next() {
        Some(word) => word.parse().ok()?,
        None => 0,
    };
    if words.next().is_some() {
        return None;
    }
    Some((
        count.min(BENCH_MAX_CHUNKS),
        Duration::from_micros(gap_us.min(BENCH_MAX_GAP_US)),
    ))
}

/// Splits `text` into `parts` pieces of roughly equal length, on character boundaries.
fn split_chunks(text: &str, parts: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(parts).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

struct Ending {
    stop_reason: StopReason,
    title: bool,
    /// The prompt fails with this JSON-RPC error instead of answering.
    error: Option<(i64, String)>,
}

/// The turn was cancelled.
struct Cancelled;

/// One prompt turn being played.
struct Turn<'a> {
    demo: &'a Demo,
    session_id: &'a str,
    cancel: watch::Receiver<bool>,
    /// Everything said so far, recorded as the answer in the history.
    said: String,
    /// The session's working directory.
    cwd: String,
}

impl Turn<'_> {
    async fn play(&mut self, prompt: &[ContentBlock], model_id: &str) -> Ending {
        let text = prompt_text(prompt);
        let lower = text.to_lowercase();
        let has = |word: &str| lower.contains(word);
        if self
            .demo
            .with_session(self.session_id, |s| s.wedged)
            .unwrap_or(false)
        {
            self.say("Queued for the next turn.");
            return Ending {
                stop_reason: StopReason::EndTurn,
                title: false,
                error: None,
            };
        }
        if has("freeze") {
            // A hung agent: no output, and cancel is ignored.
            std::future::pending::<()>().await;
        }
        if has("wedge") {
            let id = self.start_tool("sleep 30");
            self.tool_status(&id, ToolCallStatus::InProgress, Some("$ sleep 30"), None);
            self.wait_cancel().await;
            let _ = self.demo.with_session(self.session_id, |s| s.wedged = true);
            let error = Some((crate::rpc::INTERNAL_ERROR, "Internal error".to_owned()));
            return Ending {
                stop_reason: StopReason::Cancelled,
                title: false,
                error,
            };
        }
        let stop_reason = match self.script(prompt, &text, &has, model_id).await {
            Ok(()) => StopReason::EndTurn,
            Err(Cancelled) => StopReason::Cancelled,
        };
        Ending {
            stop_reason,
            title: has("title"),
            error: None,
        }
    }

    async fn script(
        &mut self,
        prompt: &[ContentBlock],
        text: &str,
        has: &impl Fn(&str) -> bool,
        model_id: &str,
    ) -> Result<(), Cancelled> {
        if has("garbage") {
            let _ = self
                .demo
                .conn
                .send_raw_line("this line is not JSON-RPC {{{");
        }
        if has("crash") {
            self.say("Crashing now.");
            let _ = self.demo.conn.flush().await;
            tracing::warn!("demo agent exits on request (crash keyword)");
            std::process::exit(3);
        }
        if has("hang") {
            self.wait_cancel().await;
            return Err(Cancelled);
        }
        if let Some(command) = text.trim().strip_prefix('/') {
            self.slash_command(command, model_id);
            return Ok(());
        }
        if let Some((count, gap)) = bench_request(text) {
            return self.bench(count, gap).await;
        }
        if has("silent") {
            self.say(SILENT_ANSWER);
            return Ok(());
        }
        if has("think") {
            for part in ["Thinking about ", "what you said", "…"] {
                self.update(SessionUpdate::AgentThoughtChunk(chunk(part)));
            }
        }
        if has("plan") {
            self.plan();
        }
        if has("tool") {
            self.tool();
        }
        if has("fail") {
            self.failing_tool();
        }
        self.check()?;
        if has("permission") || has("approve") {
            self.permission().await?;
        }
        if has("clarify") {
            self.clarify().await?;
        }
        self.attachments(prompt);
        if has("mkfile") {
            self.make_file().await;
        }
        if has("mkimage") {
            self.say("Here is an image.\n\n");
            let image = ContentBlock::image(DEMO_PNG_BASE64, "image/png");
            self.update(SessionUpdate::AgentMessageChunk(ContentChunk {
                content: image,
            }));
        }
        if has("slow") {
            for i in 0..SLOW_CHUNKS {
                self.pause().await?;
                self.say(&format!("tick {i} "));
            }
        }
        self.check()?;
        if !text.is_empty() || self.said.is_empty() {
            for part in split_chunks(&format!("Echo: {text}"), 3) {
                self.say(&part);
            }
        }
        if model_id != DEFAULT_MODEL {
            self.say(&format!("\n\n(model: {model_id})"));
        }
        Ok(())
    }

    /// Streams `count` chunks `gap` apart, each carrying its send time (unix nanoseconds): the
    /// load tool on the same machine subtracts it from the time a device receives the chunk.
    async fn bench(&mut self, count: usize, gap: Duration) -> Result<(), Cancelled> {
        for _ in 0..count {
            if !gap.is_zero() {
                tokio::select! {
                    _ = tokio::time::sleep(gap) => {}
                    _ = self.wait_cancel() => return Err(Cancelled),
                }
            }
            self.check()?;
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            self.say(&format!("{nanos} "));
        }
        Ok(())
    }

    fn update(&self, update: SessionUpdate) {
        self.demo.send_update(self.session_id, update);
    }

    fn say(&mut self, text: &str) {
        self.said.push_str(text);
        self.update(SessionUpdate::AgentMessageChunk(chunk(text)));
    }

    fn check(&self) -> Result<(), Cancelled> {
        if *self.cancel.borrow() {
            Err(Cancelled)
        } else {
            Ok(())
        }
    }

    async fn wait_cancel(&mut self) {
        // The sender lives until this turn ends, so this only returns on cancel.
        let _ = self.cancel.wait_for(|cancelled| *cancelled).await;
    }

    /// Simulates model latency; stops early on cancel.
    async fn pause(&mut self) -> Result<(), Cancelled> {
        tokio::select! {
            _ = tokio::time::sleep(SLOW_PAUSE) => self.check(),
            _ = self.wait_cancel() => Err(Cancelled),
        }
    }

    fn slash_command(&mut self, command: &str, model_id: &str) {
        let name = command.split_whitespace().next().unwrap_or_default();
        let answer = match name {
            "help" => "Commands: /help, /tools, /model".to_string(),
            "tools" => "Tools: terminal (simulated; nothing really runs)".to_string(),
            "model" => format!("Current model: {model_id}"),
            _ => format!("Unknown command /{name}"),
        };
        self.say(&answer);
    }

    fn plan(&self) {
        let entry = |content: &str, priority, status| PlanEntry {
            content: content.into(),
            priority,
            status,
        };
        self.update(SessionUpdate::Plan(Plan {
            entries: vec![
                entry(
                    "Read the request",
                    PlanEntryPriority::High,
                    PlanEntryStatus::Completed,
                ),
                entry(
                    "Write the answer",
                    PlanEntryPriority::Medium,
                    PlanEntryStatus::InProgress,
                ),
                entry(
                    "Suggest next steps",
                    PlanEntryPriority::Low,
                    PlanEntryStatus::Pending,
                ),
            ],
        }));
    }

    fn fresh_tool_id(&self) -> String {
        self.demo.state().fresh_id("tool")
    }

    /// Announces a `terminal` tool call and returns its id.
    fn start_tool(&self, command: &str) -> String {
        let id = self.fresh_tool_id();
        self.update(SessionUpdate::ToolCall(ToolCall {
            tool_call_id: id.clone(),
            title: format!("terminal: {command}"),
            kind: ToolKind::Execute,
            status: Some(ToolCallStatus::Pending),
            raw_input: Some(json!({ "command": command })),
            raw_output: None,
            content: text_content(&format!("$ {command}")),
            locations: Vec::new(),
        }));
        id
    }

    fn tool_status(
        &self,
        id: &str,
        status: ToolCallStatus,
        output: Option<&str>,
        raw_output: Option<Value>,
    ) {
        self.update(SessionUpdate::ToolCallUpdate(ToolCallUpdate {
            tool_call_id: id.into(),
            status: Some(status),
            content: output.map(text_content),
            raw_output,
            ..ToolCallUpdate::default()
        }));
    }

    fn tool(&mut self) {
        self.say("Let me run a command.");
        let id = self.start_tool("echo hello");
        self.tool_status(
            &id,
            ToolCallStatus::InProgress,
            Some("$ echo hello\nrunning…"),
            None,
        );
        let output = json!({"output": "hello", "exitCode": 0});
        self.tool_status(&id, ToolCallStatus::Completed, Some("hello"), Some(output));
        self.say("\n\nThe command printed: hello.\n\n");
    }

    fn failing_tool(&mut self) {
        let id = self.start_tool("false");
        self.tool_status(&id, ToolCallStatus::InProgress, None, None);
        let output = json!({"output": "", "exitCode": 1});
        self.tool_status(
            &id,
            ToolCallStatus::Failed,
            Some("command failed with exit code 1"),
            Some(output),
        );
        self.say("The command failed.\n\n");
    }

    /// Puts a permission request to the client; `None` when it answered with an error.
    async fn ask(
        &mut self,
        request: RequestPermissionRequest,
    ) -> Result<Option<RequestPermissionOutcome>, Cancelled> {
        let conn = self.demo.conn.clone();
        let asking = conn.request(method::SESSION_REQUEST_PERMISSION, to_json(&request));
        let answer = tokio::select! {
            answer = asking => answer,
            // A cancelled turn does not wait for the answer: the client must answer `cancelled`
            // anyway, and a late answer is simply ignored.
            _ = self.wait_cancel() => return Err(Cancelled),
        };
        match answer {
            Ok(value) => match serde_json::from_value::<RequestPermissionResponse>(value) {
                Ok(response) => Ok(Some(response.outcome)),
                Err(error) => {
                    tracing::debug!(%error, "demo agent got a malformed permission answer");
                    Ok(None)
                }
            },
            Err(error) => {
                tracing::debug!(%error, "demo agent's permission request failed");
                Ok(None)
            }
        }
    }

    async fn permission(&mut self) -> Result<(), Cancelled> {
        let command = "rm -rf ./demo-scratch";
        let id = self.start_tool(command);
        let option = |id: &str, name: &str, kind| PermissionOption {
            option_id: id.into(),
            name: name.into(),
            kind,
        };
        let options = vec![
            option("allow_once", "Allow once", PermissionOptionKind::AllowOnce),
            option(
                "allow_always",
                "Allow always",
                PermissionOptionKind::AllowAlways,
            ),
            option("reject_once", "Deny", PermissionOptionKind::RejectOnce),
        ];
        let request = RequestPermissionRequest {
            session_id: self.session_id.into(),
            tool_call: ToolCallUpdate {
                tool_call_id: id.clone(),
                title: Some(format!("terminal: {command}")),
                kind: Some(ToolKind::Execute),
                status: Some(ToolCallStatus::Pending),
                raw_input: Some(json!({ "command": command })),
                content: Some(text_content(&format!("$ {command}"))),
                ..ToolCallUpdate::default()
            },
            options: options.clone(),
        };
        let outcome = self.ask(request).await;
        let chosen = match &outcome {
            Ok(Some(RequestPermissionOutcome::Selected { option_id })) => {
                options.iter().find(|o| &o.option_id == option_id)
            }
            _ => None,
        };
        match chosen {
            Some(option) if option.kind.is_allow() => {
                self.tool_status(&id, ToolCallStatus::InProgress, None, None);
                self.tool_status(
                    &id,
                    ToolCallStatus::Completed,
                    Some("removed ./demo-scratch (simulated)"),
                    None,
                );
                self.say(&format!("Permission granted: {}.\n\n", option.option_id));
                Ok(())
            }
            _ => {
                self.tool_status(
                    &id,
                    ToolCallStatus::Failed,
                    Some("not run: permission refused"),
                    None,
                );
                match outcome {
                    Ok(Some(RequestPermissionOutcome::Cancelled)) | Err(Cancelled) => {
                        Err(Cancelled)
                    }
                    _ => {
                        self.say("Permission denied.\n\n");
                        Ok(())
                    }
                }
            }
        }
    }

    async fn clarify(&mut self) -> Result<(), Cancelled> {
        let question = "Which color do you prefer?";
        let request = RequestPermissionRequest {
            session_id: self.session_id.into(),
            tool_call: ToolCallUpdate {
                tool_call_id: self.fresh_tool_id(),
                title: Some(format!("{CLARIFY_TITLE_PREFIX} {question}")),
                kind: Some(ToolKind::Other),
                status: Some(ToolCallStatus::Pending),
                raw_input: Some(json!({
                    "question": question,
                    "choices": COLORS.iter().map(|(_, name)| *name).collect::<Vec<_>>(),
                })),
                ..ToolCallUpdate::default()
            },
            options: COLORS
                .iter()
                .map(|(id, name)| PermissionOption {
                    option_id: (*id).into(),
                    name: (*name).into(),
                    kind: PermissionOptionKind::AllowOnce,
                })
                .collect(),
        };
        match self.ask(request).await? {
            Some(RequestPermissionOutcome::Selected { option_id }) => {
                match COLORS.iter().find(|(id, _)| *id == option_id) {
                    Some((_, name)) => self.say(&format!("You chose {name}.\n\n")),
                    None => self.say("That is not one of the choices.\n\n"),
                }
                Ok(())
            }
            Some(RequestPermissionOutcome::Cancelled) => Err(Cancelled),
            None => {
                self.say("No answer.\n\n");
                Ok(())
            }
        }
    }

    /// Writes the demo file into the session's working directory and shares it the way agents
    /// without file content blocks do: a `MEDIA:<path>` line.
    async fn make_file(&mut self) {
        let path = std::path::Path::new(&self.cwd).join(DEMO_FILE_NAME);
        match tokio::fs::write(&path, demo_file_text()).await {
            Ok(()) => self.say(&format!("Here is a file.\nMEDIA:{}\n\n", path.display())),
            Err(e) => self.say(&format!("Could not write {}: {e}\n\n", path.display())),
        }
    }

    fn attachments(&mut self, prompt: &[ContentBlock]) {
        for block in prompt {
            let note = match block {
                ContentBlock::Image(image) => {
                    format!(
                        "Received image {} ({} bytes)",
                        image.mime_type,
                        base64_len(&image.data)
                    )
                }
                ContentBlock::ResourceLink(link) => format!("Received file {}", link.name),
                ContentBlock::Resource(embedded) => {
                    format!("Received resource {}", embedded.resource.uri)
                }
                _ => continue,
            };
            self.say(&format!("{note}\n\n"));
        }
    }
}

fn chunk(text: &str) -> ContentChunk {
    ContentChunk {
        content: ContentBlock::text(text),
    }
}

fn text_content(text: &str) -> Vec<ToolCallContent> {
    vec![ToolCallContent::Content(chunk(text))]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_length_without_decoding() {
        assert_eq!(base64_len(""), 0);
        assert_eq!(base64_len("aGk="), 2);
        assert_eq!(base64_len("aGVsbG8="), 5);
        assert_eq!(base64_len("aGVsbG8h"), 6);
        assert_eq!(base64_len("aGVsbG8"), 5);
    }

    #[test]
    fn chunks_split_on_char_boundaries() {
        assert_eq!(split_chunks("Echo: héllo", 3).concat(), "Echo: héllo");
        assert_eq!(split_chunks("Echo: héllo", 3).len(), 3);
        assert_eq!(split_chunks("ab", 3), vec!["a", "b"]);
    }

    #[test]
    fn bench_is_recognised_only_as_the_whole_prompt() {
        assert_eq!(bench_request("bench 5"), Some((5, Duration::ZERO)));
        assert_eq!(
            bench_request(" bench 3 2000 "),
            Some((3, Duration::from_micros(2000)))
        );
        assert_eq!(
            bench_request("bench 999999999").map(|b| b.0),
            Some(BENCH_MAX_CHUNKS)
        );
        assert_eq!(bench_request("a bench 5"), None);
        assert_eq!(bench_request("benchmark 5"), None);
        assert_eq!(bench_request("bench five"), None);
        assert_eq!(bench_request("bench 5 10 extra"), None);
    }
}
