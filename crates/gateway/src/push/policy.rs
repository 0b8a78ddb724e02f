//! The push policy: which durable frames want the user's attention, what their push says, and how
//! a burst of them becomes one push.

use iris_protocol::{PushButton, PushPayload, Role, ServerFrame};
use iris_store::PushItem;

/// Longest content excerpt in a push, in characters.
const PREVIEW_CHARS: usize = 160;

/// What a frame means for the user, in rising importance of [`Kind::rank`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A `notification` of no more specific kind (a renamed thread, …).
    Notice,
    /// A final assistant message.
    Reply,
    /// A scheduled job's result.
    Cron,
    /// A finite-choice picker.
    Choice,
    /// The agent asks a question.
    Clarify,
    /// The agent asks for permission.
    Approval,
}

impl Kind {
    /// The name stored in the push queue.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Notice => "notification",
            Kind::Reply => "reply",
            Kind::Cron => "cron",
            Kind::Choice => "choice",
            Kind::Clarify => "clarify",
            Kind::Approval => "approval",
        }
    }

    /// Reads a stored name back.
    pub fn parse(s: &str) -> Kind {
        match s {
            "reply" => Kind::Reply,
            "cron" => Kind::Cron,
            "choice" => Kind::Choice,
            "clarify" => Kind::Clarify,
            "approval" => Kind::Approval,
            _ => Kind::Notice,
        }
    }

    /// The frame of a coalesced burst that a push describes is its most important one.
    pub fn rank(self) -> u8 {
        self as u8
    }

    /// Whether the user is expected to act (pickers): such pushes get a higher ntfy priority.
    pub fn needs_action(self) -> bool {
        matches!(self, Kind::Choice | Kind::Clarify | Kind::Approval)
    }

    /// The ntfy tag (an emoji short code) of this kind.
    pub fn ntfy_tag(self) -> &'static str {
        match self {
            Kind::Notice => "bell",
            Kind::Reply => "speech_balloon",
            Kind::Cron => "alarm_clock",
            Kind::Choice | Kind::Clarify => "question",
            Kind::Approval => "warning",
        }
    }
}

/// Whether a frame of this type can want attention; the commit hook wakes the worker only then.
pub fn may_want_attention(frame_type: &str) -> bool {
    matches!(
        frame_type,
        "message"
            | "message.stop"
            | "notification"
            | "picker.approval"
            | "picker.clarify"
            | "picker.choice"
    )
}

/// The kind of a frame that wants the user's attention; `None` for every other frame (streaming,
/// tools, channel events, receipts, busy/idle, the user's own messages, system notices).
pub fn classify(frame: &ServerFrame) -> Option<Kind> {
    match frame {
        ServerFrame::MessageStop(_) => Some(Kind::Reply),
        ServerFrame::Message(m) => match m.role {
            Role::Assistant => Some(Kind::Reply),
            Role::Cron => Some(Kind::Cron),
            Role::User | Role::System => None,
        },
        ServerFrame::PickerApproval(_) => Some(Kind::Approval),
        ServerFrame::PickerClarify(_) => Some(Kind::Clarify),
        ServerFrame::PickerChoice(_) => Some(Kind::Choice),
        ServerFrame::Notification(n) => Some(match n.kind.as_str() {
            "approval" => Kind::Approval,
            "clarify" => Kind::Clarify,
            "cron" => Kind::Cron,
            _ => Kind::Notice,
        }),
        _ => None,
    }
}

/// What a description needs besides the frame.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The agent's display name ("Hermes").
    pub agent: &'a str,
    /// The name of the frame's chat or thread, when it has one.
    pub chat_name: Option<&'a str>,
    /// Whether content excerpts may be shown.
    pub previews: bool,
}

