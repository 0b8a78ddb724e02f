//! The JSON-RPC layer against a hand-driven peer over an in-memory pipe.

use iris_acp::rpc::{
    Connection, Incoming, IncomingRx, RequestId, MAX_LINE_BYTES, METHOD_NOT_FOUND,
};
use iris_acp::AcpError;
use serde_json::{json, Value};
use tokio::io::{
    AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf,
};

/// The far end of the pipe, played by the test.
struct Peer {
    lines: Lines<BufReader<ReadHalf<DuplexStream>>>,
    writer: WriteHalf<DuplexStream>,
}

impl Peer {
    async fn read(&mut self) -> Value {
        let line = self
            .lines
            .next_line()
            .await
            .unwrap()
            .expect("a line from the connection");
        serde_json::from_str(&line).unwrap()
    }

    async fn write_raw(&mut self, raw: &str) {
        self.writer.write_all(raw.as_bytes()).await.unwrap();
    }

    async fn send(&mut self, msg: Value) {
        self.write_raw(&format!("{msg}\n")).await;
    }
}

fn connect() -> (Connection, IncomingRx, Peer) {
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let (reader, writer) = tokio::io::split(ours);
    let (conn, incoming) = Connection::new(reader, writer);
    let (peer_reader, peer_writer) = tokio::io::split(theirs);
    (
        conn,
        incoming,
        Peer {
            lines: BufReader::new(peer_reader).lines(),
            writer: peer_writer,
        },
    )
}

#[tokio::test]
async fn requests_get_results_and_error_objects() {
    let (conn, _incoming, mut peer) = connect();

    let call = conn.request("session/new", json!({"cwd": "/w", "mcpServers": []}));
    let answer = async {
        let request = peer.read().await;
        assert_eq!(request["jsonrpc"], "2.0");
        assert_eq!(request["method"], "session/new");
        assert_eq!(request["params"]["cwd"], "/w");
        peer.send(json!({"jsonrpc": "2.0", "id": request["id"], "result": {"sessionId": "s1"}, "_meta": {}}))
            .await;
    };
    let (result, ()) = tokio::join!(call, answer);
    assert_eq!(result.unwrap(), json!({"sessionId": "s1"}));

    let call = conn.request("ping", Value::Null);
    let answer = async {
        let request = peer.read().await;
        assert!(request.get("params").is_none(), "null params are omitted");
        let error =
            json!({"code": -32601, "message": "Method not found", "data": {"method": "ping"}});
        peer.send(json!({"jsonrpc": "2.0", "id": request["id"], "error": error}))
            .await;
    };
    let (result, ()) = tokio::join!(call, answer);
    match result {
        Err(AcpError::Rpc {
            code,
            message,
            data,
        }) => {
            assert_eq!(code, -32601);
            assert_eq!(message, "Method not found");
            assert_eq!(data, Some(json!({"method": "ping"})));
        }
        other => panic!("expected an rpc error, got {other:?}"),
    }
}

#[tokio::test]
async fn concurrent_requests_are_matched_by_id() {
    let (conn, _incoming, mut peer) = connect();
    let first = conn.request("a", json!({}));
    let second = conn.request("b", json!({}));
    let answer = async {
        let a = peer.read().await;
        let b = peer.read().await;
        assert_ne!(a["id"], b["id"]);
        // Answer in reverse order.
        peer.send(json!({"jsonrpc": "2.0", "id": b["id"], "result": b["method"]}))
            .await;
        peer.send(json!({"jsonrpc": "2.0", "id": a["id"], "result": a["method"]}))
            .await;
    };
    let (first, second, ()) = tokio::join!(first, second, answer);
    assert_eq!(first.unwrap(), "a");
    assert_eq!(second.unwrap(), "b");
}

