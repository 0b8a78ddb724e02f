//! The two ways to talk to Hermes that the scenario compares, each driven the way its app would:
//! Hermes' own WebSocket server (`hermes serve`, JSON-RPC on `/api/ws`: `session.create`, then
//! `prompt.submit`, answers as `message.delta` events ending with `message.complete`), and the
//! gateway running `hermes acp` as its agent (a device sends `message.send` and reads
//! `message.update` up to `message.stop`).

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use iris_client::{Client, ConnectOptions, RawConnection, RawFrame};
use iris_protocol::{
    ChannelCreate, ClientFrame, Header, MessageSend, RequestId, ServerFrame, StreamText,
};
use serde_json::json;
use tokio::process::Command;

use super::procs::{cpu_ms, descendants, first_line_with, rss_mib, HermesHome, Server};
use super::wire::{self, HermesFrame, Screen};
use crate::gateway::{connect, serve_command, TOKEN};
use crate::unix_nanos;

/// Longest wait for any one frame (the first turn waits for Hermes to start on a loaded
/// machine).
const FRAME_TIMEOUT: Duration = Duration::from_secs(120);

/// What a client saw of one turn.
pub struct Turn {
    /// From sending the prompt to the first text on screen.
    pub first_text: Duration,
    /// From sending the prompt to the answer's end on screen.
    pub complete: Duration,
    /// Every chunk's time to the screen.
    pub screen: Screen,
}

/// CPU time and resident memory of one side's processes.
#[derive(Default)]
pub struct Usage {
    /// The server's own CPU time so far, in milliseconds.
    pub server_cpu_ms: f64,
    /// The agent's (Hermes in the gateway's case; nothing for `hermes serve`, which is both).
    pub agent_cpu_ms: f64,
    pub server_rss_mib: f64,
    pub agent_rss_mib: f64,
}

/// `hermes serve` and one WebSocket client with one session.
pub struct HermesServe {
    server: Server,
    client: HermesClient,
    url: String,
    /// From spawning the server to its ready line (it accepts connections).
    pub listening: Duration,
}

impl HermesServe {
    /// Starts the server, connects as soon as it listens and opens a session (which starts
    /// building the agent in the background, as the app's opening does).
    pub async fn start(venv: &Path, root: &Path, model_port: u16) -> anyhow::Result<HermesServe> {
        let home = HermesHome::new(root, model_port)?;
        let mut cmd = Command::new(venv.join("bin/hermes"));
        cmd.args(["serve", "--host", "127.0.0.1", "--port", "0"])
            .env_clear()
            .envs(home.env(venv))
            .env("HERMES_DASHBOARD_SESSION_TOKEN", TOKEN)
            .current_dir(&home.work);
        let (server, stdout) = Server::spawn(cmd, &root.join("hermes-serve.log"))?;
        let ready = first_line_with(stdout, "HERMES_BACKEND_READY").await?;
        let listening = server.spawned.elapsed();
        let port: u16 = ready
            .split("port=")
            .nth(1)
            .and_then(|p| p.trim().parse().ok())
            .ok_or_else(|| anyhow!("no port in {ready:?}"))?;
        let url = format!("ws://127.0.0.1:{port}/api/ws?token={TOKEN}");
        let client = HermesClient::connect(&url, server.spawned).await?;
        Ok(HermesServe {
            server,
            client,
            url,
            listening,
        })
    }

    /// From spawning the server to the first session's agent being built (its first
    /// `session.info`).
    pub fn agent_built(&self) -> Option<Duration> {
        self.client.agent_built
    }

    /// Another client, with a session of its own, as a second app would be; returns once the
    /// session's agent is built (Hermes times out building many at once).
    pub async fn client(&self) -> anyhow::Result<HermesClient> {
        let mut client = HermesClient::connect(&self.url, self.server.spawned).await?;
        if client.agent_built.is_none() {
            client.until(|f| f.kind() == "session.info").await?;
        }
        Ok(client)
    }

    /// One turn of the first client.
    pub async fn turn(&mut self, text: &str, chunks: usize) -> anyhow::Result<Turn> {
        self.client.turn(text, chunks).await
    }

