//! A tool call's file changes (ACP `diff` content: a path, the old and the new text) as the
//! answer keeps them: a unified diff per file with its `+`/`−` counts, within
//! [`MAX_CHANGE_BYTES`] per file and [`MAX_TURN_CHANGE_BYTES`] per turn. Texts too large to
//! compare quickly keep their counts only, so an agent cannot make the lane spend seconds or
//! megabytes on one edit.
//!
//! The budget also follows each file through the turn's edits ([`Edit`]): when a file was
//! changed by more than one call that succeeded and each edit starts from the text the one
//! before left (or every edit wrote the whole file), the turn's change to it is one diff from
//! the first edit's old text to the last one's new text ([`ChangeBudget::combined`]). Edits of
//! snippets (Claude Code's `Edit` sends the replaced lines only) do not chain, and keep their
//! diffs one per edit. The texts kept for this are bounded by [`MAX_KEPT_TEXT`] per turn.
//!
//! Paths and diffs are the agent's text: what would not show or would change how the rest
//! shows (ESC sequences, bidi overrides, zero-width characters) is written out as `<U+XXXX>`
//! ([`crate::text::reveal_hidden`]); a path outside the agent's working directory is marked
//! `outside` ([`outside`]).

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use iris_acp::ToolCallContent;
use iris_protocol::{FileChange, MAX_CHANGE_BYTES, MAX_TURN_CHANGE_BYTES, MAX_TURN_TOOLS};
use similar::{ChangeTag, TextDiff};

/// Texts larger than this (old and new together) are not compared line by line.
const MAX_COMPARED_BYTES: usize = 1024 * 1024;
/// The longest a comparison may take; past it the diff is coarser but correct.
const COMPARE_DEADLINE: Duration = Duration::from_millis(50);
/// Lines of context around each change.
const CONTEXT: usize = 3;

/// Most bytes of old and new texts a turn keeps to combine a file's edits; a file whose edits
/// would pass it keeps its diffs one per edit.
pub const MAX_KEPT_TEXT: usize = 4 * 1024 * 1024;
/// Most files a turn follows through its edits.
const MAX_FOLLOWED_FILES: usize = 256;

/// One tool call's change to a file, as the agent sent it.
#[derive(Debug)]
struct Edit {
    call: String,
    old: Option<String>,
    new: String,
}

impl Edit {
    /// The bytes of text it keeps.
    fn size(&self) -> usize {
        self.old.as_ref().map_or(0, String::len) + self.new.len()
    }
}

/// A file the turn changed, with its edits in order; `lost` once its texts are not all kept.
#[derive(Debug, Default)]
struct Followed {
    path: String,
    edits: Vec<Edit>,
    lost: bool,
}

/// The diff bytes a turn may still keep, and the texts of its files' edits.
#[derive(Debug)]
pub struct ChangeBudget {
    /// The agent's working directory (empty: no path is marked `outside`).
    dir: PathBuf,
    left: usize,
    files: Vec<Followed>,
    kept: usize,
    /// Calls that ended without success: their edits do not count.
    failed: Vec<String>,
}

impl Default for ChangeBudget {
    fn default() -> Self {
        ChangeBudget {
            dir: PathBuf::new(),
            left: MAX_TURN_CHANGE_BYTES,
            files: Vec::new(),
            kept: 0,
            failed: Vec::new(),
        }
    }
}

impl ChangeBudget {
    /// The budget of a turn of an agent working in `dir` (a relative one is taken from the
    /// gateway's own working directory, as the agent's process was started).
    pub fn within(dir: PathBuf) -> ChangeBudget {
        let dir = match dir.is_relative() && !dir.as_os_str().is_empty() {
            true => std::path::absolute(&dir).unwrap_or(dir),
            false => dir,
        };
        ChangeBudget {
            dir,
            ..ChangeBudget::default()
        }
    }

    /// The file changes in tool call `call`'s `content` (see [`ChangeBudget::take`]), followed
    /// for the turn's combined changes: a call that sends its diff again replaces its edit.
    pub fn take_for(&mut self, call: &str, content: &[ToolCallContent]) -> Vec<FileChange> {
        for c in content {
            if let ToolCallContent::Diff(d) = c {
                self.follow(call, &d.path, d.old_text.as_deref(), &d.new_text);
            }
        }
        self.take(content)
    }

