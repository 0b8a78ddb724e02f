//! A device's own push notifications (an Iris extension): `push.status` asks how pushes reach
//! this device and how the last one through each backend ended; `push.test` sends it a test
//! notification now. Both are answered by `push.status`. [`PushPayload`] is what a push itself
//! carries to the device: the Web Push payload the service worker reads, and FCM's `data`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `push.status`: this device's push registrations and the last push through each backend.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushStatus {
    /// The backends this device is registered with and the gateway has configured (`fcm`,
    /// `ntfy`, `webpush`).
    #[serde(default)]
    pub registered: Vec<String>,
    /// The one a push goes through now (`hello` `caps.push` when registered, else FCM, then
    /// ntfy, then Web Push); absent when the device cannot be pushed to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    /// How the last push through each backend ended, the latest first.
    #[serde(default)]
    pub last: Vec<PushOutcome>,
}

/// How the last push through one backend ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushOutcome {
    /// `fcm`, `ntfy` or `webpush`.
    pub backend: String,
    /// `delivered` (the backend accepted it), `retrying` (it will be sent again), `rejected`
    /// (refused for good), `expired` (the registration was no longer valid and was removed) or
    /// `unreachable` (given up after every retry).
    pub result: String,
    /// What the backend said, when it is worth showing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// When, unix milliseconds.
    pub at: i64,
    /// Whether it was a test notification (`push.test`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub test: bool,
}

/// What one push notification carries to a device, whichever service takes it there: the JSON
/// of a Web Push payload (encrypted for the browser, read by Iris Web's service worker) and, as
/// strings, FCM's `data` (see [`PushPayload::fcm_data`]). The gateway builds it once from what it
/// may show (the `[push] content` setting has already been applied).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushPayload {
    /// The notification's title: what happened, in which chat.
    pub title: String,
    /// Its text: an excerpt, or a neutral line.
    pub body: String,
    /// The highest cursor the push covers: the app skips notifying frames up to it.
    pub cursor: u64,
    /// The wire type of the frame it describes (`push.test` for a test notification).
    #[serde(rename = "type")]
    pub frame_type: String,
    /// That frame's chat.
    pub chat_id: Option<String>,
    /// That frame's thread.
    pub thread_id: Option<String>,
    /// That frame's message.
    pub message_id: Option<String>,
    /// How many frames it covers.
    pub count: usize,
    /// The same for every push of a lane, so a newer push replaces the older one on the device.
    pub tag: String,
    /// The picker whose answers are offered as buttons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub picker_id: Option<String>,
    /// The token that allows one answer to that picker from this device (`POST /v1/actions`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_token: Option<String>,
    /// Where a button sends its answer, absolute, for an app that is not a page of the gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_url: Option<String>,
    /// The buttons, in the picker's order; empty without a picker.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<PushButton>,
}

/// One answer offered as a notification button.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushButton {
    /// The answer's value, sent back with the action token.
    pub action: String,
    /// The button's label.
    pub title: String,
}

impl PushPayload {
    /// FCM's `data`: every value a string (absent ones empty, the buttons as a JSON array in one
    /// string). The title, the text and the tag are not repeated there: FCM carries them in the
    /// message's `notification` and `android` parts.
    pub fn fcm_data(&self) -> BTreeMap<&'static str, String> {
        let mut data = BTreeMap::from([
            ("cursor", self.cursor.to_string()),
            ("type", self.frame_type.clone()),
            ("chat_id", self.chat_id.clone().unwrap_or_default()),
            ("thread_id", self.thread_id.clone().unwrap_or_default()),
            ("message_id", self.message_id.clone().unwrap_or_default()),
            ("count", self.count.to_string()),
        ]);
        let action = [
            ("picker_id", &self.picker_id),
            ("action_token", &self.action_token),
            ("action_url", &self.action_url),
        ];
        for (key, value) in action {
            if let Some(value) = value {
                data.insert(key, value.clone());
            }
        }
        if !self.actions.is_empty() {
            let buttons = serde_json::to_string(&self.actions).unwrap_or_default();
            data.insert("actions", buttons);
        }
        data
    }
}

#[cfg(test)]
mod tests {
    use crate::{decode, encode, ClientFrame, Header, ServerFrame};

    #[test]
    fn a_push_payload_as_web_push_json_and_as_fcm_strings() {
        let mut push = super::PushPayload {
            title: "Answer · Default".into(),
            body: "Hello".into(),
            cursor: 42,
            frame_type: "message.final".into(),
            chat_id: Some("c1".into()),
            thread_id: None,
            message_id: Some("m1".into()),
            count: 2,
            tag: "iris-c1".into(),
            ..Default::default()
        };
        let json = serde_json::to_value(&push).unwrap();
        assert_eq!(json["type"], "message.final");
        assert_eq!(json["thread_id"], serde_json::Value::Null);
        assert!(json.get("actions").is_none() && json.get("action_token").is_none());
        let data = push.fcm_data();
        assert_eq!(data["cursor"], "42");
        assert_eq!(data["thread_id"], "");
        assert!(!data.contains_key("title") && !data.contains_key("actions"));

        push.picker_id = Some("p1".into());
        push.action_token = Some("tok".into());
        push.actions = vec![super::PushButton {
            action: "allow".into(),
            title: "Allow once".into(),
        }];
        let back: super::PushPayload =
            serde_json::from_value(serde_json::to_value(&push).unwrap()).unwrap();
        assert_eq!(back, push);
        assert_eq!(
            push.fcm_data()["actions"],
            r#"[{"action":"allow","title":"Allow once"}]"#
        );
    }

    #[test]
    fn push_status_and_push_test_round_trip() {
        for (text, want) in [
            (
                r#"{"v":1,"type":"push.status","id":2,"payload":{}}"#,
                "push.status",
            ),
            (
                r#"{"v":1,"type":"push.test","id":3,"payload":{}}"#,
                "push.test",
            ),
        ] {
            let d = decode::<ClientFrame>(text).unwrap();
            assert_eq!(crate::codec::FrameBody::frame_type(&d.body), want);
        }
        let status = super::PushStatus {
            registered: vec!["webpush".into()],
            route: Some("webpush".into()),
            last: vec![super::PushOutcome {
                backend: "webpush".into(),
                result: "expired".into(),
                detail: Some("the subscription was removed".into()),
                at: 5,
                test: true,
            }],
        };
        let text = encode(&Header::default(), &ServerFrame::PushStatus(status.clone()));
        let back = decode::<ServerFrame>(&text).unwrap();
        assert_eq!(back.body, ServerFrame::PushStatus(status));
    }
}
