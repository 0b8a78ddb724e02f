//! The script of the demo agent: a table of rules, each a trigger and a behaviour, played from
//! top to bottom for every prompt.

use std::time::Duration;

use super::turn::{prompt_text, Cancelled, Ending, Turn};
use crate::types::*;

/// One rule of the script: when its trigger matches the prompt, the turn plays its behaviour.
struct Rule {
    /// When the rule applies.
    trigger: Trigger,
    /// What the turn does, as the module docs of [`crate::demo`] tell it.
    description: &'static str,
    /// The behaviour that plays it.
    behaviour: Behaviour,
}

/// When a rule applies.
enum Trigger {
    /// Any of these words appears in the prompt text (case-insensitive).
    Keyword(&'static [&'static str]),
    /// The prompt text starts with `/`.
    SlashCommand,
    /// The whole prompt text is `bench <n> [<gap_us>]`.
    Bench,
    /// Every turn that gets this far.
    Always,
}

/// What a rule makes the turn do: each names a method of [`Turn`], which `perform` calls.
#[derive(Clone, Copy)]
enum Behaviour {
    Title,
    Rename,
    Freeze,
    Wedge,
    Garbage,
    Crash,
    Hang,
    Flood,
    Deluge,
    Spree,
    Hoard,
    Pester,
    Crowd,
    SlashCommand,
    Bench,
    Silent,
    Environment,
    Sessions,
    Recall,
    Future,
    Cost,
    Think,
    Plan,
    Tool,
    Edit,
    Revise,
    FailingTool,
    Collapse,
    Checkpoint,
    Permission,
    Patch,
    Hostile,
    Clarify,
    Elicit,
    Attachments,
    MakeFile,
    MakeImage,
    Slow,
    Linger,
    KeepAlive,
    Echo,
    ModelNote,
}

/// A rule that plays `behaviour` when one of `words` is in the prompt.
const fn keyword(
    words: &'static [&'static str],
    behaviour: Behaviour,
    description: &'static str,
) -> Rule {
    Rule {
        trigger: Trigger::Keyword(words),
        description,
        behaviour,
    }
}

/// A rule that plays `behaviour` on every turn that gets to it.
const fn always(behaviour: Behaviour, description: &'static str) -> Rule {
    Rule {
        trigger: Trigger::Always,
        description,
        behaviour,
    }
}

