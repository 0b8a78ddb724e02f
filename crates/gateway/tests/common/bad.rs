//! What the bad-input tests check after each refusal: the stored state is unchanged, the
//! connection is still usable, and a connection closed before `hello` got its error and Close.

use std::time::Duration;

use iris_client::{Client, Event, RawConnection, RawFrame};
use iris_protocol::{ChannelInfo, ClientFrame, ErrorCode, Header, HistoryRequest, ServerFrame};
use serde_json::Value;

use super::TestGateway;

/// How long any single answer may take.
pub const ANSWER: Duration = Duration::from_secs(5);

/// Every lane's messages (id, text), the channel directory and the outbox head.
#[derive(Debug, PartialEq)]
pub struct Snapshot {
    pub lanes: Vec<Vec<(String, String)>>,
    pub channels: Vec<ChannelInfo>,
    pub head: u64,
}

/// All messages of a lane, oldest first, paging with `before_message_id`.
pub async fn whole_history(
    client: &mut Client,
    chat: &str,
    thread: Option<&str>,
) -> Vec<(String, String)> {
    let mut all = Vec::new();
    let mut before = None;
    loop {
        let req = HistoryRequest {
            before_message_id: before.clone(),
            limit: Some(200),
        };
        let event = client
            .request(
                Header::lane(chat, thread.map(str::to_owned)),
                ClientFrame::History(req),
            )
            .await
            .expect("history answered");
        let ServerFrame::History(page) = event.body else {
            panic!("history answered by {}", event.raw)
        };
        let mut rows: Vec<(String, String)> = page
            .messages
            .into_iter()
            .map(|m| (m.message_id, m.text))
            .collect();
        rows.append(&mut all);
        all = rows;
        if !page.has_more {
            return all;
        }
        before = page.oldest_message_id;
        assert!(
            before.is_some(),
            "a page with has_more names its oldest message"
        );
    }
}

/// What is stored, as seen by a device that connects now.
pub async fn snapshot(
    gw: &TestGateway,
    probe: &str,
    lanes: &[(String, Option<String>)],
) -> Snapshot {
    let (mut client, ack) = gw.connect(probe).await;
    let mut histories = Vec::new();
    for (chat, thread) in lanes {
        histories.push(whole_history(&mut client, chat, thread.as_deref()).await);
    }
    client.close().await.expect("probe closes");
    Snapshot {
        lanes: histories,
        channels: ack.channels,
        head: ack.head_cursor,
    }
}

/// The next frame on a connection, within [`ANSWER`].
pub async fn next(client: &mut Client, case: &str) -> Event {
    match client.next_event_timeout(ANSWER).await {
        Ok(event) => event,
        Err(e) => panic!("case {case:?}: no frame arrived: {e}"),
    }
}

/// A JSON `ping` with this id is answered by a `pong` with this id, and nothing comes before it.
pub async fn assert_usable(client: &mut Client, id: u64, case: &str) {
    let ping = format!(r#"{{"v":1,"id":{id},"type":"ping","payload":{{"ts":{id}}}}}"#);
    client
        .send_text(&ping)
        .await
        .unwrap_or_else(|e| panic!("case {case:?}: connection unusable: {e}"));
    let event = next(client, case).await;
    assert!(
        matches!(event.body, ServerFrame::Pong(_)) && event.id() == Some(id),
        "case {case:?}: the next frame after it should be the pong to ping {id}, got {}",
        event.raw
    );
}

/// The code of an `error` event, or a panic naming the case.
pub fn error_code(event: &Event, case: &str) -> ErrorCode {
    match &event.body {
        ServerFrame::Error(e) => e.code,
        _ => panic!("case {case:?}: expected an error frame, got {}", event.raw),
    }
}

/// Reads a text frame from a raw connection as JSON.
pub async fn raw_json(conn: &mut RawConnection, case: &str) -> Value {
    match conn.recv_timeout(ANSWER).await {
        Ok(RawFrame::Text(t)) => {
            serde_json::from_str(&t).unwrap_or_else(|e| panic!("case {case:?}: {e}: {t}"))
        }
        other => panic!("case {case:?}: expected a text frame, got {other:?}"),
    }
}

/// Asserts an `error` frame with this code (and id), then a Close with this code.
/// `id: None` leaves the id unchecked.
pub async fn assert_rejected(
    conn: &mut RawConnection,
    case: &str,
    code: &str,
    id: Option<Option<u64>>,
    close: u16,
) {
    let frame = raw_json(conn, case).await;
    assert_eq!(frame["type"], "error", "case {case:?}: {frame}");
    assert_eq!(frame["payload"]["code"], code, "case {case:?}: {frame}");
    if let Some(id) = id {
        assert_eq!(
            frame.get("id").and_then(Value::as_u64),
            id,
            "case {case:?}: {frame}"
        );
        if id.is_none() {
            assert!(frame.get("id").is_none(), "case {case:?}: {frame}");
        }
    }
    match conn.recv_timeout(ANSWER).await {
        Ok(RawFrame::Close(Some((c, _)))) => assert_eq!(c, close, "case {case:?}: close code"),
        other => panic!("case {case:?}: expected a Close {close}, got {other:?}"),
    }
}
