//! The gateway's slash commands as a lane runs them: one arm per [`Command`], each answering
//! with a system message or a picker in the lane.

use super::queue::CommandJob;
use super::session::find_model;
use super::LaneActor;
use crate::command::{Command, Reasoning};
use crate::outbox::Origin;

impl LaneActor {
    /// Runs a gateway command in this lane.
    pub(super) async fn command(&mut self, c: CommandJob) {
        self.out.read_receipt(c.origin_conn, &c.message_id);
        // The device that asked: a picker opens by itself there only.
        let device = self.env.shared.hub.device_of(c.origin_conn);
        match c.command {
            Command::New => self.new_session().await,
            Command::Stop => self.out.system("Nothing is running in this chat.").await,
            Command::Status => {
                let mut text = self.status_text();
                text.push_str(&format!(
                    "\nSpare session: {}",
                    self.session.spare_text().await
                ));
                if let Some(held) = self.session.agent_sessions().await {
                    text.push_str(&format!(
                        "\nAgent sessions: {held} open on this chat's agent"
                    ));
                }
                self.out.system(text).await;
            }
            Command::Help => {
                let commands = self.host().agent_commands();
                let text = crate::command::help_text(&super::super::catalog::catalog(commands));
                self.out.system(text).await;
            }
            Command::Reasoning(Reasoning::Show) => self.set_reasoning(true).await,
            Command::Reasoning(Reasoning::Hide) => self.set_reasoning(false).await,
            Command::Reasoning(Reasoning::Ask) => {
                let frame = self.pickers.reasoning_picker(self.show_reasoning, device);
                self.out.durable(vec![frame], None, None).await
            }
            Command::Reasoning(Reasoning::Unknown(other)) => {
                self.out
                    .system(format!(
                        "Unknown option {other:?}: use /reasoning show or /reasoning hide."
                    ))
                    .await
            }
            Command::Cron(args) => {
                let text = crate::cron::command::run(
                    &self.env.cron,
                    self.out.lane(),
                    device.as_deref(),
                    &args,
                )
                .await;
                self.out.system(text).await;
            }
            Command::Title(title) if title.is_empty() => {
                self.out.system("Usage: /title <new name>").await
            }
            Command::Title(title) => self.user_title(&title).await,
            Command::Model(wanted) => self.model(wanted, device).await,
            Command::Agent(Some(name)) => self.switch_agent(&name).await,
            Command::Agent(None) => {
                let current = self.host().name.clone();
                let frame = self
                    .pickers
                    .agent_picker(self.env.hosts.names(), &current, device);
                self.out.durable(vec![frame], None, None).await
            }
        }
    }

    /// Moves this lane's channel to another agent; this lane follows before its next job, the
    /// channel's other lanes at once (or after their running turns).
    pub(super) async fn switch_agent(&mut self, name: &str) {
        let chat = self.out.lane().chat_id.clone();
        match super::super::switch::switch_channel(&self.env, &chat, name, &Origin::none()).await {
            // The other lanes follow at once, this one before its next job.
            Ok(true) => self.env.bump_epoch(),
            Ok(false) => {}
            Err(e) => {
                let e = crate::wire::WireError::from(e);
                self.out
                    .system(format!("The agent was not changed: {}", e.message))
                    .await
            }
        }
    }

    pub(super) async fn new_session(&mut self) {
        self.drop_checkpoints().await;
        self.session.forget().await;
        match self.ensure_session().await {
            Ok(_) => self.out.system("Started a new session.").await,
            Err(e) => {
                self.out
                    .system(format!("Could not start a new session: {e}"))
                    .await
            }
        }
    }

    /// `/model`: the picker, or a switch to the named model ([`find_model`]).
    pub(super) async fn model(&mut self, wanted: Option<String>, device: Option<String>) {
        if let Err(e) = self.ensure_session().await {
            self.out
                .system(format!("The agent is not available: {e}"))
                .await;
            return;
        }
        let Some(wanted) = wanted else {
            let models = self.session.current().and_then(|s| s.models.clone());
            match models {
                Some(models) => {
                    let frame = self.pickers.model_picker(&models, device);
                    self.out.durable(vec![frame], None, None).await
                }
                None => {
                    self.out
                        .system("This agent does not offer a choice of models.")
                        .await
                }
            }
            return;
        };
        let models = self.session.current().and_then(|s| s.models.as_ref());
        let found = models.and_then(|m| {
            find_model(
                m.available_models.iter().map(|x| x.model_id.as_str()),
                &wanted,
            )
        });
        match found {
            Some(id) => self.set_model(&id).await,
            None => {
                let list = models
                    .map(|m| {
                        m.available_models
                            .iter()
                            .map(|x| x.model_id.clone())
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or_default();
                self.out
                    .system(format!("Unknown model {wanted:?}. Available: {list}"))
                    .await;
            }
        }
    }

    pub(super) fn status_text(&self) -> String {
        let agent = match self.host().info() {
            Some(info) => format!("{} ({info})", self.host().label),
            None => self.host().label.clone(),
        };
        let model = self
            .session
            .current_model()
            .unwrap_or_else(|| "unknown until the first message".into());
        let session = self.session.shown_id().unwrap_or("none yet");
        let agents: Vec<String> = self
            .env
            .hosts
            .reports()
            .into_iter()
            .map(|a| {
                let default = if a.name == self.env.hosts.default_name() {
                    "default, "
                } else {
                    ""
                };
                let state = if a.running { "running" } else { "not running" };
                format!("{} ({default}{state}, {} restarts)", a.name, a.restarts)
            })
            .collect();
        format!(
            "Agent: {agent}\nModel: {model}\nSession: {session}\nReasoning: {}\nQueued messages: {}\nWorking directory: {}\nAgents: {}\nSandbox: {}",
            if self.show_reasoning { "shown" } else { "hidden" },
            self.queue.len(),
            crate::config::home_relative(&self.host().cwd),
            agents.join(", "),
            crate::harden::in_force().describe(),
        )
    }

    /// Switches the session's model, and says how that went.
    pub(super) async fn set_model(&mut self, model_id: &str) {
        match self.session.set_model(model_id).await {
            Ok(said) => {
                let agent = self.host().name.clone();
                self.out.model_changed(said, &agent, model_id).await
            }
            Err(said) => self.out.system(said).await,
        }
    }

    pub(super) async fn set_reasoning(&mut self, show: bool) {
        self.show_reasoning = show;
        self.out
            .system(if show {
                "Reasoning will be shown."
            } else {
                "Reasoning will be hidden."
            })
            .await;
    }
}