/// The title and preview of a frame's push. With previews off the preview is empty and no title
/// carries text the agent or a job wrote (a `notification`'s own title is replaced by one that
/// only says what happened).
pub fn describe(frame: &ServerFrame, kind: Kind, ctx: Context<'_>) -> (String, String) {
    let agent = capitalized(ctx.agent);
    let generic = match kind {
        Kind::Reply => match ctx.chat_name {
            Some(chat) => format!("{agent} replied in {chat}"),
            None => format!("{agent} replied"),
        },
        Kind::Cron => match ctx.chat_name {
            Some(chat) => format!("Scheduled job reported in {chat}"),
            None => "Scheduled job reported".to_owned(),
        },
        Kind::Approval => "Approval needed".to_owned(),
        Kind::Clarify => format!("{agent} has a question"),
        Kind::Choice => "Choice needed".to_owned(),
        Kind::Notice => match ctx.chat_name {
            Some(chat) => format!("Notification in {chat}"),
            None => "Notification".to_owned(),
        },
    };
    let (title, content) = match frame {
        ServerFrame::MessageStop(m) => (generic, m.final_text.as_str()),
        ServerFrame::Message(m) => (generic, m.text.as_str()),
        ServerFrame::PickerApproval(p) => (generic, p.title.as_str()),
        ServerFrame::PickerClarify(p) => (generic, p.title.as_str()),
        ServerFrame::PickerChoice(p) => (generic, p.title.as_str()),
        ServerFrame::Notification(n) => {
            let own = n.title.trim();
            let title = if ctx.previews && !own.is_empty() {
                excerpt(own, 80)
            } else {
                generic
            };
            (title, n.body.as_deref().unwrap_or_default())
        }
        _ => (generic, ""),
    };
    let preview = if ctx.previews {
        excerpt(content, PREVIEW_CHARS)
    } else {
        String::new()
    };
    (title, preview)
}

/// The message a frame belongs to, for the push's `message_id`.
pub fn message_id(frame: &ServerFrame) -> Option<String> {
    match frame {
        ServerFrame::MessageStop(m) => Some(m.message_id.clone()),
        ServerFrame::Message(m) => Some(m.message_id.clone()),
        _ => None,
    }
}

/// One push, as every backend sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushContent {
    /// The highest cursor the push covers: the app skips notifying frames up to it.
    pub cursor: u64,
    /// How many frames it covers.
    pub count: usize,
    /// The wire type of the frame it describes (the most important of the burst).
    pub frame_type: String,
    /// That frame's kind.
    pub kind: Kind,
    /// That frame's chat.
    pub chat_id: Option<String>,
    /// That frame's thread.
    pub thread_id: Option<String>,
    /// That frame's message.
    pub message_id: Option<String>,
    /// What happened.
    pub title: String,
    /// The excerpt, or a neutral line when there is none.
    pub body: String,
    /// Same for every push of a lane, so that a newer push (or a resend) replaces the older one
    /// on the device: FCM `collapse_key` and notification `tag`, ntfy sequence id.
    pub collapse_key: String,
    /// The answers the notification offers as buttons, when it describes a picker still open.
    pub action: Option<PushAction>,
}

/// A picker's answers offered on a notification, with the token that allows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushAction {
    /// The picker.
    pub picker_id: String,
    /// The action token (`crate::actions`): one answer, by this device, to this picker.
    pub token: String,
    /// `(value, label)` of each answer offered, in the picker's order.
    pub choices: Vec<(String, String)>,
    /// Where a button sends its answer, absolute (`<public_url>/v1/actions`), for an app that
    /// is not a page of the gateway.
    pub url: String,
}

/// Most answers a notification offers; a question with more choices offers none.
pub const MAX_ACTIONS: usize = 4;
/// Longest label offered on a notification's button, in characters.
pub const MAX_ACTION_LABEL: usize = 40;

/// The answers a notification may offer for an open picker's frame: an approval's choices, or a
/// question's when it has at most [`MAX_ACTIONS`] short ones (and takes no typed answer).
pub fn action_choices(frame: &serde_json::Value) -> Option<(String, Vec<(String, String)>)> {
    let kind = frame["type"].as_str()?;
    let p = &frame["payload"];
    if !matches!(kind, "picker.approval" | "picker.clarify") || p["free_text"] == true {
        return None;
    }
    let choices: Vec<(String, String)> = p["choices"]
        .as_array()?
        .iter()
        .filter_map(|c| {
            Some((
                c["value"].as_str()?.to_owned(),
                c["label"].as_str()?.to_owned(),
            ))
        })
        .collect();
    let short = choices
        .iter()
        .all(|(_, label)| label.chars().count() <= MAX_ACTION_LABEL);
    if choices.is_empty() || choices.len() > MAX_ACTIONS || !short {
        return None;
    }
    Some((p["picker_id"].as_str()?.to_owned(), choices))
}

