//! TLS served by the gateway itself: a device connects over `wss://` to a self-signed
//! certificate it pins by the fingerprint the pairing link carries (and refuses any other), the
//! owner's certificate files are served with HSTS and read again when a renewal replaces them
//! (a broken file keeps the previous certificate in service), and plain `ws://` gets nothing.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use common::{TestGateway, TOKEN};
use futures_util::{SinkExt, StreamExt};
use iris_gateway::config::tls::TlsConfig;
use iris_gateway::credentials::Link;
use iris_gateway::tls::{fingerprint, pinned_client};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;
use tokio_tungstenite::tungstenite::Message;

fn addr(gw: &TestGateway) -> SocketAddr {
    let hostport = gw
        .url
        .strip_prefix("ws://")
        .and_then(|r| r.strip_suffix("/ws"))
        .expect("ws url");
    hostport.parse().expect("an address")
}

/// A TLS connection that trusts only the certificate `pin`.
async fn connect_pinned(gw: &TestGateway, pin: &str) -> std::io::Result<TlsStream<TcpStream>> {
    let config = pinned_client(pin);
    let tcp = TcpStream::connect(addr(gw)).await?;
    let name = ServerName::try_from("localhost").expect("name");
    TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
}

/// Says `hello` over `wss://` through a connection pinned to `pin`; the frame type answered.
async fn hello_over_tls(gw: &TestGateway, pin: &str) -> Result<String, String> {
    let tls = connect_pinned(gw, pin).await.map_err(|e| e.to_string())?;
    let url = format!("wss://{}/ws", addr(gw));
    let (mut ws, _) = tokio_tungstenite::client_async(url, tls)
        .await
        .map_err(|e| e.to_string())?;
    let hello = serde_json::json!({
        "v": 1, "type": "hello", "id": 1,
        "payload": {"token": TOKEN, "device_id": "tls-phone", "device_name": "Phone"},
    });
    ws.send(Message::text(hello.to_string()))
        .await
        .map_err(|e| e.to_string())?;
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(text))) => {
                let frame: serde_json::Value = serde_json::from_str(&text).expect("JSON");
                return Ok(frame["type"].as_str().unwrap_or_default().to_owned());
            }
            Some(Ok(_)) => continue,
            Some(Err(e)) => return Err(e.to_string()),
            None => return Err("closed".into()),
        }
    }
}

/// `GET /healthz` over a pinned TLS connection: the response head, lower case.
async fn healthz_head(gw: &TestGateway, pin: &str) -> String {
    let mut tls = connect_pinned(gw, pin).await.expect("TLS");
    tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .expect("write");
    let mut answer = Vec::new();
    let _ = tls.read_to_end(&mut answer).await;
    let text = String::from_utf8_lossy(&answer).to_lowercase();
    text.split("\r\n\r\n").next().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn a_device_pins_the_self_signed_certificate_its_pairing_link_names() {
    let gw = TestGateway::start_with(|c| c.tls = Some(TlsConfig::self_signed())).await;
    let config = &gw.shared.config;
    let pin = config
        .tls_pin
        .clone()
        .expect("a self-signed certificate has a pin");
    let link = Link::new(config, "ipc_code");
    assert!(
        link.web_url.starts_with("https://127.0.0.1:"),
        "{}",
        link.web_url
    );
    assert!(
        link.web_url.ends_with(&format!("&pin={pin}")),
        "{}",
        link.web_url
    );
    assert!(link.ws_url.starts_with("wss://"), "{}", link.ws_url);

    assert_eq!(hello_over_tls(&gw, &pin).await, Ok("hello.ack".to_owned()));
    // Another certificate (a machine in the middle) is refused by the pinning client.
    let other = "0".repeat(64);
    let refused = hello_over_tls(&gw, &other).await;
    assert!(refused.is_err(), "{refused:?}");
    // No HSTS with a certificate the browser warns about: it would forbid going on.
    let head = healthz_head(&gw, &pin).await;
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(!head.contains("strict-transport-security"), "{head}");
    // Plain WebSocket to the TLS port gets no answer that lets it in.
    let plain = tokio_tungstenite::connect_async(gw.url.clone()).await;
    assert!(plain.is_err(), "plain ws:// must fail");
    gw.stop().await;
}

fn write_cert(dir: &std::path::Path, when: SystemTime) -> String {
    let made =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .expect("certificate");
    let cert = dir.join("fullchain.pem");
    let key = dir.join("privkey.pem");
    std::fs::write(&key, made.signing_key.serialize_pem()).expect("key");
    std::fs::write(&cert, made.cert.pem()).expect("cert");
    for path in [&cert, &key] {
        let file = std::fs::File::options()
            .write(true)
            .open(path)
            .expect("open");
        file.set_modified(when).expect("mtime");
    }
    fingerprint(made.cert.der())
}

#[tokio::test]
async fn the_owners_certificate_is_served_with_hsts_and_a_renewal_is_picked_up() {
    let certs = tempfile::tempdir().expect("tempdir");
    let start = SystemTime::now();
    let first = write_cert(certs.path(), start);
    let mut tls = TlsConfig::files(
        certs.path().join("fullchain.pem"),
        certs.path().join("privkey.pem"),
    );
    // Look at the files on every handshake (10 s in service).
    tls.reload_check = Duration::ZERO;
    let gw = TestGateway::start_with(|c| c.tls = Some(tls)).await;
    assert_eq!(
        gw.shared.config.tls_pin, None,
        "a CA's certificate is not pinned"
    );
    assert_eq!(
        hello_over_tls(&gw, &first).await,
        Ok("hello.ack".to_owned())
    );
    let head = healthz_head(&gw, &first).await;
    assert!(
        head.contains("strict-transport-security: max-age=31536000"),
        "{head}"
    );

    // Renewed in place, as certbot does: the next connection gets the new certificate.
    let renewed = write_cert(certs.path(), start + Duration::from_secs(60));
    assert_eq!(
        hello_over_tls(&gw, &renewed).await,
        Ok("hello.ack".to_owned())
    );
    assert!(
        hello_over_tls(&gw, &first).await.is_err(),
        "the old one is gone"
    );

    // A renewal caught half-written keeps the working certificate in service.
    std::fs::write(certs.path().join("fullchain.pem"), "-----BEGIN CERT").expect("write");
    let file = std::fs::File::options()
        .write(true)
        .open(certs.path().join("fullchain.pem"))
        .expect("open");
    file.set_modified(start + Duration::from_secs(120))
        .expect("mtime");
    assert_eq!(
        hello_over_tls(&gw, &renewed).await,
        Ok("hello.ack".to_owned())
    );
    gw.stop().await;
}