    /// Tool call `call` ended; edits of a call that failed are not part of the turn's change.
    pub fn ended(&mut self, call: &str, ok: bool) {
        if !ok && self.failed.len() < MAX_TURN_TOOLS {
            self.failed.push(call.to_owned());
        }
    }

    fn follow(&mut self, call: &str, path: &str, old: Option<&str>, new: &str) {
        let at = match self.files.iter().position(|f| f.path == path) {
            Some(at) => at,
            None if self.files.len() < MAX_FOLLOWED_FILES => {
                self.files.push(Followed {
                    path: path.to_owned(),
                    ..Followed::default()
                });
                self.files.len() - 1
            }
            None => return,
        };
        let file = &mut self.files[at];
        if file.lost {
            return;
        }
        // A call that sends its diff again keeps its place among the file's edits.
        let again = file.edits.iter().position(|e| e.call == call);
        let replaced = again.map_or(0, |i| file.edits[i].size());
        let size = old.map_or(0, str::len) + new.len();
        if self.kept - replaced + size > MAX_KEPT_TEXT {
            file.lost = true;
            self.kept -= file.edits.drain(..).map(|e| e.size()).sum::<usize>();
            return;
        }
        self.kept = self.kept - replaced + size;
        let edit = Edit {
            call: call.to_owned(),
            old: old.map(str::to_owned),
            new: new.to_owned(),
        };
        match again {
            Some(i) => file.edits[i] = edit,
            None => file.edits.push(edit),
        }
    }

    /// The turn's change to each file that more than one successful call changed, when its
    /// edits chain (see the module docs), in the order the files were first changed. Its diff
    /// has a budget of its own, as large as the turn's.
    pub fn combined(&self) -> Vec<FileChange> {
        let mut own = ChangeBudget::within(self.dir.clone());
        self.files
            .iter()
            .filter(|f| !f.lost)
            .filter_map(|f| {
                let edits: Vec<&Edit> = f
                    .edits
                    .iter()
                    .filter(|e| !self.failed.contains(&e.call))
                    .collect();
                let (first, last) = (edits.first()?, edits.last()?);
                let whole = edits.iter().all(|e| e.old.is_none());
                let chained = edits
                    .windows(2)
                    .all(|w| w[1].old.as_deref() == Some(&w[0].new));
                (edits.len() > 1 && (whole || chained))
                    .then(|| own.change(&f.path, first.old.as_deref(), &last.new))
            })
            .collect()
    }

    /// The file changes in `content`, in order; empty when it has none.
    pub fn take(&mut self, content: &[ToolCallContent]) -> Vec<FileChange> {
        content
            .iter()
            .filter_map(|c| match c {
                ToolCallContent::Diff(d) => {
                    Some(self.change(&d.path, d.old_text.as_deref(), &d.new_text))
                }
                _ => None,
            })
            .collect()
    }

    fn change(&mut self, path: &str, old: Option<&str>, new: &str) -> FileChange {
        let outside = !self.dir.as_os_str().is_empty() && outside(&self.dir, path);
        let path = crate::text::head(&crate::text::reveal_hidden(path, false), 1024);
        let before = old.unwrap_or("");
        let mut change = FileChange {
            path: path.clone(),
            new_file: old.is_none(),
            outside,
            ..FileChange::default()
        };
        if before.len() + new.len() > MAX_COMPARED_BYTES {
            change.removed = before.lines().count() as u32;
            change.added = new.lines().count() as u32;
            change.truncated = true;
            return change;
        }
        let diff = TextDiff::configure()
            .timeout(COMPARE_DEADLINE)
            .diff_lines(before, new);
        for op in diff.ops() {
            for c in diff.iter_changes(op) {
                match c.tag() {
                    ChangeTag::Insert => change.added += 1,
                    ChangeTag::Delete => change.removed += 1,
                    ChangeTag::Equal => {}
                }
            }
        }
        let from = if old.is_some() {
            path.as_str()
        } else {
            "/dev/null"
        };
        let text = diff
            .unified_diff()
            .context_radius(CONTEXT)
            .header(from, &path)
            .to_string();
        let text = crate::text::reveal_hidden(&text, true);
        let room = self.left.min(MAX_CHANGE_BYTES);
        if text.len() <= room {
            self.left -= text.len();
            change.diff = text;
        } else {
            // Cut at a line end, so that what is kept is a readable start of the diff.
            let cut = crate::text::prefix_bytes(&text, room);
            let cut = &cut[..cut.rfind('\n').map_or(0, |i| i + 1)];
            self.left -= cut.len();
            change.diff = cut.to_owned();
            change.truncated = true;
        }
        change
    }
}

