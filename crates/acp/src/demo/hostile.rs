//! The `deceive` rule: an agent whose titles, labels and file changes are made to fool the
//! person reading them on a device (terminal escapes, bidi overrides, zero-width characters,
//! HTML, files outside its working directory), for the gateway's tests of what it shows.

use super::script::{Flow, Step, Stop};
use super::turn::{Cancelled, Turn};
use crate::types::*;

/// The title of the `hostile` tool call.
pub const HOSTILE_TOOL_TITLE: &str =
    "\u{1b}[31mwrite_file\u{202E}: <img src=x onerror=alert(1)>\u{200B}notes\u{7}";
/// The file the `hostile` tool call changes, relative to the session's working directory.
pub const HOSTILE_PATH: &str = "../outside\u{202E}txt.exe";
/// The new text of that change.
pub const HOSTILE_NEW_TEXT: &str =
    "\u{1b}[2J\u{1b}]0;owned\u{7}ok\nif (admin) { /*\u{202E} } \u{2066}if (x)*/\n<script>x</script>\n";
/// The title of the `hostile` approval.
pub const HOSTILE_APPROVAL_TITLE: &str =
    "\u{1b}]0;pwned\u{7}Approve\u{202E} <b>edit</b>\nof\u{200B} /etc/iris-hostile.conf";

impl Turn<'_> {
    /// `deceive`: a completed edit whose title and diff carry hidden characters and HTML, of a
    /// file outside the working directory; then an approval of such an edit with such a title
    /// and labels. Answers `Hostile: <optionId>. `.
    pub(super) async fn hostile(&mut self) -> Step {
        let id = self.fresh_tool_id();
        let path = format!("{}/{HOSTILE_PATH}", self.cwd.trim_end_matches('/'));
        self.update(SessionUpdate::ToolCall(ToolCall {
            tool_call_id: id.clone(),
            title: HOSTILE_TOOL_TITLE.into(),
            kind: ToolKind::Edit,
            status: Some(ToolCallStatus::Pending),
            raw_input: None,
            raw_output: None,
            content: vec![ToolCallContent::Diff(Diff {
                path,
                old_text: Some("safe\n".into()),
                new_text: HOSTILE_NEW_TEXT.into(),
            })],
            locations: Vec::new(),
        }));
        self.tool_status(&id, ToolCallStatus::Completed, None, None);
        let option = |id: &str, name: &str, kind| PermissionOption {
            option_id: id.into(),
            name: name.into(),
            kind,
        };
        let request = RequestPermissionRequest {
            session_id: self.session_id.into(),
            tool_call: ToolCallUpdate {
                tool_call_id: format!("hostile-approval-{}", self.fresh_tool_id()),
                title: Some(HOSTILE_APPROVAL_TITLE.into()),
                kind: Some(ToolKind::Edit),
                status: Some(ToolCallStatus::Pending),
                content: Some(vec![ToolCallContent::Diff(Diff {
                    path: "/etc/iris-hostile.conf".into(),
                    old_text: None,
                    new_text: "owned\u{1b}[8m\n".into(),
                })]),
                ..ToolCallUpdate::default()
            },
            options: vec![
                option(
                    "allow_once",
                    "\u{1b}[1mAllow\u{200B} once\u{1b}[0m",
                    PermissionOptionKind::AllowOnce,
                ),
                option(
                    "reject_once",
                    "<b>Deny</b>\u{202E}",
                    PermissionOptionKind::RejectOnce,
                ),
                option("\u{202E}", "\u{200B}", PermissionOptionKind::RejectOnce),
            ],
        };
        match self.ask(request).await {
            Ok(Some(RequestPermissionOutcome::Selected { option_id })) => {
                self.say(&format!("Hostile: {option_id}. "));
                Ok(Flow::Next)
            }
            Ok(Some(RequestPermissionOutcome::Cancelled)) | Err(Cancelled) => Err(Stop::Cancelled),
            _ => {
                self.say("Hostile: no answer. ");
                Ok(Flow::Next)
            }
        }
    }
}
