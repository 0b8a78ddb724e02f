//! The Markdown form of an export: a heading per chat and thread, one section per message with
//! its author and time (UTC), the text as the author wrote it (it is Markdown already), links to
//! copied media, and a note where an answer did not complete. Everything a message, an agent
//! or a device wrote goes through [`harmless`]: no raw HTML, script links or remote images.

use std::fmt::Write;

use iris_protocol::{ChatExport, ExportedLane, Message, PickerOutcome, Role, Step, TurnEnd};

use super::harmless::harmless;

/// The whole document.
pub fn render(doc: &ChatExport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# {}\n", harmless(&one_line(&doc.chat.name)));
    let _ = writeln!(
        out,
        "_Exported from Iris Gateway on {} (chat `{}`)._\n",
        when(doc.exported_at),
        doc.chat.chat_id
    );
    lane(&mut out, doc, &doc.chat);
    for thread in &doc.threads {
        let _ = writeln!(out, "## Thread: {}\n", harmless(&one_line(&thread.name)));
        lane(&mut out, doc, thread);
    }
    out
}

fn lane(out: &mut String, doc: &ChatExport, lane: &ExportedLane) {
    if lane.messages.is_empty() {
        out.push_str("_No messages._\n\n");
    }
    for m in &lane.messages {
        message(out, doc, m);
    }
}

fn message(out: &mut String, doc: &ChatExport, m: &Message) {
    let mut who = match m.role {
        Role::User if m.steering => "You (steering)".to_owned(),
        Role::User => "You".to_owned(),
        Role::Assistant => "Agent".to_owned(),
        Role::System => "Gateway".to_owned(),
        Role::Cron => "Scheduled".to_owned(),
    };
    if let Some(model) = m
        .model
        .as_deref()
        .or(m.runtime.as_ref().and_then(|r| r.model.as_deref()))
    {
        let _ = write!(who, " · {}", harmless(&one_line(model)));
    }
    let _ = writeln!(out, "### {who} · {}\n", when(m.ts));
    if let Some(reasoning) = m.reasoning.as_deref().filter(|r| !r.trim().is_empty()) {
        for line in harmless(reasoning).lines() {
            let _ = writeln!(out, "> {line}");
        }
        out.push('\n');
    }
    for step in &m.steps {
        self::step(out, step);
    }
    if !m.turn_changes.is_empty() {
        out.push_str("- Changes of this turn, each file from before the turn to after it:\n");
        for change in &m.turn_changes {
            file_change(out, change);
        }
    }
    if !m.steps.is_empty() || !m.turn_changes.is_empty() {
        out.push('\n');
    }
    if !m.text.is_empty() {
        out.push_str(&without_headings(&harmless(m.text.trim_end())));
        out.push_str("\n\n");
    }
    for media in &m.media {
        let name = media.filename.replace(['[', ']'], "");
        match doc.media_files.get(&media.media_id) {
            Some(path) => {
                let _ = writeln!(out, "- Attachment: [{name}](<{path}>)");
            }
            None => {
                let _ = writeln!(out, "- Attachment: {name} (not copied)");
            }
        }
    }
    if !m.media.is_empty() {
        out.push('\n');
    }
    let note = match m.ended {
        Some(TurnEnd::Stopped) => Some("Stopped before the answer was complete."),
        Some(TurnEnd::CutOff) => Some("Cut off: the gateway went down during this answer."),
        Some(TurnEnd::AgentFailed) => Some("The agent failed during this answer."),
        Some(TurnEnd::Completed) | None => None,
    };
    if let Some(note) = note {
        let _ = writeln!(out, "_{note}_\n");
    }
}