/// The body of a push without the conversation's text.
fn neutral_body(count: usize) -> String {
    match count {
        1 => "Open Iris to see it.".to_owned(),
        n => format!("{n} new updates. Open Iris to see them."),
    }
}

impl PushContent {
    /// Leaves out everything the conversation said (`[push] content = "private"`): the body
    /// becomes neutral and a notification's own title gives way to "Notification" (for the
    /// buttons, see [`PushContent::offers_buttons`]).
    pub fn make_private(&mut self) {
        self.body = neutral_body(self.count);
        if self.kind == Kind::Notice {
            self.title = "Notification".to_owned();
        }
    }

    /// Whether the push may offer its picker's answers as buttons: always with full content;
    /// when private only for an approval, whose labels name the kind of permission (a
    /// question's choices are the agent's words).
    pub fn offers_buttons(&self, private: bool) -> bool {
        !private || self.kind == Kind::Approval
    }

    /// What the push carries to the device, the same through Web Push and FCM.
    pub fn payload(&self) -> PushPayload {
        let action = self.action.as_ref();
        PushPayload {
            title: self.title.clone(),
            body: self.body.clone(),
            cursor: self.cursor,
            frame_type: self.frame_type.clone(),
            chat_id: self.chat_id.clone(),
            thread_id: self.thread_id.clone(),
            message_id: self.message_id.clone(),
            count: self.count,
            tag: self.collapse_key.clone(),
            picker_id: action.map(|a| a.picker_id.clone()),
            action_token: action.map(|a| a.token.clone()),
            action_url: action.map(|a| a.url.clone()),
            actions: action
                .map(|a| {
                    a.choices
                        .iter()
                        .map(|(action, title)| PushButton {
                            action: action.clone(),
                            title: title.clone(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

/// Coalesces a device's queued frames (cursor order) into one push: it describes the most
/// important frame (among equals a picker before the `notification` that announces it, then the
/// latest) and carries the highest cursor.
pub fn summarize(items: &[PushItem]) -> Option<PushContent> {
    let cursor = items.iter().map(|i| i.cursor).max()?;
    let head = items.iter().max_by_key(|i| {
        let picker = i.frame_type.starts_with("picker.");
        (Kind::parse(&i.kind).rank(), picker, i.cursor)
    })?;
    let body = match head.preview.is_empty() {
        false => head.preview.clone(),
        true => neutral_body(items.len()),
    };
    Some(PushContent {
        cursor,
        count: items.len(),
        frame_type: head.frame_type.clone(),
        kind: Kind::parse(&head.kind),
        chat_id: head.chat_id.clone(),
        thread_id: head.thread_id.clone(),
        message_id: head.message_id.clone(),
        title: head.title.clone(),
        body,
        collapse_key: collapse_key(head.chat_id.as_deref(), head.thread_id.as_deref()),
        action: None,
    })
}

/// `iris-<chat>` or `iris-<chat>-<thread>`, limited to characters every backend accepts in an id.
pub fn collapse_key(chat_id: Option<&str>, thread_id: Option<&str>) -> String {
    let mut key = String::from("iris");
    for part in [chat_id, thread_id].into_iter().flatten() {
        key.push('-');
        key.extend(part.chars().map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        }));
    }
    key.truncate(64);
    key
}

/// Whitespace collapsed to single spaces, cut to `max` characters with an ellipsis.
pub fn excerpt(text: &str, max: usize) -> String {
    let mut words = text.split_whitespace();
    let mut out = String::new();
    let mut count = 0;
    if let Some(first) = words.next() {
        out.push_str(first);
        count = first.chars().count();
        for w in words {
            out.push(' ');
            out.push_str(w);
            count += 1 + w.chars().count();
            if count > max {
                break;
            }
        }
    }
    if count <= max {
        return out;
    }
    let mut cut: String = out.chars().take(max.saturating_sub(1)).collect();
    cut.truncate(cut.trim_end().len());
    cut.push('…');
    cut
}

fn capitalized(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => "The agent".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(cursor: u64, kind: Kind, title: &str, preview: &str) -> PushItem {
        PushItem {
            device_id: "d".into(),
            cursor,
            frame_type: "x".into(),
            kind: kind.as_str().into(),
            chat_id: Some("default".into()),
            thread_id: None,
            message_id: None,
            title: title.into(),
            preview: preview.into(),
            queued_at: 0,
        }
    }

    #[test]
    fn excerpts_collapse_whitespace_and_cut_on_characters() {
        assert_eq!(excerpt("  a \n b\tc ", 10), "a b c");
        assert_eq!(excerpt("äöü äöü äöü", 6), "äöü ä…");
        assert_eq!(excerpt("", 5), "");
    }

    #[test]
    fn a_burst_is_described_by_its_most_important_frame_with_the_latest_cursor() {
        let items = [
            item(3, Kind::Reply, "replied", "one"),
            item(5, Kind::Approval, "Approval needed", "rm -rf"),
            item(9, Kind::Reply, "replied", "two"),
        ];
        let push = summarize(&items).expect("a push");
        assert_eq!(
            (
                push.cursor,
                push.count,
                push.title.as_str(),
                push.body.as_str()
            ),
            (9, 3, "Approval needed", "rm -rf")
        );
        let quiet = summarize(&[
            item(4, Kind::Reply, "replied", ""),
            item(6, Kind::Reply, "replied", ""),
        ])
        .expect("a push");
        assert_eq!(quiet.body, "2 new updates. Open Iris to see them.");
    }

    #[test]
    fn a_picker_describes_the_push_rather_than_the_notification_announcing_it() {
        let mut picker = item(5, Kind::Approval, "Approval needed", "terminal: rm -rf");
        picker.frame_type = "picker.approval".into();
        let mut notice = item(6, Kind::Approval, "Approval needed", "Approve terminal?");
        notice.frame_type = "notification".into();
        let push = summarize(&[picker, notice]).expect("a push");
        assert_eq!(
            (push.frame_type.as_str(), push.body.as_str(), push.cursor),
            ("picker.approval", "terminal: rm -rf", 6)
        );
    }

    #[test]
    fn a_notification_offers_an_approvals_choices_and_a_short_questions() {
        let frame = |kind: &str, labels: &[&str], free_text: bool| {
            let choices: Vec<_> = labels
                .iter()
                .enumerate()
                .map(|(i, l)| serde_json::json!({"value": format!("v{i}"), "label": l}))
                .collect();
            serde_json::json!({"type": kind, "payload": {"picker_id": "p1", "choices": choices, "free_text": free_text}})
        };
        let approval = action_choices(&frame("picker.approval", &["Allow once", "Deny"], false));
        assert_eq!(
            approval,
            Some((
                "p1".into(),
                vec![
                    ("v0".into(), "Allow once".into()),
                    ("v1".into(), "Deny".into())
                ]
            ))
        );
        let long = "a label much longer than a notification button can show";
        for none in [
            frame("picker.clarify", &["1", "2", "3", "4", "5"], false),
            frame("picker.clarify", &["yes", long], false),
            frame("picker.clarify", &["yes", "no"], true),
            frame("picker.clarify", &[], false),
            frame("picker.model", &["a"], false),
        ] {
            assert_eq!(action_choices(&none), None, "{none}");
        }
    }

    #[test]
    fn collapse_keys_are_per_lane_and_safe() {
        assert_eq!(collapse_key(Some("default"), None), "iris-default");
        assert_eq!(collapse_key(Some("c_1"), Some("t/2")), "iris-c_1-t_2");
    }
}
