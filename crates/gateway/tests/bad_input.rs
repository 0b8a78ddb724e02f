//! Bad input from a device: every malformed, mistyped or impossible frame gets the right `error`
//! (with its request `id` when one could be read), the connection stays usable, and nothing that
//! is stored changes. The checks before `hello` are in `bad_hello.rs`, rate limits and device
//! replacement in `limits_and_replacement.rs`.

mod common;

use common::bad::*;
use common::*;
use iris_client::Event;
use iris_protocol::{
    ChannelCreate, ClientFrame, ErrorCode, Header, MessageSend, RequestId, ServerFrame,
};

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
            "channel.create with a name of only invisible characters",
            r#"{"v":1,"id":@ID,"type":"channel.create","payload":{"name":"\u200b\u2066"}}"#,
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
