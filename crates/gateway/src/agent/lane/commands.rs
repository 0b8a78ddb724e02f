//! The gateway's slash commands as a lane runs them: one arm per [`Command`], each answering
//! with a system message or a picker in the lane.

use iris_protocol::{Choice, DurableFrame, ModelEntry, ModelProvider, PickerChoice, PickerModel};

use super::{short, CommandJob, LaneActor, Pending};
use crate::command::{Command, Reasoning};

impl LaneActor {
    /// Runs a gateway command in this lane.
    pub(super) async fn command(&mut self, c: CommandJob) {
        self.read_receipt(c.origin_conn, &c.message_id);
        match c.command {
            Command::New => self.new_session().await,
            Command::Stop => self.system("Nothing is running in this chat.").await,
            Command::Status => {
                let mut text = self.status_text();
                if let Some(held) = self.agent_sessions().await {
                    text.push_str(&format!(
                        "\nAgent sessions: {held} open on this chat's agent"
                    ));
                }
                self.system(text).await;
            }
            Command::Help => {
                let text = crate::command::help_text(&super::super::catalog::catalog(self.host()));
                self.system(text).await;
            }
            Command::Reasoning(Reasoning::Show) => self.set_reasoning(true).await,
            Command::Reasoning(Reasoning::Hide) => self.set_reasoning(false).await,
            Command::Reasoning(Reasoning::Ask) => self.reasoning_picker().await,
            Command::Reasoning(Reasoning::Unknown(other)) => {
                self.system(format!(
                    "Unknown option {other:?}: use /reasoning show or /reasoning hide."
                ))
                .await
            }
            Command::Cron(args) => {
                let device = self.bridge.shared.hub.device_of(c.origin_conn);
                let text = crate::cron::command::run(
                    &self.bridge.cron,
                    &self.lane,
                    device.as_deref(),
                    &args,
                )
                .await;
                self.system(text).await;
            }
            Command::Title(title) if title.is_empty() => {
                self.system("Usage: /title <new name>").await
            }
            Command::Title(title) => self.user_title(&title).await,
            Command::Model(wanted) => self.model(wanted).await,
            Command::Agent(Some(name)) => self.switch_agent(&name).await,
            Command::Agent(None) => self.agent_picker().await,
        }
    }

    /// `/agent` without a name: the agents this channel can talk to, its own marked.
    async fn agent_picker(&mut self) {
        let names = crate::agent::Agents::of(self.bridge.clone()).names();
        let current = self.host().name.clone();
        let choices = names
            .iter()
            .map(|n| Choice {
                value: n.clone(),
                label: n.clone(),
                is_current: *n == current,
            })
            .collect();
        let id = self.register_picker(Pending::Agent { names });
        let frame = DurableFrame::PickerChoice(PickerChoice {
            picker_id: id,
            title: "Agent".into(),
            choices,
        });
        self.durable(vec![frame], None, None).await;
    }

    /// Moves this lane's channel to another agent; this lane follows before its next job, the
    /// channel's other lanes at once (or after their running turns).
    pub(super) async fn switch_agent(&mut self, name: &str) {
        let agents = crate::agent::Agents::of(self.bridge.clone());
        let origin = crate::outbox::Origin::none();
        let chat = self.lane.chat_id.clone();
        let result = agents
            .switch_channel_from(&chat, name, &origin, Some(&self.lane))
            .await;
        if let Err(e) = result {
            self.system(format!("The agent was not changed: {}", e.message))
                .await;
        }
    }

    pub(super) async fn new_session(&mut self) {
        if let Some(old) = self.session.take() {
            self.host().remove_route(&old.id);
            self.close_session(&old).await;
        }
        self.set_stored_session(None).await;
        match self.ensure_session().await {
            Ok(_) => self.system("Started a new session.").await,
            Err(e) => {
                self.system(format!("Could not start a new session: {e}"))
                    .await
            }
        }
    }

    pub(super) async fn reasoning_picker(&mut self) {
        let id = self.register_picker(Pending::Reasoning);
        let choices = vec![
            Choice {
                value: "show".into(),
                label: "Show reasoning".into(),
                is_current: self.show_reasoning,
            },
            Choice {
                value: "hide".into(),
                label: "Hide reasoning".into(),
                is_current: !self.show_reasoning,
            },
        ];
        let frame = DurableFrame::PickerChoice(PickerChoice {
            picker_id: id,
            title: "Reasoning".into(),
            choices,
        });
        self.durable(vec![frame], None, None).await;
    }

