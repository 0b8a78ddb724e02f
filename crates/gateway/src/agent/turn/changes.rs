//! A tool call's file changes (ACP `diff` content: a path, the old and the new text) as the
//! answer keeps them: a unified diff per file with its `+`/`−` counts, within
//! [`MAX_CHANGE_BYTES`] per file and [`MAX_TURN_CHANGE_BYTES`] per turn. Texts too large to
//! compare quickly keep their counts only, so an agent cannot make the lane spend seconds or
//! megabytes on one edit.

use std::time::Duration;

use iris_acp::ToolCallContent;
use iris_protocol::{FileChange, MAX_CHANGE_BYTES, MAX_TURN_CHANGE_BYTES};
use similar::{ChangeTag, TextDiff};

/// Texts larger than this (old and new together) are not compared line by line.
const MAX_COMPARED_BYTES: usize = 1024 * 1024;
/// The longest a comparison may take; past it the diff is coarser but correct.
const COMPARE_DEADLINE: Duration = Duration::from_millis(50);
/// Lines of context around each change.
const CONTEXT: usize = 3;

/// The diff bytes a turn may still keep.
#[derive(Debug)]
pub struct ChangeBudget {
    left: usize,
}

impl Default for ChangeBudget {
    fn default() -> Self {
        ChangeBudget {
            left: MAX_TURN_CHANGE_BYTES,
        }
    }
}

impl ChangeBudget {
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
        let path = crate::text::head(path, 1024);
        let before = old.unwrap_or("");
        let mut change = FileChange {
            path: path.clone(),
            new_file: old.is_none(),
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
}
