//! A stranger cannot exhaust the gateway: half-sent requests are cut off by the header timeout,
//! connections over the caps are closed at once, strangers from many addresses hold at most
//! three quarters of the total (beyond it a new connection closes the one that waited longest
//! without a device, so a device still gets in), a connection may send only a little before
//! `hello`, and messages the WebSocket layer refuses are closed with their proper code.

mod common;

use std::time::{Duration, Instant};

use common::tcp::*;
use common::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// A request whose headers never end.
const HALF_REQUEST: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: iris\r\nX-Slow: ";

/// The owner can still do what the app does first: `/healthz`, then `hello`.
async fn owner_gets_in(gw: &TestGateway) {
    let (status, body) = http_get(server_addr(&gw.url), "/healthz").await;
    assert_eq!(status, 200, "healthz: {body}");
    assert!(body.contains("\"status\":\"ok\""), "{body}");
    let (_client, ack) = gw.connect("owner-phone").await;
    assert_eq!(ack.device_id.as_deref(), Some("owner-phone"));
}

/// Opens `count` connections from `from`, each sending the start of a request and no more.
async fn half_open(from: &str, server: std::net::SocketAddr, count: usize) -> Vec<TcpStream> {
    let mut conns = Vec::with_capacity(count);
    for _ in 0..count {
        let mut tcp = connect_from(from, server).await.expect("connect");
        // Over the cap the gateway may already have closed it; that is what is tested below.
        let _ = tcp.write_all(HALF_REQUEST).await;
        conns.push(tcp);
    }
    conns
}

#[tokio::test]
async fn hundreds_of_half_open_requests_from_a_stranger_do_not_starve_the_owner() {
    let gw = TestGateway::start_with(|c| c.limits.max_connections_per_address = 64).await;
    let server = server_addr(&gw.url);
    let mut conns = half_open("127.0.0.2", server, 300).await;
    // The stranger's first 64 are held (until the header timeout), the other 236 closed at once.
    for (n, tcp) in conns.iter_mut().enumerate().skip(64) {
        assert!(
            closed_within(tcp, ANSWER).await,
            "connection {n} over the cap stayed open"
        );
    }
    owner_gets_in(&gw).await;
    let held = conns[..64].iter().filter(|t| still_open(t)).count();
    assert_eq!(held, 64, "connections within the cap are served");
    // The operator sees it.
    let (_, metrics) = http_get(server, "/metrics").await;
    assert!(
        metrics.contains("iris_connections_refused_total 236"),
        "{metrics}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_slowloris_connection_is_closed_within_the_header_timeout() {
    let timeout = Duration::from_secs(1);
    let gw = TestGateway::start_with(|c| c.limits.header_timeout = timeout).await;
    let server = server_addr(&gw.url);
    // One sends half a request and waits; the other keeps trickling a byte of header now and
    // then, which must not keep it alive past the timeout either.
    let mut silent = connect_from("127.0.0.2", server).await.expect("connect");
    silent.write_all(HALF_REQUEST).await.expect("write");
    let mut trickle = connect_from("127.0.0.3", server).await.expect("connect");
    trickle.write_all(HALF_REQUEST).await.expect("write");
    let started = Instant::now();
    let trickling = async {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            tick.tick().await;
            if trickle.write_all(b"a").await.is_err() || !still_open(&trickle) {
                return started.elapsed();
            }
        }
    };
    let trickled = tokio::time::timeout(ANSWER, trickling)
        .await
        .expect("the trickling connection is closed in time");
    assert!(
        closed_within(&mut silent, ANSWER).await,
        "silent connection still open"
    );
    assert!(
        trickled >= timeout,
        "closed before the timeout: {trickled:?}"
    );
    owner_gets_in(&gw).await;
    gw.stop().await;
}

#[tokio::test]
async fn the_total_cap_closes_extra_connections_and_frees_places_as_they_time_out() {
    let gw = TestGateway::start_with(|c| {
        c.limits.max_connections = 100;
        c.limits.max_connections_per_address = 1000;
        c.limits.header_timeout = Duration::from_secs(1);
    })
    .await;
    let server = server_addr(&gw.url);
    let mut conns = half_open("127.0.0.2", server, 150).await;
    for (n, tcp) in conns.iter_mut().enumerate().skip(100) {
        assert!(
            closed_within(tcp, ANSWER).await,
            "connection {n} over the total stayed open"
        );
    }
    // The held ones are cut off by the header timeout, and their places are free again.
    for (n, tcp) in conns.iter_mut().enumerate().take(100) {
        assert!(
            closed_within(tcp, ANSWER).await,
            "connection {n} outlived the timeout"
        );
    }
    owner_gets_in(&gw).await;
    gw.stop().await;
}

#[tokio::test]
async fn strangers_from_many_addresses_cannot_keep_a_device_out() {
    let gw = TestGateway::start_with(|c| {
        c.limits.max_connections = 40;
        c.limits.max_connections_per_address = 2;
        c.limits.header_timeout = Duration::from_secs(60);
    })
    .await;
    let server = server_addr(&gw.url);
    let (mut early, _) = gw.connect("early-phone").await;
    // Sixty addresses, two half-sent requests each: three times the total.
    let mut strangers = Vec::new();
    for i in 1..=60 {
        strangers.extend(half_open(&format!("127.0.1.{i}"), server, 2).await);
    }
    // They hold at most their share, 30 of 40: every older one was closed, refused or evicted
    // for a newer one, long before the header timeout.
    for (n, tcp) in strangers.iter_mut().enumerate().take(120 - 30) {
        assert!(
            closed_within(tcp, ANSWER).await,
            "stranger {n} still holds a place"
        );
    }
    // A device gets in, and the one that was in goes on.
    owner_gets_in(&gw).await;
    let echo = send_text(&mut early, "default", "still here").await;
    assert_eq!(message_text(&echo), "still here");
    gw.stop().await;
}

