//! The client against a scripted fake gateway: each test writes the server's side by hand.

use std::future::Future;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use iris_client::protocol::{
    ClientFrame, ErrorCode, GatewayState, Header, HistoryRequest, MediaPull, MessageSend,
    ServerFrame,
};
use iris_client::{Client, ClientError, ConnectOptions, RawConnection, RawFrame};
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

const STEP: Duration = Duration::from_secs(5);

/// The server's end of one connection.
struct Peer {
    ws: WebSocketStream<TcpStream>,
}

impl Peer {
    async fn recv(&mut self) -> Message {
        tokio::time::timeout(STEP, self.ws.next())
            .await
            .expect("the client sent nothing in time")
            .expect("the client hung up")
            .expect("websocket error on the server side")
    }

    /// The next text frame as JSON; control frames are not expected here.
    async fn recv_json(&mut self) -> Value {
        match self.recv().await {
            Message::Text(text) => {
                serde_json::from_str(&text).expect("the client sent invalid JSON")
            }
            other => panic!("expected a text frame, got {other:?}"),
        }
    }

    async fn send_json(&mut self, frame: Value) {
        self.ws
            .send(Message::text(frame.to_string()))
            .await
            .expect("server send");
    }

    /// Reads `hello` and accepts it with the given outbox head.
    async fn accept_hello(&mut self, head_cursor: u64) -> Value {
        let hello = self.recv_json().await;
        assert_eq!(hello["type"], "hello");
        assert_eq!(hello["id"], 0);
        self.send_json(json!({"v":1,"id":0,"type":"hello.ack","payload":{
            "server_caps":{"streaming":true,"reasoning":true,"tools":true,"media":true,"search":true,"pickers":true},
            "sync_cursor":3,"last_pushed_cursor":2,"head_cursor":head_cursor,
            "channels":[{"chat_id":"default","name":"Default","kind":"default","is_default":true}]}}))
            .await;
        hello
    }

    /// Waits for the client's Close and lets the handshake finish.
    async fn expect_client_close(&mut self) {
        loop {
            match tokio::time::timeout(STEP, self.ws.next())
                .await
                .expect("no close from the client")
            {
                Some(Ok(Message::Close(_))) | None => break,
                Some(Ok(_)) => {}
                Some(Err(e)) => panic!("websocket error while waiting for close: {e}"),
            }
        }
        // Drain until the stream ends so the answering Close is flushed.
        while let Ok(Some(Ok(_))) = tokio::time::timeout(STEP, self.ws.next()).await {}
    }
}

/// Starts a one-connection fake gateway running `script`; returns its URL and the script's task.
async fn fake_gateway<F, Fut>(script: F) -> (String, JoinHandle<()>)
where
    F: FnOnce(Peer) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/ws", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
        script(Peer { ws }).await;
    });
    (url, task)
}

fn options(url: &str) -> ConnectOptions {
    let mut opts = ConnectOptions::new(url, "secret", "dev_a");
    opts.device_name = Some("Test phone".into());
    opts
}

fn message_frame(id: &str) -> Value {
    json!({"v":1,"type":"message","chat_id":"default","thread_id":null,
           "payload":{"message_id":id,"role":"assistant","text":"hi","ts":1}})
}

