//! The whole bridge against the real Hermes agent (hermes-agent 0.19.0 over ACP, its LLM a
//! scripted fake in a loopback-only network namespace): what a device sees of answers, tool
//! calls, approvals, stop, steer, the recovery from Hermes' cancel wedge, titles, the model
//! picker and image attachments.
//!
//! Each test starts one gateway (and so one Hermes, about 2 s) and runs several scenarios on it.
//! Ignored where no Hermes venv or network namespaces exist (the build script looks); never
//! under CI.

mod common;
#[path = "common/hermes.rs"]
mod hermes;

use std::future::Future;
use std::time::{Duration, Instant};

use base64::Engine;
use common::*;
use hermes::HermesEnv;
use iris_client::{Client, ClientError, Event};
use iris_protocol::{
    AgentSteer, BusyReason, ClientFrame, Empty, ErrorCode, Header, MediaUploadEnd,
    MediaUploadStart, MessageSend, MessageStop, RequestId, Role, ServerFrame, ToolEnd, ToolStart,
};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// Every test finishes well inside a minute; this bound turns a hang into a failure.
const TEST_BUDGET: Duration = Duration::from_secs(55);
/// Longest wait for the next frame of a turn (the first one includes starting Hermes).
/// Steering text, unique enough to find in the fake LLM's request log.
const STEER: &str = "STEER-7f3a use the word banana";
/// A 2×2 RGB PNG: a real image, so that nothing on the way rejects it.
const PNG: [u8; 74] = [
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x02, 0x08, 0x02, 0x00, 0x00, 0x00, 0xfd, 0xd4, 0x9a,
    0x73, 0x00, 0x00, 0x00, 0x11, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0x00,
    0x44, 0x0c, 0x60, 0xf2, 0x3f, 0x00, 0x1b, 0xf2, 0x03, 0xfd, 0xf3, 0xe7, 0x4b, 0xb1, 0x00, 0x00,
    0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

// ---------------------------------------------------------------------------------------------
// Harness.

/// Prepares a Hermes environment (a test that gets here without Hermes fails, saying what is
/// missing; where it is not installed the test is ignored, see `build.rs`).
macro_rules! hermes_env {
    ($script:expr) => {
        HermesEnv::new(&$script)
    };
}

/// Runs a test body within [`TEST_BUDGET`]; on failure, prints what Hermes and the fake LLM
/// logged, which is where the cause of a surprise usually shows.
async fn within<F: Future<Output = ()>>(env: &HermesEnv, test: F) {
    struct Diagnose<'a>(&'a HermesEnv);
    impl Drop for Diagnose<'_> {
        fn drop(&mut self) {
            if std::thread::panicking() {
                // Access-log lines and plugin discovery drown the interesting parts.
                let stderr = without_lines(&self.0.fake_llm_stderr(), "fake-llm: \"");
                let logs = without_lines(&self.0.hermes_logs(), "hermes_cli.plugins");
                eprintln!("--- fake LLM stderr ---\n{}", tail(&stderr, 4000));
                eprintln!("--- Hermes logs ---\n{}", tail(&logs, 8000));
            }
        }
    }
    let _diagnose = Diagnose(env);
    tokio::time::timeout(TEST_BUDGET, test)
        .await
        .expect("test exceeded its time budget");
}

fn without_lines(text: &str, noise: &str) -> String {
    text.lines()
        .filter(|l| !l.contains(noise))
        .map(|l| format!("{l}\n"))
        .collect()
}

fn tail(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// A gateway whose agent is Hermes, working in the environment's work directory.
async fn gateway(env: &HermesEnv) -> TestGateway {
    let (command, cwd) = (env.command_line(), env.work.clone());
    TestGateway::start_with(move |c| {
        c.agent_command = Some(command);
        c.agent_cwd = Some(cwd);
    })
    .await
}

fn stop_of(events: &[Event]) -> MessageStop {
    events
        .iter()
        .find_map(|e| match &e.body {
            ServerFrame::MessageStop(s) => Some(s.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no message.stop in {:?}", types(events)))
}

/// Every `message.update` text, in order.
fn update_texts(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            ServerFrame::MessageUpdate(u) => Some(u.text.clone()),
            _ => None,
        })
        .collect()
}

fn tool_starts(events: &[Event]) -> Vec<ToolStart> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            ServerFrame::ToolStart(t) => Some(t.clone()),
            _ => None,
        })
        .collect()
}