    /// The server's CPU time and memory, its helper processes included.
    pub fn usage(&self) -> Usage {
        let mut pids = descendants(self.server.pid);
        pids.push(self.server.pid);
        Usage {
            server_cpu_ms: cpu_ms(&pids),
            agent_cpu_ms: 0.0,
            server_rss_mib: rss_mib(&pids),
            agent_rss_mib: 0.0,
        }
    }

    pub async fn stop(self) {
        drop(self.client);
        self.server.stop().await;
    }
}

/// A WebSocket client of `hermes serve` with one session.
pub struct HermesClient {
    ws: RawConnection,
    session: String,
    next_id: u64,
    spawned: Instant,
    agent_built: Option<Duration>,
}

impl HermesClient {
    /// Connects and opens a session.
    async fn connect(url: &str, spawned: Instant) -> anyhow::Result<HermesClient> {
        let ws = RawConnection::connect(url).await?;
        let mut side = HermesClient {
            ws,
            session: String::new(),
            next_id: 1,
            spawned,
            agent_built: None,
        };
        side.until(|f| f.kind() == "gateway.ready").await?;
        let id = side.send("session.create", json!({"cols": 80})).await?;
        let created = side.answer(id).await?;
        side.session = created["session_id"]
            .as_str()
            .context("session.create without a session_id")?
            .to_owned();
        Ok(side)
    }

    async fn send(&mut self, method: &str, params: serde_json::Value) -> anyhow::Result<u64> {
        let id = self.next_id;
        self.next_id += 1;
        self.ws
            .send_text(&wire::request(id, method, params))
            .await?;
        Ok(id)
    }

    async fn next(&mut self) -> anyhow::Result<HermesFrame> {
        loop {
            match self.ws.recv_timeout(FRAME_TIMEOUT).await? {
                RawFrame::Text(t) => {
                    let frame = wire::parse(&t)?;
                    if frame.kind() == "session.info" && self.agent_built.is_none() {
                        self.agent_built = Some(self.spawned.elapsed());
                    }
                    return Ok(frame);
                }
                RawFrame::Binary(_) => {}
                RawFrame::Close(c) => bail!("hermes serve closed the connection: {c:?}"),
            }
        }
    }

    async fn until(&mut self, want: impl Fn(&HermesFrame) -> bool) -> anyhow::Result<HermesFrame> {
        loop {
            let frame = self.next().await?;
            if want(&frame) {
                return Ok(frame);
            }
        }
    }

    async fn answer(&mut self, id: u64) -> anyhow::Result<serde_json::Value> {
        let frame = self
            .until(|f| matches!(f, HermesFrame::Response { id: i, .. } if *i == id))
            .await?;
        match frame {
            HermesFrame::Response { result, .. } => result.map_err(|e| anyhow!("Hermes: {e}")),
            HermesFrame::Event { .. } => unreachable!("until returned a response"),
        }
    }

    /// One turn: `prompt.submit` up to `message.complete`, whose answer has `chunks` chunks.
    pub async fn turn(&mut self, text: &str, chunks: usize) -> anyhow::Result<Turn> {
        let sent = Instant::now();
        let params = json!({"session_id": self.session, "text": text});
        let id = self.send("prompt.submit", params).await?;
        let mut screen = Screen::default();
        let mut first_text = None;
        loop {
            let frame = self.next().await?;
            let now = unix_nanos();
            let (kind, text) = match frame {
                HermesFrame::Response {
                    id: i,
                    result: Err(e),
                } if i == id => {
                    bail!("prompt.submit refused: {e}")
                }
                HermesFrame::Response { .. } => continue,
                HermesFrame::Event { kind, text, .. } => (kind, text.unwrap_or_default()),
            };
            match kind.as_str() {
                "message.delta" => screen.append(&text, now),
                "message.complete" => {
                    screen
                        .finish(&text, now, chunks)
                        .with_context(|| format!("Hermes answered {:?}", short(&text)))?;
                }
                "error" => bail!("Hermes: {text}"),
                _ => continue,
            }
            if first_text.is_none() && screen.has_text() {
                first_text = Some(sent.elapsed());
            }
            if kind == "message.complete" {
                break;
            }
        }
        Ok(Turn {
            first_text: first_text.unwrap_or_else(|| sent.elapsed()),
            complete: sent.elapsed(),
            screen,
        })
    }
}

