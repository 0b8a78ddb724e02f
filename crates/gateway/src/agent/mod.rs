//! The agent bridge: the agent process ([`host`]), one actor per lane ([`lane`]) that maps ACP
//! turns onto frames ([`turn`]), and the command catalog that mixes the gateway's commands with
//! the agent's.

pub mod host;
pub mod lane;
pub mod recovery;
pub mod tools;
pub mod turn;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use iris_acp::AgentSpec;
use iris_protocol::CommandInfo;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::handlers::{Lane, WireError};
use crate::state::Shared;
use host::AgentHost;
use lane::{LaneActor, LaneCmd};

/// How the gateway reaches its agent.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentChoice {
    /// What to run.
    pub spec: AgentSpec,
    /// Human name.
    pub label: String,
    /// Whether it is the built-in demo agent.
    pub is_demo: bool,
    /// No agent at all (`none`): messages are stored and synced but nobody answers.
    pub disabled: bool,
    /// Said once, in the log and as a system message on the first turn (e.g. how to connect
    /// Hermes when the demo agent was chosen for lack of one).
    pub notice: Option<String>,
}

/// The message shown when no agent is configured and Hermes is not installed.
pub const DEMO_NOTICE: &str = "No agent is configured and `hermes` is not on PATH, so the built-in demo agent answers. \
To use Hermes: `pip install 'hermes-agent[acp]'`, then restart the gateway with `--agent \"hermes acp\"` \
(or put `hermes` on PATH).";

/// Chooses the agent from the configured command line: `demo`, a command line, or (when none is
/// given) `hermes acp` if `hermes` is on PATH, else the demo agent with a notice.
pub fn choose_agent(command: Option<&str>, cwd: &Path) -> Result<AgentChoice, String> {
    let demo = |notice: Option<String>| -> Result<AgentChoice, String> {
        let exe = std::env::current_exe()
            .map_err(|e| format!("cannot find this program to run the demo agent: {e}"))?;
        Ok(AgentChoice {
            spec: AgentSpec::new(exe.to_string_lossy())
                .arg("demo-agent")
                .cwd(cwd),
            label: "demo agent".into(),
            is_demo: true,
            disabled: false,
            notice,
        })
    };
    match command.map(str::trim) {
        Some("demo") => demo(None),
        Some("none") => Ok(AgentChoice {
            spec: AgentSpec::new("none"),
            label: "no agent".into(),
            is_demo: false,
            disabled: true,
            notice: None,
        }),
        Some(line) if !line.is_empty() => {
            let words = split_command(line)?;
            let program = words[0].clone();
            let mut spec = AgentSpec::new(program.clone()).cwd(cwd);
            for w in &words[1..] {
                spec = spec.arg(w.clone());
            }
            let is_demo = words.get(1).map(String::as_str) == Some("demo-agent");
            let base = Path::new(&program)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or(program.clone());
            let label = if is_demo {
                "demo agent".into()
            } else if base.starts_with("hermes") {
                "Hermes".into()
            } else {
                base
            };
            Ok(AgentChoice {
                spec,
                label,
                is_demo,
                disabled: false,
                notice: None,
            })
        }
        _ => match find_on_path("hermes") {
            Some(hermes) => Ok(AgentChoice {
                spec: AgentSpec::new(hermes.to_string_lossy()).arg("acp").cwd(cwd),
                label: "Hermes".into(),
                is_demo: false,
                disabled: false,
                notice: None,
            }),
            None => demo(Some(DEMO_NOTICE.into())),
        },
    }
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| {
            p.metadata()
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// Splits a command line into words, honouring single and double quotes and backslashes.
pub fn split_command(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') | (None, '\\') => match chars.next() {
                Some(n) => {
                    cur.push(n);
                    in_word = true;
                }
                None => return Err("command line ends with a backslash".into()),
            },
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            (None, c) => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return Err("unbalanced quote in the agent command line".into());
    }
    if in_word {
        words.push(cur);
    }
    if words.is_empty() {
        return Err("the agent command line is empty".into());
    }
    Ok(words)
}

/// A lane actor's mailbox, task, and the flag that silences it when its lane is deleted.
type LaneHandle = (
    mpsc::UnboundedSender<LaneCmd>,
    JoinHandle<()>,
    Arc<AtomicBool>,
);

