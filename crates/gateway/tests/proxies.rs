//! The reverse-proxy recipes of docs/deployment.md ("Behind a TLS reverse proxy"), run as the
//! page writes them in front of the real gateway, with Debian's Caddy and nginx: only the host
//! name, the ports and the certificate files are the test's (a certificate made here, which the
//! device pins). Through each, the page loads and a device does a turn over `wss://`.
//!
//! Ignored where `caddy` or `nginx` is missing (the build script looks); never under CI.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{demo_agent, TestGateway, TOKEN};
use futures_util::{SinkExt, StreamExt};
use iris_gateway::tls::{fingerprint, pinned_client};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;
use tokio_tungstenite::tungstenite::Message;

/// The code block that follows the line starting with `intro` in docs/deployment.md.
fn recipe(intro: &str) -> String {
    let doc = include_str!("../../../docs/deployment.md");
    let at = doc
        .lines()
        .position(|l| l.starts_with(intro))
        .unwrap_or_else(|| panic!("docs/deployment.md has no line starting {intro:?}"));
    let lines: Vec<&str> = doc.lines().skip(at + 1).collect();
    let open = lines
        .iter()
        .position(|l| l.starts_with("```"))
        .expect("a code block");
    let close = open
        + 1
        + lines[open + 1..]
            .iter()
            .position(|l| l.starts_with("```"))
            .expect("its end");
    lines[open + 1..close].join("\n")
}

/// A loopback port free a moment ago.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// A certificate for `localhost` in `dir` (cert.pem, key.pem); its fingerprint.
fn certificate(dir: &Path) -> String {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("rcgen");
    std::fs::write(dir.join("cert.pem"), made.cert.pem()).expect("cert");
    std::fs::write(dir.join("key.pem"), made.signing_key.serialize_pem()).expect("key");
    let der = CertificateDer::from_pem_slice(made.cert.pem().as_bytes()).expect("pem");
    fingerprint(&der)
}

/// A proxy process, killed when dropped; its log is shown when a test fails.
struct Proxy {
    child: Child,
    log: std::path::PathBuf,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            eprintln!("--- proxy log ---\n{log}");
        }
    }
}

/// Starts `program args` with its output in `dir/proxy.log`, and waits until `port` accepts.
async fn start_proxy(program: &str, args: &[&str], dir: &Path, port: u16) -> Proxy {
    let log = dir.join("proxy.log");
    let out = std::fs::File::create(&log).expect("log");
    let child = Command::new(program)
        .args(args)
        .env("HOME", dir)
        .env("XDG_DATA_HOME", dir.join("data"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("log"))
        .stderr(out)
        .spawn()
        .unwrap_or_else(|e| panic!("start {program}: {e}"));
    let mut proxy = Proxy { child, log };
    // The proxy says nothing a test could wait for when it listens: its port is asked.
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        if let Ok(Some(status)) = proxy.child.try_wait() {
            panic!("{program} exited ({status}) without listening");
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{program} did not listen on {port}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    proxy
}

/// A gateway on loopback for a proxy on `port`, as the recipe's config.toml has it.
async fn gateway(port: u16, trusted: bool) -> TestGateway {
    TestGateway::start_with(move |c| {
        c.agent_command = Some(demo_agent());
        c.spare_session = false;
        c.public_url = Some(format!("https://localhost:{port}"));
        if trusted {
            c.trusted_proxies = vec!["127.0.0.1".parse().expect("ip")];
        }
    })
    .await
}

fn gateway_addr(gw: &TestGateway) -> String {
    gw.url
        .strip_prefix("ws://")
        .and_then(|r| r.strip_suffix("/ws"))
        .expect("ws url")
        .to_owned()
}

/// A TLS connection to the proxy that trusts only its certificate.
async fn connect(port: u16, pin: &str) -> TlsStream<TcpStream> {
    let tcp = TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], port)))
        .await
        .expect("connect");
    let name = ServerName::try_from("localhost").expect("name");
    TlsConnector::from(Arc::new(pinned_client(pin)))
        .connect(name, tcp)
        .await
        .expect("TLS with the proxy")
}

