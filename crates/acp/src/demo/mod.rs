//! The demo agent: a small, deterministic ACP agent with no model behind it, for the quickstart
//! (`iris-gateway demo-agent`) and for fast tests.
//!
//! Everything it says is scripted. It answers `Echo: <text>` and recognises keywords anywhere in
//! the prompt text (case-insensitive), which make it exercise one part of the protocol each. A
//! turn walks the script below from top to bottom and plays every rule whose trigger matches;
//! several keywords therefore combine, in this order. A rule that "ends the turn" skips the rest
//! of the script.
//!
//! | trigger | what the turn does |
//! |---|---|
//! | `title` | a `session_info_update` with title "Demo title", sent just after the prompt's answer |
//! | `rename` | a runaway agent's titles: 50 `session_info_update`s titled `Title 1` … `Title 50`, during the turn |
//! | `freeze` | sends nothing and ignores cancel: a hung agent (the client has to kill it) |
//! | `wedge` | a running `terminal: sleep 30` tool until cancelled; then, like Hermes, the prompt fails with -32603 and the session is wedged: every later prompt is answered "Queued for the next turn." and never runs |
//! | `garbage` | writes a line that is not JSON, then goes on |
//! | `crash` | one chunk, then exits the whole process with status 3 (never use in-process) |
//! | `hang` | sends nothing and answers only when cancelled |
//! | `flood` | a runaway agent's text: 8 MiB in 64 KiB `agent_message_chunk`s, stopping when cancelled; ends the turn |
//! | `deluge` | a runaway agent that ignores cancel: 50 MiB of text in 64 KiB `agent_message_chunk`s as fast as the client reads them, then ends the turn |
//! | `spree` | a runaway agent's tool calls: 2,000 `terminal: true` calls, each completed at once, stopping when cancelled; ends the turn |
//! | `hoard` | a runaway agent's files: 100 small text files as embedded `resource`s, stopping when cancelled; ends the turn |
//! | `pester` | a runaway agent's approvals: 20 `session/request_permission`s at once, each with a 10,000-character title and 40 long options; says `cancelled <k>. ` as each is cancelled, then `Pestered: <n> answered, <m> cancelled.`; ends the turn |
//! | `crowd` | a runaway agent's command list: an `available_commands_update` with a 1,000-character name first, then 5,000 commands (`crowd<i>`) with 1,200-character descriptions and 500-character hints; answers `Crowded.`; ends the turn |
//! | `/<command>` | the prompt text starts with `/`: a slash command (`/help`, `/tools`, `/model`) answered locally; ends the turn |
//! | `bench <n> [<gap_us>]` | only as the whole prompt: `n` chunks (at most 100,000), each its send time in unix nanoseconds and a space, `gap_us` microseconds apart (default 0); ends the turn. The load tool `iris-bench` measures chunk-to-device latency with them |
//! | `silent` | answers exactly `[SILENT] nothing to report` (the marker of a scheduled job with nothing to say); ends the turn |
//! | `environment` | answers `Environment: ` and, sorted, the names of its `IRIS_*` variables and `NAME=value` of its `DEMO_*` ones (`none` without any); ends the turn |
//! | `sessions` | answers `Open sessions: <n>, resumed: <r>, loaded: <l>` (sessions open now; reopened by `session/resume` and `session/load` since the demo started); ends the turn |
//! | `recall` | answers `Recall: <n> earlier turns` and the user text of each earlier turn of this session, oldest first, joined by ` / ` (what `session/fork` copied, say); ends the turn |
//! | `future` | updates from a newer ACP version: a `session/update` of an unknown type (`future_update`), then an `agent_message_chunk` "Future-proof. " with an unknown field |
//! | `cost` | a `usage_update` with `cost {amount: 0.0125, currency: "USD"}` |
//! | `think` | `agent_thought_chunk`s before the answer |
//! | `plan` | a `plan` update with three entries |
//! | `collapse` | "Building first.", a `tool_call` (`terminal: make build`) left `in_progress`, then exits the whole process with status 3 before any answer text (never use in-process) |
//! | `tool` | "Let me run a command.", a `tool_call` (`terminal: echo hello`, kind `execute`, status `pending`), `tool_call_update`s (`in_progress`, then `completed` with output `hello`), then text after it |
//! | `edit` | a `tool_call` (`write_file: notes.txt`, kind `edit`) whose content is a `diff` of `<cwd>/notes.txt` ("one two three" becomes "one 2 three four", a line each), then `completed`; the file is not written; answers `Edited notes.txt.` |
//! | `revise` | four edits in one turn, none written: `write_file: notes.txt` twice as whole files ("one two three" becomes "one 2 three", then "one 2 three four"), and `Edit: draft.txt` twice by snippets ("alpha" to "ALPHA", "gamma" to "GAMMA"), interleaved, each `completed`; answers `Revised notes.txt and draft.txt.` |
//! | `fail` | a `tool_call` (`terminal: false`) that ends `failed` |
//! | (every turn) | ends the turn `cancelled` if it has been cancelled |
//! | `permission` or `approve` | a `tool_call`, then `session/request_permission` (allow_once / allow_always / reject_once); answers `Permission granted: <optionId>.` or `Permission denied.`; a `cancelled` outcome ends the turn `cancelled` |
//! | `patch` | an edit whose `diff` (`<cwd>/notes.txt`: "beta" becomes "BETA") only the `session/request_permission` shows, as Hermes' `write_file` does; answers `Patched notes.txt. ` when allowed, `Not patched. ` when refused; the file is not written |
//! | `deceive` | an agent out to fool the reader: a completed `tool_call` titled [`HOSTILE_TOOL_TITLE`] (an ESC sequence, a bidi override, a zero-width space, HTML) whose `diff` changes `<cwd>/`[`HOSTILE_PATH`] (outside the working directory) to [`HOSTILE_NEW_TEXT`], then a `session/request_permission` titled [`HOSTILE_APPROVAL_TITLE`] with the `diff` of `/etc/iris-hostile.conf` and such labels (`allow_once`, `reject_once`, and an option whose id and label are invisible); answers `Hostile: <optionId>. ` |
//! | `clarify` | a question put as a permission request (see below); answers `You chose <name>.` |
//! | `elicit` | an `elicitation/create` form (see below): the choice `color` (`oneOf` Red, Blue) and the free string `other`; with `two` in the prompt two questions (`color` with `color_other`, and the boolean `large`); with `number` one number field; answers `You answered <content as JSON>.`, `Declined.` or `No answer.`; a `cancel` ends the turn `cancelled` |
//! | (every turn) | acknowledges each attachment: an `image` block as `Received image <mime> (<n> bytes)`, an `audio` block as `Received audio <mime> (<n> bytes)`, a `resource_link` as `Received file <name>`, an embedded `resource` as `Received resource <uri>` |
//! | `mkfile` | writes [`DEMO_FILE_NAME`] (a fixed text of [`demo_file_text`]) into the session's working directory and says `MEDIA:<its path>` on a line of its own |
//! | `mkimage` | "Here is an image.", then an `image` content block (a 1×1 PNG, [`DEMO_PNG_BASE64`]) in an `agent_message_chunk` |
//! | `slow` | 20 chunks 50 ms apart; `session/cancel` stops it (`cancelled`, chunks already sent stay sent) |
//! | `linger` | "Lingering. ", then nothing until `session/cancel`, which ends the turn `cancelled` |
//! | `keepalive` | empty `agent_message_chunk`s, as newer Hermes releases send during a long turn to keep the connection alive: two before any text, then "Working. ", two more, then "Done. " (each empty chunk after a 50 ms pause) |
//! | (every turn) | ends the turn `cancelled` if it has been cancelled |
//! | (every turn) | `Echo: <text>` in up to three `agent_message_chunk`s, unless the text is empty and something was said already |
//! | (every turn) | a model note `(model: <id>)` when the model is not the default |
//!
//! A unit test keeps this table equal to the script the demo plays.
//!
//! It advertises `sessionCapabilities.close` (`session/close` forgets a session) and `list`
//! (`session/list` lists the open sessions), `fork` unless `DEMO_FORK=0` (`session/fork` copies a
//! session's history, model and mode into a new one), with `DEMO_RESUME=1` also `resume`
//! (`session/resume` reopens a session without replaying it), and a capability of a newer ACP version (`futureCapability`) that clients must ignore.
//!
//! It takes images in prompts (`promptCapabilities.image`), and audio too with `DEMO_AUDIO=1`.
//!
//! With `DEMO_PROMPT_LOG=<file>` in its environment the demo appends the text of every prompt it
//! starts a turn for to that file, one JSON string per line, so that tests count real runs.
//!
//! With `DEMO_EXTRA_COMMAND=<name>` in its environment the demo advertises one more slash command,
//! `/<name>`, so that two demo agents behind one gateway can be told apart by their catalogs.
//!
//! Every turn sends a `usage_update` (`size` 65536, `used` growing with the conversation) before
//! its answer, and answers `{stopReason, usage: {inputTokens, outputTokens, totalTokens,
//! thoughtTokens, cachedReadTokens}}` with the turn's own counts (ACP's meaning; Hermes sends the
//! session's running totals in the same shape).
//!
//! # Clarifying questions
//!
//! ACP has no request for asking the user a question. The demo asks one as a
//! `session/request_permission` whose `toolCall` has the title `clarify: <question>` and kind
//! `other`, and whose options are the possible answers (`red` "Red", `blue` "Blue"). Clients that
//! know the convention ([`crate::CLARIFY_TITLE_PREFIX`]) show a picker instead of an approval.
//!
//! The `elicit` keyword asks the way ACP's (unstable) elicitation does, as Claude Code's adapter
//! asks its `AskUserQuestion` questions: an `elicitation/create` in form mode, message "Which
//! color do you prefer?", whose schema has the choice `color` and the optional free string
//! `other` (the adapter's `question_0` and `question_0_custom`); `elicit two` asks two
//! questions in one form, as the adapter does for several.
//!
//! # Sessions
//!
//! Sessions live in memory. `session/load` replays a known session's history (each user message
//! and the answer to it) before answering; an id the demo does not know, e.g. one issued before a
//! restart, loads as an empty session, so that restored sessions keep working. A second
//! `session/prompt` while a turn runs in the same session is refused with error -32000 "busy". A
//! session wedged by the `wedge` keyword answers every prompt "Queued for the next turn." without
//! running the script.

use std::io;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinSet;

use crate::rpc::{Connection, Incoming};

mod behaviours;
mod catalog;
mod fixtures;
mod hostile;
mod questions;
mod script;
mod server;
mod turn;

pub use fixtures::{
    demo_file_text, BUSY, DEFAULT_MODEL, DEMO_FILE_NAME, DEMO_PNG_BASE64, SILENT_ANSWER,
};
pub use hostile::{HOSTILE_APPROVAL_TITLE, HOSTILE_NEW_TEXT, HOSTILE_PATH, HOSTILE_TOOL_TITLE};

/// Serves ACP as the demo agent on `input`/`output` until `input` ends.
pub async fn run<R, W>(input: R, output: W) -> io::Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (conn, mut incoming, io) = Connection::build(input, output, None);
    let io = tokio::spawn(io);
    let demo = Arc::new(server::Demo::new(conn.clone()));
    let mut turns = JoinSet::new();
    while let Some(message) = incoming.recv().await {
        match message {
            Incoming::Request {
                method,
                params,
                responder,
                ..
            } => {
                if let Some(prompt) = demo.handle_request(&method, params, responder, &mut turns) {
                    turns.spawn(turn::play(demo.clone(), prompt));
                }
            }
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
