//! Empty `agent_message_chunk`s, which newer Hermes releases send every 45 s of a long turn to
//! keep the connection alive, are not text: they open no bubble and send no update (so nothing
//! is stored or pushed for them), and the answer is what the agent said.

mod common;

use common::*;
use iris_protocol::ServerFrame;

#[tokio::test]
async fn empty_chunks_from_the_agent_make_no_frames() {
    let gw = TestGateway::start_demo().await;
    let (mut phone, _) = gw.connect("phone").await;
    let events = turn(&mut phone, default_lane(), "keepalive").await;
    assert_eq!(final_text(&events), "Working. Done. Echo: keepalive");
    let updates: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.body {
            ServerFrame::MessageUpdate(u) => Some(u.text.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        !updates.is_empty() && updates.iter().all(|t| !t.is_empty()),
        "no update without text: {updates:?}"
    );
    assert!(
        updates.windows(2).all(|w| w[1].len() > w[0].len()),
        "each update brings new text: {updates:?}"
    );
    // The bubble opens with the first text, not with the first empty chunk.
    let start = types(&events)
        .iter()
        .position(|t| *t == "message.start")
        .expect("message.start");
    assert_eq!(
        types(&events)[start + 1..]
            .iter()
            .find(|t| t.starts_with("message.")),
        Some(&"message.update"),
        "{:?}",
        types(&events)
    );
    gw.stop().await;
}
