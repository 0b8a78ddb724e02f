//! The gateway's slash commands as a lane runs them: functions over the lane's parts, one arm
//! per [`Command`], each answering with a system message or a picker in the lane; and a device's
//! answer to a picker, which may switch the model, the reasoning shown or the agent.

use super::super::error::AgentError;
use super::parts::LaneParts;
use super::pickers::{self, Opened};
use super::queue::CommandJob;
use super::rewind;
use super::session::find_model;
use super::titles;
use crate::command::{Command, Reasoning};
use crate::outbox::Origin;

/// Runs a gateway command in this lane; `queued` counts the jobs waiting in it.
pub(super) async fn run(parts: &mut LaneParts, queued: usize, c: CommandJob) {
    parts.out.read_receipt(c.origin_conn, &c.message_id);
    // The device that asked: a picker opens by itself there only.
    let device = parts.env.shared.hub.device_of(c.origin_conn);
    match c.command {
        Command::New => new_session(parts).await,
        Command::Stop => parts.out.system("Nothing is running in this chat.").await,
        Command::Status => {
            let mut text = status_text(parts, queued);
            text.push_str(&format!(
                "\nSpare session: {}",
                parts.session.spare_text().await
            ));
            if let Some(held) = parts.session.agent_sessions().await {
                text.push_str(&format!(
                    "\nAgent sessions: {held} open on this chat's agent"
                ));
            }
            parts.out.system(text).await;
        }
        Command::Help => {
            let commands = parts.host().agent_commands();
            let text = crate::command::help_text(&super::super::catalog::catalog(commands));
            parts.out.system(text).await;
        }
        Command::Reasoning(Reasoning::Show) => set_reasoning(parts, true).await,
        Command::Reasoning(Reasoning::Hide) => set_reasoning(parts, false).await,
        Command::Reasoning(Reasoning::Ask) => {
            let frame = parts.pickers.reasoning_picker(parts.show_reasoning, device);
            parts.out.durable(vec![frame], None, None).await
        }
        Command::Reasoning(Reasoning::Unknown(other)) => {
            parts
                .out
                .system(format!(
                    "Unknown option {other:?}: use /reasoning show or /reasoning hide."
                ))
                .await
        }
        Command::Cron(args) => {
            let text = crate::cron::command::run(
                &parts.env.cron,
                parts.out.lane(),
                device.as_deref(),
                &args,
            )
            .await;
            parts.out.system(text).await;
        }
        Command::Title(title) if title.is_empty() => {
            parts.out.system("Usage: /title <new name>").await
        }
        Command::Title(title) => titles::user_title(&parts.out, &title).await,
        Command::Model(wanted) => model(parts, wanted, device).await,
        Command::Agent(Some(name)) => switch_agent(parts, &name).await,
        Command::Agent(None) => {
            let current = parts.host().name.clone();
            let frame = parts
                .pickers
                .agent_picker(parts.env.hosts.names(), &current, device);
            parts.out.durable(vec![frame], None, None).await
        }
    }
}

/// Moves this lane's channel to another agent; this lane follows before its next job, the
/// channel's other lanes at once (or after their running turns).
async fn switch_agent(parts: &mut LaneParts, name: &str) {
    let chat = parts.out.lane().chat_id.clone();
    match super::super::switch::switch_channel(&parts.env, &chat, name, &Origin::none()).await {
        // The other lanes follow at once, this one before its next job.
        Ok(true) => parts.env.bump_epoch(),
        Ok(false) => {}
        Err(e) => {
            let e = crate::wire::WireError::from(e);
            parts
                .out
                .system(format!("The agent was not changed: {}", e.message))
                .await
        }
    }
}

async fn new_session(parts: &mut LaneParts) {
    rewind::drop_checkpoints(parts).await;
    parts.session.forget().await;
    match parts.ensure_session().await {
        Ok(_) => parts.out.system("Started a new session.").await,
        Err(e) => {
            parts
                .out
                .system(format!("Could not start a new session: {e}"))
                .await
        }
    }
}

/// `/model`: the picker, or a switch to the named model ([`find_model`]).
async fn model(parts: &mut LaneParts, wanted: Option<String>, device: Option<String>) {
    if let Err(e) = parts.ensure_session().await {
        parts
            .out
            .system(format!("The agent is not available: {e}"))
            .await;
        return;
    }
    let Some(wanted) = wanted else {
        let models = parts.session.current().and_then(|s| s.models.clone());
        match models {
            Some(models) => {
                let frame = parts.pickers.model_picker(&models, device);
                parts.out.durable(vec![frame], None, None).await
            }
            None => {
                parts
                    .out
                    .system("This agent does not offer a choice of models.")
                    .await
            }
        }
        return;
    };
    let models = parts.session.current().and_then(|s| s.models.as_ref());
    let found = models.and_then(|m| {
        find_model(
            m.available_models.iter().map(|x| x.model_id.as_str()),
            &wanted,
        )
    });
    match found {
        Some(id) => set_model(parts, &id).await,
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
            parts
                .out
                .system(format!("Unknown model {wanted:?}. Available: {list}"))
                .await;
        }
    }
}

fn status_text(parts: &LaneParts, queued: usize) -> String {
    let agent = match parts.host().info() {
        Some(info) => format!("{} ({info})", parts.host().label),
        None => parts.host().label.clone(),
    };
    let model = parts
        .session
        .current_model()
        .unwrap_or_else(|| "unknown until the first message".into());
    let session = parts.session.shown_id().unwrap_or("none yet");
    let agents: Vec<String> = parts
        .env
        .hosts
        .reports()
        .into_iter()
        .map(|a| {
            let default = if a.name == parts.env.hosts.default_name() {
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
        if parts.show_reasoning { "shown" } else { "hidden" },
        queued,
        crate::config::home_relative(&parts.host().cwd),
        agents.join(", "),
        crate::harden::in_force().describe(),
    )
}

/// Switches the session's model, and says how that went.
async fn set_model(parts: &mut LaneParts, model_id: &str) {
    match parts.session.set_model(model_id).await {
        Ok(said) => {
            let agent = parts.host().name.clone();
            parts.out.model_changed(said, &agent, model_id).await
        }
        Err(said) => parts.out.system(said).await,
    }
}

async fn set_reasoning(parts: &mut LaneParts, show: bool) {
    parts.show_reasoning = show;
    parts
        .out
        .system(if show {
            "Reasoning will be shown."
        } else {
            "Reasoning will be hidden."
        })
        .await;
}

/// Takes a device's answer to a picker; a form's next question comes back, to be shown by the
/// running turn.
pub(super) async fn answer_picker(
    parts: &mut LaneParts,
    picker_id: &str,
    value: &str,
    device: Option<String>,
) -> Result<Option<Box<Opened>>, AgentError> {
    let find =
        |models: &[String], value: &str| find_model(models.iter().map(String::as_str), value);
    match parts.pickers.answer(picker_id, value, device, find)? {
        pickers::Answer::Approved => {}
        pickers::Answer::Next(opened) => return Ok(Some(opened)),
        pickers::Answer::Model(model) => set_model(parts, &model).await,
        pickers::Answer::Reasoning(show) => set_reasoning(parts, show).await,
        pickers::Answer::Agent(name) => switch_agent(parts, &name).await,
    }
    Ok(None)
}