fn tool_ends(events: &[Event]) -> Vec<ToolEnd> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            ServerFrame::ToolEnd(t) => Some(t.clone()),
            _ => None,
        })
        .collect()
}

fn busy_reasons(events: &[Event]) -> Vec<BusyReason> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            ServerFrame::AgentBusy(b) => Some(b.reason),
            _ => None,
        })
        .collect()
}

fn position(events: &[Event], ty: &str) -> usize {
    events
        .iter()
        .position(|e| e.frame_type() == ty)
        .unwrap_or_else(|| panic!("no {ty} in {:?}", types(events)))
}

/// The fake LLM's turn requests (not title or other side calls) whose last user text is `text`.
fn turn_requests_for(env: &HermesEnv, text: &str) -> Vec<Value> {
    env.turn_requests()
        .into_iter()
        .filter(|r| r["last_user"] == text)
        .collect()
}

fn ticks(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("tick {i} ")).collect()
}

/// A directory with one file, for a scripted `rm -rf` to delete; returns the command.
fn doomed_dir(env: &HermesEnv, name: &str) -> String {
    let dir = env.work.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("file"), "x").unwrap();
    format!("rm -rf {}", dir.display())
}

/// Waits for the lane's approval picker; returns its frame and every frame before it.
async fn approval(client: &mut Client) -> (iris_protocol::PickerApproval, Vec<Event>) {
    let frames = until(client, |e| e.frame_type() == "picker.approval").await;
    match &frames.last().unwrap().body {
        ServerFrame::PickerApproval(p) => (p.clone(), frames),
        _ => unreachable!(),
    }
}

// ---------------------------------------------------------------------------------------------
// Answers, tool calls, approvals.

