//! Test harness: a real gateway on 127.0.0.1:0 in this process (or as a child process), and typed
//! clients connected to it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use iris_client::{Client, ConnectOptions, Event};
use iris_gateway::agent::Agents;
use iris_gateway::cron::Cron;
use iris_gateway::media::Media;
use iris_gateway::state::Shared;
use iris_gateway::{Config, Gateway};
use iris_protocol::{ClientFrame, Header, HelloAck, MessageSend, Role, ServerFrame};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub mod bad;
pub mod binary;
#[allow(unused_imports)]
pub use binary::{cli_command, run_cli};
pub mod chaos_device;
pub mod fake_push;
pub mod media;
pub mod prompt_log;
pub mod schedule;
pub mod tcp;
pub mod turns;

pub const TOKEN: &str = "test-token-0123456789";

/// A gateway running in this process.
pub struct TestGateway {
    pub url: String,
    pub dir: PathBuf,
    pub shared: Arc<Shared>,
    pub agents: Agents,
    pub cron: Cron,
    pub media: Arc<Media>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
    _tmp: Option<tempfile::TempDir>,
}

impl TestGateway {
    /// The default chat exported as Markdown (no media), as the `export` command writes it.
    pub fn markdown_export(&self) -> String {
        use iris_gateway::admin::archive::{export, ExportFormat, ExportRequest};
        let out = tempfile::tempdir().expect("tempdir");
        let request = ExportRequest {
            chat: Some("default".into()),
            format: ExportFormat::Markdown,
            out: out.path().to_path_buf(),
            media: false,
        };
        let done = export(&self.dir, &request, 0).expect("export");
        std::fs::read_to_string(&done.files[0]).expect("read the export")
    }

    /// A gateway on a fresh data dir.
    pub async fn start() -> TestGateway {
        Self::start_with(|_| {}).await
    }

    /// A gateway on a fresh data dir with the built-in demo agent answering.
    pub async fn start_demo() -> TestGateway {
        Self::start_with(|c| c.agent_command = Some(demo_agent())).await
    }

    /// A gateway on a fresh data dir with a tweaked configuration. Without a tweak of
    /// `agent_command` no agent answers, so that tests of delivery see only their own frames.
    pub async fn start_with(tweak: impl FnOnce(&mut Config)) -> TestGateway {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut gw = Self::start_in(tmp.path(), tweak).await;
        gw._tmp = Some(tmp);
        gw
    }

    /// A gateway on the given data dir (which outlives it, for restart tests).
    pub async fn start_in(dir: &Path, tweak: impl FnOnce(&mut Config)) -> TestGateway {
        let mut config = Config::for_tests(dir, TOKEN);
        config.agent_command = Some("none".into());
        tweak(&mut config);
        let gateway = Gateway::bind(config).await.expect("gateway binds");
        let url = format!("ws://{}/ws", gateway.addr);
        let (shared, agents) = (gateway.shared(), gateway.agents());
        let (cron, media) = (gateway.cron(), gateway.media());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(gateway.serve(async move {
            let _ = stopped.await;
        }));
        TestGateway {
            url,
            dir: dir.to_path_buf(),
            shared,
            agents,
            cron,
            media,
            stop: Some(stop),
            task: Some(task),
            _tmp: None,
        }
    }

    pub fn options(&self, device: &str) -> ConnectOptions {
        ConnectOptions::new(self.url.clone(), TOKEN, device)
    }

    /// Connects a device and consumes its `status online`.
    pub async fn connect(&self, device: &str) -> (Client, HelloAck) {
        let (mut client, ack) = Client::connect(self.options(device))
            .await
            .expect("connect");
        let status = client.next_event().await.expect("status");
        assert_eq!(status.frame_type(), "status");
        (client, ack)
    }

    /// Graceful shutdown; waits for it to finish.
    pub async fn stop(mut self) {
        self.stop_inner().await;
    }

    async fn stop_inner(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.expect("serve task").expect("serve result");
        }
    }
}