/// `GET /` through the proxy: the status line and whether the body is the page.
async fn page(port: u16, pin: &str) -> (String, bool) {
    let mut tls = connect(port, pin).await;
    let head = format!("GET / HTTP/1.1\r\nHost: localhost:{port}\r\nConnection: close\r\n\r\n");
    tls.write_all(head.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    let _ = tls.read_to_end(&mut answer).await;
    let text = String::from_utf8_lossy(&answer);
    let status = text.lines().next().unwrap_or_default().to_owned();
    (status, text.contains("<title>Iris</title>"))
}

/// Pairs over `wss://` through the proxy and sends "hello": the answer's final text.
async fn turn(port: u16, pin: &str) -> String {
    let tls = connect(port, pin).await;
    let url = format!("wss://localhost:{port}/ws");
    let (mut ws, _) = tokio_tungstenite::client_async(url, tls)
        .await
        .expect("a WebSocket through the proxy");
    let send = |frame: Value| Message::text(frame.to_string());
    ws.send(send(json!({
        "v": 1, "type": "hello", "id": 1,
        "payload": {"token": TOKEN, "device_id": "proxied-phone", "device_name": "Phone"},
    })))
    .await
    .expect("hello");
    ws.send(send(json!({
        "v": 1, "type": "message.send", "id": 2, "payload": {"text": "hello"},
    })))
    .await
    .expect("send");
    let mut seen = Vec::new();
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(text))) => {
                let frame: Value = serde_json::from_str(&text).expect("JSON");
                let ty = frame["type"].as_str().unwrap_or_default().to_owned();
                if ty == "message.stop" {
                    return frame["payload"]["final_text"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                }
                assert_ne!(ty, "error", "{frame}");
                seen.push(ty);
            }
            Some(Ok(_)) => continue,
            other => panic!("the WebSocket ended ({other:?}) after {seen:?}"),
        }
    }
}

/// `doctor` beside `gw` with `public_url` through the proxy on `port`, trusting its certificate
/// and with `trusted_proxies` as the gateway has it: success and the report.
async fn doctor(gw: &TestGateway, port: u16, dir: &Path, trusted: bool) -> (bool, String) {
    let config = dir.join("doctor.toml");
    let proxies = if trusted { "[\"127.0.0.1\"]" } else { "[]" };
    std::fs::write(&config, format!("trusted_proxies = {proxies}\n")).expect("config");
    let args: Vec<String> = vec![
        "doctor".into(),
        "--config".into(),
        config.to_string_lossy().into_owned(),
        "--data-dir".into(),
        gw.dir.to_string_lossy().into_owned(),
        "--listen".into(),
        gateway_addr(gw),
        "--public-url".into(),
        format!("https://localhost:{port}"),
        "--agent".into(),
        "demo".into(),
        "--trust-cert".into(),
        dir.join("cert.pem").to_string_lossy().into_owned(),
    ];
    // Off the test's runtime, which serves the gateway meanwhile.
    let (ok, out, err) = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        common::run_cli(&args)
    })
    .await
    .expect("doctor ran");
    assert!(!err.contains("panicked"), "{err}");
    (ok, out)
}

const PASSES: &str =
    "ok    the proxy passes the client's address (X-Forwarded-For) and trusted_proxies names it";

async fn through(port: u16, pin: &str) {
    let (status, is_page) = page(port, pin).await;
    assert!(status.contains(" 200 "), "{status}");
    assert!(is_page, "the page comes through");
    let answer = tokio::time::timeout(Duration::from_secs(30), turn(port, pin))
        .await
        .expect("a turn through the proxy in time");
    assert_eq!(answer, "Echo: hello");
}

/// Caddy in front of `gw` on `port`, from the recipe.
async fn caddy(gw: &TestGateway, dir: &Path, port: u16) -> Proxy {
    let site = recipe("Caddy (")
        .replace("iris.example.com", &format!("localhost:{port}"))
        .replace("127.0.0.1:8765", &gateway_addr(gw))
        .replacen(
            "{\n",
            &format!(
                "{{\n    tls {} {}\n",
                dir.join("cert.pem").display(),
                dir.join("key.pem").display()
            ),
            1,
        );
    // The test's own global options: no admin endpoint, no redirect listener on port 80, no
    // change to the machine's trust store.
    let caddyfile = format!(
        "{{\n    admin off\n    auto_https disable_redirects\n    skip_install_trust\n    storage file_system {}\n}}\n\n{site}\n",
        dir.join("storage").display()
    );
    let file = dir.join("Caddyfile");
    std::fs::write(&file, &caddyfile).expect("Caddyfile");
    let file = file.to_string_lossy().into_owned();
    start_proxy(
        "caddy",
        &["run", "--config", &file, "--adapter", "caddyfile"],
        dir,
        port,
    )
    .await
}