/// The gateway binary with `hermes acp` as its agent, and one device.
pub struct GatewayHermes {
    server: Server,
    device: Device,
    url: String,
    log: std::path::PathBuf,
    /// From spawning the gateway to it accepting connections.
    pub listening: Duration,
}

impl GatewayHermes {
    /// Starts the gateway and connects a device as soon as it listens.
    pub async fn start(venv: &Path, root: &Path, model_port: u16) -> anyhow::Result<GatewayHermes> {
        let home = HermesHome::new(root, model_port)?;
        // `env -i` gives Hermes the same scrubbed environment as `hermes serve` gets.
        let mut line = "env -i".to_owned();
        for (k, v) in home.env(venv) {
            line.push_str(&format!(" {k}={}", quote(&v)?));
        }
        line.push_str(&format!(
            " {} acp",
            quote(&venv.join("bin/hermes").display().to_string())?
        ));
        let data = root.join("gateway-data");
        std::fs::create_dir_all(&data)?;
        let config = root.join("gateway.toml");
        let work = home.work.display().to_string();
        std::fs::write(
            &config,
            format!(
                "[limits]\nmax_connections_per_address = 1000\nsends_per_minute = 100000\n\n[agent]\ncwd = {}\n",
                serde_json::to_string(&work)?
            ),
        )?;
        let cmd = serve_command(&line, &data, &config, "info")?;
        let log = root.join("gateway.log");
        let (server, stdout) = Server::spawn(cmd, &log)?;
        let url = first_line_with(stdout, "WebSocket: ").await?;
        let listening = server.spawned.elapsed();
        let url = url
            .trim()
            .trim_start_matches("WebSocket: ")
            .trim()
            .to_owned();
        let device = Device::connect(&url, "hermes-bench").await?;
        Ok(GatewayHermes {
            server,
            device,
            url,
            log,
            listening,
        })
    }

    /// Another device, paired as the first.
    pub async fn device(&self, name: &str) -> anyhow::Result<Device> {
        Device::connect(&self.url, name).await
    }

    /// The agent's own start as the gateway logged it (spawn to `initialize` answered).
    pub fn agent_start(&self) -> Option<Duration> {
        let log = std::fs::read_to_string(&self.log).ok()?;
        let line = log.lines().find(|l| l.contains("agent ready"))?;
        let ms = line.split("ms=").nth(1)?.split_whitespace().next()?;
        Some(Duration::from_millis(ms.parse().ok()?))
    }

    /// A new channel (its first turn takes the agent's spare session, where there is one).
    pub async fn new_channel(&mut self, name: &str) -> anyhow::Result<String> {
        self.device.new_channel(name).await
    }

    /// One turn in the default channel.
    pub async fn turn(&mut self, text: &str, chunks: usize) -> anyhow::Result<Turn> {
        self.device.turn_in("default", text, chunks).await
    }

    /// One turn in `chat`.
    pub async fn turn_in(&mut self, chat: &str, text: &str, chunks: usize) -> anyhow::Result<Turn> {
        self.device.turn_in(chat, text, chunks).await
    }

    /// The gateway's CPU time and memory, and its agent's (every descendant).
    pub fn usage(&self) -> Usage {
        let agent = descendants(self.server.pid);
        Usage {
            server_cpu_ms: cpu_ms(&[self.server.pid]),
            agent_cpu_ms: cpu_ms(&agent),
            server_rss_mib: rss_mib(&[self.server.pid]),
            agent_rss_mib: rss_mib(&agent),
        }
    }

    pub async fn stop(self) {
        drop(self.device);
        self.server.stop().await;
    }
}

/// A device of the gateway.
pub struct Device {
    client: Client,
    next_id: u64,
}

