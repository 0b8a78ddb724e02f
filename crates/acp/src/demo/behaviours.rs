//! What the rules of the script do, apart from the questions (see `questions.rs`). Each
//! behaviour is a small method of [`Turn`] that says what the demo says and tells the script
//! whether to go on.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::json;

use super::catalog::answer_command;
use super::fixtures::{
    demo_file_text, DEFAULT_MODEL, DEMO_FILE_NAME, DEMO_PNG_BASE64, SILENT_ANSWER,
};
use super::script::{bench_request, Flow, Prompt, Step, Stop};
use super::turn::{chunk, Cancelled, Turn};
use crate::types::*;

/// Chunks of a `slow` turn.
const SLOW_CHUNKS: usize = 20;

/// What a `flood` turn writes: this many chunks of this many bytes.
const FLOOD_CHUNKS: usize = 128;
const FLOOD_CHUNK_BYTES: usize = 64 * 1024;
/// What a `deluge` turn writes: this many chunks of [`FLOOD_CHUNK_BYTES`] (50 MiB).
const DELUGE_CHUNKS: usize = 800;
/// Tool calls of a `spree` turn.
const SPREE_CALLS: usize = 2_000;
/// Titles of a `rename` turn.
const RENAME_TITLES: usize = 50;
/// Files of a `hoard` turn.
const HOARD_FILES: usize = 100;
/// Commands a `crowd` turn advertises.
const CROWD_COMMANDS: usize = 5_000;