#[tokio::test]
async fn requests_from_the_peer_with_id_zero_and_string_ids() {
    let (_conn, mut incoming, mut peer) = connect();
    peer.send(json!({"jsonrpc": "2.0", "id": 0, "method": "session/request_permission", "params": {"x": 1}})).await;
    peer.send(json!({"jsonrpc": "2.0", "id": "abc", "method": "fs/read_text_file", "params": {}}))
        .await;

    let Some(Incoming::Request {
        id,
        method,
        params,
        responder,
    }) = incoming.recv().await
    else {
        panic!("expected a request")
    };
    assert_eq!(id, RequestId::Number(0));
    assert_eq!(method, "session/request_permission");
    assert_eq!(params, json!({"x": 1}));
    responder.respond(json!({"outcome": {"outcome": "cancelled"}}));
    assert_eq!(
        peer.read().await,
        json!({"jsonrpc": "2.0", "id": 0, "result": {"outcome": {"outcome": "cancelled"}}})
    );

    let Some(Incoming::Request { id, responder, .. }) = incoming.recv().await else {
        panic!("expected a request")
    };
    assert_eq!(id, RequestId::Str("abc".into()));
    responder.error(METHOD_NOT_FOUND, "Method not found");
    let answer = peer.read().await;
    assert_eq!(answer["id"], "abc");
    assert_eq!(answer["error"]["code"], -32601);
}

#[tokio::test]
async fn unanswered_requests_get_an_error_answer() {
    let (_conn, mut incoming, mut peer) = connect();
    peer.send(json!({"jsonrpc": "2.0", "id": 7, "method": "terminal/create", "params": {}}))
        .await;
    let request = incoming.recv().await.unwrap();
    drop(request);
    let answer = peer.read().await;
    assert_eq!(answer["id"], 7);
    assert_eq!(answer["error"]["code"], -32603);

    // Nobody listening at all: still answered.
    drop(incoming);
    peer.send(
        json!({"jsonrpc": "2.0", "id": 8, "method": "session/request_permission", "params": {}}),
    )
    .await;
    let answer = peer.read().await;
    assert_eq!(answer["id"], 8);
    assert!(answer["error"]["code"].is_i64());
}

#[tokio::test]
async fn garbage_blank_lines_and_unknown_fields_are_tolerated() {
    let (conn, mut incoming, mut peer) = connect();
    peer.write_raw("this is not json\n\n   \r\n[1, 2, 3]\n{\"half\": \n42\n")
        .await;
    peer.write_raw("{\"jsonrpc\":\"2.0\",\"id\":999,\"result\":{}}\n")
        .await; // nobody asked
    peer.send(json!({
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "s", "update": {"sessionUpdate": "x"}, "_meta": {"k": "v"}},
        "_meta": {"trace": 1},
        "extra": true
    }))
    .await;
    let Some(Incoming::Notification { method, params }) = incoming.recv().await else {
        panic!("expected the notification")
    };
    assert_eq!(method, "session/update");
    assert_eq!(params["sessionId"], "s");

    // The connection still works both ways, and CRLF line ends are fine.
    let call = conn.request("still/alive", json!({}));
    let answer = async {
        let request = peer.read().await;
        peer.write_raw(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":\"yes\"}}\r\n",
            request["id"]
        ))
        .await;
    };
    let (result, ()) = tokio::join!(call, answer);
    assert_eq!(result.unwrap(), "yes");
}

#[tokio::test]
async fn oversized_lines_are_dropped() {
    let (_conn, mut incoming, peer) = connect();
    let Peer { lines, mut writer } = peer;
    let writing = tokio::spawn(async move {
        let huge = format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"huge\",\"params\":\"{}\"}}\n",
            "x".repeat(MAX_LINE_BYTES)
        );
        writer.write_all(huge.as_bytes()).await.unwrap();
        writer
            .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"after\"}\n")
            .await
            .unwrap();
        writer
    });
    let Some(Incoming::Notification { method, .. }) = incoming.recv().await else {
        panic!("expected a notification")
    };
    assert_eq!(method, "after");
    drop((writing.await.unwrap(), lines));
}