/// Settings of the agent bridge.
#[derive(Debug, Clone)]
pub struct BridgeConfig {
    /// The agent's working directory, home-relative, for `runtime.cwd`.
    pub cwd_display: String,
    /// Minimum spacing of `message.update` frames.
    pub update_interval: Duration,
    /// Pending approvals are cancelled after this long (before the agent's own timeout).
    pub picker_timeout: Duration,
    /// A turn without agent output for this long is cancelled.
    pub turn_idle_timeout: Duration,
    /// A cancelled turn that has not ended after this long restarts the agent.
    pub cancel_grace: Duration,
}

/// Every lane's actor and the agent they share.
pub struct Agents {
    /// The agent process host.
    pub host: Arc<AgentHost>,
    disabled: bool,
    lanes: Mutex<HashMap<Lane, LaneHandle>>,
    pickers: Mutex<HashMap<String, Lane>>,
    notice: Mutex<Option<String>>,
    /// `runtime.cwd`.
    pub cwd_display: String,
    /// Spacing of `message.update`.
    pub update_interval: Duration,
    /// Approval expiry.
    pub picker_timeout: Duration,
    /// Turn inactivity limit.
    pub turn_idle_timeout: Duration,
    /// Time a cancelled turn has to end.
    pub cancel_grace: Duration,
}

impl Agents {
    /// The bridge for this agent.
    pub fn new(choice: AgentChoice, cwd: PathBuf, cfg: BridgeConfig) -> Arc<Agents> {
        if let Some(n) = &choice.notice {
            tracing::warn!("{n}");
        }
        Arc::new(Agents {
            disabled: choice.disabled,
            host: AgentHost::new(choice.spec, choice.label, cwd, choice.is_demo),
            lanes: Mutex::default(),
            pickers: Mutex::default(),
            notice: Mutex::new(choice.notice),
            cwd_display: cfg.cwd_display,
            update_interval: cfg.update_interval,
            picker_timeout: cfg.picker_timeout,
            turn_idle_timeout: cfg.turn_idle_timeout,
            cancel_grace: cfg.cancel_grace,
        })
    }

    /// Sends a command to a lane's actor, starting the actor if needed.
    pub fn send(self: &Arc<Self>, shared: &Arc<Shared>, lane: &Lane, cmd: LaneCmd) {
        if self.disabled {
            // Without an agent, messages are stored and synced; there is nothing to run or stop.
            match cmd {
                LaneCmd::Stop(reply) => drop(reply.send(false)),
                LaneCmd::Steer(_, reply) => {
                    drop(reply.send(Err(WireError::not_found("no agent is configured"))))
                }
                LaneCmd::Picker { reply, .. } => {
                    drop(reply.send(Err(WireError::not_found("picker unknown or expired"))))
                }
                LaneCmd::Command(c) => {
                    let text = format!(
                        "{} needs an agent, and this gateway runs without one (--agent none).",
                        c.name
                    );
                    tokio::spawn(system_message(shared.clone(), lane.clone(), text));
                }
                LaneCmd::Prompt(_) | LaneCmd::Cron(_) | LaneCmd::Close => {}
            }
            return;
        }
        let mut lanes = self.lanes.lock().expect("lanes lock");
        if let Some((tx, task, _)) = lanes.get(lane) {
            if !task.is_finished() {
                if let Err(mpsc::error::SendError(cmd)) = tx.send(cmd) {
                    drop(lanes);
                    return self.respawn(shared, lane, cmd);
                }
                return;
            }
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let deleted = Arc::new(AtomicBool::new(false));
        let actor = LaneActor::new(
            shared.clone(),
            self.clone(),
            lane.clone(),
            rx,
            deleted.clone(),
        );
        let task = tokio::spawn(actor.run());
        let _ = tx.send(cmd);
        lanes.insert(lane.clone(), (tx, task, deleted));
    }

    fn respawn(self: &Arc<Self>, shared: &Arc<Shared>, lane: &Lane, cmd: LaneCmd) {
        self.lanes.lock().expect("lanes lock").remove(lane);
        self.send(shared, lane, cmd);
    }

    /// The lane a pending picker belongs to.
    pub fn picker_lane(&self, picker_id: &str) -> Option<Lane> {
        self.pickers
            .lock()
            .expect("pickers lock")
            .get(picker_id)
            .cloned()
    }

    pub(crate) fn remember_picker(&self, picker_id: &str, lane: &Lane) {
        self.pickers
            .lock()
            .expect("pickers lock")
            .insert(picker_id.to_owned(), lane.clone());
    }

    pub(crate) fn forget_pickers<'a>(&self, ids: impl Iterator<Item = &'a String>) {
        let mut map = self.pickers.lock().expect("pickers lock");
        for id in ids {
            map.remove(id);
        }
    }

