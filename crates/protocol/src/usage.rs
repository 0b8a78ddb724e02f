//! What a chat has used so far (an Iris extension): `usage` on a lane asks, `usage` answers with
//! the sums over the lane's answers, as each answer's own figures were reported.

use serde::{Deserialize, Serialize};

/// `usage`: the sums over every answer kept in the lane the envelope names.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Answers in the lane (assistant and scheduled messages).
    pub answers: u64,
    /// The sum of the `tokens` of those that reported them; absent when none did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// The sum of the `runtime.cost` of those that reported one, in the agent's figures (USD, no
    /// conversion); absent when none did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
}

#[cfg(test)]
mod tests {
    use crate::{decode, encode, ClientFrame, Header, ServerFrame};

    #[test]
    fn usage_round_trips() {
        let d = decode::<ClientFrame>(
            r#"{"v":1,"type":"usage","id":4,"chat_id":"default","payload":{}}"#,
        )
        .unwrap();
        assert_eq!(crate::codec::FrameBody::frame_type(&d.body), "usage");
        let usage = super::Usage {
            answers: 3,
            tokens: Some(1234),
            cost: Some(0.0125),
        };
        let text = encode(&Header::default(), &ServerFrame::Usage(usage.clone()));
        assert!(text.contains(r#""type":"usage""#), "{text}");
        let back = decode::<ServerFrame>(&text).unwrap();
        assert_eq!(back.body, ServerFrame::Usage(usage));
        let none = encode(
            &Header::default(),
            &ServerFrame::Usage(super::Usage::default()),
        );
        assert!(none.contains(r#""payload":{"answers":0}"#), "{none}");
    }
}
