//! The JSON the store keeps for the gateway beside its columns: a message's fields beyond id,
//! role, text and time, and a device's announced capabilities. Kept here so that every JSON
//! shape of the protocol's types is made and read by this crate alone.

use serde::{Deserialize, Serialize};

use crate::client::ClientCaps;
use crate::server::{MediaInfo, Message, Role, Runtime};
use crate::transcript::{Step, TurnEnd};

/// The fields of a message kept in the store's `extra` column.
#[derive(Debug, Default, Serialize, Deserialize)]
struct MessageExtra {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reasoning: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    media: Vec<MediaInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reply_to: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    runtime: Option<Runtime>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ended: Option<TurnEnd>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    steering: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    steps: Vec<Step>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    turn_changes: Vec<crate::FileChange>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    transcript: Option<crate::VoiceTranscript>,
}

impl Message {
    /// The message's fields beyond id, role, text and time, as the JSON text the store keeps.
    pub fn extra_json(&self) -> String {
        let extra = MessageExtra {
            reasoning: self.reasoning.clone(),
            media: self.media.clone(),
            reply_to: self.reply_to.clone(),
            model: self.model.clone(),
            tokens: self.tokens,
            runtime: self.runtime.clone(),
            ended: self.ended,
            steering: self.steering,
            steps: self.steps.clone(),
            turn_changes: self.turn_changes.clone(),
            client_id: self.client_id.clone(),
            transcript: self.transcript.clone(),
        };
        serde_json::to_string(&extra).unwrap_or_else(|_| "{}".into())
    }

    /// A message from its stored columns. Unreadable `extra` text leaves those fields empty, and
    /// an unknown role reads as `system`: a stored row always comes back as a message. The
    /// `state` of a user message is kept in a column of its own (set by the caller).
    pub fn from_stored(message_id: String, role: &str, text: String, ts: i64, extra: &str) -> Self {
        let extra: MessageExtra = serde_json::from_str(extra).unwrap_or_default();
        Message {
            message_id,
            role: Role::parse(role).unwrap_or(Role::System),
            text,
            reasoning: extra.reasoning,
            media: extra.media,
            reply_to: extra.reply_to,
            model: extra.model,
            tokens: extra.tokens,
            ts,
            runtime: extra.runtime,
            ended: extra.ended,
            steering: extra.steering,
            steps: extra.steps,
            turn_changes: extra.turn_changes,
            client_id: extra.client_id,
            state: None,
            transcript: extra.transcript,
        }
    }
}

impl Step {
    /// A running turn's steps as the JSON text its checkpoint keeps.
    pub fn list_to_stored(steps: &[Step]) -> String {
        serde_json::to_string(steps).unwrap_or_else(|_| "[]".into())
    }

    /// Checkpointed steps from their JSON text; unreadable text means none.
    pub fn list_from_stored(text: &str) -> Vec<Step> {
        serde_json::from_str(text).unwrap_or_default()
    }
}

impl ClientCaps {
    /// Announced capabilities as the JSON text the store keeps (`{}` for none).
    pub fn to_stored(caps: Option<&ClientCaps>) -> String {
        caps.and_then(|c| serde_json::to_string(c).ok())
            .unwrap_or_else(|| "{}".into())
    }

    /// Capabilities from the stored JSON text; unreadable text means none announced.
    pub fn from_stored(text: &str) -> ClientCaps {
        serde_json::from_str(text).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_survives_the_store_and_bad_extra_reads_as_empty() {
        let m = Message {
            message_id: "m_1".into(),
            role: Role::Assistant,
            text: "hi".into(),
            reasoning: Some("because".into()),
            model: Some("demo".into()),
            tokens: Some(7),
            ts: 5,
            ended: Some(TurnEnd::Stopped),
            steering: true,
            steps: vec![
                Step::Commentary {
                    text: "first".into(),
                },
                Step::Tool(crate::ToolStep {
                    index: 0,
                    name: "terminal".into(),
                    ok: Some(true),
                    ..Default::default()
                }),
            ],
            ..Message::default()
        };
        let back = Message::from_stored(
            m.message_id.clone(),
            m.role.as_str(),
            m.text.clone(),
            m.ts,
            &m.extra_json(),
        );
        assert_eq!(back, m);
        assert_eq!(
            Step::list_from_stored(&Step::list_to_stored(&m.steps)),
            m.steps
        );
        assert_eq!(Step::list_from_stored("{oops"), []);
        let bad = Message::from_stored("m".into(), "nobody", "t".into(), 1, "{oops");
        assert_eq!((bad.role, bad.model), (Role::System, None));
    }

    #[test]
    fn caps_survive_the_store() {
        let caps = ClientCaps {
            push: Some("ntfy".into()),
            ..ClientCaps::default()
        };
        assert_eq!(
            ClientCaps::from_stored(&ClientCaps::to_stored(Some(&caps))),
            caps
        );
        assert_eq!(ClientCaps::to_stored(None), "{}");
        assert_eq!(ClientCaps::from_stored("nope"), ClientCaps::default());
    }
}