    pub(crate) fn take_notice(&self) -> Option<String> {
        self.notice.lock().expect("notice lock").take()
    }

    /// The agent's name and version, once it has started.
    pub fn agent_info(&self) -> Option<String> {
        self.host.info()
    }

    /// Silences the lanes about to be deleted, so that nothing more is sent for them; returns
    /// their flags so that a failed delete can give them their voice back.
    pub fn silence_lanes(&self, pred: impl Fn(&Lane) -> bool) -> Vec<Arc<AtomicBool>> {
        let lanes = self.lanes.lock().expect("lanes lock");
        lanes
            .iter()
            .filter(|(l, _)| pred(l))
            .map(|(_, (_, _, flag))| {
                flag.store(true, Ordering::SeqCst);
                flag.clone()
            })
            .collect()
    }

    /// Ends the actors of deleted lanes and waits for them. A turn still running there is
    /// cancelled and leaves no frames: the lane no longer exists.
    pub async fn delete_lanes(&self, pred: impl Fn(&Lane) -> bool) {
        self.close_lanes(pred, true).await
    }

    async fn close_lanes(&self, pred: impl Fn(&Lane) -> bool, deleted: bool) {
        let closing: Vec<JoinHandle<()>> = {
            let mut lanes = self.lanes.lock().expect("lanes lock");
            let keys: Vec<Lane> = lanes.keys().filter(|l| pred(l)).cloned().collect();
            keys.into_iter()
                .filter_map(|k| lanes.remove(&k))
                .map(|(tx, task, flag)| {
                    flag.store(deleted, Ordering::SeqCst);
                    let _ = tx.send(LaneCmd::Close);
                    task
                })
                .collect()
        };
        for task in closing {
            let _ = task.await;
        }
    }

    /// Ends every lane (running turns are cancelled and closed with `message.stop`), then the
    /// agent process.
    pub async fn shutdown(&self) {
        self.close_lanes(|_| true, false).await;
        self.host.shutdown().await;
    }
}

/// Appends a system message to a lane, outside any lane actor.
async fn system_message(shared: Arc<Shared>, lane: Lane, text: String) {
    let message = iris_protocol::Message {
        message_id: crate::ids::new_id("m_"),
        role: iris_protocol::Role::System,
        text,
        ts: crate::ids::now_ms(),
        ..iris_protocol::Message::default()
    };
    let result = shared
        .store
        .write(move |tx| {
            tx.upsert_message(&crate::handlers::to_stored(
                &lane.chat_id,
                lane.thread_id.as_deref(),
                &message,
            ))?;
            let id = message.message_id.clone();
            let frame = iris_protocol::ServerFrame::Message(message);
            crate::state::append_frame(
                tx,
                &lane.header(),
                &frame,
                Some(&id),
                &crate::state::Origin::none(),
            )
        })
        .await;
    if let Err(e) = result {
        tracing::warn!(error = %e, "could not store a system message");
    }
}

/// The slash-command catalog: the gateway's commands, then the agent's (minus name clashes).
pub fn catalog(host: &AgentHost) -> Vec<CommandInfo> {
    let mut out = crate::commands::catalog_entries();
    for cmd in host.agent_commands() {
        let name = format!("/{}", cmd.name.trim_start_matches('/'));
        if out
            .iter()
            .any(|c| c.name == name || c.aliases.contains(&name))
        {
            continue;
        }
        out.push(CommandInfo {
            name,
            description: cmd.description.clone(),
            args_hint: cmd
                .input
                .as_ref()
                .map(|i| i.hint.clone())
                .unwrap_or_default(),
            category: "Agent".into(),
            aliases: Vec::new(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_split_like_a_shell() {
        assert_eq!(split_command("hermes acp").unwrap(), ["hermes", "acp"]);
        assert_eq!(
            split_command("'/opt/my agent/bin' --x \"a b\" c\\ d").unwrap(),
            ["/opt/my agent/bin", "--x", "a b", "c d"]
        );
        assert!(split_command("\"open").is_err());
        assert!(split_command("   ").is_err());
    }
}