impl Turn<'_> {
    /// `title`: a title follows the answer.
    pub(super) fn mark_title(&mut self) -> Step {
        self.titles.push("Demo title".into());
        Ok(Flow::Next)
    }

    /// `rename`: titles without end, during the turn.
    pub(super) fn rename(&mut self) -> Step {
        for i in 1..=RENAME_TITLES {
            let info = SessionInfoUpdate {
                title: Some(format!("Title {i}")),
                updated_at: None,
            };
            self.update(SessionUpdate::SessionInfoUpdate(info));
        }
        Ok(Flow::Next)
    }

    /// `freeze`: a hung agent; no output, and cancel is ignored.
    pub(super) async fn freeze(&mut self) -> Step {
        std::future::pending::<Step>().await
    }

    /// `wedge`: a tool that runs until cancelled, then, like Hermes, a failed prompt and a
    /// wedged session.
    pub(super) async fn wedge(&mut self) -> Step {
        let id = self.start_tool("sleep 30");
        self.tool_status(&id, ToolCallStatus::InProgress, Some("$ sleep 30"), None);
        self.wait_cancel().await;
        self.demo.wedge(self.session_id);
        Err(Stop::Failed(
            crate::rpc::INTERNAL_ERROR,
            "Internal error".to_owned(),
        ))
    }

    /// `garbage`: a line on the wire that is not JSON-RPC.
    pub(super) fn garbage(&mut self) -> Step {
        let _ = self
            .demo
            .conn
            .send_raw_line("this line is not JSON-RPC {{{");
        Ok(Flow::Next)
    }

    /// `crash`: one chunk, then the whole process exits with status 3.
    pub(super) async fn crash(&mut self) -> Step {
        self.say("Crashing now.");
        let _ = self.demo.conn.flush().await;
        tracing::warn!("demo agent exits on request (crash keyword)");
        std::process::exit(3);
    }

    /// `collapse`: a commentary beat and a running tool, then the whole process exits with
    /// status 3 before any answer text.
    pub(super) async fn collapse(&mut self) -> Step {
        self.say("Building first.");
        let id = self.start_tool("make build");
        self.tool_status(&id, ToolCallStatus::InProgress, None, None);
        let _ = self.demo.conn.flush().await;
        tracing::warn!("demo agent exits on request (collapse keyword)");
        std::process::exit(3);
    }

    /// `hang`: nothing until cancelled.
    pub(super) async fn hang(&mut self) -> Step {
        self.wait_cancel().await;
        Err(Stop::Cancelled)
    }

    /// `flood`: text without end, as a runaway agent writes it, until cancelled.
    pub(super) async fn flood(&mut self) -> Step {
        let text = "flood ".repeat(FLOOD_CHUNK_BYTES / 6);
        for _ in 0..FLOOD_CHUNKS {
            // Lets the cancel in, and goes as fast as the client reads.
            tokio::task::yield_now().await;
            self.room(1).await;
            self.check()?;
            self.update(SessionUpdate::AgentMessageChunk(chunk(&text)));
        }
        Ok(Flow::Done)
    }

    /// `deluge`: 50 MiB of text as fast as the client reads it, deaf to cancel, as an agent
    /// that runs away and does not listen writes it.
    pub(super) async fn deluge(&mut self) -> Step {
        let text = "deluge ".repeat(FLOOD_CHUNK_BYTES / 7);
        for _ in 0..DELUGE_CHUNKS {
            self.room(1).await;
            self.update(SessionUpdate::AgentMessageChunk(chunk(&text)));
        }
        Ok(Flow::Done)
    }

    /// `spree`: tool calls without end, as a runaway agent makes them, until cancelled.
    pub(super) async fn spree(&mut self) -> Step {
        for _ in 0..SPREE_CALLS {
            tokio::task::yield_now().await;
            self.room(2).await;
            self.check()?;
            let id = self.start_tool("true");
            self.tool_status(&id, ToolCallStatus::Completed, None, None);
        }
        Ok(Flow::Done)
    }

    /// `hoard`: files without end, as a runaway agent sends them, until cancelled.
    pub(super) async fn hoard(&mut self) -> Step {
        for i in 0..HOARD_FILES {
            tokio::task::yield_now().await;
            self.room(1).await;
            self.check()?;
            let resource = ResourceContents {
                uri: format!("file:///hoard/note-{i}.txt"),
                mime_type: Some("text/plain".into()),
                text: Some(format!("note {i}\n")),
                blob: None,
            };
            let content = ContentBlock::Resource(EmbeddedResource { resource });
            self.update(SessionUpdate::AgentMessageChunk(ContentChunk { content }));
        }
        Ok(Flow::Done)
    }

    /// `crowd`: a runaway agent's command list, with a name of 1,000 characters first.
    pub(super) fn crowd(&mut self) -> Step {
        let long = |word: &str, n: usize| word.repeat(n);
        let mut available_commands = vec![AvailableCommand {
            name: long("n", 1_000),
            description: "a name no one can type".into(),
            input: None,
        }];
        available_commands.extend((0..CROWD_COMMANDS).map(|i| AvailableCommand {
            name: format!("crowd{i}"),
            description: long("words ", 200),
            input: Some(AvailableCommandInput {
                hint: long("hint ", 100),
            }),
        }));
        self.update(SessionUpdate::AvailableCommandsUpdate(
            AvailableCommandsUpdate { available_commands },
        ));
        self.say("Crowded.");
        Ok(Flow::Done)
    }

    /// A slash command, answered locally.
    pub(super) fn slash_command(&mut self, prompt: &Prompt<'_>) -> Step {
        if let Some(command) = prompt.slash_command() {
            let answer = answer_command(command, prompt.model_id);
            self.say(&answer);
        }
        Ok(Flow::Done)
    }

    /// `bench <n> [<gap_us>]`: streams `n` chunks `gap_us` apart, each carrying its send time
    /// (unix nanoseconds): the load tool on the same machine subtracts it from the time a
    /// device receives the chunk.
    pub(super) async fn bench(&mut self, prompt: &Prompt<'_>) -> Step {
        let (count, gap) = bench_request(&prompt.text).unwrap_or_default();
        // Chunk i is due at start + i × gap: a late wake-up does not push the later chunks back.
        let start = tokio::time::Instant::now();
        for i in 0..count {
            if !gap.is_zero() {
                tokio::select! {
                    _ = tokio::time::sleep_until(start + gap * i as u32) => {}
                    _ = self.wait_cancel() => return Err(Stop::Cancelled),
                }
            }
            self.check()?;
            self.room(1).await;
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            self.say(&format!("{nanos} "));
        }
        Ok(Flow::Done)
    }

    /// `silent`: the marker of a scheduled job with nothing to say, and nothing else.
    pub(super) fn silent(&mut self) -> Step {
        self.say(SILENT_ANSWER);
        Ok(Flow::Done)
    }

    /// `environment`: what of the environment reached the agent, for tests of what a gateway
    /// passes on. Values of `IRIS_*` variables are never said.
    pub(super) fn environment(&mut self) -> Step {
        let mut seen: Vec<String> = std::env::vars_os()
            .filter_map(|(k, v)| {
                let k = k.to_string_lossy().into_owned();
                if k.starts_with("IRIS_") {
                    Some(k)
                } else if k.starts_with("DEMO_") {
                    Some(format!("{k}={}", v.to_string_lossy()))
                } else {
                    None
                }
            })
            .collect();
        seen.sort();
        let list = if seen.is_empty() {
            "none".to_owned()
        } else {
            seen.join(" ")
        };
        self.say(&format!("Environment: {list}"));
        Ok(Flow::Done)
    }

    /// `sessions`: how many sessions are open, resumed and loaded.
    pub(super) fn sessions(&mut self) -> Step {
        let summary = self.demo.state().sessions_summary();
        self.say(&summary);
        Ok(Flow::Done)
    }

    /// `recall`: the user text of each earlier turn of the session.
    pub(super) fn recall(&mut self) -> Step {
        let turns = self.demo.state().history_of(self.session_id);
        let mut text = format!("Recall: {} earlier turns", turns.len());
        if !turns.is_empty() {
            text.push_str(": ");
            text.push_str(&turns.join(" / "));
        }
        self.say(&text);
        Ok(Flow::Done)
    }

    /// `future`: what an agent of a newer ACP version might send.
    pub(super) fn future(&mut self) -> Step {
        self.update(SessionUpdate::Unknown(serde_json::json!({
            "sessionUpdate": "future_update",
            "detail": {"kind": "teleport", "progress": 0.5},
        })));
        let chunk = serde_json::json!({
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "Future-proof. "},
            "futureField": {"x": 1},
        });
        self.demo.send_raw_update(self.session_id, chunk);
        self.said.push_str("Future-proof. ");
        Ok(Flow::Next)
    }

    /// `cost`: a `usage_update` that reports what the session cost.
    pub(super) fn cost(&mut self) -> Step {
        self.update(SessionUpdate::UsageUpdate(UsageUpdate {
            size: Some(65536),
            used: Some(1200),
            cost: Some(serde_json::json!({"amount": 0.0125, "currency": "USD"})),
        }));
        Ok(Flow::Next)
    }

    /// `think`: thought chunks.
    pub(super) fn think(&mut self) -> Step {
        for part in ["Thinking about ", "what you said", "…"] {
            self.update(SessionUpdate::AgentThoughtChunk(chunk(part)));
        }
        Ok(Flow::Next)
    }

    /// `plan`: a plan of three entries.
    pub(super) fn plan(&mut self) -> Step {
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
        Ok(Flow::Next)
    }

    /// `tool`: a command that runs and prints `hello`, between two texts.
    pub(super) fn tool(&mut self) -> Step {
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
        Ok(Flow::Next)
    }

    /// `edit`: a file change shown as an ACP `diff`, not written.
    pub(super) fn edit(&mut self) -> Step {
        self.show_edit(
            "write_file",
            "notes.txt",
            Some("one\ntwo\nthree\n"),
            "one\n2\nthree\nfour\n",
        );
        self.say("Edited notes.txt. ");
        Ok(Flow::Next)
    }

    /// `revise`: several edits in one turn, none written: `notes.txt` twice as whole files, each
    /// starting from the text the last left, and `draft.txt` twice by snippets, as Claude
    /// Code's `Edit` sends them.
    pub(super) fn revise(&mut self) -> Step {
        let first = "one\n2\nthree\n";
        self.show_edit("write_file", "notes.txt", Some("one\ntwo\nthree\n"), first);
        self.show_edit("Edit", "draft.txt", Some("alpha\n"), "ALPHA\n");
        self.show_edit(
            "write_file",
            "notes.txt",
            Some(first),
            "one\n2\nthree\nfour\n",
        );
        self.show_edit("Edit", "draft.txt", Some("gamma\n"), "GAMMA\n");
        self.say("Revised notes.txt and draft.txt. ");
        Ok(Flow::Next)
    }

    /// A completed `edit` tool call of `<cwd>/<name>` whose content is the change as a `diff`.
    fn show_edit(&mut self, tool: &str, name: &str, old: Option<&str>, new: &str) {
        let id = self.fresh_tool_id();
        let path = format!("{}/{name}", self.cwd.trim_end_matches('/'));
        self.update(SessionUpdate::ToolCall(ToolCall {
            tool_call_id: id.clone(),
            title: format!("{tool}: {name}"),
            kind: ToolKind::Edit,
            status: Some(ToolCallStatus::Pending),
            raw_input: Some(json!({ "path": path })),
            raw_output: None,
            content: vec![ToolCallContent::Diff(Diff {
                path,
                old_text: old.map(str::to_owned),
                new_text: new.into(),
            })],
            locations: Vec::new(),
        }));
        self.tool_status(&id, ToolCallStatus::Completed, None, None);
    }

    /// `fail`: a command that fails.
    pub(super) fn failing_tool(&mut self) -> Step {
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
        Ok(Flow::Next)
    }

    /// Stops a cancelled turn.
    pub(super) fn checkpoint(&mut self) -> Step {
        self.check()?;
        Ok(Flow::Next)
    }

    /// Acknowledges the image, audio, file link and embedded resource blocks of the prompt.
    pub(super) fn attachments(&mut self, prompt: &Prompt<'_>) -> Step {
        for block in prompt.blocks {
            let note = match block {
                ContentBlock::Image(image) => {
                    format!(
                        "Received image {} ({} bytes)",
                        image.mime_type,
                        base64_len(&image.data)
                    )
                }
                ContentBlock::Audio(audio) => {
                    format!(
                        "Received audio {} ({} bytes)",
                        audio.mime_type,
                        base64_len(&audio.data)
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
        Ok(Flow::Next)
    }

    /// `mkfile`: writes the demo file into the session's working directory and shares it the
    /// way agents without file content blocks do: a `MEDIA:<path>` line.
    pub(super) async fn make_file(&mut self) -> Step {
        let path = std::path::Path::new(&self.cwd).join(DEMO_FILE_NAME);
        match tokio::fs::write(&path, demo_file_text()).await {
            Ok(()) => self.say(&format!("Here is a file.\nMEDIA:{}\n\n", path.display())),
            Err(e) => self.say(&format!("Could not write {}: {e}\n\n", path.display())),
        }
        Ok(Flow::Next)
    }

    /// `mkimage`: an image content block in the answer.
    pub(super) fn make_image(&mut self) -> Step {
        self.say("Here is an image.\n\n");
        let image = ContentBlock::image(DEMO_PNG_BASE64, "image/png");
        self.update(SessionUpdate::AgentMessageChunk(ContentChunk {
            content: image,
        }));
        Ok(Flow::Next)
    }

    /// `slow`: chunks with a pause before each, stopped by cancel.
    pub(super) async fn slow(&mut self) -> Step {
        for i in 0..SLOW_CHUNKS {
            self.pause().await?;
            self.say(&format!("tick {i} "));
        }
        Ok(Flow::Next)
    }

    /// `linger`: some text, then an answer that never goes on until it is stopped.
    pub(super) async fn linger(&mut self) -> Step {
        self.say("Lingering. ");
        self.wait_cancel().await;
        Err(Stop::Cancelled)
    }

    /// `keepalive`: empty chunks around some text, each after a pause.
    pub(super) async fn keep_alive(&mut self) -> Step {
        self.empty_chunks(2).await?;
        self.say("Working. ");
        self.empty_chunks(2).await?;
        self.say("Done. ");
        Ok(Flow::Next)
    }

    /// `n` empty `agent_message_chunk`s, each after a pause.
    async fn empty_chunks(&mut self, n: usize) -> Result<(), Cancelled> {
        for _ in 0..n {
            self.pause().await?;
            self.update(SessionUpdate::AgentMessageChunk(chunk("")));
        }
        Ok(())
    }

    /// The echo of the prompt text, unless the text is empty and something was said already.
    pub(super) fn echo(&mut self, prompt: &Prompt<'_>) -> Step {
        if !prompt.text.is_empty() || self.said.is_empty() {
            for part in split_chunks(&format!("Echo: {}", prompt.text), 3) {
                self.say(&part);
            }
        }
        Ok(Flow::Next)
    }

    /// Names the model when it is not the default.
    pub(super) fn model_note(&mut self, prompt: &Prompt<'_>) -> Step {
        if prompt.model_id != DEFAULT_MODEL {
            self.say(&format!("\n\n(model: {})", prompt.model_id));
        }
        Ok(Flow::Next)
    }
}

/// Bytes encoded by a base64 string, without decoding it.
fn base64_len(data: &str) -> usize {
    let symbols = data
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b'=')
        .count();
    symbols * 3 / 4
}

/// Splits `text` into `parts` pieces of roughly equal length, on character boundaries.
fn split_chunks(text: &str, parts: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(parts).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
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
}
