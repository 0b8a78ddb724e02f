//! Fuzz target: decoding any bytes as a client or server frame never panics, and a frame that
//! decodes re-encodes into text that decodes to the same frame.
#![no_main]

use iris_protocol::{decode, encode, ClientFrame, ServerFrame};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(frame) = decode::<ClientFrame>(text) {
        let again = decode::<ClientFrame>(&encode(&frame.header, &frame.body)).expect("re-encoded frame decodes");
        assert_eq!(again.body, frame.body);
    }
    if let Ok(frame) = decode::<ServerFrame>(text) {
        let again = decode::<ServerFrame>(&encode(&frame.header, &frame.body)).expect("re-encoded frame decodes");
        assert_eq!(again.body, frame.body);
    }
});
