//! Property tests of frame decoding: no input makes the decoder panic, and every frame the
//! encoder writes decodes back to itself.

use iris_protocol::{decode, encode, ClientFrame, FrameBody, Header, RequestId, ServerFrame};
use proptest::prelude::*;

/// JSON-looking text: fragments of real frames mixed with noise, so the parser gets deep.
fn jsonish() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("{".to_owned()),
        Just("}".to_owned()),
        Just("[".to_owned()),
        Just("]".to_owned()),
        Just("\"type\":".to_owned()),
        Just("\"payload\":".to_owned()),
        Just("\"id\":".to_owned()),
        Just("\"v\":".to_owned()),
        Just("\"message.send\"".to_owned()),
        Just("\"sync\"".to_owned()),
        Just("\"hello\"".to_owned()),
        Just(",".to_owned()),
        Just(":".to_owned()),
        Just("null".to_owned()),
        Just("-1".to_owned()),
        Just("1e999".to_owned()),
        Just("\"\\u0000\"".to_owned()),
        "[a-z_.]{0,8}".prop_map(|s| format!("\"{s}\"")),
        any::<i64>().prop_map(|n| n.to_string()),
        ".{0,4}",
    ];
    prop::collection::vec(piece, 0..40).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn decoding_arbitrary_text_never_panics(text in ".{0,300}") {
        let _ = decode::<ClientFrame>(&text);
        let _ = decode::<ServerFrame>(&text);
    }

    #[test]
    fn decoding_json_like_text_never_panics(text in jsonish()) {
        let _ = decode::<ClientFrame>(&text);
        let _ = decode::<ServerFrame>(&text);
    }

    #[test]
    fn known_frames_with_arbitrary_payload_values_never_panic(
        t in prop::sample::select(ClientFrame::TYPES.to_vec()),
        key in "[a-z_]{1,12}",
        value in jsonish(),
    ) {
        let text = format!(r#"{{"v":1,"id":1,"type":"{t}","payload":{{"{key}":{value}}}}}"#);
        if let Err(e) = decode::<ClientFrame>(&text) {
            // A frame whose id could be read is answered with that id.
            if serde_json::from_str::<serde_json::Value>(&text).is_ok() && e.id.is_none() {
                prop_assert!(e.message.contains("nested"), "{text}: {e}");
            }
        }
    }

    #[test]
    fn encoded_frames_decode_to_themselves(
        text in ".{0,200}",
        chat in proptest::option::of("[a-z0-9_]{1,10}"),
        id in proptest::option::of(any::<u32>()),
        cursor in proptest::option::of(any::<u64>()),
    ) {
        let frame = ServerFrame::MessageUpdate(iris_protocol::MessageUpdate { message_id: "m_1".into(), text, offset: None });
        let header = Header { id: id.map(|i| RequestId::from(u64::from(i))), chat_id: chat, thread_id: None, cursor };
        let decoded = decode::<ServerFrame>(&encode(&header, &frame)).unwrap();
        prop_assert_eq!(decoded.body.frame_type(), "message.update");
        prop_assert_eq!(decoded.body, frame);
        prop_assert_eq!(decoded.header, header);
    }
}