/// A streamed answer, a terminal tool call with commentary, and a dangerous command allowed
/// and then denied through the approval picker, each as a device sees it.
#[tokio::test]
#[cfg_attr(
    lacks_hermes_venv,
    ignore = "needs a Hermes venv: IRIS_HERMES_VENV, or .venv in the checkout (README, Connecting Hermes)"
)]
#[cfg_attr(
    lacks_hermes_netns,
    ignore = "needs network namespaces: unshare (util-linux) and ip (iproute2)"
)]
async fn answers_tool_calls_and_approvals_reach_the_device() {
    let env = hermes_env!(json!([]));
    let allowed = doomed_dir(&env, "junk");
    let denied = doomed_dir(&env, "keep");
    let notes = env.work.join("notes.txt");
    std::fs::write(&notes, "line one\nline two\n").unwrap();
    let notes_s = notes.display().to_string();
    env.set_script(&json!([
        {"match": "hello", "reply": {"chunks": ["Hello ", "from the ", "fake LLM!"]}},
        {"match": "run a command", "reply": {
            "content": "Let me run it.",
            "tool_calls": [{"name": "terminal", "arguments": {"command": "echo hello"}}]}},
        {"match": "run a command", "after_tool": true, "reply": {"content": "The command printed hello."}},
        {"match": "clean up", "reply": {"tool_calls": [{"name": "terminal", "arguments": {"command": allowed}}]}},
        {"match": "clean up", "after_tool": true, "reply": {"content": "Cleaned up."}},
        {"match": "tidy", "reply": {"tool_calls": [{"name": "terminal", "arguments": {"command": denied}}]}},
        {"match": "tidy", "after_tool": true, "reply": {"content": "Understood, not deleting."}},
        {"match": "patch the notes", "reply": {"tool_calls": [{"name": "patch", "arguments": {
            "path": notes_s, "old_string": "line two", "new_string": "line 2"}}]}},
        {"match": "patch the notes", "after_tool": true, "reply": {"content": "Patched."}}
    ]));
    within(&env, async {
        let gw = gateway(&env).await;
        let (mut a, _) = gw.connect("phone").await;

        // A streamed answer: start, growing updates, the final text and its runtime footer.
        let started = Instant::now();
        let frames = turn(&mut a, default_lane(), "hello there").await;
        eprintln!("first answer (Hermes start included): {:?}", started.elapsed());
        let t = types(&frames);
        // The lane was idle: busy went out with the message, before Hermes took it.
        assert_eq!(&t[..3], ["agent.busy", "read.receipt", "message.start"], "{t:?}");
        assert_eq!(&t[t.len() - 2..], ["message.stop", "agent.idle"], "{t:?}");
        let updates = update_texts(&frames);
        assert!(!updates.is_empty(), "{t:?}");
        assert!(updates.windows(2).all(|w| w[1].starts_with(&w[0])), "{updates:?}");
        let stop = stop_of(&frames);
        assert_eq!(stop.final_text, "Hello from the fake LLM!");
        assert!(stop.final_text.starts_with(updates.last().unwrap().as_str()));
        assert_eq!(stop.model.as_deref(), Some("fake-model"));
        let runtime = stop.runtime.expect("runtime footer");
        assert_eq!(runtime.model.as_deref(), Some("fake-model"));
        let pct = runtime.context_pct.expect("usage_update becomes context_pct");
        // Hermes' system prompt and tool schemas alone fill part of the 64 Ki window.
        assert!((1..=100).contains(&pct), "{pct}");
        assert!(runtime.latency.is_some() && runtime.cwd.is_some());
        assert!(stop.tokens.is_some_and(|t| t > 0), "the turn's tokens: {:?}", stop.tokens);
        let request = &turn_requests_for(&env, "hello there")[0];
        assert_eq!(request["model"], "fake-model");

        // Text before a tool call is commentary; the tool card; then the answer after the tool.
        let frames = turn(&mut a, default_lane(), "please run a command").await;
        let commentary: Vec<String> = frames
            .iter()
            .filter_map(|e| match &e.body {
                ServerFrame::Commentary(c) => Some(c.text.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(commentary, ["Let me run it."]);
        assert!(update_texts(&frames).iter().any(String::is_empty), "the bubble is cleared for the commentary");
        let start = &tool_starts(&frames)[0];
        assert_eq!(
            (start.index, start.name.as_str(), start.emoji.as_deref(), start.preview.as_deref()),
            (0, "terminal", Some("💻"), Some("echo hello"))
        );
        let end = &tool_ends(&frames)[0];
        assert!(end.ok && end.index == 0 && end.name == "terminal", "{end:?}");
        assert!(end.output_preview.as_deref().is_some_and(|o| o.contains("hello")), "{end:?}");
        assert!(end.duration.is_some());
        assert_eq!(busy_reasons(&frames), [BusyReason::Processing, BusyReason::Tool, BusyReason::Processing]);
        assert!(position(&frames, "commentary") < position(&frames, "tool.start"));
        assert!(position(&frames, "tool.start") < position(&frames, "tool.end"));
        assert!(position(&frames, "tool.end") < position(&frames, "message.stop"));
        let answer = final_text(&frames);
        // Hermes opens the text after a tool with "\n\n"; the bubble starts at the first word.
        assert_eq!(answer, "The command printed hello.");
        assert!(!answer.contains("Let me run it."), "commentary is not part of the answer: {answer:?}");

        // Meters are each turn's own, though Hermes reports the session's running totals: the
        // tokens are what the fake LLM counted for this turn's requests, the context share is
        // the conversation's, not the sum of both turns.
        let spent = |text: &str| -> u64 {
            let requests = turn_requests_for(&env, text);
            requests.iter().map(|r| r["usage"]["total_tokens"].as_u64().unwrap()).sum()
        };
        assert_eq!(stop.tokens, Some(spent("hello there")));
        let second = stop_of(&frames);
        assert_eq!(second.tokens, Some(spent("please run a command")), "{:?}", stop.tokens);
        let pct2 = second.runtime.and_then(|r| r.context_pct).expect("context_pct");
        assert!(pct2 >= pct && pct2 < pct + 10, "{pct} then {pct2}");
        // A second channel's session on the same Hermes process counts from its own start.
        let side = create_channel(&mut a, "side", None).await;
        let frames = turn(&mut a, Header::lane(&side, None), "hello from the side").await;
        assert_eq!(stop_of(&frames).tokens, Some(spent("hello from the side")));

        // A flagged command asks through picker.approval; allowing it runs it for real.
        send(&mut a, default_lane(), "clean up please", false).await;
        let (picker, before) = approval(&mut a).await;
        assert_eq!(picker.title, format!("delete in root path: {allowed}"));
        assert!(picker.preview.as_deref().is_some_and(|p| p.contains(&allowed)), "{picker:?}");
        let values: Vec<&str> = picker.choices.iter().map(|c| c.value.as_str()).collect();
        assert_eq!(values, ["allow_once", "allow_session", "allow_always", "deny", "deny_always"]);
        let labels: Vec<&str> = picker.choices.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(labels[0], "Allow once");
        let start = &tool_starts(&before)[0];
        assert_eq!((start.name.as_str(), start.preview.as_deref()), ("terminal", Some(allowed.as_str())));
        let waiting = until(&mut a, |e| matches!(&e.body, ServerFrame::AgentBusy(b) if b.reason == BusyReason::WaitingInput)).await;
        assert!(
            waiting.iter().any(|e| matches!(&e.body, ServerFrame::Notification(n) if n.kind == "approval")),
            "{:?}",
            types(&waiting)
        );
        assert!(env.work.join("junk/file").exists(), "nothing ran before the answer");
        assert_eq!(select(&mut a, &picker.picker_id, "allow_once").await.unwrap().frame_type(), "ack");
        let frames = until_idle(&mut a).await;
        assert_eq!(final_text(&frames), "Cleaned up.");
        assert!(tool_ends(&frames).iter().all(|e| e.ok), "{:?}", tool_ends(&frames));
        assert!(!env.work.join("junk").exists(), "the allowed command did not run");
        let stale = select(&mut a, &picker.picker_id, "allow_once").await.unwrap_err();
        assert!(matches!(stale, ClientError::Server { code: ErrorCode::NotFound, .. }), "{stale:?}");

        // Denying it blocks the command; the tool card says it failed and the turn goes on.
        send(&mut a, default_lane(), "tidy up the keep dir", false).await;
        let (picker, _) = approval(&mut a).await;
        assert_eq!(picker.title, format!("delete in root path: {denied}"));
        select(&mut a, &picker.picker_id, "deny").await.unwrap();
        let frames = until_idle(&mut a).await;
        let end = &tool_ends(&frames)[0];
        assert!(!end.ok, "{end:?}");
        assert!(end.output_preview.as_deref().is_some_and(|o| o.contains("BLOCKED")), "{end:?}");
        assert_eq!(final_text(&frames), "Understood, not deleting.");
        assert!(env.work.join("keep/file").exists(), "the denied command ran");

        // Hermes shows an edit's diff only in its approval: the device sees it before Allow.
        send(&mut a, default_lane(), "patch the notes", false).await;
        let (picker, _) = approval(&mut a).await;
        assert_eq!(picker.changes.len(), 1, "{picker:?}");
        assert_eq!(picker.changes[0].path, notes_s);
        assert!(picker.changes[0].diff.contains("-line two\n+line 2\n"), "{picker:?}");
        select(&mut a, &picker.picker_id, "allow_once").await.unwrap();
        let frames = until_idle(&mut a).await;
        assert_eq!(final_text(&frames), "Patched.");
        assert_eq!(std::fs::read_to_string(&notes).unwrap(), "line one\nline 2\n");
        gw.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Stop, steer, and the cancel wedge.

/// Stopping a streaming answer keeps its partial text; steering a text-only turn hides Hermes'
/// acknowledgement and runs the steering text as the next turn; stopping while an approval is
/// pending (which wedges Hermes 0.19.0) restarts Hermes, and the next message is answered with
/// the conversation's history.
#[tokio::test]
#[cfg_attr(
    lacks_hermes_venv,
    ignore = "needs a Hermes venv: IRIS_HERMES_VENV, or .venv in the checkout (README, Connecting Hermes)"
)]
#[cfg_attr(
    lacks_hermes_netns,
    ignore = "needs network namespaces: unshare (util-linux) and ip (iproute2)"
)]
async fn stop_steer_and_the_cancel_wedge() {
    let env = hermes_env!(json!([]));
    let command = doomed_dir(&env, "junk");
    env.set_script(&json!([
        {"match": "count slowly", "reply": {"chunks": ticks(20), "delay": 0.25}},
        {"match": "essay", "reply": {"chunks": ticks(10), "delay": 0.3}},
        {"match": "clean up", "reply": {"tool_calls": [{"name": "terminal", "arguments": {"command": command}}]}},
        {"match": "clean up", "after_tool": true, "reply": {"content": "Cleaned up."}}
    ]));
    within(&env, async {
        let gw = gateway(&env).await;
        let (mut a, _) = gw.connect("phone").await;

        // Stop mid-stream: the partial answer stays, and the lane answers the next message.
        send(&mut a, default_lane(), "count slowly", false).await;
        until(&mut a, |e| e.frame_type() == "message.update").await;
        let ack = a.request(default_lane(), ClientFrame::AgentStop(Empty {})).await.unwrap();
        assert_eq!(ack.frame_type(), "ack");
        let stopped_at = Instant::now();
        let frames = until_idle(&mut a).await;
        eprintln!("stop mid-stream took {:?}", stopped_at.elapsed());
        assert!(stopped_at.elapsed() < Duration::from_secs(4), "{:?}", stopped_at.elapsed());
        let partial = final_text(&frames);
        assert!(partial.starts_with("tick 0 "), "{partial:?}");
        assert!(!partial.contains("tick 19"), "the whole answer streamed despite the stop: {partial:?}");
        assert!(system_texts(&frames).is_empty(), "{:?}", system_texts(&frames));
        let next = turn(&mut a, default_lane(), "hello again").await;
        assert_eq!(final_text(&next), "OK: hello again");

        // Steer a text-only turn: Hermes' "⏩ Steer queued" note never shows, the turn's own
        // answer is intact, and the steering text runs as the next turn.
        send(&mut a, default_lane(), "write an essay", false).await;
        until(&mut a, |e| e.frame_type() == "message.update").await;
        let steer = ClientFrame::AgentSteer(AgentSteer {
            text: STEER.into(),
            ..Default::default()
        });
        assert_eq!(a.request(default_lane(), steer).await.unwrap().frame_type(), "ack");
        let first = until_idle(&mut a).await;
        let second = until_idle(&mut a).await;
        for text in update_texts(&first).iter().chain(update_texts(&second).iter()) {
            assert!(!text.contains("Steer queued"), "the acknowledgement leaked: {text:?}");
        }
        assert_eq!(final_text(&first), ticks(10).concat());
        assert_eq!(final_text(&second), format!("OK: {STEER}"));
        assert!(!types(&second).contains(&"read.receipt"), "no user message stands behind a steer");
        let steered = turn_requests_for(&env, STEER);
        assert_eq!(steered.len(), 1, "{steered:?}");
        let history = steered[0]["body"]["messages"].to_string();
        assert!(history.contains("write an essay") && history.contains("tick 9"), "{history}");
        assert!(!turn_requests_for(&env, "write an essay")[0]["body"].to_string().contains("STEER-7f3a"));

        // Stop while the approval is pending: the turn ends, Hermes is restarted, and the next
        // message gets a real answer that knows the conversation.
        send(&mut a, default_lane(), "clean up please", false).await;
        let (picker, _) = approval(&mut a).await;
        until(&mut a, |e| matches!(&e.body, ServerFrame::AgentBusy(b) if b.reason == BusyReason::WaitingInput)).await;
        let stopped_at = Instant::now();
        a.request(default_lane(), ClientFrame::AgentStop(Empty {})).await.unwrap();
        let frames = until_idle(&mut a).await;
        eprintln!("stop during an approval took {:?}", stopped_at.elapsed());
        let ends = tool_ends(&frames);
        assert!(ends.len() == 1 && !ends[0].ok, "{ends:?}");
        assert!(system_texts(&frames).is_empty(), "a stop is not an error: {:?}", system_texts(&frames));
        let stale = select(&mut a, &picker.picker_id, "allow_once").await.unwrap_err();
        assert!(matches!(stale, ClientError::Server { code: ErrorCode::NotFound, .. }), "{stale:?}");
        assert!(env.work.join("junk/file").exists(), "the stopped command ran");

        let started = Instant::now();
        let next = turn(&mut a, default_lane(), "hello after the stop").await;
        eprintln!("answer after the restart took {:?}", started.elapsed());
        // A wedged Hermes would have answered at once without asking the LLM.
        assert!(!final_text(&next).contains("Queued for the next turn"), "{}", final_text(&next));
        assert_eq!(final_text(&next), "OK: hello after the stop");
        assert!(system_texts(&next).is_empty(), "the session was restored: {:?}", system_texts(&next));
        assert!(gw.agents.restarts() >= 1, "Hermes was restarted");
        let requests = turn_requests_for(&env, "hello after the stop");
        assert_eq!(requests.len(), 1, "{requests:?}");
        let history = requests[0]["body"]["messages"].to_string();
        assert!(history.contains("clean up please") && history.contains("hello again"), "{history}");
        gw.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Titles, models, images.

/// Hermes' title for an auto-thread renames it (with a notification); `/model` offers the fake
/// endpoint's models and switching changes the model the LLM is asked for; an image attachment
/// reaches the LLM as an image part.
#[tokio::test]
#[cfg_attr(
    lacks_hermes_venv,
    ignore = "needs a Hermes venv: IRIS_HERMES_VENV, or .venv in the checkout (README, Connecting Hermes)"
)]
#[cfg_attr(
    lacks_hermes_netns,
    ignore = "needs network namespaces: unshare (util-linux) and ip (iproute2)"
)]
async fn titles_models_and_images() {
    let env = hermes_env!(json!([
        {"kind": "title", "reply": {"content": "Trip To Lisbon"}}
    ]));
    // Hermes passes images to the model only when it knows the model sees them; otherwise it
    // asks a vision helper for a description and sends that text instead. A custom endpoint is
    // unknown to its catalog, so the configuration says so, as a user of a vision model would.
    let config = env.hermes_home.join("config.yaml");
    let yaml = std::fs::read_to_string(&config).unwrap();
    let model_key = format!("context_length: {}}}", hermes::CONTEXT_LENGTH);
    assert!(yaml.contains(&model_key), "{yaml}");
    let vision = format!(
        "context_length: {}, supports_vision: true}}",
        hermes::CONTEXT_LENGTH
    );
    std::fs::write(&config, yaml.replace(&model_key, &vision)).unwrap();
    within(&env, async {
        let gw = gateway(&env).await;
        let (mut a, _) = gw.connect("phone").await;

        // An auto-thread gets an instant name, then Hermes' title.
        let text = "plan a trip to Lisbon";
        let echo = send(&mut a, default_lane(), text, true).await;
        let thread = echo
            .header
            .thread_id
            .clone()
            .expect("the echo is in the new thread");
        // The title comes from a side call after the turn; collect until both have arrived.
        let (mut idle, mut named) = (false, false);
        let frames = until(&mut a, |e| {
            idle |= e.frame_type() == "agent.idle";
            named |= matches!(&e.body, ServerFrame::Notification(n) if n.kind == "channel_renamed");
            idle && named
        })
        .await;
        assert_eq!(final_text(&frames), format!("OK: {text}"));
        let in_thread = |e: &&Event| e.header.thread_id.as_deref() == Some(thread.as_str());
        assert!(
            frames
                .iter()
                .filter(|e| e.frame_type().starts_with("message."))
                .all(|e| in_thread(&e)),
            "the turn runs in the thread: {:?}",
            types(&frames)
        );
        let renamed: Vec<(String, String)> = frames
            .iter()
            .filter_map(|e| match &e.body {
                ServerFrame::ChannelRenamed(r) => Some((r.chat_id.clone(), r.name.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(renamed, [(thread.clone(), "Trip To Lisbon".to_owned())]);
        let note = frames
            .iter()
            .find_map(|e| match &e.body {
                ServerFrame::Notification(n) if n.kind == "channel_renamed" => Some(n.clone()),
                _ => None,
            })
            .unwrap();
        assert_eq!(note.title, "Trip To Lisbon");
        assert_eq!(
            note.body.as_deref(),
            Some("Renamed topic to Trip To Lisbon")
        );
        let (_b, ack) = gw.connect("laptop").await;
        assert!(
            ack.channels
                .iter()
                .any(|c| c.chat_id == thread && c.name == "Trip To Lisbon"),
            "{:?}",
            ack.channels
        );

        // The model picker lists the endpoint's models under their provider; picking one
        // switches the model Hermes asks the LLM for.
        send(&mut a, default_lane(), "/model", false).await;
        let frames = until(&mut a, |e| e.frame_type() == "picker.model").await;
        let picker = match &frames.last().unwrap().body {
            ServerFrame::PickerModel(p) => p.clone(),
            _ => unreachable!(),
        };
        assert_eq!(picker.current_model.as_deref(), Some(hermes::MODEL_ID));
        assert_eq!(picker.current_provider.as_deref(), Some("custom"));
        let custom = picker
            .providers
            .iter()
            .find(|p| p.id == "custom")
            .expect("a custom provider group");
        let ids: Vec<&str> = custom.models.iter().map(|m| m.id.as_str()).collect();
        assert!(
            ids.contains(&hermes::MODEL_ID) && ids.contains(&hermes::OTHER_MODEL_ID),
            "{ids:?}"
        );
        select(&mut a, &picker.picker_id, hermes::OTHER_MODEL_ID)
            .await
            .unwrap();
        let reply = until(
            &mut a,
            |e| matches!(&e.body, ServerFrame::Message(m) if m.role == Role::System),
        )
        .await;
        assert!(
            system_texts(&reply)
                .iter()
                .any(|t| t.contains(hermes::OTHER_MODEL_ID)),
            "{:?}",
            system_texts(&reply)
        );

        // An image, uploaded the way an app does and attached: Hermes passes it to the model.
        let media_ref = "mu_png";
        let start = ClientFrame::MediaUploadStart(MediaUploadStart {
            media_ref: media_ref.into(),
            kind: "image".into(),
            mime: "image/png".into(),
            size: PNG.len() as u64,
            filename: "dots.png".into(),
            voice: false,
        });
        let header = Header {
            id: Some(RequestId::Str(format!("start-{media_ref}"))),
            ..Header::default()
        };
        a.send(header, start).await.unwrap();
        a.send_binary(PNG.to_vec()).await.unwrap();
        let sha256 = hex::encode(Sha256::digest(PNG));
        let end = ClientFrame::MediaUploadEnd(MediaUploadEnd {
            media_ref: media_ref.into(),
            sha256,
        });
        let ack = a
            .request(Header::default(), end)
            .await
            .expect("upload accepted");
        assert!(
            matches!(&ack.body, ServerFrame::MediaUploadAck(u) if u.ok),
            "{}",
            ack.raw
        );
        let question = "what is in this picture?";
        let frame = ClientFrame::MessageSend(MessageSend {
            text: question.into(),
            media_refs: vec![media_ref.into()],
            ..Default::default()
        });
        a.request(default_lane(), frame)
            .await
            .expect("message.send answered");
        let frames = until_idle(&mut a).await;
        let stop = stop_of(&frames);
        assert_eq!(stop.final_text, format!("OK: {question}"));
        assert_eq!(
            stop.runtime.and_then(|r| r.model).as_deref(),
            Some("fake-model-2")
        );
        let requests = turn_requests_for(&env, question);
        assert_eq!(requests.len(), 1, "{requests:?}");
        assert_eq!(
            requests[0]["model"], "fake-model-2",
            "the picked model is used"
        );
        assert_eq!(
            requests[0]["has_image"], true,
            "no image part reached the LLM"
        );
        let data_url = format!(
            "data:image/png;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(PNG)
        );
        assert!(
            requests[0]["body"].to_string().contains(&data_url),
            "the image bytes reached the LLM unchanged"
        );
        gw.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// In-turn steering; models named `provider/model`.

/// The next system message and every frame before it.
async fn system_reply(client: &mut Client) -> Vec<String> {
    let frames = until(
        client,
        |e| matches!(&e.body, ServerFrame::Message(m) if m.role == Role::System),
    )
    .await;
    system_texts(&frames)
}

/// Steering while a tool runs reaches Hermes inside the turn (it adds the text to the tool's
/// result before the next model request): one answer that took it, the steering message stored
/// before that answer, and no second turn for it. Then `/model provider/model` and a model
/// picker answered with `provider/model` (the picker's group and the model, as in the seed)
/// switch the model Hermes asks the LLM for.
#[tokio::test]
#[cfg_attr(
    lacks_hermes_venv,
    ignore = "needs a Hermes venv: IRIS_HERMES_VENV, or .venv in the checkout (README, Connecting Hermes)"
)]
#[cfg_attr(
    lacks_hermes_netns,
    ignore = "needs network namespaces: unshare (util-linux) and ip (iproute2)"
)]
async fn in_turn_steering_and_models_named_provider_slash_model() {
    let env = hermes_env!(json!([
        {"match": "build it", "reply": {
            "content": "Building.",
            "tool_calls": [{"name": "terminal", "arguments": {"command": "sleep 2; echo built"}}]}},
        {"match": "build it", "after_tool": true, "reply": {"content": "Built, as steered."}}
    ]));
    within(&env, async {
        let gw = gateway(&env).await;
        let (mut a, _) = gw.connect("phone").await;

        send(&mut a, default_lane(), "build it now", false).await;
        until(&mut a, |e| e.frame_type() == "tool.start").await;
        let steer = ClientFrame::AgentSteer(AgentSteer {
            text: STEER.into(),
            ..Default::default()
        });
        assert_eq!(
            a.request(default_lane(), steer).await.unwrap().frame_type(),
            "ack"
        );
        let frames = until_idle(&mut a).await;
        assert_eq!(final_text(&frames), "Built, as steered.");
        for text in update_texts(&frames) {
            assert!(
                !text.contains("Steer queued"),
                "the acknowledgement leaked: {text:?}"
            );
        }
        let requests = turn_requests_for(&env, "build it now");
        assert_eq!(requests.len(), 2, "{requests:?}");
        let after_tool = requests[1]["body"]["messages"].to_string();
        assert!(
            after_tool.contains(STEER),
            "the steer rode on the tool's result: {after_tool}"
        );
        // Taken in the turn, the steering text is not run again as a turn of its own.
        let next = turn(&mut a, default_lane(), "hello after steering").await;
        assert_eq!(final_text(&next), "OK: hello after steering");
        assert!(turn_requests_for(&env, STEER).is_empty());
        let (mut fresh, _) = gw.connect("fresh").await;
        let lines: Vec<(Role, bool, String)> = lane_history(&mut fresh, default_lane())
            .await
            .into_iter()
            .map(|m| (m.role, m.steering, m.text))
            .collect();
        let texts: Vec<(Role, bool, &str)> =
            lines.iter().map(|(r, s, t)| (*r, *s, t.as_str())).collect();
        assert_eq!(
            texts[..3],
            [
                (Role::User, false, "build it now"),
                (Role::User, true, STEER),
                (Role::Assistant, false, "Built, as steered."),
            ],
            "{texts:?}"
        );

        // `/model <provider/model>`, the provider being the picker's group (`custom`).
        send(&mut a, default_lane(), "/model custom/fake-model-2", false).await;
        let said = system_reply(&mut a).await;
        assert!(
            said.iter().any(|t| t.contains(hermes::OTHER_MODEL_ID)),
            "{said:?}"
        );
        let frames = turn(&mut a, default_lane(), "which model now").await;
        assert_eq!(stop_of(&frames).model.as_deref(), Some("fake-model-2"));
        assert_eq!(
            turn_requests_for(&env, "which model now")[0]["model"],
            "fake-model-2"
        );

        // The picker answered with `provider/model`, as the seed's example has it.
        send(&mut a, default_lane(), "/model", false).await;
        let frames = until(&mut a, |e| e.frame_type() == "picker.model").await;
        let picker = match &frames.last().unwrap().body {
            ServerFrame::PickerModel(p) => p.clone(),
            _ => unreachable!(),
        };
        assert_eq!(
            picker.current_model.as_deref(),
            Some(hermes::OTHER_MODEL_ID)
        );
        select(&mut a, &picker.picker_id, "custom/fake-model")
            .await
            .unwrap();
        let said = system_reply(&mut a).await;
        assert!(
            said.iter().any(|t| t.contains(hermes::MODEL_ID)),
            "{said:?}"
        );
        let frames = turn(&mut a, default_lane(), "and which model now").await;
        assert_eq!(stop_of(&frames).model.as_deref(), Some("fake-model"));
        assert_eq!(
            turn_requests_for(&env, "and which model now")[0]["model"],
            "fake-model"
        );
        gw.stop().await;
    })
    .await;
}
