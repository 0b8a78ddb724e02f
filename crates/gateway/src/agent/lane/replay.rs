//! A take-back without a fork: the turn runs in a new agent session whose first prompt opens
//! with the conversation before the message, as text, from the gateway's own transcript (the
//! user's messages and the agent's answers, those replaced left out). The agent sees what was
//! said, not what its tools returned then; the newest messages are kept when the conversation
//! is longer than [`REPLAY_BYTES`].

use iris_protocol::{MessageState, Role};
use iris_store::StoredMessage;

use super::parts::LaneParts;

/// The most messages carried over.
const REPLAY_MESSAGES: usize = 200;
/// The most bytes of messages carried over (the newest kept).
const REPLAY_BYTES: usize = 64 * 1024;

/// The text that opens the first prompt of a take-back of the turn of `before`; none when no
/// message came before it (the turn then starts in an empty session, as a first turn does).
/// When the store cannot be read it is logged, and the error is what the lane tells the person.
pub(super) async fn prelude(parts: &LaneParts, before: &str) -> Result<Option<String>, String> {
    let lane = parts.lane();
    let page = parts
        .env
        .shared
        .store
        .history(
            &lane.chat_id,
            lane.thread_id.as_deref(),
            Some(before),
            REPLAY_MESSAGES,
        )
        .await;
    match page {
        Ok(page) => Ok(transcript(&page.messages, page.has_more)),
        Err(e) => {
            tracing::warn!(lane = ?lane, error = %e, "the conversation to carry over could not be read; the turn starts without it");
            Err("The earlier conversation could not be read, so the agent answers this message in a new session without it.".to_owned())
        }
    }
}

/// The user's messages and the agent's answers of `messages` (oldest first) as text, the
/// newest within [`REPLAY_BYTES`]; `cut` says that older ones exist.
fn transcript(messages: &[StoredMessage], mut cut: bool) -> Option<String> {
    let replaced = MessageState::Replaced.as_str();
    let mut kept = Vec::new();
    let mut used = 0;
    for m in messages.iter().rev() {
        let who = match Role::parse(&m.role) {
            Some(Role::User) => "User",
            Some(Role::Assistant) => "Assistant",
            _ => continue,
        };
        let text = m.text.trim();
        if text.is_empty() || m.state.as_deref() == Some(replaced) {
            continue;
        }
        if used + text.len() > REPLAY_BYTES {
            cut = true;
            break;
        }
        used += text.len();
        kept.push(format!("{who}: {text}"));
    }
    if kept.is_empty() {
        return None;
    }
    kept.reverse();
    let head = match cut {
        true => "[The conversation so far, its earliest part left out, carried over from an earlier session of this chat]",
        false => "[The conversation so far, carried over from an earlier session of this chat]",
    };
    Some(format!(
        "{head}\n\n{}\n\n[End of the conversation so far. Answer the message that follows.]\n\n",
        kept.join("\n\n")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(role: &str, text: &str, state: Option<&str>) -> StoredMessage {
        StoredMessage {
            message_id: String::new(),
            chat_id: "default".into(),
            thread_id: None,
            role: role.into(),
            text: text.into(),
            ts: 0,
            extra: String::new(),
            state: state.map(str::to_owned),
        }
    }

    #[test]
    fn user_messages_and_answers_are_carried_over_without_notes_or_replaced_answers() {
        let messages = [
            msg("user", "What is 2+2?", Some("done")),
            msg("assistant", "5", Some("replaced")),
            msg("assistant", "4", None),
            msg("system", "The agent restarted.", None),
            msg("user", "And 3+3?", Some("done")),
            msg("assistant", "6", None),
        ];
        let text = transcript(&messages, false).unwrap();
        assert!(
            text.contains("User: What is 2+2?\n\nAssistant: 4\n\nUser: And 3+3?\n\nAssistant: 6")
        );
        assert!(!text.contains("5") && !text.contains("restarted"));
        assert!(!text.contains("left out"));
    }

    #[test]
    fn a_long_conversation_keeps_its_newest_messages_and_says_so() {
        let big = "x".repeat(REPLAY_BYTES / 2 + 1);
        let messages = [
            msg("user", &format!("first {big}"), None),
            msg("user", &format!("second {big}"), None),
            msg("user", "third", None),
        ];
        let text = transcript(&messages, false).unwrap();
        assert!(text.contains("second") && text.contains("third") && !text.contains("first"));
        assert!(text.contains("left out"));
    }

    #[test]
    fn nothing_before_the_message_is_no_prelude() {
        assert_eq!(transcript(&[msg("system", "hello", None)], false), None);
    }
}
