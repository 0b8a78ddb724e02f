//! DNS rebinding: a page on a name an attacker points at the gateway's address is the same
//! origin as that name, so its `Origin` and `Host` agree. The gateway answers only the names it
//! is known by (any IP address, `localhost`, `public_url`, `allowed_origins`, its host name):
//! every other `Host` gets 421 on `/ws` and on every other route.

mod common;

use std::net::SocketAddr;

use common::tcp::server_addr;
use common::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// The status of `GET path` sent with this `Host` (and, for `/ws`, an upgrade with `Origin`
/// `http://<host>`, as a browser on that name sends it).
async fn status_for(server: SocketAddr, path: &str, host: &str) -> u16 {
    let mut tcp = TcpStream::connect(server).await.expect("tcp");
    let upgrade = if path == "/ws" {
        format!(
            "Upgrade: websocket\r\nConnection: Upgrade\r\nOrigin: http://{host}\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        )
    } else {
        "Connection: close\r\n".to_owned()
    };
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{upgrade}\r\n");
    tcp.write_all(request.as_bytes()).await.expect("write");
    common::tcp::response_status(&mut tcp).await
}

#[tokio::test]
async fn a_rebound_name_is_refused_on_every_route() {
    let gw = TestGateway::start_with(|c| {
        c.public_url = Some("https://iris.example.com".into());
        c.allowed_origins = vec!["https://app.example.net".into()];
    })
    .await;
    let server = server_addr(&gw.url);
    let port = server.port();
    let evil = format!("rebind.evil.example:{port}");
    for path in ["/ws", "/metrics", "/healthz", "/", "/sw.js"] {
        assert_eq!(status_for(server, path, &evil).await, 421, "{path}");
    }
    // A lookalike of a known name is another name.
    let lookalike = format!("iris.example.com.evil.example:{port}");
    assert_eq!(status_for(server, "/metrics", &lookalike).await, 421);

    // The names the gateway is known by pass.
    for host in [
        server.to_string(),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        "iris.example.com".to_owned(),
        "app.example.net:443".to_owned(),
    ] {
        assert_eq!(status_for(server, "/metrics", &host).await, 200, "{host}");
    }
    assert_eq!(status_for(server, "/ws", &server.to_string()).await, 101);
    gw.stop().await;
}
