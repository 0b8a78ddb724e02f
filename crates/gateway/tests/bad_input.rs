//! Bad input from a device: every malformed, mistyped or impossible frame gets the right `error`
//! (with its request `id` when one could be read), the connection stays usable, and nothing that
//! is stored changes. Also the checks before `hello`, rate limits and device replacement.

mod common;

use std::time::Duration;

use common::*;
use iris_client::{Client, ClientError, ConnectOptions, Event, RawConnection, RawFrame};
use iris_protocol::{
    ChannelCreate, ChannelInfo, ClientFrame, ErrorCode, Header, HistoryRequest, MessageSend,
    RequestId, ServerFrame,
};
use serde_json::Value;

/// How long any single answer may take.
const ANSWER: Duration = Duration::from_secs(5);

/// Every lane's messages (id, text), the channel directory and the outbox head.
#[derive(Debug, PartialEq)]
struct Snapshot {
    lanes: Vec<Vec<(String, String)>>,
    channels: Vec<ChannelInfo>,
    head: u64,
}

/// All messages of a lane, oldest first, paging with `before_message_id`.
async fn lane_history(
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
async fn snapshot(gw: &TestGateway, probe: &str, lanes: &[(String, Option<String>)]) -> Snapshot {
    let (mut client, ack) = gw.connect(probe).await;
    let mut histories = Vec::new();
    for (chat, thread) in lanes {
        histories.push(lane_history(&mut client, chat, thread.as_deref()).await);
    }
    client.close().await.expect("probe closes");
    Snapshot {
        lanes: histories,
        channels: ack.channels,
        head: ack.head_cursor,
    }
}

/// The next frame on a connection, within [`ANSWER`].
async fn next(client: &mut Client, case: &str) -> Event {
    match client.next_event_timeout(ANSWER).await {
        Ok(event) => event,
        Err(e) => panic!("case {case:?}: no frame arrived: {e}"),
    }
}

/// A JSON `ping` with this id is answered by a `pong` with this id, and nothing comes before it.
async fn assert_usable(client: &mut Client, id: u64, case: &str) {
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
fn error_code(event: &Event, case: &str) -> ErrorCode {
    match &event.body {
        ServerFrame::Error(e) => e.code,
        _ => panic!("case {case:?}: expected an error frame, got {}", event.raw),
    }
}

enum Input {
    /// A text frame; `@ID` is replaced by the case's request id.
    Text(String),
    Binary(Vec<u8>),
}

enum Expect {
    /// An `error` with one of these codes; `with_id`: it answers the frame's id (else no id).
    Error {
        codes: &'static [ErrorCode],
        with_id: bool,
        says: Option<&'static str>,
    },
    /// A response of this type with the frame's id, passing the check.
    Reply {
        frame_type: &'static str,
        check: fn(&Event),
    },
    /// Nothing at all.
    Silent,
}

struct Case {
    name: &'static str,
    input: Input,
    expect: Expect,
}

fn err(code: &'static [ErrorCode], with_id: bool) -> Expect {
    Expect::Error {
        codes: code,
        with_id,
        says: None,
    }
}

const BAD: &[ErrorCode] = &[ErrorCode::BadRequest];
const NOT_FOUND: &[ErrorCode] = &[ErrorCode::NotFound];
const UNSUPPORTED: &[ErrorCode] = &[ErrorCode::Unsupported];

fn text(name: &'static str, frame: impl Into<String>, expect: Expect) -> Case {
    Case {
        name,
        input: Input::Text(frame.into()),
        expect,
    }
}

fn search_is_harmless(event: &Event) {
    let ServerFrame::SearchResults(results) = &event.body else {
        panic!("{}", event.raw)
    };
    assert!(
        results.hits.iter().all(|h| !h.message_id.is_empty()),
        "hits name their messages"
    );
}

/// The whole bad-input table on one authenticated connection, with an observer device that must
/// see nothing, and the stored state compared before and after.
#[tokio::test]
async fn bad_frames_get_the_right_error_and_change_nothing() {
    let gw = TestGateway::start_with(|c| c.limits.sends_per_minute = 1_000_000).await;
    let (mut a, _) = gw.connect("bad-input-phone").await;
    let (mut observer, _) = gw.connect("bad-input-observer").await;

    // A channel with a thread, a message in each, and more than one history page in the default lane.
    let create = |name: &str, parent: Option<&str>| {
        ClientFrame::ChannelCreate(ChannelCreate {
            name: name.into(),
            kind: None,
            parent_chat_id: parent.map(str::to_owned),
            agent: None,
        })
    };
    let work = a
        .request(Header::default(), create("Work", None))
        .await
        .expect("channel created");
    let ServerFrame::ChannelCreated(work) = work.body else {
        panic!("{}", work.raw)
    };
    let work = work.chat_id;
    let idea = a
        .request(Header::default(), create("Ideas", Some(&work)))
        .await
        .expect("thread created");
    let ServerFrame::ChannelCreated(idea) = idea.body else {
        panic!("{}", idea.raw)
    };
    let idea = idea.chat_id;
    send_text(&mut a, &work, "planning the week").await;
    let send = ClientFrame::MessageSend(MessageSend {
        text: "an idea in a thread".into(),
        ..Default::default()
    });
    a.request(Header::lane(work.clone(), Some(idea.clone())), send)
        .await
        .expect("thread message echoed");
    const FILLER: u64 = 205;
    for i in 0..FILLER {
        let text = if i == 100 {
            "the needle in the haystack".to_owned()
        } else {
            format!("filler number {i}")
        };
        let header = Header {
            id: Some(RequestId::from(10_000 + i)),
            ..Header::lane("default", None)
        };
        let send = ClientFrame::MessageSend(MessageSend {
            text,
            ..Default::default()
        });
        a.send(header, send).await.expect("pipelined send");
    }
    let mut last_echo = String::new();
    for i in 0..FILLER {
        let echo = next(&mut a, "filler echo").await;
        assert_eq!(
            echo.id(),
            Some(10_000 + i),
            "echoes come in request order: {}",
            echo.raw
        );
        last_echo = message_id(&echo);
    }
    observer
        .wait_for_timeout(
            |e| matches!(&e.body, ServerFrame::Message(m) if m.message_id == last_echo),
            ANSWER,
        )
        .await
        .expect("the observer saw the setup");
    observer.take_seen();

    let lanes = vec![
        ("default".to_owned(), None),
        (work.clone(), None),
        (work.clone(), Some(idea.clone())),
    ];
    let before = snapshot(&gw, "probe-before", &lanes).await;
    assert_eq!(before.lanes[0].len(), FILLER as usize);
    assert_eq!(
        before.channels.len(),
        3,
        "default, Work and its thread: {:?}",
        before.channels
    );
    let head = before.head;

    let huge = format!(
        r#"{{"v":1,"id":@ID,"type":"message.send","payload":{{"text":"{}"}}}}"#,
        "a".repeat(1_500_000)
    );
    let long_text = format!(
        r#"{{"v":1,"id":@ID,"type":"message.send","payload":{{"text":"{}"}}}}"#,
        "b".repeat(70_000)
    );
    let deep = format!(
        r#"{{"v":1,"id":@ID,"type":"ping","payload":{{"x":{}{}}}}}"#,
        "[".repeat(100),
        "]".repeat(100)
    );
    let long_name = format!(
        r#"{{"v":1,"id":@ID,"type":"channel.create","payload":{{"name":"{}"}}}}"#,
        "n".repeat(300)
    );
    let foreign_thread = format!(
        r#"{{"v":1,"id":@ID,"type":"history","chat_id":"{idea}","thread_id":"t_other","payload":{{}}}}"#
    );
    let thread_in_thread = format!(
        r#"{{"v":1,"id":@ID,"type":"channel.create","payload":{{"name":"Deeper","parent_chat_id":"{idea}"}}}}"#
    );
    let default_thread = format!(
        r#"{{"v":1,"id":@ID,"type":"channel.set_default","chat_id":"{idea}","payload":{{}}}}"#
    );
    let beyond_head = format!(
        r#"{{"v":1,"id":@ID,"type":"sync","payload":{{"cursor":{}}}}}"#,
        head + 1000
    );
    let wrong_lane_receipt = format!(
        r#"{{"v":1,"id":@ID,"type":"read.receipt","chat_id":"{work}","payload":{{"message_id":"{last_echo}"}}}}"#
    );
    let channel_kind = format!(
        r#"{{"v":1,"id":@ID,"type":"channel.create","payload":{{"name":"X","kind":"channel","parent_chat_id":"{work}"}}}}"#
    );

    let cases = vec![
        // Not a frame at all.
        text("malformed JSON", r#"{"v":1,"type":"ping""#, err(BAD, false)),
        text(
            "truncated frame with an id",
            r#"{"v":1,"id":@ID,"type":"ping","payl"#,
            err(BAD, true),
        ),
        text(
            "trailing garbage after a frame with an id",
            r#"{"v":1,"id":@ID,"type":"ping","payload":{}}}"#,
            err(BAD, true),
        ),
        text("garbage text", "hello gateway", err(BAD, false)),
        text("empty text frame", "", err(BAD, false)),
        text("JSON array", "[1,2,3]", err(BAD, false)),
        text("JSON string", r#""ping""#, err(BAD, false)),
        text("JSON number", "42", err(BAD, false)),
        text("JSON null", "null", err(BAD, false)),
        text(
            "missing type",
            r#"{"v":1,"id":@ID,"payload":{}}"#,
            err(BAD, true),
        ),
        text(
            "type is a number",
            r#"{"v":1,"id":@ID,"type":7,"payload":{}}"#,
            err(BAD, true),
        ),
        text(
            "v is a string",
            r#"{"v":"1","id":@ID,"type":"ping","payload":{}}"#,
            err(BAD, true),
        ),
        text(
            "id is an object",
            r#"{"v":1,"id":{"n":1},"type":"ping","payload":{}}"#,
            err(BAD, false),
        ),
        text(
            "chat_id is a number",
            r#"{"v":1,"id":@ID,"type":"history","chat_id":5,"payload":{}}"#,
            err(BAD, true),
        ),
        text(
            "payload is an array",
            r#"{"v":1,"id":@ID,"type":"history","payload":[]}"#,
            err(BAD, true),
        ),
        text(
            "payload is a string",
            r#"{"v":1,"id":@ID,"type":"ping","payload":"ts"}"#,
            err(BAD, true),
        ),
        text(
            "history limit is a string",
            r#"{"v":1,"id":@ID,"type":"history","payload":{"limit":"10"}}"#,
            err(BAD, true),
        ),
        text(
            "sync cursor is a string",
            r#"{"v":1,"id":@ID,"type":"sync","payload":{"cursor":"5"}}"#,
            err(BAD, true),
        ),
        text(
            "message_ids is a string",
            r#"{"v":1,"id":@ID,"type":"message.delete","payload":{"message_ids":"m_1"}}"#,
            err(BAD, true),
        ),
        text(
            "ping ts is a string",
            r#"{"v":1,"id":@ID,"type":"ping","payload":{"ts":"now"}}"#,
            err(BAD, true),
        ),
        text(
            "reply_to is a number",
            r#"{"v":1,"id":@ID,"type":"message.send","payload":{"text":"x","reply_to":5}}"#,
            err(BAD, true),
        ),
        text(
            "fcm.register token is a number, no id",
            r#"{"v":1,"type":"fcm.register","payload":{"fcm_token":5}}"#,
            err(BAD, false),
        ),
        text("huge text frame above 1 MiB", huge, err(BAD, true)),
        text("nesting 100 levels deep", deep, err(BAD, true)),
        Case {
            name: "binary frame without an upload",
            input: Input::Binary(vec![0xde, 0xad, 0xbe, 0xef]),
            expect: err(BAD, false),
        },
        // Required fields.
        text(
            "message.send without text",
            r#"{"v":1,"id":@ID,"type":"message.send","payload":{}}"#,
            Expect::Error {
                codes: BAD,
                with_id: true,
                says: Some("text is empty"),
            },
        ),
        text(
            "message.send with blank text",
            r#"{"v":1,"id":@ID,"type":"message.send","payload":{"text":"  \n\t "}}"#,
            err(BAD, true),
        ),
        text("message text above 64 KiB", long_text, err(BAD, true)),
        text(
            "channel.rename without name",
            r#"{"v":1,"id":@ID,"type":"channel.rename","chat_id":"default","payload":{}}"#,
            err(BAD, true),
        ),
        text(
            "channel.delete without chat_id",
            r#"{"v":1,"id":@ID,"type":"channel.delete","payload":{}}"#,
            err(BAD, true),
        ),
        text(
            "search without query",
            r#"{"v":1,"id":@ID,"type":"search","payload":{"scope":"all"}}"#,
            err(BAD, true),
        ),
        text(
            "search scope chat without chat_id",
            r#"{"v":1,"id":@ID,"type":"search","payload":{"query":"x","scope":"chat"}}"#,
            err(BAD, true),
        ),
        text(
            "search scope bogus",
            r#"{"v":1,"id":@ID,"type":"search","payload":{"query":"x","scope":"galaxy"}}"#,
            err(BAD, true),
        ),
        text(
            "picker.select without picker_id",
            r#"{"v":1,"id":@ID,"type":"picker.select","payload":{"value":"x"}}"#,
            err(BAD, true),
        ),
        text(
            "commands.complete without prefix",
            r#"{"v":1,"id":@ID,"type":"commands.complete","payload":{}}"#,
            err(BAD, true),
        ),
        // Unknown types.
        text(
            "unknown type with id",
            r#"{"v":1,"id":@ID,"type":"teleport","payload":{}}"#,
            err(UNSUPPORTED, true),
        ),
        text(
            "unknown type without id",
            r#"{"v":1,"type":"teleport","payload":{"to":"mars"}}"#,
            Expect::Silent,
        ),
        text(
            "unknown type with null id",
            r#"{"v":1,"id":null,"type":"teleport"}"#,
            Expect::Silent,
        ),
        // Things that do not exist.
        text(
            "history of an unknown chat",
            r#"{"v":1,"id":@ID,"type":"history","chat_id":"c_nope","payload":{}}"#,
            err(NOT_FOUND, true),
        ),
        text(
            "message.send to an unknown chat",
            r#"{"v":1,"id":@ID,"type":"message.send","chat_id":"c_nope","payload":{"text":"hi"}}"#,
            err(NOT_FOUND, true),
        ),
        text(
            "history of an unknown thread",
            r#"{"v":1,"id":@ID,"type":"history","chat_id":"default","thread_id":"t_nope","payload":{}}"#,
            err(NOT_FOUND, true),
        ),
        text(
            "a thread's chat_id with another thread_id",
            foreign_thread,
            err(BAD, true),
        ),
        text(
            "history before an unknown message",
            r#"{"v":1,"id":@ID,"type":"history","chat_id":"default","payload":{"before_message_id":"m_nope"}}"#,
            err(NOT_FOUND, true),
        ),
        text(
            "picker.select of an unknown picker",
            r#"{"v":1,"id":@ID,"type":"picker.select","payload":{"picker_id":"pc_nope","value":"high"}}"#,
            err(NOT_FOUND, true),
        ),
        text(
            "agent.stop with nothing running",
            r#"{"v":1,"id":@ID,"type":"agent.stop","chat_id":"default","payload":{}}"#,
            err(NOT_FOUND, true),
        ),
        text(
            "agent.steer in an unknown chat",
            r#"{"v":1,"id":@ID,"type":"agent.steer","chat_id":"c_nope","payload":{"text":"left"}}"#,
            err(NOT_FOUND, true),
        ),
        text(
            "read.receipt for an unknown message",
            r#"{"v":1,"id":@ID,"type":"read.receipt","payload":{"chat_id":"default","message_id":"m_nope"}}"#,
            err(NOT_FOUND, true),
        ),
        text(
            "read.receipt naming the wrong chat",
            wrong_lane_receipt,
            err(NOT_FOUND, true),
        ),
        text(
            "channel.rename of an unknown chat",
            r#"{"v":1,"id":@ID,"type":"channel.rename","chat_id":"c_nope","payload":{"name":"New"}}"#,
            err(NOT_FOUND, true),
        ),
        text(
            "channel.delete of an unknown chat",
            r#"{"v":1,"id":@ID,"type":"channel.delete","chat_id":"c_nope","payload":{}}"#,
            err(NOT_FOUND, true),
        ),
        text(
            "channel.set_default of an unknown chat",
            r#"{"v":1,"id":@ID,"type":"channel.set_default","chat_id":"c_nope","payload":{}}"#,
            err(NOT_FOUND, true),
        ),
        text(
            "thread under an unknown parent",
            r#"{"v":1,"id":@ID,"type":"channel.create","payload":{"name":"Orphan","parent_chat_id":"c_nope"}}"#,
            err(NOT_FOUND, true),
        ),
        // Values out of range.
        text(
            "history limit negative",
            r#"{"v":1,"id":@ID,"type":"history","chat_id":"default","payload":{"limit":-5}}"#,
            err(BAD, true),
        ),
        text(
            "history limit zero",
            r#"{"v":1,"id":@ID,"type":"history","chat_id":"default","payload":{"limit":0}}"#,
            err(BAD, true),
        ),
        text(
            "history limit 1000 is clamped to 200",
            r#"{"v":1,"id":@ID,"type":"history","chat_id":"default","payload":{"limit":1000}}"#,
            Expect::Reply {
                frame_type: "history",
                check: |e| {
                    let ServerFrame::History(page) = &e.body else {
                        panic!("{}", e.raw)
                    };
                    assert_eq!(
                        page.messages.len(),
                        200,
                        "the page is clamped to 200 messages"
                    );
                    assert!(page.has_more, "205 messages do not fit in one page");
                },
            },
        ),
        text(
            "sync with a negative cursor",
            r#"{"v":1,"id":@ID,"type":"sync","payload":{"cursor":-1}}"#,
            err(BAD, true),
        ),
        text("sync beyond the outbox head", beyond_head, err(BAD, true)),
        text(
            "hello again after authentication",
            format!(
                r#"{{"v":1,"id":@ID,"type":"hello","payload":{{"token":"{TOKEN}","device_id":"bad-input-phone"}}}}"#
            ),
            err(BAD, true),
        ),
        text(
            "message.delete with an empty list",
            r#"{"v":1,"id":@ID,"type":"message.delete","chat_id":"default","payload":{"message_ids":[]}}"#,
            err(BAD, true),
        ),
        text(
            "message.delete of a default-chat message named in another chat",
            format!(
                r#"{{"v":1,"id":@ID,"type":"message.delete","chat_id":"{work}","payload":{{"message_ids":["{last_echo}"]}}}}"#
            ),
            err(NOT_FOUND, true),
        ),
        text(
            "channel.delete of the default channel",
            r#"{"v":1,"id":@ID,"type":"channel.delete","chat_id":"default","payload":{}}"#,
            err(BAD, true),
        ),
        text(
            "channel.create with an empty name",
            r#"{"v":1,"id":@ID,"type":"channel.create","payload":{"name":"   "}}"#,
            err(BAD, true),
        ),
        text(
            "channel.create with a 300-character name",
            long_name,
            err(BAD, true),
        ),
        text(
            "channel.create with a control character",
            r#"{"v":1,"id":@ID,"type":"channel.create","payload":{"name":"bell\u0007name"}}"#,
            err(BAD, true),
        ),
        text(
            "channel.create with kind bogus",
            r#"{"v":1,"id":@ID,"type":"channel.create","payload":{"name":"X","kind":"bogus"}}"#,
            err(BAD, true),
        ),
        text(
            "channel.create kind channel with a parent",
            channel_kind,
            err(BAD, true),
        ),
        text(
            "channel.create kind thread without a parent",
            r#"{"v":1,"id":@ID,"type":"channel.create","payload":{"name":"X","kind":"thread"}}"#,
            err(BAD, true),
        ),
        text("thread inside a thread", thread_in_thread, err(BAD, true)),
        text(
            "a thread as the default channel",
            default_thread,
            err(BAD, true),
        ),
        text(
            "channel.rename to a newline",
            r#"{"v":1,"id":@ID,"type":"channel.rename","chat_id":"default","payload":{"name":"a\nb"}}"#,
            err(BAD, true),
        ),
        // Search input that looks like SQL or FTS syntax is just text.
        text(
            "search for SQL",
            r#"{"v":1,"id":@ID,"type":"search","payload":{"query":"'); DROP TABLE messages;--"}}"#,
            Expect::Reply {
                frame_type: "search.results",
                check: search_is_harmless,
            },
        ),
        text(
            "search for an unbalanced quote",
            r#"{"v":1,"id":@ID,"type":"search","payload":{"query":"\"unbalanced"}}"#,
            Expect::Reply {
                frame_type: "search.results",
                check: search_is_harmless,
            },
        ),
        text(
            "search for NEAR(",
            r#"{"v":1,"id":@ID,"type":"search","payload":{"query":"NEAR("}}"#,
            Expect::Reply {
                frame_type: "search.results",
                check: search_is_harmless,
            },
        ),
        text(
            "search for *",
            r#"{"v":1,"id":@ID,"type":"search","payload":{"query":"*"}}"#,
            Expect::Reply {
                frame_type: "search.results",
                check: search_is_harmless,
            },
        ),
        text(
            "search for column syntax",
            r#"{"v":1,"id":@ID,"type":"search","payload":{"query":"text:needle OR ^a AND (b"}}"#,
            Expect::Reply {
                frame_type: "search.results",
                check: search_is_harmless,
            },
        ),
        text(
            "search still finds a message afterwards",
            r#"{"v":1,"id":@ID,"type":"search","payload":{"query":"needle"}}"#,
            Expect::Reply {
                frame_type: "search.results",
                check: |e| {
                    let ServerFrame::SearchResults(r) = &e.body else {
                        panic!("{}", e.raw)
                    };
                    assert_eq!(r.hits.len(), 1, "exactly the needle message: {}", e.raw);
                    assert!(r.hits[0].snippet.contains("needle"), "{}", e.raw);
                },
            },
        ),
        // Media is either not offered yet or refuses these particular requests.
        text(
            "media.upload.start of 1 TB",
            r#"{"v":1,"id":@ID,"type":"media.upload.start","payload":{"media_ref":"mu_big","kind":"file","mime":"application/octet-stream","size":1000000000000,"filename":"big.bin"}}"#,
            err(&[ErrorCode::Unsupported, ErrorCode::MediaTooLarge], true),
        ),
        text(
            "media.upload.end without a start",
            r#"{"v":1,"id":@ID,"type":"media.upload.end","payload":{"media_ref":"mu_none","sha256":"00"}}"#,
            err(
                &[
                    ErrorCode::Unsupported,
                    ErrorCode::NotFound,
                    ErrorCode::BadRequest,
                ],
                true,
            ),
        ),
        text(
            "media.pull of unknown media",
            r#"{"v":1,"id":@ID,"type":"media.pull","payload":{"media_id":"md_nope"}}"#,
            err(&[ErrorCode::Unsupported, ErrorCode::NotFound], true),
        ),
        text(
            "message.send with an unknown media_ref",
            r#"{"v":1,"id":@ID,"type":"message.send","chat_id":"default","payload":{"text":"look","media_refs":["mu_nope"]}}"#,
            err(&[ErrorCode::NotFound, ErrorCode::BadRequest], true),
        ),
    ];
    assert!(cases.len() >= 40, "the table has {} cases", cases.len());
    let data_dir = gw.dir.to_string_lossy().into_owned();

    for (i, case) in cases.into_iter().enumerate() {
        let id = 1000 + i as u64;
        match case.input {
            Input::Text(t) => a.send_text(&t.replace("@ID", &id.to_string())).await,
            Input::Binary(b) => a.send_binary(b).await,
        }
        .unwrap_or_else(|e| panic!("case {:?}: could not send: {e}", case.name));
        match case.expect {
            Expect::Error {
                codes,
                with_id,
                says,
            } => {
                let event = next(&mut a, case.name).await;
                let code = error_code(&event, case.name);
                assert!(
                    codes.contains(&code),
                    "case {:?}: expected one of {codes:?}, got {}",
                    case.name,
                    event.raw
                );
                let want = with_id.then_some(id);
                assert_eq!(
                    event.id(),
                    want,
                    "case {:?}: the error's id: {}",
                    case.name,
                    event.raw
                );
                if !with_id {
                    assert_eq!(event.header.id, None, "case {:?}: {}", case.name, event.raw);
                }
                let ServerFrame::Error(e) = &event.body else {
                    unreachable!()
                };
                if let Some(says) = says {
                    assert!(
                        e.message.contains(says),
                        "case {:?}: message {:?}",
                        case.name,
                        e.message
                    );
                }
                let lower = e.message.to_lowercase();
                let leaks = lower.contains("sqlite")
                    || lower.contains("panicked")
                    || e.message.contains(&data_dir);
                assert!(
                    !leaks,
                    "case {:?}: the message shows internals: {:?}",
                    case.name, e.message
                );
            }
            Expect::Reply { frame_type, check } => {
                let event = next(&mut a, case.name).await;
                assert_eq!(
                    event.frame_type(),
                    frame_type,
                    "case {:?}: {}",
                    case.name,
                    event.raw
                );
                assert_eq!(event.id(), Some(id), "case {:?}: {}", case.name, event.raw);
                check(&event);
            }
            Expect::Silent => {}
        }
        assert_usable(&mut a, 500_000 + i as u64, case.name).await;
    }

    // An unknown major version is refused and the socket closed: the last case on this connection.
    a.send_text(r#"{"v":2,"id":77,"type":"ping","payload":{}}"#)
        .await
        .expect("send v2");
    let event = next(&mut a, "v2").await;
    assert_eq!(
        error_code(&event, "v2"),
        ErrorCode::Unsupported,
        "{}",
        event.raw
    );
    assert_eq!(event.id(), Some(77));
    let close = a.closed_timeout(ANSWER).await.expect("closed after v2");
    assert_eq!(
        close.map(|c| c.0),
        Some(4400),
        "an unknown protocol version closes with 4400"
    );

    // No other device heard of any of it, and nothing stored changed.
    observer
        .expect_quiet(QUIET)
        .await
        .expect("the observer saw nothing");
    let after = snapshot(&gw, "probe-after", &lanes).await;
    assert_eq!(after, before, "bad input changed what is stored");
    gw.stop().await;
}

/// Reads a text frame from a raw connection as JSON.
async fn raw_json(conn: &mut RawConnection, case: &str) -> Value {
    match conn.recv_timeout(ANSWER).await {
        Ok(RawFrame::Text(t)) => {
            serde_json::from_str(&t).unwrap_or_else(|e| panic!("case {case:?}: {e}: {t}"))
        }
        other => panic!("case {case:?}: expected a text frame, got {other:?}"),
    }
}

/// Asserts an `error` frame with this code (and id), then a Close with this code.
/// `id: None` leaves the id unchecked.
async fn assert_rejected(
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

/// Before `hello` only a valid `hello` is accepted; everything else is `auth` and close 4401.
#[tokio::test]
async fn the_first_frame_must_be_a_valid_hello() {
    let gw = TestGateway::start_with(|c| c.limits.auth_failures_per_minute = 1000).await;
    let hello = |token: &str, device: &str| {
        format!(
            r#"{{"v":1,"id":3,"type":"hello","payload":{{"token":"{token}","device_id":"{device}"}}}}"#
        )
    };
    enum First {
        Text(String),
        Binary,
    }
    let long_device = "d".repeat(129);
    let cases: Vec<(&str, First, &str, Option<u64>, u16)> = vec![
        (
            "a ping before hello",
            First::Text(r#"{"v":1,"id":3,"type":"ping","payload":{}}"#.into()),
            "auth",
            Some(3),
            4401,
        ),
        (
            "a message.send before hello",
            First::Text(r#"{"v":1,"id":3,"type":"message.send","payload":{"text":"hi"}}"#.into()),
            "auth",
            Some(3),
            4401,
        ),
        (
            "an unknown type before hello",
            First::Text(r#"{"v":1,"type":"teleport","payload":{}}"#.into()),
            "auth",
            None,
            4401,
        ),
        (
            "a wrong token",
            First::Text(hello("not-the-token-at-all", "phone")),
            "auth",
            Some(3),
            4401,
        ),
        (
            "an empty token",
            First::Text(hello("", "phone")),
            "auth",
            Some(3),
            4401,
        ),
        (
            "the token with a trailing space",
            First::Text(hello(&format!("{TOKEN} "), "phone")),
            "auth",
            Some(3),
            4401,
        ),
        (
            "a hello without token",
            First::Text(r#"{"v":1,"id":3,"type":"hello","payload":{"device_id":"phone"}}"#.into()),
            "auth",
            Some(3),
            4401,
        ),
        (
            "malformed JSON",
            First::Text(r#"{"v":1,"type":"hello","payload":{"token":"#.into()),
            "auth",
            None,
            4401,
        ),
        ("a JSON array", First::Text("[]".into()), "auth", None, 4401),
        ("a binary frame", First::Binary, "auth", None, 4401),
        (
            "a hello of protocol v2",
            First::Text(hello(TOKEN, "phone").replace(r#""v":1"#, r#""v":2"#)),
            "unsupported",
            Some(3),
            4400,
        ),
        (
            "a device id of 129 characters",
            First::Text(hello(TOKEN, &long_device)),
            "bad_request",
            Some(3),
            4401,
        ),
        (
            "a device id with a space",
            First::Text(hello(TOKEN, "my phone")),
            "bad_request",
            Some(3),
            4401,
        ),
        (
            "a caps flag of the wrong type",
            First::Text(format!(
                r#"{{"v":1,"id":3,"type":"hello","payload":{{"token":"{TOKEN}","device_id":"phone","caps":{{"append_updates":"yes"}}}}}}"#
            )),
            "bad_request",
            Some(3),
            4401,
        ),
    ];
    for (name, first, code, id, close) in cases {
        let mut conn = RawConnection::connect(&gw.url).await.expect("connect");
        match first {
            First::Text(t) => conn.send_text(&t).await,
            First::Binary => conn.send_binary(vec![1, 2, 3]).await,
        }
        .expect("send first frame");
        assert_rejected(&mut conn, name, code, Some(id), close).await;
    }
    // The gateway is unharmed: a correct hello still works.
    let (_client, ack) = gw.connect("phone").await;
    assert_eq!(ack.device_id.as_deref(), Some("phone"));
    gw.stop().await;
}

#[tokio::test]
async fn no_hello_in_time_is_an_auth_error() {
    let gw = TestGateway::start_with(|c| c.limits.hello_timeout = Duration::from_millis(300)).await;
    let mut conn = RawConnection::connect(&gw.url).await.expect("connect");
    let started = std::time::Instant::now();
    assert_rejected(&mut conn, "silent device", "auth", Some(None), 4401).await;
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "rejected after the timeout, not before"
    );
    gw.stop().await;
}

#[tokio::test]
async fn repeated_wrong_tokens_throttle_the_address() {
    let gw = TestGateway::start_with(|c| c.limits.auth_failures_per_minute = 3).await;
    for attempt in 0..3 {
        let mut conn = RawConnection::connect(&gw.url).await.expect("connect");
        let err = conn
            .hello("wrong-token-xyz", "guesser")
            .await
            .expect_err("wrong token refused");
        assert!(
            matches!(
                err,
                ClientError::Server {
                    code: ErrorCode::Auth,
                    ..
                }
            ),
            "attempt {attempt}: {err}"
        );
    }
    // Further wrong attempts are refused as throttled (the right token still passes: see
    // tests/hostile.rs).
    let mut conn = RawConnection::connect(&gw.url).await.expect("connect");
    let hello = r#"{"v":1,"id":9,"type":"hello","payload":{"token":"wrong-token-xyz","device_id":"phone"}}"#;
    conn.send_text(hello).await.expect("send hello");
    assert_rejected(&mut conn, "locked out", "rate_limited", Some(Some(9)), 4401).await;
    gw.stop().await;
}

#[tokio::test]
async fn rapid_sends_are_rate_limited_and_the_connection_survives() {
    // 8 a minute allows a burst of 2.
    let gw = TestGateway::start_with(|c| c.limits.sends_per_minute = 8).await;
    let (mut a, _) = gw.connect("chatty").await;
    let mut accepted = Vec::new();
    let mut limited = 0;
    for i in 0..6 {
        let send = ClientFrame::MessageSend(MessageSend {
            text: format!("quick {i}"),
            ..Default::default()
        });
        match a.request(Header::lane("default", None), send).await {
            Ok(echo) => accepted.push(message_text(&echo)),
            Err(ClientError::Server {
                code: ErrorCode::RateLimited,
                ..
            }) => limited += 1,
            Err(e) => panic!("send {i}: {e}"),
        }
    }
    assert_eq!(
        accepted,
        ["quick 0", "quick 1"],
        "the burst is accepted, in order"
    );
    assert_eq!(limited, 4, "the rest is refused with rate_limited");
    assert_usable(&mut a, 42, "after rate limiting").await;
    let stored = lane_history(&mut a, "default", None).await;
    let texts: Vec<&str> = stored.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(
        texts,
        ["quick 0", "quick 1"],
        "refused messages are not stored"
    );
    // The budget is per device: another device can still talk.
    let (mut b, _) = gw.connect("quiet").await;
    let echo = send_text(&mut b, "default", "my turn").await;
    assert_eq!(message_text(&echo), "my turn");
    gw.stop().await;
}

#[tokio::test]
async fn a_second_connection_of_a_device_replaces_the_first_after_flushing() {
    let gw = TestGateway::start().await;
    let (mut sender, _) = gw.connect("sender").await;
    // The old connection never reads while frames for it pile up.
    let mut old = RawConnection::connect(&gw.url).await.expect("connect");
    old.hello(TOKEN, "tablet").await.expect("hello");
    let mut sent = Vec::new();
    for i in 0..20 {
        sent.push(message_id(
            &send_text(&mut sender, "default", &format!("for the tablet {i}")).await,
        ));
    }
    let (mut new, _) = gw.connect("tablet").await;

    let mut got = Vec::new();
    let close = loop {
        match old
            .recv_timeout(ANSWER)
            .await
            .expect("old connection ends with a Close")
        {
            RawFrame::Text(t) => {
                let v: Value = serde_json::from_str(&t).expect("json");
                if v["type"] == "message" {
                    got.push(
                        v["payload"]["message_id"]
                            .as_str()
                            .expect("message_id")
                            .to_owned(),
                    );
                }
            }
            RawFrame::Binary(_) => panic!("no binary frames expected"),
            RawFrame::Close(close) => break close,
        }
    };
    assert_eq!(
        close.map(|c| c.0),
        Some(4409),
        "the old connection is closed as replaced"
    );
    assert_eq!(
        got, sent,
        "every frame queued for the old connection arrived before the close"
    );

    // The new connection is the device's only one and works.
    let echo = send_text(&mut sender, "default", "after the switch").await;
    let seen = new
        .next_event_timeout(ANSWER)
        .await
        .expect("the new connection receives");
    assert_eq!(message_id(&seen), message_id(&echo));
    assert_usable(&mut new, 7, "replacement").await;
    gw.stop().await;
}

#[tokio::test]
async fn device_names_that_look_like_paths_or_are_long_are_accepted() {
    let gw = TestGateway::start().await;
    let longest_id = "x".repeat(128);
    let names = [
        ("../../etc/passwd", "../../../../etc/shadow".to_owned()),
        ("C:\\Windows\\..\\win.ini", "%2e%2e%2f".to_owned()),
        ("long-name-phone", "Ü".repeat(5000)),
        (longest_id.as_str(), "nul\u{0}byte".to_owned()),
    ];
    for (device_id, device_name) in names {
        let mut opts = ConnectOptions::new(gw.url.clone(), TOKEN, device_id);
        opts.device_name = Some(device_name);
        let (mut client, ack) = Client::connect(opts)
            .await
            .expect("odd device names are accepted");
        assert_eq!(ack.device_id.as_deref(), Some(device_id));
        let echo = send_text(&mut client, "default", "still fine").await;
        assert_eq!(message_text(&echo), "still fine");
        client.close().await.expect("close");
    }
    // Nothing was written outside the data dir's database: the dir holds no odd files.
    let mut entries: Vec<String> = std::fs::read_dir(&gw.dir)
        .expect("data dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    entries.sort();
    assert!(
        entries.iter().all(|e| e.starts_with("iris.db")
            || ["token", "media", "admin.sock", "admin.key"].contains(&e.as_str())),
        "{entries:?}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn the_default_chat_survives_delete_even_after_the_default_flag_moved() {
    let gw = TestGateway::start().await;
    let (mut a, _) = gw.connect("phone").await;
    let create = ClientFrame::ChannelCreate(ChannelCreate {
        name: "Home".into(),
        kind: None,
        parent_chat_id: None,
        agent: None,
    });
    let created = a
        .request(Header::default(), create)
        .await
        .expect("channel created");
    let ServerFrame::ChannelCreated(home) = created.body else {
        panic!("{}", created.raw)
    };
    let moved = a
        .request(
            Header::lane(home.chat_id.clone(), None),
            ClientFrame::ChannelSetDefault(Default::default()),
        )
        .await
        .expect("default moved");
    assert_eq!(moved.frame_type(), "channel.list", "{}", moved.raw);
    send_text(&mut a, "default", "keep me").await;
    for chat in ["default", home.chat_id.as_str()] {
        let err = a
            .request(
                Header::lane(chat, None),
                ClientFrame::ChannelDelete(Default::default()),
            )
            .await
            .expect_err("neither the default chat nor the current default channel can be deleted");
        assert!(
            matches!(
                err,
                ClientError::Server {
                    code: ErrorCode::BadRequest,
                    ..
                }
            ),
            "{chat}: {err}"
        );
    }
    let (_probe, ack) = gw.connect("probe").await;
    let ids: Vec<&str> = ack.channels.iter().map(|c| c.chat_id.as_str()).collect();
    assert!(
        ids.contains(&"default") && ids.contains(&home.chat_id.as_str()),
        "{ids:?}"
    );
    let kept = lane_history(&mut a, "default", None).await;
    assert_eq!(
        kept.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>(),
        ["keep me"]
    );
    gw.stop().await;
}
