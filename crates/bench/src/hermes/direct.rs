//! The reference for the other two: `hermes acp` spoken to directly over ACP by this program,
//! with no gateway and no device in between. A chunk counts as visible when its
//! `agent_message_chunk` notification has been read from Hermes' stdout, so its figures are what
//! Hermes' ACP adapter itself delivers, and the gateway's own share of a token's way to the
//! screen is the difference.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use iris_acp::{AgentClient, AgentEvent, AgentSpec, ContentBlock, SessionUpdate};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::procs::{cpu_ms, descendants, rss_mib, HermesHome};
use super::sides::{Turn, Usage};
use super::wire::Screen;
use crate::unix_nanos;

/// Longest wait for the last chunks of an answer after the prompt was answered.
const TAIL_TIMEOUT: Duration = Duration::from_secs(10);

/// `hermes acp` with one session, its message chunks stamped on arrival.
pub struct AcpDirect {
    client: AgentClient,
    session: String,
    /// The sessions' working directory.
    work: PathBuf,
    /// `(arrival in unix nanoseconds, text)` of every message chunk.
    chunks: mpsc::UnboundedReceiver<(u64, String)>,
    reader: JoinHandle<()>,
    /// The agent's process id.
    pid: Option<u32>,
}

impl AcpDirect {
    /// Starts `hermes acp` in the scrubbed environment the gateway gives it (`env -i`),
    /// initializes it and opens a session.
    pub async fn start(venv: &Path, root: &Path, model_port: u16) -> anyhow::Result<AcpDirect> {
        let home = HermesHome::new(root, model_port)?;
        let mut spec = AgentSpec::new("env").arg("-i").cwd(&home.work);
        for (k, v) in home.env(venv) {
            spec = spec.arg(format!("{k}={v}"));
        }
        let spec = spec
            .arg(venv.join("bin/hermes").display().to_string())
            .arg("acp");
        let (client, mut events) = AgentClient::spawn(&spec)?;
        let (tx, chunks) = mpsc::unbounded_channel();
        let reader = tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                let AgentEvent::Update(n) = event else {
                    continue;
                };
                if let SessionUpdate::AgentMessageChunk(c) = n.update {
                    let now = unix_nanos();
                    let text = c.content.as_text().unwrap_or_default().to_owned();
                    if tx.send((now, text)).is_err() {
                        return;
                    }
                }
            }
        });
        client
            .initialize()
            .await
            .context("hermes acp: initialize")?;
        let session = client
            .new_session(&home.work)
            .await
            .context("hermes acp: session/new")?
            .session_id;
        let pid = client.process().map(|p| p.pid());
        Ok(AcpDirect {
            client,
            session,
            work: home.work,
            chunks,
            reader,
            pid,
        })
    }

    /// The agent's CPU time and memory (its helper processes included).
    pub fn usage(&self) -> Usage {
        let Some(pid) = self.pid else {
            return Usage::default();
        };
        let mut pids = descendants(pid);
        pids.push(pid);
        Usage {
            agent_cpu_ms: cpu_ms(&pids),
            agent_rss_mib: rss_mib(&pids),
            ..Usage::default()
        }
    }

    /// Opens another session, which the next turns go to (as a new channel's do through the
    /// gateway, whose spare session is opened before it is needed).
    pub async fn new_session(&mut self) -> anyhow::Result<()> {
        self.session = self
            .client
            .new_session(&self.work)
            .await
            .context("hermes acp: session/new")?
            .session_id;
        Ok(())
    }

    /// One `session/prompt`, with every chunk of its answer.
    pub async fn turn(&mut self, text: &str, chunks: usize) -> anyhow::Result<Turn> {
        while self.chunks.try_recv().is_ok() {}
        let sent = Instant::now();
        let prompt = self
            .client
            .prompt(&self.session, vec![ContentBlock::text(text)]);
        tokio::pin!(prompt);
        let mut screen = Screen::default();
        let mut answer = String::new();
        let mut first_text = None;
        let mut answered = false;
        let mut last = 0;
        loop {
            let chunk = tokio::select! {
                res = &mut prompt, if !answered => {
                    res.context("hermes acp: session/prompt")?;
                    answered = true;
                    if whole(&answer, chunks) {
                        break;
                    }
                    continue;
                }
                chunk = self.chunks.recv() => chunk,
                _ = tokio::time::sleep(TAIL_TIMEOUT), if answered => None,
            };
            let Some((at, text)) = chunk else {
                if answered {
                    break;
                }
                bail!("hermes acp ended during a turn");
            };
            answer.push_str(&text);
            screen.append(&text, at);
            last = at;
            if first_text.is_none() && screen.has_text() {
                first_text = Some(sent.elapsed());
            }
            if answered && whole(&answer, chunks) {
                break;
            }
        }
        screen.finish(answer.trim_end(), last, chunks)?;
        Ok(Turn {
            first_text: first_text.unwrap_or_else(|| sent.elapsed()),
            complete: sent.elapsed(),
            screen,
        })
    }

    pub async fn stop(self) {
        drop(self.client);
        self.reader.abort();
    }
}

/// Every stamp is followed by its space: the answer holds all its chunks.
fn whole(answer: &str, chunks: usize) -> bool {
    answer.split_whitespace().count() >= chunks
}