impl Device {
    async fn connect(url: &str, name: &str) -> anyhow::Result<Device> {
        let client = connect(ConnectOptions::new(url.to_owned(), TOKEN, name)).await?;
        Ok(Device { client, next_id: 1 })
    }

    /// Shows only `chat` (`focus.set`): streaming updates of other chats are not sent to it.
    pub async fn focus(&mut self, chat: &str) -> anyhow::Result<()> {
        let lane = iris_protocol::LaneRef {
            chat_id: chat.to_owned(),
            thread_id: None,
        };
        self.client.focus(vec![lane]).await?;
        Ok(())
    }

    /// A new channel (its first turn takes the agent's spare session, where there is one).
    pub async fn new_channel(&mut self, name: &str) -> anyhow::Result<String> {
        let frame = ClientFrame::ChannelCreate(ChannelCreate {
            name: name.to_owned(),
            ..ChannelCreate::default()
        });
        let created = self.client.request(Header::default(), frame).await?;
        let chat = created.json()["payload"]["chat_id"]
            .as_str()
            .context("channel.create gave no chat_id")?
            .to_owned();
        Ok(chat)
    }

    /// One turn: `message.send` up to the answer's `message.stop` (then its `agent.idle`).
    pub async fn turn_in(&mut self, chat: &str, text: &str, chunks: usize) -> anyhow::Result<Turn> {
        let header = Header {
            id: Some(RequestId::from(self.next_id)),
            ..Header::lane(chat, None)
        };
        self.next_id += 1;
        let frame = ClientFrame::MessageSend(MessageSend {
            text: text.to_owned(),
            ..Default::default()
        });
        let sent = Instant::now();
        self.client.send(header, frame).await?;
        let mut bubbles: HashMap<String, StreamText> = HashMap::new();
        let mut answer: Option<String> = None;
        let mut screen = Screen::default();
        let mut first_text = None;
        let mut complete = None;
        loop {
            let event = self.client.next_event_timeout(FRAME_TIMEOUT).await?;
            let now = unix_nanos();
            let error = matches!(event.body, ServerFrame::Error(_));
            if event.header.chat_id.as_deref() != Some(chat) && !error {
                continue;
            }
            match &event.body {
                ServerFrame::MessageUpdate(u) => {
                    let bubble = bubbles.entry(u.message_id.clone()).or_default();
                    bubble.apply(u).map_err(|e| anyhow!("update: {e:?}"))?;
                    let id = answer.get_or_insert_with(|| u.message_id.clone());
                    if *id == u.message_id {
                        screen.set(bubble.as_str(), now);
                    }
                }
                ServerFrame::MessageStop(s) => {
                    complete = Some(sent.elapsed());
                    screen.finish(&s.final_text, now, chunks).with_context(|| {
                        format!("the gateway answered {:?}", short(&s.final_text))
                    })?;
                }
                ServerFrame::Error(e) => bail!("the gateway answered with an error: {e:?}"),
                _ => continue,
            }
            if first_text.is_none() && screen.has_text() {
                first_text = Some(sent.elapsed());
            }
            if event.frame_type() == "message.stop" {
                break;
            }
        }
        self.client
            .wait_for_timeout(
                |e| e.frame_type() == "agent.idle" && e.header.chat_id.as_deref() == Some(chat),
                FRAME_TIMEOUT,
            )
            .await
            .context("no agent.idle after the answer")?;
        self.client.take_seen();
        Ok(Turn {
            first_text: first_text.unwrap_or_else(|| sent.elapsed()),
            complete: complete.unwrap_or_else(|| sent.elapsed()),
            screen,
        })
    }
}

/// A word for the gateway's agent command line (no quoting needed for the paths used here).
fn quote(word: &str) -> anyhow::Result<String> {
    if word
        .chars()
        .any(|c| c.is_whitespace() || "'\"\\".contains(c))
    {
        bail!("path {word:?} needs quoting; use a plainer temp dir or venv path");
    }
    Ok(word.to_owned())
}

fn short(text: &str) -> String {
    text.chars().take(120).collect()
}
