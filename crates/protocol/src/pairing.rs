//! Pairing another device and managing the paired ones (Iris extensions): `pair.create` asks
//! the gateway for a one-time pairing code, answered by `pair.code`; `devices.list` asks for the
//! paired devices and `device.revoke` revokes one, both answered by `devices.list`.

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

/// `device.revoke`: revoke a paired device. A device may revoke itself and the devices paired
/// through its own codes (and theirs), nothing else.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceRevoke {
    /// The device to revoke.
    pub device_id: String,
}

/// `devices.list` (the answer): the paired devices, as the asking device sees them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceList {
    /// Every paired device, the longest paired first.
    #[serde(default)]
    pub devices: Vec<DeviceInfo>,
    /// Answering `device.revoke`: the devices it revoked, the one named first, then those
    /// paired through its codes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revoked: Vec<String>,
}

/// One paired device in `devices.list`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// Its id.
    pub device_id: String,
    /// Its display name (`hello.device_name`), as the device sent it.
    pub name: String,
    /// When it first signed in, unix milliseconds.
    pub paired_at: i64,
    /// When it last connected or disconnected, unix milliseconds.
    pub last_seen: i64,
    /// Whether it is connected now.
    #[serde(default)]
    pub online: bool,
    /// Whether it is the device that asked.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub this_device: bool,
    /// The device whose pairing code paired it; absent when the owner paired it (a code of
    /// `iris-gateway pair`, or the shared token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paired_by: Option<String>,
    /// The push backends it is registered with (`fcm`, `ntfy`, `webpush`): what the gateway
    /// knows of its kind.
    #[serde(default)]
    pub push: Vec<String>,
    /// Whether the asking device may revoke it: itself, or a device paired through its codes.
    #[serde(default)]
    pub may_revoke: bool,
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

    #[test]
    fn device_frames_round_trip() {
        let list = decode::<ClientFrame>(r#"{"v":1,"type":"devices.list","id":1,"payload":{}}"#)
            .expect("decode");
        assert!(matches!(list.body, ClientFrame::DevicesList(_)));
        let revoke = decode::<ClientFrame>(
            r#"{"v":1,"type":"device.revoke","id":2,"payload":{"device_id":"spare"}}"#,
        )
        .expect("decode");
        let ClientFrame::DeviceRevoke(r) = &revoke.body else {
            panic!("{revoke:?}")
        };
        assert_eq!(r.device_id, "spare");
        let missing =
            decode::<ClientFrame>(r#"{"v":1,"type":"device.revoke","id":3,"payload":{}}"#)
                .expect_err("no device_id");
        assert_eq!(missing.code, crate::ErrorCode::BadRequest);
        let answer = super::DeviceList {
            devices: vec![super::DeviceInfo {
                device_id: "phone".into(),
                name: "Phone".into(),
                paired_at: 1,
                last_seen: 2,
                online: true,
                this_device: true,
                paired_by: None,
                push: vec!["webpush".into()],
                may_revoke: true,
            }],
            revoked: vec!["spare".into()],
        };
        let text = encode(
            &Header::default(),
            &ServerFrame::DevicesList(answer.clone()),
        );
        assert!(text.contains(r#""type":"devices.list""#), "{text}");
        assert!(!text.contains("paired_by"), "{text}");
        let back = decode::<ServerFrame>(&text).expect("decode");
        assert_eq!(back.body, ServerFrame::DevicesList(answer));
    }
}