#[tokio::test]
async fn closing_the_transport_fails_pending_requests_and_ends_incoming() {
    let (conn, mut incoming, mut peer) = connect();
    let first = conn.request("session/prompt", json!({}));
    let second = conn.request("session/prompt", json!({}));
    let hang_up = async {
        peer.read().await;
        peer.read().await;
        drop(peer);
    };
    let (first, second, ()) = tokio::join!(first, second, hang_up);
    assert!(
        matches!(first, Err(AcpError::Closed { ref stderr_tail }) if stderr_tail.is_empty()),
        "{first:?}"
    );
    assert!(second.unwrap_err().is_closed());
    assert!(incoming.recv().await.is_none());
    conn.closed().await;
    assert!(conn.is_closed());
    assert!(conn
        .request("late", json!({}))
        .await
        .unwrap_err()
        .is_closed());
    assert!(conn.notify("late", json!({})).unwrap_err().is_closed());
}

#[tokio::test]
async fn dropping_every_handle_closes_the_transport() {
    let (conn, _incoming, mut peer) = connect();
    conn.notify("bye", json!({})).unwrap();
    assert_eq!(peer.read().await["method"], "bye");
    drop(conn);
    assert!(
        peer.lines.next_line().await.unwrap().is_none(),
        "the peer sees end of stream"
    );
}

/// The write side of a pipe to a process that has exited: every write fails with `BrokenPipe`,
/// and the first failure is announced.
struct DeadEnd {
    failed: Option<tokio::sync::oneshot::Sender<()>>,
}

impl tokio::io::AsyncWrite for DeadEnd {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        _: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        if let Some(failed) = self.failed.take() {
            let _ = failed.send(());
        }
        std::task::Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// An agent that dies right after writing its last updates: the gateway may find its input
/// closed (a request it writes fails) before it has read what the agent wrote. Everything the
/// peer wrote up to the end of its output is still handed on, before a pending request fails.
#[tokio::test]
async fn a_failed_write_still_reads_the_peer_to_its_end_before_requests_fail() {
    let (ours, mut theirs) = tokio::io::duplex(64 * 1024);
    let (failed, write_failed) = tokio::sync::oneshot::channel();
    let dead = DeadEnd {
        failed: Some(failed),
    };
    let (conn, mut incoming) = Connection::new(ours, dead);
    let prompt = tokio::spawn({
        let conn = conn.clone();
        async move { conn.request("session/prompt", json!({})).await }
    });
    // The prompt's line is the write that fails; the connection has handled that failure once
    // this task runs again (one thread: its I/O task is not polled meanwhile).
    write_failed.await.unwrap();
    // Nothing more can be written: a new request fails at once instead of waiting.
    assert!(conn
        .request("late", json!({}))
        .await
        .unwrap_err()
        .is_closed());
    assert!(conn.notify("late", json!({})).unwrap_err().is_closed());

    // What the peer wrote before its output ended: three updates.
    for n in 0..3 {
        let update = json!({"jsonrpc": "2.0", "method": "session/update", "params": {"n": n}});
        theirs
            .write_all(format!("{update}\n").as_bytes())
            .await
            .expect("the connection still reads the peer's output");
    }
    drop(theirs);

    let failed = prompt.await.unwrap();
    assert!(failed.unwrap_err().is_closed());
    // By the time the prompt fails, every update is already waiting for the consumer.
    let mut got = Vec::new();
    while let Ok(message) = incoming.try_recv() {
        match message {
            Incoming::Notification { method, params } => got.push((method, params["n"].clone())),
            other => panic!("{other:?}"),
        }
    }
    let n = |n: u64| ("session/update".to_owned(), json!(n));
    assert_eq!(got, [n(0), n(1), n(2)]);
    assert!(
        incoming.recv().await.is_none(),
        "then the incoming channel ends"
    );
    conn.closed().await;
}
