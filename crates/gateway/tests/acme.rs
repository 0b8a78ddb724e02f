//! TLS without a hand-made certificate: the plain HTTP listener beside TLS redirects every
//! request to https on the same known host (never to a host a stranger names) and refuses
//! WebSockets; certificates come over ACME from Debian's `pebble` (Let's Encrypt's test
//! server, on loopback with its own CA) through real TLS-ALPN-01 and HTTP-01 validation, are
//! kept 0600, served with HSTS, renewed before they expire without a restart, and `doctor` says
//! where they stand and why the last order failed.

mod common;

use std::net::{SocketAddr, TcpListener as StdListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{file_mode, run_cli, TestGateway};
use iris_gateway::config::tls::{AcmeConfig, AcmeFileConfig, TlsConfig};
use iris_gateway::tls::fingerprint;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// Sends `request` to `addr` over plain TCP; the answer's head, lower case.
async fn plain(addr: SocketAddr, request: &str) -> String {
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    tcp.write_all(request.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer).to_lowercase();
    text.split("\r\n\r\n").next().unwrap_or_default().to_owned()
}

fn tls_port(gw: &TestGateway) -> u16 {
    gw.shared.config.listen.port()
}

fn redirect_addr(gw: &TestGateway) -> SocketAddr {
    gw.shared
        .config
        .tls
        .as_ref()
        .and_then(|t| t.redirect_listen)
        .expect("a redirect listener")
}

#[tokio::test]
async fn plain_http_is_redirected_to_the_same_known_host_and_websockets_are_refused() {
    let gw = TestGateway::start_with(|c| {
        let mut tls = TlsConfig::self_signed();
        tls.redirect_listen = Some("127.0.0.1:0".parse().unwrap());
        c.tls = Some(tls);
    })
    .await;
    let addr = redirect_addr(&gw);
    let port = tls_port(&gw);
    let head = plain(
        addr,
        "GET /chat?c=1 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(head.starts_with("http/1.1 308"), "{head}");
    assert!(
        head.contains(&format!("location: https://localhost:{port}/chat?c=1")),
        "{head}"
    );
    assert!(!head.contains("strict-transport-security"), "{head}");
    let head = plain(
        addr,
        "GET / HTTP/1.1\r\nHost: 127.0.0.1:80\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(
        head.contains(&format!("location: https://127.0.0.1:{port}/\r\n")),
        "{head}"
    );
    // A name the gateway does not answer to, or one bent with user info, is never a Location.
    for (host, status) in [
        ("evil.example", "421"),
        ("evil.example@localhost", "400"),
        ("localhost/evil.example", "400"),
    ] {
        let request = format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        let head = plain(addr, &request).await;
        assert!(
            head.starts_with(&format!("http/1.1 {status}")),
            "{host}: {head}"
        );
        assert!(!head.contains("location"), "{host}: {head}");
    }
    // A WebSocket on plain HTTP is refused, not upgraded and not redirected.
    let head = plain(
        addr,
        "GET /ws HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    )
    .await;
    assert!(head.starts_with("http/1.1 403"), "{head}");
    let url = format!("ws://{addr}/ws");
    assert!(tokio_tungstenite::connect_async(url).await.is_err());
    gw.stop().await;
}

/// A loopback port free now (bound and let go: pebble is told its ports before it starts).
fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Pebble, killed when dropped.
struct Pebble {
    child: Child,
    directory: String,
    ca: PathBuf,
    management: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Pebble {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Pebble {
    /// Pebble on loopback with a CA of its own for its HTTPS, validating HTTP-01 on `http` and
    /// TLS-ALPN-01 on `tls`, issuing certificates valid for `validity_secs`.
    async fn start(http: u16, tls: u16, validity_secs: u64) -> Pebble {
        let dir = tempfile::tempdir().expect("tempdir");
        let ca_key = rcgen::KeyPair::generate().expect("key");
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("ca");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).expect("ca cert");
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let key = rcgen::KeyPair::generate().expect("key");
        let params =
            rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
                .expect("params");
        let leaf = params.signed_by(&key, &issuer).expect("leaf");
        let path = |name: &str| dir.path().join(name);
        std::fs::write(path("ca.pem"), ca.pem()).expect("write");
        std::fs::write(path("cert.pem"), leaf.pem()).expect("write");
        std::fs::write(path("key.pem"), key.serialize_pem()).expect("write");
        let (listen, management) = (free_port(), free_port());
        let config = serde_json::json!({"pebble": {
            "listenAddress": format!("127.0.0.1:{listen}"),
            "managementListenAddress": format!("127.0.0.1:{management}"),
            "certificate": path("cert.pem"),
            "privateKey": path("key.pem"),
            "httpPort": http,
            "tlsPort": tls,
            "ocspResponderURL": "",
            "externalAccountBindingRequired": false,
            "certificateValidityPeriod": validity_secs,
        }});
        std::fs::write(path("pebble.json"), config.to_string()).expect("write");
        let child = Command::new("pebble")
            .arg("-config")
            .arg(path("pebble.json"))
            .env("PEBBLE_VA_NOSLEEP", "1")
            .env("PEBBLE_WFE_NONCEREJECT", "0")
            .env("PEBBLE_AUTHZREUSE", "0")
            .stdout(if std::env::var_os("IRIS_PEBBLE_LOG").is_some() {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .stderr(if std::env::var_os("IRIS_PEBBLE_LOG").is_some() {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .spawn()
            .expect("pebble runs (apt-get install pebble)");
        let pebble = Pebble {
            child,
            directory: format!("https://127.0.0.1:{listen}/dir"),
            ca: path("ca.pem"),
            management,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        while TcpStream::connect(("127.0.0.1", listen)).await.is_err() {
            assert!(
                Instant::now() < deadline,
                "pebble did not listen within 15 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        pebble
    }

    /// The root of the certificates pebble issues (made anew at each start).
    async fn root(&self) -> CertificateDer<'static> {
        let ca = std::fs::read(&self.ca).expect("ca");
        let client = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&ca).expect("pem"))
            .build()
            .expect("client");
        let url = format!("https://127.0.0.1:{}/roots/0", self.management);
        let pem = client
            .get(url)
            .send()
            .await
            .expect("roots")
            .bytes()
            .await
            .expect("body");
        use rustls::pki_types::pem::PemObject;
        CertificateDer::from_pem_slice(&pem).expect("a root")
    }

    fn acme(&self, challenge: &str) -> AcmeConfig {
        AcmeConfig::resolve(AcmeFileConfig {
            domains: vec!["localhost".into()],
            email: Some("owner@example.com".into()),
            directory: Some(self.directory.clone()),
            directory_ca: Some(self.ca.clone()),
            challenge: Some(challenge.into()),
            renew_before_days: None,
        })
        .expect("acme config")
    }
}

/// The fingerprint of the certificate served at `port` to a client trusting only `root`, and the
/// head of its `/healthz`; `None` while no certificate it trusts is served.
async fn served(port: u16, root: &CertificateDer<'static>) -> Option<(String, String)> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(root.clone()).ok()?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .ok()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
    let name = ServerName::try_from("localhost").ok()?;
    let mut tls = TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .ok()?;
    let leaf = fingerprint(tls.get_ref().1.peer_certificates()?.first()?);
    tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .ok()?;
    let mut answer = Vec::new();
    let _ = tls.read_to_end(&mut answer).await;
    let head = String::from_utf8_lossy(&answer).to_lowercase();
    Some((leaf, head.split("\r\n\r\n").next()?.to_owned()))
}

/// Waits (at most `within`) until `port` serves a certificate `root` vouches for other than
/// `old`.
async fn wait_served(
    dir: &Path,
    port: u16,
    root: &CertificateDer<'static>,
    old: Option<&str>,
    within: Duration,
) -> (String, String) {
    let deadline = Instant::now() + within;
    loop {
        let once = tokio::time::timeout(Duration::from_secs(5), served(port, root));
        if let Ok(Some((leaf, head))) = once.await {
            if Some(leaf.as_str()) != old {
                return (leaf, head);
            }
        }
        assert!(
            Instant::now() < deadline,
            "no new certificate within {within:?}; status: {}",
            std::fs::read_to_string(dir.join("acme/status.json")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `doctor` with `[tls.acme]` as in `acme`: its stdout.
fn doctor(dir: &Path, acme: &AcmeConfig, directory: &str) -> String {
    let config = dir.join("doctor.toml");
    let ca = acme
        .directory_ca
        .as_ref()
        .map(|p| format!("directory_ca = {:?}\n", p.display().to_string()))
        .unwrap_or_default();
    let text = format!(
        "[tls.acme]\ndomains = {:?}\ndirectory = {directory:?}\n{ca}",
        acme.domains
    );
    std::fs::write(&config, text).expect("config");
    let (_, out, err) = run_cli(&[
        "doctor",
        "--config",
        &config.to_string_lossy(),
        "--data-dir",
        &dir.to_string_lossy(),
        "--agent",
        "demo",
    ]);
    assert!(!err.contains("panicked"), "{err}");
    out
}

#[tokio::test]
#[cfg_attr(lacks_pebble_pebble, ignore = "needs pebble: apt-get install pebble")]
async fn certificates_come_from_pebble_over_both_challenges_and_are_renewed_in_service() {
    let (alpn_port, http_port) = (free_port(), free_port());
    // 30 s certificates: renewed a third of their lifetime before expiry, 20 s in.
    let pebble = Pebble::start(http_port, alpn_port, 30).await;
    let root = pebble.root().await;
    let alpn = pebble.acme("tls-alpn-01");
    let data = tempfile::tempdir().expect("tempdir");
    let on_alpn_port = |c: &mut iris_gateway::config::Config| {
        c.listen = SocketAddr::from(([127, 0, 0, 1], alpn_port));
        c.tls = Some(TlsConfig::acme(alpn.clone()));
    };
    let gw = TestGateway::start_in(data.path(), on_alpn_port).await;
    let (first, head) = wait_served(&gw.dir, alpn_port, &root, None, Duration::from_secs(60)).await;
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(
        head.contains("strict-transport-security: max-age=31536000"),
        "{head}"
    );
    for file in ["cert.pem", "key.pem", "account.json", "status.json"] {
        let path = gw.dir.join("acme").join(file);
        assert_eq!(file_mode(&path), 0o600, "{}", path.display());
    }
    let (dir, directory) = (gw.dir.clone(), pebble.directory.clone());
    let acme = alpn.clone();
    let report = tokio::task::spawn_blocking(move || doctor(&dir, &acme, &directory))
        .await
        .expect("doctor");
    assert!(
        report.contains("ok    ACME certificate for localhost valid until"),
        "{report}"
    );

    // HTTP-01 through the plain listener of a second gateway.
    let http01 = pebble.acme("http-01");
    let other = TestGateway::start_with(|c| {
        let mut tls = TlsConfig::acme(http01.clone());
        tls.redirect_listen = Some(SocketAddr::from(([127, 0, 0, 1], http_port)));
        c.tls = Some(tls);
    })
    .await;
    let (issued, _) = wait_served(
        &other.dir,
        tls_port(&other),
        &root,
        None,
        Duration::from_secs(60),
    )
    .await;
    assert_ne!(issued, first);
    other.stop().await;

    // The renewal: a new certificate in service on the same listener, no restart.
    let (renewed, head) = wait_served(
        &gw.dir,
        alpn_port,
        &root,
        Some(&first),
        Duration::from_secs(60),
    )
    .await;
    assert_ne!(renewed, first);
    assert!(head.starts_with("http/1.1 200"), "{head}");
    gw.stop().await;

    // A restart serves the stored certificate from its first handshake, with the authority
    // gone: no new order stands between a restart and the devices.
    drop(pebble);
    let gw = TestGateway::start_in(data.path(), on_alpn_port).await;
    let (after, head) = served(alpn_port, &root).await.expect("served at once");
    assert_eq!(after, renewed);
    assert!(head.starts_with("http/1.1 200"), "{head}");
    gw.stop().await;
}

#[tokio::test]
async fn doctor_names_the_last_failed_order_and_why() {
    let closed = free_port();
    let acme = AcmeConfig::resolve(AcmeFileConfig {
        domains: vec!["localhost".into()],
        directory: Some(format!("https://127.0.0.1:{closed}/dir")),
        ..AcmeFileConfig::default()
    })
    .expect("config");
    let gw = TestGateway::start_with(|c| c.tls = Some(TlsConfig::acme(acme.clone()))).await;
    let status = gw.dir.join("acme").join("status.json");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !status.exists() {
        assert!(Instant::now() < deadline, "no failed order recorded");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (dir, cfg) = (gw.dir.clone(), acme.clone());
    let report = tokio::task::spawn_blocking(move || doctor(&dir, &cfg, &cfg.directory))
        .await
        .expect("doctor");
    let line = report
        .lines()
        .find(|l| l.contains("ACME"))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(line.starts_with("FAIL"), "{line}");
    assert!(
        line.contains("the last ACME order for localhost failed at")
            && line.contains("new account"),
        "{line}"
    );
    assert!(line.contains("tries again by itself"), "{line}");
    gw.stop().await;
}
