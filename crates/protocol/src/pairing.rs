//! Pairing another device (an Iris extension): `pair.create` asks the gateway for a one-time
//! pairing code, answered by `pair.code`.

use serde::{Deserialize, Serialize};

/// `pair.code`: a one-time pairing code and the link that carries it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairCode {
    /// The code: a new device presents it once as `hello.token`.
    pub code: String,
    /// The web client's URL with the code and the WebSocket URL in its fragment
    /// (`…/#token=<code>&ws=<ws url>`), the content of the QR code.
    pub url: String,
    /// The WebSocket URL a native app connects to.
    pub ws: String,
    /// When the code stops being accepted, unix milliseconds.
    pub expires_at: i64,
    /// The QR code of `url` as an SVG document (drawn by the gateway, so clients need no QR
    /// library).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qr_svg: Option<String>,
}

#[cfg(test)]
mod tests {
    use crate::{decode, encode, ClientFrame, Header, HelloAck, ServerFrame};

    #[test]
    fn pairing_frames_round_trip_and_older_acks_still_decode() {
        let create = decode::<ClientFrame>(r#"{"v":1,"type":"pair.create","id":4,"payload":{}}"#)
            .expect("decode");
        assert!(matches!(create.body, ClientFrame::PairCreate(_)));
        let text = r#"{"v":1,"type":"pair.code","id":4,"payload":{"code":"ipc_1","url":"https://x/#token=ipc_1&ws=wss%3A%2F%2Fx%2Fws","ws":"wss://x/ws","expires_at":600000}}"#;
        let code = decode::<ServerFrame>(text).expect("decode");
        let ServerFrame::PairCode(pair) = &code.body else {
            panic!("{code:?}")
        };
        assert_eq!((pair.code.as_str(), pair.expires_at), ("ipc_1", 600_000));
        assert!(encode(&code.header, &code.body).contains(r#""ws":"wss://x/ws""#));
        // `device_token` is additive: absent, it decodes as none and is not written.
        let ack = HelloAck::default();
        let out = encode(&Header::default(), &ServerFrame::HelloAck(ack));
        assert!(!out.contains("device_token"), "{out}");
        let with = HelloAck {
            device_token: Some("idt_9".into()),
            ..HelloAck::default()
        };
        let out = encode(&Header::default(), &ServerFrame::HelloAck(with));
        assert!(out.contains(r#""device_token":"idt_9""#), "{out}");
    }
}