/// The script, in the order it is played. The module docs of [`crate::demo`] list it too.
const SCRIPT: &[Rule] = &[
    keyword(
        &["title"],
        Behaviour::Title,
        "a `session_info_update` with title \"Demo title\", sent just after the prompt's answer",
    ),
    keyword(
        &["rename"],
        Behaviour::Rename,
        "a runaway agent's titles: 50 `session_info_update`s titled `Title 1` … `Title 50`, \
         during the turn",
    ),
    keyword(
        &["freeze"],
        Behaviour::Freeze,
        "sends nothing and ignores cancel: a hung agent (the client has to kill it)",
    ),
    keyword(
        &["wedge"],
        Behaviour::Wedge,
        "a running `terminal: sleep 30` tool until cancelled; then, like Hermes, the prompt \
         fails with -32603 and the session is wedged: every later prompt is answered \"Queued \
         for the next turn.\" and never runs",
    ),
    keyword(
        &["garbage"],
        Behaviour::Garbage,
        "writes a line that is not JSON, then goes on",
    ),
    keyword(
        &["crash"],
        Behaviour::Crash,
        "one chunk, then exits the whole process with status 3 (never use in-process)",
    ),
    keyword(
        &["hang"],
        Behaviour::Hang,
        "sends nothing and answers only when cancelled",
    ),
    keyword(
        &["flood"],
        Behaviour::Flood,
        "a runaway agent's text: 8 MiB in 64 KiB `agent_message_chunk`s, stopping when \
         cancelled; ends the turn",
    ),
    keyword(
        &["deluge"],
        Behaviour::Deluge,
        "a runaway agent that ignores cancel: 50 MiB of text in 64 KiB `agent_message_chunk`s \
         as fast as the client reads them, then ends the turn",
    ),
    keyword(
        &["spree"],
        Behaviour::Spree,
        "a runaway agent's tool calls: 2,000 `terminal: true` calls, each completed at once, \
         stopping when cancelled; ends the turn",
    ),
    keyword(
        &["hoard"],
        Behaviour::Hoard,
        "a runaway agent's files: 100 small text files as embedded `resource`s, stopping when \
         cancelled; ends the turn",
    ),
    keyword(
        &["pester"],
        Behaviour::Pester,
        "a runaway agent's approvals: 20 `session/request_permission`s at once, each with a \
         10,000-character title and 40 long options; says `cancelled <k>. ` as each is cancelled, \
         then `Pestered: <n> answered, <m> cancelled.`; ends the turn",
    ),
    keyword(
        &["crowd"],
        Behaviour::Crowd,
        "a runaway agent's command list: an `available_commands_update` with a 1,000-character \
         name first, then 5,000 commands (`crowd<i>`) with 1,200-character descriptions and \
         500-character hints; answers `Crowded.`; ends the turn",
    ),
    Rule {
        trigger: Trigger::SlashCommand,
        description:
            "the prompt text starts with `/`: a slash command (`/help`, `/tools`, `/model`) \
             answered locally; ends the turn",
        behaviour: Behaviour::SlashCommand,
    },
    Rule {
        trigger: Trigger::Bench,
        description:
            "only as the whole prompt: `n` chunks (at most 100,000), each its send time in unix \
             nanoseconds and a space, `gap_us` microseconds apart (default 0); ends the turn. \
             The load tool `iris-bench` measures chunk-to-device latency with them",
        behaviour: Behaviour::Bench,
    },
    keyword(
        &["silent"],
        Behaviour::Silent,
        "answers exactly `[SILENT] nothing to report` (the marker of a scheduled job with \
         nothing to say); ends the turn",
    ),
    keyword(
        &["environment"],
        Behaviour::Environment,
        "answers `Environment: ` and, sorted, the names of its `IRIS_*` variables and `NAME=value` of its `DEMO_*` ones (`none` without any); ends the turn",
    ),
    keyword(
        &["sessions"],
        Behaviour::Sessions,
        "answers `Open sessions: <n>, resumed: <r>, loaded: <l>` (sessions open now; reopened by \
         `session/resume` and `session/load` since the demo started); ends the turn",
    ),
    keyword(
        &["recall"],
        Behaviour::Recall,
        "answers `Recall: <n> earlier turns` and the user text of each earlier turn of this \
         session, oldest first, joined by ` / ` (what `session/fork` copied, say); ends the turn",
    ),
    keyword(
        &["future"],
        Behaviour::Future,
        "updates from a newer ACP version: a `session/update` of an unknown type \
         (`future_update`), then an `agent_message_chunk` \"Future-proof. \" with an unknown field",
    ),
    keyword(
        &["cost"],
        Behaviour::Cost,
        "a `usage_update` with `cost {amount: 0.0125, currency: \"USD\"}`",
    ),
    keyword(
        &["think"],
        Behaviour::Think,
        "`agent_thought_chunk`s before the answer",
    ),
    keyword(
        &["plan"],
        Behaviour::Plan,
        "a `plan` update with three entries",
    ),
    keyword(
        &["collapse"],
        Behaviour::Collapse,
        "\"Building first.\", a `tool_call` (`terminal: make build`) left `in_progress`, then \
         exits the whole process with status 3 before any answer text (never use in-process)",
    ),
    keyword(
        &["tool"],
        Behaviour::Tool,
        "\"Let me run a command.\", a `tool_call` (`terminal: echo hello`, kind `execute`, \
         status `pending`), `tool_call_update`s (`in_progress`, then `completed` with output \
         `hello`), then text after it",
    ),
    keyword(
        &["edit"],
        Behaviour::Edit,
        "a `tool_call` (`write_file: notes.txt`, kind `edit`) whose content is a `diff` of \
         `<cwd>/notes.txt` (\"one two three\" becomes \"one 2 three four\", a line each), then \
         `completed`; the file is not written; answers `Edited notes.txt.`",
    ),
    keyword(
        &["revise"],
        Behaviour::Revise,
        "four edits in one turn, none written: `write_file: notes.txt` twice as whole files \
         (\"one two three\" becomes \"one 2 three\", then \"one 2 three four\"), and \
         `Edit: draft.txt` twice by snippets (\"alpha\" to \"ALPHA\", \"gamma\" to \"GAMMA\"), \
         interleaved, each `completed`; answers `Revised notes.txt and draft.txt.`",
    ),
    keyword(
        &["fail"],
        Behaviour::FailingTool,
        "a `tool_call` (`terminal: false`) that ends `failed`",
    ),
    always(
        Behaviour::Checkpoint,
        "ends the turn `cancelled` if it has been cancelled",
    ),
    keyword(
        &["permission", "approve"],
        Behaviour::Permission,
        "a `tool_call`, then `session/request_permission` (allow_once / allow_always / \
         reject_once); answers `Permission granted: <optionId>.` or `Permission denied.`; a \
         `cancelled` outcome ends the turn `cancelled`",
    ),
    keyword(
        &["patch"],
        Behaviour::Patch,
        "an edit whose `diff` (`<cwd>/notes.txt`: \"beta\" becomes \"BETA\") only the \
         `session/request_permission` shows, as Hermes' `write_file` does; answers `Patched \
         notes.txt. ` when allowed, `Not patched. ` when refused; the file is not written",
    ),
    keyword(
        &["deceive"],
        Behaviour::Hostile,
        "an agent out to fool the reader: a completed `tool_call` titled [`HOSTILE_TOOL_TITLE`] \
         (an ESC sequence, a bidi override, a zero-width space, HTML) whose `diff` changes \
         `<cwd>/`[`HOSTILE_PATH`] (outside the working directory) to [`HOSTILE_NEW_TEXT`], then \
         a `session/request_permission` titled [`HOSTILE_APPROVAL_TITLE`] with the `diff` of \
         `/etc/iris-hostile.conf` and such labels (`allow_once`, `reject_once`, and an option \
         whose id and label are invisible); answers `Hostile: <optionId>. `",
    ),
    keyword(
        &["clarify"],
        Behaviour::Clarify,
        "a question put as a permission request (see below); answers `You chose <name>.`",
    ),
    keyword(
        &["elicit"],
        Behaviour::Elicit,
        "an `elicitation/create` form (see below): the choice `color` (`oneOf` Red, Blue) and \
         the free string `other`; with `two` in the prompt two questions (`color` with \
         `color_other`, and the boolean `large`); with `number` one number field; \
         answers `You answered <content as JSON>.`, `Declined.` or `No answer.`; a `cancel` \
         ends the turn `cancelled`",
    ),
    always(
        Behaviour::Attachments,
        "acknowledges each attachment: an `image` block as `Received image <mime> (<n> bytes)`, \
         an `audio` block as `Received audio <mime> (<n> bytes)`, a `resource_link` as `Received file <name>`, an embedded `resource` as `Received \
         resource <uri>`",
    ),
    keyword(
        &["mkfile"],
        Behaviour::MakeFile,
        "writes [`DEMO_FILE_NAME`] (a fixed text of [`demo_file_text`]) into the session's \
         working directory and says `MEDIA:<its path>` on a line of its own",
    ),
    keyword(
        &["mkimage"],
        Behaviour::MakeImage,
        "\"Here is an image.\", then an `image` content block (a 1×1 PNG, [`DEMO_PNG_BASE64`]) \
         in an `agent_message_chunk`",
    ),
    keyword(
        &["slow"],
        Behaviour::Slow,
        "20 chunks 50 ms apart; `session/cancel` stops it (`cancelled`, chunks already sent stay \
         sent)",
    ),
    keyword(
        &["linger"],
        Behaviour::Linger,
        "\"Lingering. \", then nothing until `session/cancel`, which ends the turn `cancelled`",
    ),
    keyword(
        &["keepalive"],
        Behaviour::KeepAlive,
        "empty `agent_message_chunk`s, as newer Hermes releases send during a long turn to keep \
         the connection alive: two before any text, then \"Working. \", two more, then \
         \"Done. \" (each empty chunk after a 50 ms pause)",
    ),
    always(
        Behaviour::Checkpoint,
        "ends the turn `cancelled` if it has been cancelled",
    ),
    always(
        Behaviour::Echo,
        "`Echo: <text>` in up to three `agent_message_chunk`s, unless the text is empty and \
         something was said already",
    ),
    always(
        Behaviour::ModelNote,
        "a model note `(model: <id>)` when the model is not the default",
    ),
];