impl Drop for TestGateway {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Sends a message and returns the echo (the response with the request id).
pub async fn send_text(client: &mut Client, chat: &str, text: &str) -> Event {
    let frame = ClientFrame::MessageSend(MessageSend {
        text: text.into(),
        ..Default::default()
    });
    client
        .request(Header::lane(chat, None), frame)
        .await
        .expect("message.send answered")
}

/// The message id of a `message` event.
pub fn message_id(event: &Event) -> String {
    match &event.body {
        ServerFrame::Message(m) => m.message_id.clone(),
        other => panic!("expected a message, got {other:?}"),
    }
}

/// The text of a `message` event.
pub fn message_text(event: &Event) -> String {
    match &event.body {
        ServerFrame::Message(m) => m.text.clone(),
        other => panic!("expected a message, got {other:?}"),
    }
}

/// The command line of the built-in demo agent (the gateway binary's hidden subcommand).
pub fn demo_agent() -> String {
    format!("'{}' demo-agent", binary::BIN)
}

/// The demo agent as the only agent, named `demo`, without `sessionCapabilities.fork`: lanes
/// keep no checkpoints (`DEMO_FORK=0`), for tests that count the sessions it holds.
pub fn demo_without_fork(c: &mut Config) {
    c.agent_command = None;
    c.agents = vec![iris_gateway::config::NamedAgent {
        name: "demo".into(),
        command: demo_agent(),
        cwd: None,
        env: [("DEMO_FORK".to_owned(), "0".into())].into_iter().collect(),
        timeouts: Default::default(),
        spare_session: None,
    }];
    c.default_agent = Some("demo".into());
}

/// How long a turn's frames may take to arrive.
pub const FRAME_WAIT: Duration = Duration::from_secs(30);

/// The default channel's flat lane.
pub fn default_lane() -> Header {
    Header::lane("default", None)
}

/// Sends a message to a lane; returns the echo.
pub async fn send(client: &mut Client, lane: Header, text: &str, auto_thread: bool) -> Event {
    let frame = ClientFrame::MessageSend(MessageSend {
        text: text.into(),
        auto_thread,
        ..Default::default()
    });
    client
        .request(lane, frame)
        .await
        .expect("message.send answered")
}

/// Every frame up to and including the first one matching `pred`.
pub async fn until(client: &mut Client, mut pred: impl FnMut(&Event) -> bool) -> Vec<Event> {
    let mut out = Vec::new();
    loop {
        let e = match client.next_event_timeout(FRAME_WAIT).await {
            Ok(e) => e,
            Err(e) => panic!("waiting for a frame: {e}; so far: {:?}", types(&out)),
        };
        let done = pred(&e);
        out.push(e);
        if done {
            return out;
        }
    }
}

/// Every frame up to and including the next `agent.idle`.
pub async fn until_idle(client: &mut Client) -> Vec<Event> {
    until(client, |e| e.frame_type() == "agent.idle").await
}

/// Sends a message and returns every frame of its turn.
pub async fn turn(client: &mut Client, lane: Header, text: &str) -> Vec<Event> {
    send(client, lane, text, false).await;
    until_idle(client).await
}

/// The frame types, in order.
pub fn types(events: &[Event]) -> Vec<&str> {
    events.iter().map(|e| e.frame_type()).collect()
}

/// The turn's answer: `message.stop`'s final text, or an assistant `message`'s text.
pub fn answer(events: &[Event]) -> Option<String> {
    events.iter().find_map(|e| match &e.body {
        ServerFrame::MessageStop(s) => Some(s.final_text.clone()),
        ServerFrame::Message(m) if m.role == Role::Assistant => Some(m.text.clone()),
        _ => None,
    })
}

/// The turn's answer; panics when there is none.
pub fn final_text(events: &[Event]) -> String {
    answer(events).unwrap_or_else(|| panic!("no final message in {:?}", types(events)))
}

/// The texts of system messages, in order.
pub fn system_texts(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            ServerFrame::Message(m) if m.role == Role::System => Some(m.text.clone()),
            _ => None,
        })
        .collect()
}

/// The demo agent's answer to `sessions` in this chat ("Open sessions: N, resumed: …").
pub async fn demo_sessions(client: &mut Client, chat: &str) -> String {
    send(client, Header::lane(chat, None), "sessions", false).await;
    let events = until(client, |e| {
        e.frame_type() == "agent.idle" && e.header.chat_id.as_deref() == Some(chat)
    })
    .await;
    final_text(&events)
}

/// Runs a gateway command (`/status`, `/new`, …) in this chat and returns its system message.
pub async fn lane_command(client: &mut Client, chat: &str, text: &str) -> String {
    send(client, Header::lane(chat, None), text, false).await;
    let events = until(client, |e| {
        e.header.chat_id.as_deref() == Some(chat)
            && matches!(&e.body, ServerFrame::Message(m) if m.role == Role::System)
    })
    .await;
    system_texts(&events).pop().unwrap_or_default()
}

/// The newest page of a lane's history, as a device reads it.
pub async fn lane_history(client: &mut Client, lane: Header) -> Vec<iris_protocol::Message> {
    let reply = client
        .request(lane, ClientFrame::History(Default::default()))
        .await
        .expect("history answered");
    match reply.body {
        ServerFrame::History(h) => h.messages,
        other => panic!("expected history, got {other:?}"),
    }
}

/// Creates a channel (or, with a parent, a thread) and returns its id.
pub async fn create_channel(client: &mut Client, name: &str, parent: Option<&str>) -> String {
    let frame = ClientFrame::ChannelCreate(iris_protocol::ChannelCreate {
        name: name.into(),
        kind: None,
        parent_chat_id: parent.map(str::to_owned),
        agent: None,
    });
    let created = client
        .request(Header::default(), frame)
        .await
        .expect("channel.create answered");
    created.json()["payload"]["chat_id"]
        .as_str()
        .expect("a chat_id")
        .to_owned()
}

/// Answers a picker.
pub async fn select(
    client: &mut Client,
    picker_id: &str,
    value: &str,
) -> Result<Event, iris_client::ClientError> {
    let frame = ClientFrame::PickerSelect(iris_protocol::PickerSelect {
        picker_id: picker_id.into(),
        value: value.into(),
    });
    client.request(Header::default(), frame).await
}

pub const QUIET: Duration = Duration::from_millis(200);

/// A plain HTTP GET to the gateway: the status and the body.
pub async fn gateway_get(gw: &TestGateway, path: &str) -> (u16, String) {
    tcp::http_get(tcp::server_addr(&gw.url), path).await
}

/// A file's permission bits.
pub fn file_mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

/// The messages marked `replaced` (by a regenerate or an edit) among `events`.
pub fn replaced(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            ServerFrame::MessageState(s) if s.state == iris_protocol::MessageState::Replaced => {
                Some(s.message_id.clone())
            }
            _ => None,
        })
        .collect()
}
