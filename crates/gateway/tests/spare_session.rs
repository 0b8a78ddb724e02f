//! The spare session: the gateway keeps one agent session open ahead of need and hands it to the
//! next new chat (or `/new`), so that its first answer does not wait for `session/new`; it opens
//! the next one behind it, never more than one, and none when `spare_session = false`. Through
//! the real server and the demo agent, whose `sessions` keyword says how many sessions it holds
//! (without checkpoints, so that the counts are exact: `tests/rewind.rs` covers those).

mod common;

use common::*;

/// The session id `/status` names on the line starting with `label`.
fn named_session<'a>(status: &'a str, label: &str) -> &'a str {
    status
        .lines()
        .find_map(|l| l.strip_prefix(label))
        .unwrap_or_else(|| panic!("no {label:?} line in /status: {status}"))
}

/// The id of the ready spare in a `/status` text.
fn spare_id(status: &str) -> String {
    let line = named_session(status, "Spare session: ");
    line.strip_prefix("ready (")
        .and_then(|l| l.strip_suffix(')'))
        .unwrap_or_else(|| panic!("no spare ready: {status}"))
        .to_owned()
}

#[tokio::test]
async fn a_new_chat_takes_the_session_opened_ahead_and_the_next_one_is_opened() {
    let gw = TestGateway::start_with(demo_without_fork).await;
    let (mut a, _) = gw.connect("phone").await;
    turn(&mut a, default_lane(), "hello").await;
    let status = lane_command(&mut a, "default", "/status").await;
    let spare = spare_id(&status);
    assert_ne!(
        named_session(&status, "Session: "),
        spare,
        "the spare is not the default chat's own session"
    );

    let side = create_channel(&mut a, "Side", None).await;
    let events = turn(&mut a, iris_protocol::Header::lane(&side, None), "hello").await;
    assert_eq!(final_text(&events), "Echo: hello");
    let status = lane_command(&mut a, &side, "/status").await;
    assert_eq!(
        named_session(&status, "Session: "),
        spare,
        "the new chat runs on the session opened before it existed"
    );
    let next = spare_id(&status);
    assert_ne!(next, spare, "a new spare is opened behind it");
    assert!(
        demo_sessions(&mut a, &side)
            .await
            .starts_with("Open sessions: 3,"),
        "the default chat's, the new chat's and one spare"
    );
    gw.stop().await;
}

#[tokio::test]
async fn spares_never_pile_up_however_often_a_chat_starts_over() {
    let gw = TestGateway::start_with(demo_without_fork).await;
    let (mut a, _) = gw.connect("phone").await;
    turn(&mut a, default_lane(), "hello").await;
    let mut seen = Vec::new();
    for _ in 0..4 {
        assert_eq!(
            lane_command(&mut a, "default", "/new").await,
            "Started a new session."
        );
        turn(&mut a, default_lane(), "hello").await;
        let status = lane_command(&mut a, "default", "/status").await;
        seen.push(named_session(&status, "Session: ").to_owned());
        spare_id(&status);
        assert!(
            demo_sessions(&mut a, "default")
                .await
                .starts_with("Open sessions: 2,"),
            "the chat's session and one spare, after {} restarts: {status}",
            seen.len()
        );
    }
    seen.dedup();
    assert_eq!(seen.len(), 4, "every /new starts on another session");
    gw.stop().await;
}

#[tokio::test]
async fn no_spare_when_it_is_turned_off() {
    let gw = TestGateway::start_with(|c| {
        demo_without_fork(c);
        c.spare_session = false;
    })
    .await;
    let (mut a, _) = gw.connect("phone").await;
    turn(&mut a, default_lane(), "hello").await;
    let status = lane_command(&mut a, "default", "/status").await;
    assert_eq!(named_session(&status, "Spare session: "), "off");
    assert!(demo_sessions(&mut a, "default")
        .await
        .starts_with("Open sessions: 1,"));
    gw.stop().await;
}