/// The prompt of a turn, as the script reads it.
pub(super) struct Prompt<'a> {
    /// The content blocks as sent.
    pub(super) blocks: &'a [ContentBlock],
    /// The text blocks, joined by newlines.
    pub(super) text: String,
    /// `text` in lower case, where keywords are looked for.
    lower: String,
    /// The session's model.
    pub(super) model_id: &'a str,
}

impl<'a> Prompt<'a> {
    /// Reads `blocks`, sent to a session whose model is `model_id`.
    fn new(blocks: &'a [ContentBlock], model_id: &'a str) -> Prompt<'a> {
        let text = prompt_text(blocks);
        let lower = text.to_lowercase();
        Prompt {
            blocks,
            text,
            lower,
            model_id,
        }
    }

    /// The slash command (the text after the `/`), when the prompt is one.
    pub(super) fn slash_command(&self) -> Option<&str> {
        self.text.trim().strip_prefix('/')
    }
}

impl Trigger {
    /// True when the rule applies to `prompt`.
    fn matches(&self, prompt: &Prompt<'_>) -> bool {
        match self {
            Trigger::Keyword(words) => words.iter().any(|word| prompt.lower.contains(word)),
            Trigger::SlashCommand => prompt.slash_command().is_some(),
            Trigger::Bench => bench_request(&prompt.text).is_some(),
            Trigger::Always => true,
        }
    }
}