    /// `/model`: the picker, or a switch to the named model ([`find_model`]).
    pub(super) async fn model(&mut self, wanted: Option<String>) {
        if let Err(e) = self.ensure_session().await {
            self.system(format!("The agent is not available: {e}"))
                .await;
            return;
        }
        let Some(wanted) = wanted else {
            self.model_picker().await;
            return;
        };
        let models = self.session.as_ref().and_then(|s| s.models.as_ref());
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
                self.system(format!("Unknown model {wanted:?}. Available: {list}"))
                    .await;
            }
        }
    }

    /// How many sessions the lane's agent holds (`session/list`), where it offers that and runs.
    async fn agent_sessions(&self) -> Option<usize> {
        let instance = self.host().running().await?;
        if !instance.caps.session_capability("list") {
            return None;
        }
        let listed = tokio::time::timeout(
            std::time::Duration::from_secs(3),
            instance.client.list_sessions(),
        )
        .await;
        match listed {
            Ok(Ok(list)) => Some(list.sessions.len()),
            Ok(Err(e)) => {
                tracing::info!(error = %e, "session/list failed");
                None
            }
            Err(_) => None,
        }
    }

    pub(super) fn status_text(&self) -> String {
        let agent = match self.host().info() {
            Some(info) => format!("{} ({info})", self.host().label),
            None => self.host().label.clone(),
        };
        let model = self
            .current_model()
            .unwrap_or_else(|| "unknown until the first message".into());
        let session = self
            .session
            .as_ref()
            .map(|s| s.id.as_str())
            .or(self.stored_session.as_deref())
            .unwrap_or("none yet");
        let agents: Vec<String> = self
            .bridge
            .reports()
            .into_iter()
            .map(|a| {
                let default = if a.name == self.bridge.default_host().name {
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

    pub(super) async fn model_picker(&mut self) {
        let Some(models) = self.session.as_ref().and_then(|s| s.models.clone()) else {
            self.system("This agent does not offer a choice of models.")
                .await;
            return;
        };
        let mut providers: Vec<ModelProvider> = Vec::new();
        for m in &models.available_models {
            let provider = provider_of(&m.model_id).0.to_owned();
            let entry = ModelEntry {
                id: m.model_id.clone(),
                label: m.name.clone(),
            };
            match providers.iter_mut().find(|p| p.id == provider) {
                Some(p) => p.models.push(entry),
                None => providers.push(ModelProvider {
                    label: provider.clone(),
                    id: provider,
                    models: vec![entry],
                }),
            }
        }
        let current = models.current_model_id.clone();
        let id = self.register_picker(Pending::Model {
            models: models
                .available_models
                .iter()
                .map(|m| m.model_id.clone())
                .collect(),
        });
        let frame = DurableFrame::PickerModel(PickerModel {
            picker_id: id,
            current_provider: current.split_once(':').map(|(p, _)| p.to_owned()),
            current_model: Some(current),
            providers,
        });
        self.durable(vec![frame], None, None).await;
    }

    pub(super) async fn set_model(&mut self, model_id: &str) {
        let host = self.host.clone();
        let Some(session) = self.session.as_mut() else {
            self.system("The agent is not running; send a message first.")
                .await;
            return;
        };
        let instance = match host.instance().await {
            Ok(i) if i.generation == session.generation => i,
            _ => {
                self.system("The agent restarted; try again.").await;
                return;
            }
        };
        match instance.client.set_model(&session.id, model_id).await {
            Ok(()) => {
                if let Some(m) = session.models.as_mut() {
                    m.current_model_id = model_id.to_owned();
                }
                self.system(format!("Model switched to {model_id}.")).await;
            }
            Err(e) => {
                self.system(format!(
                    "Could not switch the model: {}",
                    short(&e.to_string())
                ))
                .await
            }
        }
    }

    pub(super) async fn set_reasoning(&mut self, show: bool) {
        self.show_reasoning = show;
        self.system(if show {
            "Reasoning will be shown."
        } else {
            "Reasoning will be hidden."
        })
        .await;
    }
}

/// The picker group (provider) of an agent's model id and the id within it:
/// `openrouter:openai/gpt-5.4` → (`openrouter`, `openai/gpt-5.4`); an id without a provider is in
/// the group `default`.
fn provider_of(model_id: &str) -> (&str, &str) {
    model_id.split_once(':').unwrap_or(("default", model_id))
}

/// The model of `ids` (the agent's model ids) that `wanted` names, in the first of these forms
/// that matches: the agent's id itself (`demo:verbose`); `provider/model` as the seed's catalog
/// and model picker have it, the provider being the picker's group (`demo/verbose`, and
/// `demo/demo:verbose` for the id the picker lists); the model without its provider (`verbose`),
/// or without its vendor either (`gpt-5.4`).
pub(super) fn find_model<'a>(
    ids: impl Iterator<Item = &'a str> + Clone,
    wanted: &str,
) -> Option<String> {
    let wanted = wanted.trim();
    let by_group = |provider: &str, model: &str| {
        ids.clone().find(|id| {
            let (p, m) = provider_of(id);
            p == provider && (m == model || *id == model)
        })
    };
    ids.clone()
        .find(|id| *id == wanted)
        .or_else(|| wanted.split_once('/').and_then(|(p, m)| by_group(p, m)))
        .or_else(|| ids.clone().find(|id| provider_of(id).1 == wanted))
        .or_else(|| {
            ids.clone()
                .find(|id| crate::agent::turn::bare_model(id) == wanted)
        })
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::find_model;

    #[test]
    fn a_model_is_found_by_its_id_provider_and_model_or_bare_name() {
        let ids = [
            "demo:echo",
            "demo:verbose",
            "openrouter:openai/gpt-5.4",
            "plain",
        ];
        let find = |w: &str| find_model(ids.iter().copied(), w);
        for (wanted, id) in [
            ("demo:verbose", "demo:verbose"),
            ("demo/verbose", "demo:verbose"),
            ("demo/demo:verbose", "demo:verbose"),
            ("openrouter/openai/gpt-5.4", "openrouter:openai/gpt-5.4"),
            ("openai/gpt-5.4", "openrouter:openai/gpt-5.4"),
            ("gpt-5.4", "openrouter:openai/gpt-5.4"),
            ("verbose", "demo:verbose"),
            ("default/plain", "plain"),
        ] {
            assert_eq!(find(wanted).as_deref(), Some(id), "{wanted}");
        }
        assert_eq!(
            find("other/verbose"),
            None,
            "the provider must be the model's group"
        );
        assert_eq!(find("nope"), None);
    }
}