#[tokio::test]
async fn twenty_thousand_connection_attempts_leave_healthz_answering() {
    let gw = TestGateway::start().await;
    let server = server_addr(&gw.url);
    // The stranger keeps at most 256 sockets of its own open at a time; the gateway holds 64 of
    // them and closes the rest as they come.
    let mut held: std::collections::VecDeque<TcpStream> = Default::default();
    let mut checks = Vec::new();
    let started = Instant::now();
    for n in 0..20_000 {
        if let Ok(tcp) = connect_from("127.0.0.2", server).await {
            let _ = tcp.try_write(HALF_REQUEST);
            held.push_back(tcp);
        }
        if held.len() > 256 {
            held.pop_front();
        }
        if n % 2_000 == 0 {
            let asked = Instant::now();
            let (status, _) = http_get(server, "/healthz").await;
            assert_eq!(status, 200, "healthz after {n} attempts");
            checks.push(asked.elapsed());
        }
    }
    assert_eq!(checks.len(), 10);
    let slowest = checks.iter().max().copied().unwrap_or_default();
    eprintln!(
        "20,000 attempts in {:?}; slowest /healthz meanwhile {slowest:?}",
        started.elapsed()
    );
    owner_gets_in(&gw).await;
    gw.stop().await;
}

/// A WebSocket that said `hello` as the owner, opened by hand.
async fn owner_socket(gw: &TestGateway) -> TcpStream {
    let server = server_addr(&gw.url);
    let mut tcp = TcpStream::connect(server).await.expect("connect");
    upgrade(&mut tcp, server).await;
    tcp.write_all(&hello_frame(TOKEN, "raw-phone"))
        .await
        .expect("write");
    match read_frame(&mut tcp).await {
        Some(ServerFrame::Text(t)) if t.contains("\"hello.ack\"") => tcp,
        other => panic!("expected hello.ack, got {other:?}"),
    }
}

#[tokio::test]
async fn a_message_above_the_hard_limit_is_closed_with_1009() {
    let gw = TestGateway::start().await;
    let mut tcp = owner_socket(&gw).await;
    // The frame header alone promises 3 MiB; the gateway does not wait for them.
    tcp.write_all(&frame_head(0x1, 3 * 1024 * 1024))
        .await
        .expect("write");
    let (_, close) = until_close(&mut tcp).await;
    let (code, reason) = close.expect("a close frame");
    assert_eq!(code, 1009, "{reason}");
    assert!(reason.contains("too large"), "{reason}");
    owner_gets_in(&gw).await;
    gw.stop().await;
}

#[tokio::test]
async fn invalid_utf8_in_a_text_frame_is_closed_with_1007() {
    let gw = TestGateway::start().await;
    let mut tcp = owner_socket(&gw).await;
    tcp.write_all(&text_frame(b"{\"type\":\"\xff\xfe\"}"))
        .await
        .expect("write");
    let (_, close) = until_close(&mut tcp).await;
    let (code, reason) = close.expect("a close frame");
    assert_eq!(code, 1007, "{reason}");
    // Before hello too.
    let server = server_addr(&gw.url);
    let mut tcp = TcpStream::connect(server).await.expect("connect");
    upgrade(&mut tcp, server).await;
    tcp.write_all(&text_frame(b"\xc3\x28"))
        .await
        .expect("write");
    let (texts, close) = until_close(&mut tcp).await;
    assert_eq!(close.map(|c| c.0), Some(1007), "{texts:?}");
    assert!(texts.iter().any(|t| t.contains("bad_request")), "{texts:?}");
    gw.stop().await;
}

#[tokio::test]
async fn more_than_16_kib_before_hello_is_refused_with_1009() {
    let gw = TestGateway::start().await;
    let server = server_addr(&gw.url);
    let mut tcp = TcpStream::connect(server).await.expect("connect");
    upgrade(&mut tcp, server).await;
    // A frame promising 2 MiB, of which 20 KiB arrive: the gateway stops reading at 16 KiB.
    tcp.write_all(&frame_head(0x1, 2 * 1024 * 1024))
        .await
        .expect("write");
    let _ = tcp.write_all(&vec![b'a'; 20 * 1024]).await;
    let (texts, close) = until_close(&mut tcp).await;
    let (code, reason) = close.expect("a close frame");
    assert_eq!(code, 1009, "{reason}");
    assert!(reason.contains("before hello"), "{reason}");
    assert!(texts.iter().any(|t| t.contains("bad_request")), "{texts:?}");
    // A hello of ordinary size is still fine, and after it frames up to 1 MiB are.
    let mut owner = owner_socket(&gw).await;
    let big = format!(
        r#"{{"v":1,"type":"message.send","id":2,"chat_id":"default","payload":{{"text":"{}"}}}}"#,
        "b".repeat(60 * 1024)
    );
    owner
        .write_all(&text_frame(big.as_bytes()))
        .await
        .expect("write");
    loop {
        match read_frame(&mut owner).await {
            Some(ServerFrame::Text(t)) if t.contains("\"id\":2") => {
                assert!(t.contains("\"message\""), "{}", &t[..200.min(t.len())]);
                break;
            }
            Some(ServerFrame::Text(_)) => {}
            other => panic!("expected the echo, got {other:?}"),
        }
    }
    gw.stop().await;
}