/// How the script goes on after a rule.
pub(super) enum Flow {
    /// With the next rule.
    Next,
    /// Not at all: the answer is complete.
    Done,
}

/// Why a turn stopped before the end of the script.
pub(super) enum Stop {
    /// The client cancelled it.
    Cancelled,
    /// The prompt fails with this JSON-RPC error instead of answering.
    Failed(i64, String),
}

impl From<Cancelled> for Stop {
    fn from(_: Cancelled) -> Stop {
        Stop::Cancelled
    }
}

/// What a behaviour returns.
pub(super) type Step = Result<Flow, Stop>;

impl Turn<'_> {
    /// Plays the prompt: the script, unless the session is wedged.
    pub(super) async fn play(&mut self, blocks: &[ContentBlock], model_id: &str) -> Ending {
        if self.demo.is_wedged(self.session_id) {
            self.say("Queued for the next turn.");
            return Ending {
                stop_reason: StopReason::EndTurn,
                titles: Vec::new(),
                error: None,
            };
        }
        let prompt = Prompt::new(blocks, model_id);
        let (stop_reason, error) = match self.run_script(&prompt).await {
            Ok(()) => (StopReason::EndTurn, None),
            Err(Stop::Cancelled) => (StopReason::Cancelled, None),
            Err(Stop::Failed(code, message)) => (StopReason::Cancelled, Some((code, message))),
        };
        Ending {
            stop_reason,
            titles: std::mem::take(&mut self.titles),
            error,
        }
    }

    /// Plays every rule whose trigger matches, in order, until one ends the turn.
    async fn run_script(&mut self, prompt: &Prompt<'_>) -> Result<(), Stop> {
        for rule in SCRIPT {
            if !rule.trigger.matches(prompt) {
                continue;
            }
            tracing::trace!(rule = rule.description, "demo agent plays a rule");
            if let Flow::Done = self.perform(rule.behaviour, prompt).await? {
                break;
            }
        }
        Ok(())
    }

    /// Plays one behaviour.
    async fn perform(&mut self, behaviour: Behaviour, prompt: &Prompt<'_>) -> Step {
        match behaviour {
            Behaviour::Title => self.mark_title(),
            Behaviour::Rename => self.rename(),
            Behaviour::Freeze => self.freeze().await,
            Behaviour::Wedge => self.wedge().await,
            Behaviour::Garbage => self.garbage(),
            Behaviour::Crash => self.crash().await,
            Behaviour::Hang => self.hang().await,
            Behaviour::Flood => self.flood().await,
            Behaviour::Deluge => self.deluge().await,
            Behaviour::Spree => self.spree().await,
            Behaviour::Hoard => self.hoard().await,
            Behaviour::Pester => self.pester().await,
            Behaviour::Crowd => self.crowd(),
            Behaviour::SlashCommand => self.slash_command(prompt),
            Behaviour::Bench => self.bench(prompt).await,
            Behaviour::Silent => self.silent(),
            Behaviour::Environment => self.environment(),
            Behaviour::Sessions => self.sessions(),
            Behaviour::Recall => self.recall(),
            Behaviour::Future => self.future(),
            Behaviour::Cost => self.cost(),
            Behaviour::Think => self.think(),
            Behaviour::Plan => self.plan(),
            Behaviour::Tool => self.tool(),
            Behaviour::Edit => self.edit(),
            Behaviour::Revise => self.revise(),
            Behaviour::FailingTool => self.failing_tool(),
            Behaviour::Collapse => self.collapse().await,
            Behaviour::Checkpoint => self.checkpoint(),
            Behaviour::Permission => self.permission().await,
            Behaviour::Patch => self.patch().await,
            Behaviour::Hostile => self.hostile().await,
            Behaviour::Clarify => self.clarify().await,
            Behaviour::Elicit => self.elicit(&prompt.lower).await,
            Behaviour::Attachments => self.attachments(prompt),
            Behaviour::MakeFile => self.make_file().await,
            Behaviour::MakeImage => self.make_image(),
            Behaviour::Slow => self.slow().await,
            Behaviour::Linger => self.linger().await,
            Behaviour::KeepAlive => self.keep_alive().await,
            Behaviour::Echo => self.echo(prompt),
            Behaviour::ModelNote => self.model_note(prompt),
        }
    }
}

