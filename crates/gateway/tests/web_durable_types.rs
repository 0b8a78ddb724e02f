//! The web client's list of durable frame types (`web/assets/util.js`) against the protocol
//! crate's: a type the client does not count as durable would throw its cursor off by one for
//! every such frame, so the two lists must say the same of every server frame type.

use iris_protocol::ServerFrame;

const UTIL_JS: &str = include_str!("../web/assets/util.js");

/// The strings of the `DURABLE` set in util.js.
fn durable_set() -> Vec<String> {
    let start = UTIL_JS
        .find("const DURABLE = new Set([")
        .expect("util.js defines `const DURABLE = new Set([`");
    let rest = &UTIL_JS[start..];
    let end = rest.find("]);").expect("the DURABLE set ends with `]);`");
    rest[..end]
        .split('\'')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// What `isDurable` in util.js says of a frame of this type (and, for `read.receipt`, with or
/// without `device_id`), following its rules as written there.
fn client_says_durable(set: &[String], frame_type: &str, with_device: bool) -> bool {
    if frame_type == "read.receipt" {
        return with_device;
    }
    set.iter().any(|t| t == frame_type) || frame_type.starts_with("picker.")
}

#[test]
fn the_rules_of_is_durable_are_the_ones_this_test_follows() {
    for rule in [
        "if (frame.type === 'read.receipt') return Boolean(frame.payload && frame.payload.device_id);",
        "return DURABLE.has(frame.type) || frame.type.startsWith('picker.');",
    ] {
        assert!(
            UTIL_JS.contains(rule),
            "isDurable in util.js changed; update this test with it: {rule}"
        );
    }
}

#[test]
fn the_web_client_counts_exactly_the_durable_types_of_the_protocol() {
    let set = durable_set();
    assert!(set.len() > 10, "parsed the DURABLE set: {set:?}");
    for listed in &set {
        assert!(
            ServerFrame::TYPES.contains(&listed.as_str()),
            "util.js lists `{listed}`, which is no server frame type"
        );
    }
    // Every type the protocol knows, and one it may add later under a durable prefix.
    let mut types: Vec<&str> = ServerFrame::TYPES.to_vec();
    types.push("picker.someday");
    types.push("someday.frame");
    for ty in types {
        if ty == "read.receipt" {
            continue;
        }
        assert_eq!(
            client_says_durable(&set, ty, false),
            ServerFrame::is_durable_type(ty),
            "util.js and the protocol crate disagree on whether `{ty}` is durable"
        );
    }
}

#[test]
fn a_read_receipt_is_durable_only_with_a_device() {
    let relayed = iris_protocol::ReadReceiptEvent {
        message_id: "m".into(),
        device_id: Some("d".into()),
    };
    let own = iris_protocol::ReadReceiptEvent {
        message_id: "m".into(),
        device_id: None,
    };
    let set = durable_set();
    assert_eq!(
        client_says_durable(&set, "read.receipt", true),
        ServerFrame::ReadReceipt(relayed).is_durable()
    );
    assert_eq!(
        client_says_durable(&set, "read.receipt", false),
        ServerFrame::ReadReceipt(own).is_durable()
    );
}