/// One step of the turn as a list item: what the agent said, ran, planned and asked.
fn step(out: &mut String, step: &Step) {
    match step {
        Step::Commentary { text } => {
            let _ = writeln!(out, "- _{}_", harmless(&one_line(text.trim())));
        }
        Step::Tool(t) => {
            let status = match t.ok {
                Some(true) => "done",
                Some(false) => "failed",
                None => "did not finish",
            };
            let what = t.preview.as_deref().map(one_line).unwrap_or_default();
            let _ = writeln!(
                out,
                "- Tool `{}` {} ({status})",
                in_code(&t.name),
                harmless(&what)
            );
            for change in &t.changes {
                file_change(out, change);
            }
        }
        Step::Plan { text } => {
            out.push_str("- Plan:\n");
            for line in harmless(text).lines().filter(|l| !l.trim().is_empty()) {
                let _ = writeln!(out, "  {}", line.trim());
            }
        }
        Step::Picker(p) => {
            let answer = match p.outcome {
                Some(PickerOutcome::Answered) | None => p
                    .label
                    .as_deref()
                    .or(p.value.as_deref())
                    .unwrap_or("answered"),
                Some(PickerOutcome::Expired) => "expired",
                Some(PickerOutcome::Cancelled) => "cancelled",
            };
            let _ = writeln!(
                out,
                "- Asked: {} → {}",
                harmless(&one_line(&p.title)),
                harmless(&one_line(answer))
            );
        }
    }
}

/// A file a tool changed: its path and counts, and its diff as a fenced `diff` block (the fence
/// longer than any run of backticks in the diff, so the diff cannot end it).
fn file_change(out: &mut String, change: &iris_protocol::FileChange) {
    let cut = if change.truncated {
        ", diff cut short"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "  - `{}` +{} −{}{cut}{}",
        in_code(&change.path),
        change.added,
        change.removed,
        if change.outside {
            " (outside the agent's directory)"
        } else {
            ""
        }
    );
    if change.diff.is_empty() {
        return;
    }
    let longest = change
        .diff
        .split(|c| c != '`')
        .map(str::len)
        .max()
        .unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let _ = writeln!(out, "    {fence}diff");
    for line in change.diff.lines() {
        let _ = writeln!(out, "    {line}");
    }
    let _ = writeln!(out, "    {fence}");
}

/// `2026-12-03 10:04 UTC`.
fn when(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_else(|| ms.to_string())
}

/// A name on one line (headings end at a newline).
/// A message's Markdown with its headings escaped (`\#`, and `\` before a setext underline),
/// outside code fences: the text keeps its formatting but cannot start a section of the
/// document's own (a forged "## Thread:" or "### User · …").
fn without_headings(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut fence: Option<&str> = None;
    for (i, line) in text.lines().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) if indent <= 3 => fence = Some(m),
            (Some(open), Some(m)) if m == open => fence = None,
            _ => {}
        }
        let heading = trimmed.starts_with('#')
            || (!trimmed.is_empty() && trimmed.trim_end().chars().all(|c| c == '=' || c == '-'));
        if fence.is_none() && marker.is_none() && indent <= 3 && heading {
            out.push_str(&line[..indent]);
            out.push('\\');
            out.push_str(trimmed);
        } else {
            out.push_str(line);
        }
    }
    out
}

/// A name inside a code span: on one line, without the backticks that would end the span.
fn in_code(s: &str) -> String {
    one_line(s).replace('`', "'")
}

fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use iris_protocol::EXPORT_FORMAT;

    fn msg(role: Role, text: &str, ended: Option<TurnEnd>) -> Message {
        Message {
            message_id: "m".into(),
            role,
            text: text.into(),
            ts: 1_780_000_000_000,
            ended,
            ..Message::default()
        }
    }

    #[test]
    fn a_stopped_answer_says_so_and_authors_are_named() {
        let doc = ChatExport {
            format: EXPORT_FORMAT.into(),
            version: 1,
            exported_at: 1_780_000_000_000,
            chat: ExportedLane {
                chat_id: "c1".into(),
                name: "Plans\nfor May".into(),
                kind: "channel".into(),
                created_at: 0,
                messages: vec![
                    msg(Role::User, "hello", None),
                    msg(Role::Assistant, "hi th", Some(TurnEnd::Stopped)),
                ],
            },
            threads: vec![],
            media_files: Default::default(),
        };
        let md = render(&doc);
        assert!(md.starts_with("# Plans for May\n"), "{md}");
        assert!(
            md.contains("### You · 2026-05-28 20:26 UTC\n\nhello\n"),
            "{md}"
        );
        assert!(md.contains("### Agent · "), "{md}");
        assert!(
            md.contains("_Stopped before the answer was complete._"),
            "{md}"
        );
    }
}