/// Most chunks one `bench` turn streams, and the longest pause between two.
const BENCH_MAX_CHUNKS: usize = 100_000;
const BENCH_MAX_GAP_US: u64 = 1_000_000;

/// `bench <n> [<gap_us>]` when it is the whole prompt. Matched only as the whole prompt so that
/// ordinary text ("a benchmark of 3 runs") is never taken for it.
pub(super) fn bench_request(text: &str) -> Option<(usize, Duration)> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// How the module docs name a trigger.
    fn label(trigger: &Trigger) -> String {
        match trigger {
            Trigger::Keyword(words) => words
                .iter()
                .map(|word| format!("`{word}`"))
                .collect::<Vec<_>>()
                .join(" or "),
            Trigger::SlashCommand => "`/<command>`".to_string(),
            Trigger::Bench => "`bench <n> [<gap_us>]`".to_string(),
            Trigger::Always => "(every turn)".to_string(),
        }
    }

    #[test]
    fn the_module_docs_list_the_script() {
        let documented: Vec<&str> = include_str!("mod.rs")
            .lines()
            .filter_map(|line| line.strip_prefix("//! | "))
            .skip(1) // the header
            .collect();
        let script: Vec<String> = SCRIPT
            .iter()
            .map(|rule| format!("{} | {} |", label(&rule.trigger), rule.description))
            .collect();
        assert_eq!(documented, script);
    }

    #[test]
    fn keywords_match_anywhere_in_any_case() {
        let blocks = [ContentBlock::text("Please APPROVE this")];
        let prompt = Prompt::new(&blocks, "demo:echo");
        let permission = &Trigger::Keyword(&["permission", "approve"]);
        assert!(permission.matches(&prompt));
        assert!(!Trigger::Keyword(&["tool"]).matches(&prompt));
        assert!(!Trigger::SlashCommand.matches(&prompt));
        assert!(!Trigger::Bench.matches(&prompt));
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