#[tokio::test]
async fn connect_sends_hello_and_returns_the_ack() {
    let (url, server) = fake_gateway(|mut peer| async move {
        let hello = peer.accept_hello(10).await;
        assert_eq!(hello["payload"]["token"], "secret");
        assert_eq!(hello["payload"]["device_id"], "dev_a");
        assert_eq!(hello["payload"]["device_name"], "Test phone");
        assert_eq!(hello["payload"]["caps"]["min_protocol"], 1);
        peer.send_json(json!({"v":1,"type":"status","payload":{"state":"online"}}))
            .await;
        peer.expect_client_close().await;
    })
    .await;

    let (mut client, ack) = Client::connect(options(&url)).await.unwrap();
    assert_eq!(ack.head_cursor, 10);
    assert_eq!(ack.sync_cursor, 3);
    assert_eq!(client.hello_ack().channels[0].chat_id, "default");
    assert_eq!(client.next_live_cursor(), 11);

    let status = client.next_event().await.unwrap();
    assert!(matches!(status.body, ServerFrame::Status(ref s) if s.state == GatewayState::Online));
    assert_eq!(status.cursor, None);
    assert!(!status.replayed);
    client.close().await.unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn rejected_hello_is_a_server_error() {
    let (url, server) = fake_gateway(|mut peer| async move {
        peer.recv_json().await;
        peer.send_json(
            json!({"v":1,"id":0,"type":"error","payload":{"code":"auth","message":"bad token"}}),
        )
        .await;
        let close = CloseFrame {
            code: CloseCode::from(4401),
            reason: "auth".into(),
        };
        peer.ws.close(Some(close)).await.unwrap();
    })
    .await;

    match Client::connect(options(&url)).await {
        Err(ClientError::Server {
            code: ErrorCode::Auth,
            message,
        }) => assert_eq!(message, "bad token"),
        other => panic!("expected an auth error, got {other:?}"),
    }
    server.await.unwrap();
}

#[tokio::test]
async fn live_durable_frames_get_counted_cursors() {
    let (url, server) = fake_gateway(|mut peer| async move {
        peer.accept_hello(10).await;
        peer.send_json(message_frame("m_1")).await; // 11
        peer.send_json(json!({"v":1,"type":"message.update","chat_id":"default",
                              "payload":{"message_id":"m_2","text":"par"}}))
            .await; // ephemeral
        peer.send_json(json!({"v":1,"type":"tool.start","chat_id":"default",
                              "payload":{"index":1,"name":"terminal"}}))
            .await; // 12
        let send = peer.recv_json().await;
        assert_eq!(send["type"], "message.send");
        assert_eq!(send["id"], 1);
        // The echo answering the request is durable too: 13.
        let mut echo = message_frame("m_3");
        echo["id"] = send["id"].clone();
        peer.send_json(echo).await;
        peer.send_json(json!({"v":1,"type":"agent.busy","chat_id":"default","payload":{"reason":"processing"}})).await; // 14
        peer.expect_client_close().await;
    })
    .await;

    let (mut client, _) = Client::connect(options(&url)).await.unwrap();
    let send = MessageSend {
        text: "hello".into(),
        ..MessageSend::default()
    };
    let echo = client
        .request(
            Header::lane("default", None),
            ClientFrame::MessageSend(send),
        )
        .await
        .unwrap();
    assert_eq!(echo.cursor, Some(13));
    assert!(!echo.replayed);

    let first = client.next_event().await.unwrap();
    assert_eq!((first.frame_type(), first.cursor), ("message", Some(11)));
    let update = client.next_event().await.unwrap();
    assert_eq!(
        (update.frame_type(), update.cursor),
        ("message.update", None)
    );
    let tool = client.next_event().await.unwrap();
    assert_eq!((tool.frame_type(), tool.cursor), ("tool.start", Some(12)));
    let busy = client.next_event().await.unwrap();
    assert_eq!((busy.frame_type(), busy.cursor), ("agent.busy", Some(14)));

    let expected: Vec<(u64, String)> = vec![
        (11, "message".into()),
        (12, "tool.start".into()),
        (13, "message".into()),
        (14, "agent.busy".into()),
    ];
    assert_eq!(client.durable_log(), expected.as_slice());
    assert_eq!(client.next_live_cursor(), 15);
    client.close().await.unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn sync_collects_replays_and_resets_the_live_counter() {
    let (url, server) = fake_gateway(|mut peer| async move {
        peer.accept_hello(10).await;
        let sync = peer.recv_json().await;
        assert_eq!(sync["type"], "sync");
        assert_eq!(sync["payload"]["cursor"], 5);
        // A live frame sent before the gateway took up the sync: it is outbox frame 11.
        peer.send_json(json!({"v":1,"type":"agent.busy","chat_id":"default","payload":{"reason":"processing"}})).await;
        for cursor in 6..=10u64 {
            let mut frame = message_frame(&format!("m_{cursor}"));
            frame["cursor"] = json!(cursor);
            peer.send_json(frame).await;
        }
        peer.send_json(json!({"v":1,"id":sync["id"],"type":"sync.done","payload":{"cursor":11}})).await;
        peer.send_json(message_frame("m_12")).await;

        // A second sync below the retention floor, reaching a later head.
        let sync = peer.recv_json().await;
        assert_eq!(sync["id"], 2);
        let mut frame = message_frame("m_19");
        frame["cursor"] = json!(19);
        peer.send_json(frame).await;
        peer.send_json(json!({"v":1,"id":sync["id"],"type":"sync.done","payload":{"cursor":20,"gap":true}})).await;
        peer.send_json(message_frame("m_21")).await;
        peer.expect_client_close().await;
    })
    .await;

    let (mut client, _) = Client::connect(options(&url)).await.unwrap();
    let outcome = client.sync(5).await.unwrap();
    let cursors: Vec<_> = outcome.frames.iter().map(|e| e.cursor).collect();
    assert_eq!(cursors, vec![Some(6), Some(7), Some(8), Some(9), Some(10)]);
    assert!(outcome.frames.iter().all(|e| e.replayed));
    assert_eq!((outcome.cursor, outcome.gap), (11, false));
    assert_eq!(client.next_live_cursor(), 12);

    let busy = client.next_event().await.unwrap();
    assert_eq!(
        (busy.frame_type(), busy.cursor, busy.replayed),
        ("agent.busy", Some(11), false)
    );
    let live = client.next_event().await.unwrap();
    assert_eq!(
        (live.frame_type(), live.cursor, live.replayed),
        ("message", Some(12), false)
    );

    let outcome = client.sync(12).await.unwrap();
    assert_eq!(outcome.frames.len(), 1);
    assert_eq!((outcome.cursor, outcome.gap), (20, true));
    assert_eq!(client.next_event().await.unwrap().cursor, Some(21));

    let logged: Vec<u64> = client.durable_log().iter().map(|(c, _)| *c).collect();
    assert_eq!(logged, vec![11, 6, 7, 8, 9, 10, 12, 19, 21]);
    client.close().await.unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn responses_are_matched_by_id_and_events_keep_their_order() {
    let (url, server) = fake_gateway(|mut peer| async move {
        peer.accept_hello(0).await;
        let first = peer.recv_json().await;
        assert_eq!(first["id"], 1);
        assert_eq!(first["type"], "history");
        peer.send_json(json!({"v":1,"type":"typing","chat_id":"default","payload":{"on":true}})).await;
        peer.send_json(json!({"v":1,"type":"message.update","chat_id":"default",
                              "payload":{"message_id":"m_1","text":"a"}}))
            .await;
        // An answer to some other request is not ours.
        peer.send_json(json!({"v":1,"id":99,"type":"error","payload":{"code":"internal","message":"x"}})).await;
        peer.send_json(json!({"v":1,"id":1,"type":"history","chat_id":"default",
                              "payload":{"messages":[],"has_more":false}}))
            .await;
        peer.send_json(json!({"v":1,"type":"status","payload":{"state":"online"}})).await;

        let second = peer.recv_json().await;
        assert_eq!(second["id"], 2);
        peer.send_json(json!({"v":1,"id":2,"type":"error","payload":{"code":"not_found","message":"chat_id unknown"}}))
            .await;
        peer.expect_client_close().await;
    })
    .await;

    let (mut client, _) = Client::connect(options(&url)).await.unwrap();
    // The caller's id is replaced by the client's counter.
    let header = Header {
        id: Some(77u64.into()),
        ..Header::lane("default", None)
    };
    let history = client
        .request(header, ClientFrame::History(HistoryRequest::default()))
        .await
        .unwrap();
    assert_eq!((history.frame_type(), history.id()), ("history", Some(1)));

    let err = client
        .request(
            Header::lane("nope", None),
            ClientFrame::History(HistoryRequest::default()),
        )
        .await
        .unwrap_err();
    match err {
        ClientError::Server {
            code: ErrorCode::NotFound,
            message,
        } => assert_eq!(message, "chat_id unknown"),
        other => panic!("expected not_found, got {other:?}"),
    }

    let order: Vec<String> = [0; 4]
        .iter()
        .map(|_| {
            client
                .try_next_event()
                .expect("buffered")
                .frame_type()
                .to_owned()
        })
        .collect();
    assert_eq!(order, ["typing", "message.update", "error", "status"]);
    assert!(client.try_next_event().is_none());
    client.close().await.unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn pings_are_answered_while_the_client_only_reads() {
    let (url, server) = fake_gateway(|mut peer| async move {
        peer.accept_hello(0).await;
        // The first Ping lands while the client is idle, the second while it waits on next_event.
        for probe in [&b"confirm-7"[..], &b"confirm-8"[..]] {
            peer.ws
                .send(Message::Ping(probe.to_vec().into()))
                .await
                .unwrap();
            // The client writes nothing of its own, so the very next frame must be the Pong.
            match peer.recv().await {
                Message::Pong(payload) => assert_eq!(&payload[..], probe),
                other => panic!("expected a pong, got {other:?}"),
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        peer.send_json(json!({"v":1,"type":"status","payload":{"state":"online"}}))
            .await;
        peer.expect_client_close().await;
    })
    .await;

    let (mut client, _) = Client::connect(options(&url)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    let event = client.next_event().await.unwrap();
    assert_eq!(event.frame_type(), "status");
    client.close().await.unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn server_close_code_is_reported() {
    let (url, server) = fake_gateway(|mut peer| async move {
        peer.accept_hello(0).await;
        peer.send_json(message_frame("m_1")).await;
        let close = CloseFrame {
            code: CloseCode::from(4409),
            reason: "replaced".into(),
        };
        peer.ws.close(Some(close)).await.unwrap();
        // The client answers the close handshake on its own.
        while let Ok(Some(Ok(_))) = tokio::time::timeout(STEP, peer.ws.next()).await {}
    })
    .await;

    let (mut client, _) = Client::connect(options(&url)).await.unwrap();
    assert_eq!(
        client.closed().await.unwrap(),
        Some((4409, "replaced".to_owned()))
    );
    // The frame sent before the close is still there, then the close is the end.
    assert_eq!(client.next_event().await.unwrap().frame_type(), "message");
    match client.next_event().await {
        Err(ClientError::Closed(Some((4409, reason)))) => assert_eq!(reason, "replaced"),
        other => panic!("expected the close, got {other:?}"),
    }
    assert!(matches!(
        client.send_text("{}").await,
        Err(ClientError::Closed(_))
    ));
    server.await.unwrap();
}

#[tokio::test]
async fn binary_frames_are_queued_apart_from_events() {
    let (url, server) = fake_gateway(|mut peer| async move {
        peer.accept_hello(0).await;
        let pull = peer.recv_json().await;
        assert_eq!(pull["type"], "media.pull");
        peer.send_json(json!({"v":1,"id":pull["id"],"type":"media.pull","payload":{
            "media_id":"md_1","kind":"file","mime":"text/plain","size":6,"filename":"a.txt","sha256":"00"}}))
            .await;
        peer.ws.send(Message::binary(b"abc".to_vec())).await.unwrap();
        peer.send_json(json!({"v":1,"type":"typing","chat_id":"default","payload":{"on":true}})).await;
        peer.ws.send(Message::binary(b"def".to_vec())).await.unwrap();
        peer.send_json(json!({"v":1,"id":pull["id"],"type":"media.pull.end","payload":{"ok":true}})).await;
        peer.expect_client_close().await;
    })
    .await;

    let (mut client, _) = Client::connect(options(&url)).await.unwrap();
    let header = client
        .request(
            Header::default(),
            ClientFrame::MediaPull(MediaPull {
                media_id: "md_1".into(),
            }),
        )
        .await
        .unwrap();
    assert!(matches!(header.body, ServerFrame::MediaPullHeader(ref h) if h.size == 6));
    let mut bytes = client.binary().await.unwrap();
    bytes.extend(client.binary().await.unwrap());
    assert_eq!(bytes, b"abcdef");
    assert_eq!(client.next_event().await.unwrap().frame_type(), "typing");
    assert_eq!(
        client.next_event().await.unwrap().frame_type(),
        "media.pull.end"
    );
    client.close().await.unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn wait_for_keeps_skipped_events_and_expect_quiet_catches_stragglers() {
    let (url, server) = fake_gateway(|mut peer| async move {
        peer.accept_hello(0).await;
        peer.send_json(json!({"v":1,"type":"message.start","chat_id":"default",
                              "payload":{"message_id":"m_1","role":"assistant"}}))
            .await;
        peer.send_json(json!({"v":1,"type":"message.update","chat_id":"default",
                              "payload":{"message_id":"m_1","text":"a"}}))
            .await;
        peer.send_json(json!({"v":1,"type":"message.stop","chat_id":"default",
                              "payload":{"message_id":"m_1","final_text":"ab"}}))
            .await;
        // Stay quiet until the client asks for more, then send a straggler.
        let poke = peer.recv_json().await;
        assert_eq!(poke["type"], "ping");
        peer.send_json(json!({"v":1,"type":"agent.idle","chat_id":"default","payload":{}}))
            .await;
        peer.expect_client_close().await;
    })
    .await;

    let (mut client, _) = Client::connect(options(&url)).await.unwrap();
    let stop = client
        .wait_for(|e| e.frame_type() == "message.stop")
        .await
        .unwrap();
    assert_eq!(stop.cursor, Some(2));
    let skipped: Vec<&str> = client.seen().iter().map(|e| e.frame_type()).collect();
    assert_eq!(skipped, ["message.start", "message.update"]);

    client
        .expect_quiet(Duration::from_millis(200))
        .await
        .unwrap();
    client
        .send(Header::default(), ClientFrame::Ping(Default::default()))
        .await
        .unwrap();
    match client.expect_quiet(Duration::from_secs(5)).await {
        Err(ClientError::Unexpected(event)) => assert_eq!(event.frame_type(), "agent.idle"),
        other => panic!("expected the straggler, got {other:?}"),
    }
    client.close().await.unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn undecodable_text_is_a_protocol_error() {
    let (url, server) = fake_gateway(|mut peer| async move {
        peer.accept_hello(0).await;
        peer.ws.send(Message::text("{not json")).await.unwrap();
        peer.send_json(json!({"v":1,"type":"status","payload":{"state":"online"}}))
            .await;
        peer.expect_client_close().await;
    })
    .await;

    let (mut client, _) = Client::connect(options(&url)).await.unwrap();
    assert!(matches!(
        client.next_event().await,
        Err(ClientError::Protocol(_))
    ));
    assert_eq!(client.next_event().await.unwrap().frame_type(), "status");
    client.close().await.unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn raw_connection_reads_only_when_asked() {
    let (url, server) = fake_gateway(|mut peer| async move {
        peer.accept_hello(4).await;
        peer.send_json(message_frame("m_1")).await;
        peer.ws
            .send(Message::Ping(b"p".to_vec().into()))
            .await
            .unwrap();
        peer.ws.send(Message::binary(vec![1, 2, 3])).await.unwrap();
        match peer.recv().await {
            Message::Pong(payload) => assert_eq!(&payload[..], b"p"),
            other => panic!("expected a pong, got {other:?}"),
        }
        let text = peer.recv_json().await;
        assert_eq!(text, json!({"garbage": true}));
        let close = CloseFrame {
            code: CloseCode::from(4401),
            reason: "auth".into(),
        };
        peer.ws.close(Some(close)).await.unwrap();
        while let Ok(Some(Ok(_))) = tokio::time::timeout(STEP, peer.ws.next()).await {}
    })
    .await;

    let mut raw = RawConnection::connect(&url).await.unwrap();
    let ack = raw.hello("secret", "dev_raw").await.unwrap();
    assert_eq!(ack.head_cursor, 4);
    match raw.recv().await.unwrap() {
        RawFrame::Text(text) => assert!(text.contains("m_1")),
        other => panic!("expected text, got {other:?}"),
    }
    assert_eq!(raw.recv().await.unwrap(), RawFrame::Binary(vec![1, 2, 3]));
    raw.send_text(r#"{"garbage":true}"#).await.unwrap();
    assert_eq!(
        raw.recv().await.unwrap(),
        RawFrame::Close(Some((4401, "auth".into())))
    );
    assert!(matches!(
        raw.recv().await,
        Err(ClientError::Closed(Some((4401, _))))
    ));
    server.await.unwrap();
}
