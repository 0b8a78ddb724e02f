//! Reaching the gateway away from home, with real processes on loopback: `iris-gateway relay`,
//! the gateway with `[reach] relays` naming it (through a tap that keeps every byte the relay
//! is sent and sends back), and a native client that dials the gateway's endpoint id through
//! the relay only. The same `hello`, frames, errors and refusals as over the WebSocket; the
//! relay's bytes hold neither the chat's text nor the device token; the endpoint key persists.

#[path = "common/binary.rs"]
mod binary;

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use binary::*;
use iris_client::iroh::{EndpointId, RelayUrl};
use iris_client::{Client, ClientError, ConnectOptions, Dial, Event, RawConnection};
use iris_protocol::{
    ClientFrame, DeviceRevoke, Empty, ErrorCode, Header, MessageSend, ServerFrame,
};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::{Child, Command};

/// How long a turn's frames, or a relay registration, may take.
const WAIT: Duration = Duration::from_secs(30);

/// A text no frame of the protocol holds by chance: seen by the device and the agent only.
const SECRET_TEXT: &str = "quartz-zebra-0x5eed-marmalade";

/// `iris-gateway relay` on a port of loopback the system chose.
struct RelayProcess {
    _child: Child,
    /// `host:port`.
    addr: String,
}

async fn start_relay() -> RelayProcess {
    let mut child = Command::new(BIN)
        .args(["relay", "--listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the relay");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let line = tokio::time::timeout(PATIENCE, lines.next_line())
        .await
        .expect("the relay starts in time")
        .expect("read")
        .expect("a line");
    let addr = line
        .strip_prefix("Relay: http://")
        .unwrap_or_else(|| panic!("not the relay's line: {line}"))
        .to_owned();
    RelayProcess {
        _child: child,
        addr,
    }
}

/// A TCP proxy in front of the relay that keeps every byte passing either way.
struct Tap {
    url: String,
    bytes: Arc<Mutex<Vec<u8>>>,
}

async fn tap(to: String) -> Tap {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let bytes = Arc::new(Mutex::new(Vec::new()));
    let kept = bytes.clone();
    tokio::spawn(async move {
        while let Ok((inbound, _)) = listener.accept().await {
            let Ok(outbound) = TcpStream::connect(&to).await else {
                continue;
            };
            let (ri, wi) = inbound.into_split();
            let (ro, wo) = outbound.into_split();
            tokio::spawn(copy(ri, wo, kept.clone()));
            tokio::spawn(copy(ro, wi, kept.clone()));
        }
    });
    Tap { url, bytes }
}

async fn copy(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    kept: Arc<Mutex<Vec<u8>>>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n) = from.read(&mut buf).await {
        if n == 0 || to.write_all(&buf[..n]).await.is_err() {
            break;
        }
        kept.lock().expect("lock").extend_from_slice(&buf[..n]);
    }
    let _ = to.shutdown().await;
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The gateway with the demo agent, reachable through `relay` when given.
async fn start_gateway(dir: &Path, relay: Option<&str>) -> Running {
    let config = dir.join("gateway.toml");
    let reach = match relay {
        Some(url) => format!("[reach]\nrelays = [\"{url}\"]\nbind = \"127.0.0.1:0\"\n"),
        None => String::new(),
    };
    std::fs::write(&config, reach).expect("config");
    let data = dir.join("data");
    let (data, config) = (data.to_str().expect("path"), config.to_str().expect("path"));
    let args = [
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        data,
        "--token",
        TOKEN,
        "--config",
        config,
    ];
    let mut cmd = serve(&args);
    cmd.env("IRIS_AGENT", "demo");
    Running::start(cmd).await
}

/// The gateway's endpoint id from its banner, once a relay knows it.
async fn registered(gw: &Running) -> EndpointId {
    assert!(
        gw.stderr_until("registered at a relay", WAIT).await,
        "the gateway never registered at the relay:\n{}",
        gw.stderr.lock().expect("lock")
    );
    gw.line("Endpoint:")
        .expect("an Endpoint line in the banner")
        .parse()
        .expect("an endpoint id")
}

fn dial(gateway: EndpointId, relay: &str) -> Dial {
    let relay: RelayUrl = relay.parse().expect("relay url");
    Dial {
        relay_only: true,
        ..Dial::new(gateway, vec![relay])
    }
}

async fn via_relay(
    dial: &Dial,
    token: &str,
    device: &str,
) -> Result<(Client, iris_protocol::HelloAck), ClientError> {
    let opts = ConnectOptions::new(format!("iroh:{}", dial.gateway), token, device);
    Client::connect_via_relay(opts, dial).await
}

/// `hello` over the WebSocket with `token`: the error it earns.
async fn refused_over_websocket(gw: &Running, token: &str, device: &str) -> (ErrorCode, String) {
    let mut conn = RawConnection::connect(&gw.url).await.expect("connect");
    match conn.hello(token, device).await {
        Err(ClientError::Server { code, message }) => (code, message),
        other => panic!("expected an error, got {other:?}"),
    }
}

async fn until(client: &mut Client, mut done: impl FnMut(&Event) -> bool) -> Vec<Event> {
    let mut seen = Vec::new();
    loop {
        let event = client
            .next_event_timeout(WAIT)
            .await
            .unwrap_or_else(|e| panic!("waiting for a frame: {e}"));
        let stop = done(&event);
        seen.push(event);
        if stop {
            return seen;
        }
    }
}

#[tokio::test]
async fn a_paired_device_chats_through_the_relay_which_sees_no_plaintext() {
    let dir = tempfile::tempdir().expect("tmp");
    let relay = start_relay().await;
    let tap = tap(relay.addr.clone()).await;
    let gw = start_gateway(dir.path(), Some(&tap.url)).await;
    let id = registered(&gw).await;
    let dial = dial(id, &tap.url);

    // The owner, on the gateway's machine, makes a pairing code for the phone.
    let (mut owner, _) = Client::connect(gw.options(TOKEN, "owner-desk"))
        .await
        .expect("owner");
    let answer = owner
        .request(Header::default(), ClientFrame::PairCreate(Empty {}))
        .await
        .expect("pair.create");
    let ServerFrame::PairCode(pair) = answer.body else {
        panic!("{}", answer.raw);
    };
    // The phone pairs through the relay, then signs in with its device token.
    let (phone, ack) = via_relay(&dial, &pair.code, "phone").await.expect("pairs");
    let token = ack.device_token.expect("a device token");
    phone.close().await.expect("close");
    let (mut phone, _) = via_relay(&dial, &token, "phone").await.expect("signs in");

    let send = ClientFrame::MessageSend(MessageSend {
        text: format!("please repeat {SECRET_TEXT}"),
        ..Default::default()
    });
    phone
        .request(Header::lane("default", None), send)
        .await
        .expect("message.send answered");
    let turn = until(&mut phone, |e| e.frame_type() == "agent.idle").await;
    let streamed = turn.iter().any(|e| e.frame_type() == "message.update");
    let answer = turn
        .iter()
        .find_map(|e| match &e.body {
            ServerFrame::MessageStop(s) => Some(s.final_text.clone()),
            _ => None,
        })
        .expect("an answer");
    assert!(streamed && !answer.is_empty(), "{answer}");

    // A wrong token is refused as over the WebSocket: the same code and message.
    let over_ws = refused_over_websocket(&gw, "not-a-token-0123456789", "stranger").await;
    match via_relay(&dial, "not-a-token-0123456789", "stranger").await {
        Err(ClientError::Server { code, message }) => assert_eq!((code, message), over_ws),
        other => panic!("a stranger got in: {other:?}"),
    }

    // Revoked by the owner: the phone's connection through the relay is closed, and it is
    // refused as over the WebSocket.
    owner
        .request(
            Header::default(),
            ClientFrame::DeviceRevoke(DeviceRevoke {
                device_id: "phone".into(),
            }),
        )
        .await
        .expect("revoke");
    let close = phone.closed_timeout(WAIT).await.expect("closed");
    assert_eq!(close.map(|c| c.0), Some(4401));
    let over_ws = refused_over_websocket(&gw, &token, "phone").await;
    match via_relay(&dial, &token, "phone").await {
        Err(ClientError::Server { code, message }) => {
            assert_eq!(code, ErrorCode::Auth);
            assert_eq!((code, message), over_ws);
        }
        other => panic!("a revoked device got in: {other:?}"),
    }

    // Everything the relay was sent and sent back: ciphertext, and the ids of the endpoints.
    let seen = tap.bytes.lock().expect("lock").clone();
    assert!(
        seen.len() > 1000,
        "little passed the tap: {} bytes",
        seen.len()
    );
    assert!(!contains(&seen, SECRET_TEXT.as_bytes()), "the chat's text");
    assert!(!contains(&seen, token.as_bytes()), "the device token");
    assert!(!contains(&seen, pair.code.as_bytes()), "the pairing code");
    owner.close().await.expect("close");
    gw.stop().await;
}

#[tokio::test]
async fn the_endpoint_key_is_private_and_kept_across_restarts() {
    let dir = tempfile::tempdir().expect("tmp");
    let key = dir.path().join("data").join("endpoint.key");
    // Without `[reach]` there is no endpoint: no key, no line in the banner.
    let gw = start_gateway(dir.path(), None).await;
    assert!(gw.line("Endpoint:").is_none(), "{:?}", gw.banner);
    // A device served: the gateway is past its start (and handles SIGTERM).
    let (device, _) = Client::connect(gw.options(TOKEN, "desk"))
        .await
        .expect("connect");
    device.close().await.expect("close");
    gw.stop().await;
    assert!(!key.exists(), "a key without [reach]");

    let relay = start_relay().await;
    let url = format!("http://{}", relay.addr);
    let gw = start_gateway(dir.path(), Some(&url)).await;
    let first = registered(&gw).await;
    gw.stop().await;
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&key).expect("key").permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");

    let gw = start_gateway(dir.path(), Some(&url)).await;
    assert_eq!(registered(&gw).await, first, "the same endpoint id");
    gw.stop().await;

    // `iris-gateway reach` prints the same id and the relay.
    let data = dir.path().join("data");
    let config = dir.path().join("gateway.toml");
    let output = std::process::Command::new(BIN)
        .args(["reach", "--data-dir"])
        .arg(&data)
        .arg("--config")
        .arg(&config)
        .env_remove("IRIS_TOKEN")
        .env_remove("IRIS_CONFIG")
        .output()
        .expect("run reach");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(
        stdout.contains(&format!("Endpoint id: {first}")),
        "{stdout}"
    );
    assert!(stdout.contains(&relay.addr), "{stdout}");
}