#[tokio::test]
#[cfg_attr(lacks_proxies_caddy, ignore = "needs caddy: apt-get install caddy")]
#[cfg_attr(lacks_proxies_nginx, ignore = "needs nginx: apt-get install nginx")]
async fn caddy_as_the_recipe_has_it_carries_the_page_and_a_turn() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pin = certificate(dir.path());
    let port = free_port();
    let gw = gateway(port, true).await;
    let _caddy = caddy(&gw, dir.path(), port).await;
    through(port, &pin).await;
    let (ok, out) = doctor(&gw, port, dir.path(), true).await;
    assert!(ok && out.contains(PASSES), "{out}");
    gw.stop().await;
}

/// A gateway that does not name its proxy in `trusted_proxies` sees every device as the proxy:
/// `doctor` says so, and what to do.
#[tokio::test]
#[cfg_attr(lacks_proxies_caddy, ignore = "needs caddy: apt-get install caddy")]
#[cfg_attr(lacks_proxies_nginx, ignore = "needs nginx: apt-get install nginx")]
async fn doctor_names_a_proxy_missing_from_trusted_proxies() {
    let dir = tempfile::tempdir().expect("tempdir");
    certificate(dir.path());
    let port = free_port();
    let gw = gateway(port, false).await;
    let _caddy = caddy(&gw, dir.path(), port).await;
    let (ok, out) = doctor(&gw, port, dir.path(), false).await;
    assert!(!ok, "{out}");
    let fails: Vec<&str> = out.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert_eq!(fails.len(), 1, "{out}");
    assert!(
        fails[0].contains("not in trusted_proxies") && fails[0].contains("add the proxy's address"),
        "{out}"
    );
    gw.stop().await;
}

#[tokio::test]
#[cfg_attr(lacks_proxies_caddy, ignore = "needs caddy: apt-get install caddy")]
#[cfg_attr(lacks_proxies_nginx, ignore = "needs nginx: apt-get install nginx")]
async fn nginx_as_the_recipe_has_it_carries_the_page_and_a_turn() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pin = certificate(dir.path());
    let port = free_port();
    let gw = gateway(port, true).await;
    let d = dir.path().display();
    let server = recipe("nginx (")
        .replace("listen 443 ssl", &format!("listen 127.0.0.1:{port} ssl"))
        .replace("iris.example.com", "localhost")
        .replace(
            "/etc/letsencrypt/live/localhost/fullchain.pem",
            &format!("{d}/cert.pem"),
        )
        .replace(
            "/etc/letsencrypt/live/localhost/privkey.pem",
            &format!("{d}/key.pem"),
        )
        .replace("127.0.0.1:8765", &gateway_addr(&gw));
    // The test's own main context: one process in the foreground, everything under `dir`.
    let conf = format!(
        "daemon off;\nmaster_process off;\npid {d}/nginx.pid;\nerror_log {d}/proxy.log info;\n\
         events {{ worker_connections 64; }}\n\
         http {{\n    access_log off;\n    client_body_temp_path {d}/body;\n    proxy_temp_path {d}/proxy;\n\
         fastcgi_temp_path {d}/fastcgi;\n    uwsgi_temp_path {d}/uwsgi;\n    scgi_temp_path {d}/scgi;\n\
         {server}\n}}\n"
    );
    let file = dir.path().join("nginx.conf");
    std::fs::write(&file, &conf).expect("nginx.conf");
    let (file, prefix) = (file.to_string_lossy().into_owned(), format!("{d}/"));
    let _nginx = start_proxy(
        nginx(),
        &["-p", &prefix, "-c", &file, "-e", &format!("{d}/proxy.log")],
        dir.path(),
        port,
    )
    .await;
    through(port, &pin).await;
    let (ok, out) = doctor(&gw, port, dir.path(), true).await;
    assert!(ok && out.contains(PASSES), "{out}");
    gw.stop().await;
}

/// nginx is in /usr/sbin, which a user's PATH may lack.
fn nginx() -> &'static str {
    if Path::new("/usr/sbin/nginx").exists() {
        "/usr/sbin/nginx"
    } else {
        "nginx"
    }
}
