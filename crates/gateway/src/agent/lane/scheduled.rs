//! A scheduled job's run in its lane: a turn like any other for the lane's queue (it waits for a
//! running turn, and messages sent meanwhile wait for it), but in a fresh agent session of its
//! own, so that it starts without history and leaves the lane's conversation untouched.
//!
//! Nothing streams: the lane shows `agent.busy {reason:"cron"}` while the job runs, and the
//! answer arrives whole as a `cron` message with its notification (see [`crate::cron::Cron::finish`]).
//! Nobody watches a scheduled run, so the agent's permission requests are declined. Functions
//! over the lane's parts, its mailbox and its queue, which the run's [`TurnRun`] borrows.

use std::sync::Arc;
use std::time::Instant;

use iris_acp::{ContentBlock, SessionModelState};
use iris_protocol::{BusyReason, Role};

use super::super::host::{event_channel, EventRx, Instance};
use super::super::turn::{Ending, Out, TurnConfig, TurnMapper};
use super::inbox::Inbox;
use super::parts::LaneParts;
use super::queue::LaneQueue;
use super::run::{short, Driven, Ended, TurnRun};
use crate::cron::{CronRun, Outcome};
use crate::ids::new_id;

/// Runs a due job as this lane's turn.
pub(super) async fn run(
    parts: &mut LaneParts,
    inbox: &mut Inbox,
    queue: &mut LaneQueue,
    run: CronRun,
) {
    // The job may have been removed or paused while it waited behind another turn.
    if !parts.env.cron.still_wanted(&run).await {
        return;
    }
    parts.out.busy(BusyReason::Cron).await;
    match cron_turn((&mut *parts, inbox, queue), &run.prompt).await {
        Some(outcome) => {
            if let Outcome::Failed(why) = &outcome {
                tracing::warn!(lane = ?parts.lane(), agent = %parts.host().name, job_id = run.job_id, cause = %why, "a scheduled run failed");
            }
            parts.env.cron.finish(parts.out.lane(), run, outcome).await
        }
        // The lane closes (gateway shutdown or channel deletion): the run is not recorded, so
        // that a restart catches it up.
        None => tracing::info!(job_id = run.job_id, "scheduled run interrupted"),
    }
    parts.out.idle().await;
}

/// Opens the job's own session, runs the prompt in it and forgets the session.
async fn cron_turn(
    (parts, inbox, queue): (&mut LaneParts, &mut Inbox, &mut LaneQueue),
    prompt: &str,
) -> Option<Outcome> {
    let instance = match parts.host().instance().await {
        Ok(i) => i,
        Err(e) => {
            return Some(Outcome::Failed(format!(
                "the agent is not available: {}",
                short(&e.to_string())
            )))
        }
    };
    let session = match instance.client.new_session(&parts.host().cwd).await {
        Ok(s) => s,
        Err(e) => {
            return Some(Outcome::Failed(format!(
                "the agent could not open a session: {}",
                short(&e.to_string())
            )))
        }
    };
    let (tx, rx) = event_channel();
    parts
        .host()
        .add_route(&session.session_id, instance.generation, tx);
    let model = cron_model(parts, &instance, &session.session_id, session.models).await;
    let run = (&mut *parts, inbox, queue);
    let outcome = cron_prompt(run, &instance, &session.session_id, model, prompt, rx).await;
    parts.host().remove_route(&session.session_id);
    // The run's session is never used again.
    instance.close_session(&session.session_id).await;
    outcome
}

/// The model of the run: the one chosen in this lane, when the agent offers it.
async fn cron_model(
    parts: &LaneParts,
    instance: &Instance,
    session_id: &str,
    models: Option<SessionModelState>,
) -> Option<String> {
    let offered = models?;
    let Some(wanted) = parts
        .session
        .current_model()
        .filter(|m| *m != offered.current_model_id)
    else {
        return Some(offered.current_model_id);
    };
    if !offered
        .available_models
        .iter()
        .any(|m| m.model_id == wanted)
    {
        return Some(offered.current_model_id);
    }
    match instance
        .client
        .switch_model(session_id, Some(&offered), &wanted)
        .await
    {
        Ok(()) => Some(wanted),
        Err(e) => {
            tracing::warn!(error = %e, "could not select the lane's model for a scheduled run");
            Some(offered.current_model_id)
        }
    }
}

async fn cron_prompt(
    (parts, inbox, queue): (&mut LaneParts, &mut Inbox, &mut LaneQueue),
    instance: &Arc<Instance>,
    session_id: &str,
    model: Option<String>,
    prompt: &str,
    rx: EventRx,
) -> Option<Outcome> {
    let mapper = TurnMapper::new(TurnConfig {
        message_id: new_id("m_"),
        role: Role::Cron,
        model,
        agent: Some(parts.host().name.clone()),
        cwd: crate::config::home_relative(&parts.host().cwd),
        workdir: parts.host().cwd.clone(),
        show_reasoning: parts.show_reasoning,
        update_interval: parts.env.settings.update_interval,
        rewind: false,
    });
    let blocks = vec![ContentBlock::text(prompt.to_owned())];
    let (instance, session_id) = (instance.clone(), session_id.to_owned());
    let run = TurnRun::scheduled(parts, inbox, queue, instance, session_id, rx, mapper);
    let Driven {
        ended,
        mapper,
        timed_out,
        runaway,
        ..
    } = run.drive(blocks).await;
    if inbox.closing {
        return None;
    }
    let (cancelled, tokens) = match ended {
        Ended::Answered { cancelled, tokens } => (cancelled, tokens),
        Ended::Stopped => (true, None),
        Ended::ShutDown => return None,
        Ended::Crashed(detail) => {
            return Some(Outcome::Failed(format!(
                "the agent stopped unexpectedly ({detail})"
            )))
        }
        Ended::Failed(detail) => {
            return Some(Outcome::Failed(format!(
                "the agent reported an error: {detail}"
            )))
        }
    };
    if timed_out {
        let secs = parts.host().timeouts.turn_idle.as_secs();
        return Some(Outcome::Failed(format!(
            "the agent sent nothing for {secs} s, so the run was cancelled"
        )));
    }
    if runaway {
        return Some(Outcome::Failed(format!(
            "the agent {}, so the run was stopped",
            super::turns::beyond_bounds()
        )));
    }
    if cancelled {
        return Some(Outcome::Cancelled);
    }
    let ending = Ending {
        tokens,
        ..Ending::default()
    };
    let answer = mapper
        .finish(&ending, Instant::now())
        .into_iter()
        .find_map(|o| match o {
            Out::Final(_, message) if !message.text.trim().is_empty() => Some(message),
            _ => None,
        });
    Some(answer.map_or(Outcome::Empty, |m| Outcome::Answer(Box::new(m))))
}
