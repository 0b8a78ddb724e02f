//! A device's own push notifications (an Iris extension): `push.status` asks how pushes reach
//! this device and how the last one through each backend ended; `push.test` sends it a test
//! notification now. Both are answered by `push.status`.

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

#[cfg(test)]
mod tests {
    use crate::{decode, encode, ClientFrame, Header, ServerFrame};

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