/// Whether `path` (absolute, or relative to `dir`) lies outside `dir`, read as written: `.` and
/// `..` are followed by name, symbolic links are not (the file browser, which opens files,
/// resolves them beneath the directory itself).
pub fn outside(dir: &Path, path: &str) -> bool {
    !lexical(&dir.join(path)).starts_with(lexical(dir))
}

/// `path` with its `.` and `..` components followed by name.
fn lexical(path: &Path) -> PathBuf {
    let mut parts: Vec<Component> = Vec::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if matches!(parts.last(), Some(Component::Normal(_))) {
                    parts.pop();
                }
            }
            other => parts.push(other),
        }
    }
    parts.iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use iris_acp::Diff;

    fn diff(path: &str, old: Option<&str>, new: &str) -> ToolCallContent {
        ToolCallContent::Diff(Diff {
            path: path.into(),
            old_text: old.map(str::to_owned),
            new_text: new.into(),
        })
    }

    #[test]
    fn an_edit_becomes_a_unified_diff_with_its_counts() {
        let mut budget = ChangeBudget::default();
        let changes = budget.take(&[
            diff(
                "/w/notes.txt",
                Some("one\ntwo\nthree\n"),
                "one\n2\nthree\nfour\n",
            ),
            diff("/w/new.txt", None, "hello\n"),
        ]);
        assert_eq!(changes.len(), 2);
        let edit = &changes[0];
        assert_eq!((edit.added, edit.removed, edit.new_file), (2, 1, false));
        assert!(
            edit.diff
                .starts_with("--- /w/notes.txt\n+++ /w/notes.txt\n@@"),
            "{}",
            edit.diff
        );
        assert!(
            edit.diff.contains("-two\n+2\n") && edit.diff.contains("+four\n"),
            "{}",
            edit.diff
        );
        let new = &changes[1];
        assert!(new.new_file && new.diff.starts_with("--- /dev/null\n+++ /w/new.txt\n"));
    }

    #[test]
    fn chained_edits_of_a_turn_combine_into_one_change_per_file() {
        let mut budget = ChangeBudget::default();
        let first = "one\n2\nthree\n";
        budget.take_for("c1", &[diff("/w/notes", Some("one\ntwo\nthree\n"), first)]);
        // A call that sends its diff again (its start, then an update) is one edit.
        budget.take_for("c1", &[diff("/w/notes", Some("one\ntwo\nthree\n"), first)]);
        budget.take_for("c2", &[diff("/w/draft", Some("alpha\n"), "ALPHA\n")]);
        budget.take_for(
            "c3",
            &[diff("/w/notes", Some(first), "one\n2\nthree\nfour\n")],
        );
        // ... and keeps its place when it does so late.
        budget.take_for("c1", &[diff("/w/notes", Some("one\ntwo\nthree\n"), first)]);
        budget.take_for("c4", &[diff("/w/draft", Some("gamma\n"), "GAMMA\n")]);
        budget.take_for("c5", &[diff("/w/once", None, "x\n")]);
        budget.take_for("c6", &[diff("/w/whole", None, "a\n")]);
        budget.take_for("c7", &[diff("/w/whole", None, "b\n")]);
        let combined = budget.combined();
        // Snippets do not chain; a file changed once needs no combining.
        let paths: Vec<&str> = combined.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(paths, ["/w/notes", "/w/whole"]);
        let notes = &combined[0];
        assert_eq!((notes.added, notes.removed, notes.new_file), (2, 1, false));
        assert!(notes.diff.contains("-two\n+2\n") && notes.diff.contains("+four\n"));
        assert!(combined[1].new_file && combined[1].diff.ends_with("+b\n"));
        // A failed call's edit is not part of the turn's change.
        budget.take_for(
            "c8",
            &[diff("/w/notes", Some("one\n2\nthree\nfour\n"), "gone\n")],
        );
        budget.ended("c8", false);
        assert_eq!(budget.combined()[0].diff, notes.diff);
    }

    #[test]
    fn the_texts_kept_to_combine_are_bounded() {
        let mut budget = ChangeBudget::default();
        let big = "y\n".repeat(MAX_KEPT_TEXT / 4);
        budget.take_for("c1", &[diff("/w/a", None, &big)]);
        budget.take_for("c2", &[diff("/w/a", Some(&big), &big)]);
        assert!(budget.kept <= MAX_KEPT_TEXT && budget.files[0].lost);
        assert!(budget.combined().is_empty());
        budget.take_for("c3", &[diff("/w/b", None, "1\n")]);
        budget.take_for("c4", &[diff("/w/b", Some("1\n"), "2\n")]);
        assert_eq!(budget.combined().len(), 1, "room was given back");
        for i in 0..MAX_FOLLOWED_FILES + 10 {
            budget.take_for("c", &[diff(&format!("/w/{i}"), None, "")]);
        }
        assert_eq!(budget.files.len(), MAX_FOLLOWED_FILES);
    }

    #[test]
    fn large_changes_keep_their_counts_within_the_bounds() {
        let mut budget = ChangeBudget::default();
        let old: String = (0..3000).map(|i| format!("line {i}\n")).collect();
        let new: String = (0..3000).map(|i| format!("line {}\n", i * 7)).collect();
        let big = budget.take(&[diff("/w/big", Some(&old), &new)]);
        assert!(big[0].truncated && big[0].diff.len() <= MAX_CHANGE_BYTES);
        assert!(big[0].diff.ends_with('\n') && big[0].added > 0);
        let huge = "x\n".repeat(MAX_COMPARED_BYTES);
        let skipped = budget.take(&[diff("/w/huge", None, &huge)]);
        assert_eq!(
            (skipped[0].diff.as_str(), skipped[0].added),
            ("", MAX_COMPARED_BYTES as u32)
        );
        // The turn's budget runs out: later files keep counts only.
        for _ in 0..20 {
            budget.take(&[diff("/w/big", Some(&old), &new)]);
        }
        let late = budget.take(&[diff("/w/late", Some("a\n"), "b\n")]);
        assert!(late[0].truncated && late[0].diff.is_empty(), "{late:?}");
        assert_eq!((late[0].added, late[0].removed), (1, 1));
    }

    #[test]
    fn paths_outside_the_directory_are_marked_and_hidden_characters_written_out() {
        let mut budget = ChangeBudget::within(PathBuf::from("/w/./x/../project"));
        let changes = budget.take(&[
            diff("/w/project/src/a.rs", Some("a\n"), "b\n"),
            diff("src/../b.rs", Some("a\n"), "b\n"),
            diff("/w/project/../other/c.rs", Some("a\n"), "b\n"),
            diff("/etc/passwd", None, "root::0:0::/:/bin/sh\n"),
            diff("../../x", None, "x\n"),
            diff("/w/project-evil/d.rs", None, "x\n"),
            diff(
                "/w/project/e\u{202E}txt.exe\n+++ /w/project/fake",
                Some("ok\n"),
                "\u{1b}[2J\u{1b}]0;owned\u{7}ok /*\u{202E}*/ <script>x</script>\n",
            ),
        ]);
        let outside: Vec<bool> = changes.iter().map(|c| c.outside).collect();
        assert_eq!(outside, [false, false, true, true, true, true, false]);
        let hostile = &changes[6];
        assert_eq!(
            hostile.path,
            "/w/project/e<U+202E>txt.exe<U+000A>+++ /w/project/fake"
        );
        assert!(
            hostile.diff.contains(
                "+<U+001B>[2J<U+001B>]0;owned<U+0007>ok /*<U+202E>*/ <script>x</script>\n"
            ),
            "{}",
            hostile.diff
        );
        assert_eq!(
            hostile
                .diff
                .lines()
                .filter(|l| l.starts_with("+++"))
                .count(),
            1
        );
        assert!(!hostile.diff.contains('\u{1b}') && !hostile.diff.contains('\u{202E}'));
        // Without a directory nothing is marked.
        let plain = ChangeBudget::default().take(&[diff("/etc/x", None, "x\n")]);
        assert!(!plain[0].outside);
    }
}
