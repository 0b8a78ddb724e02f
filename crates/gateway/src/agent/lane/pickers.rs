//! A lane's picker book: the agent's permission requests, clarify questions and forms
//! (`elicitation/create`, shown as a question) (approvals, with a deadline), and the gateway's own model, reasoning and agent choices, each under its id in
//! the bridge's index while it is open.
//!
//! However a picker closes (answered on any device, expired, or cancelled with its turn), the book
//! notes it; the lane then tells every device with a durable `picker.closed`, and an agent's
//! picker becomes a step of the turn's answer with its outcome.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use iris_acp::{
    ElicitationResponder, Form, PermissionResponder, RequestPermissionRequest, SessionModelState,
};
use iris_protocol::{
    AgentBusy, BusyReason, Choice, DurableFrame, FileChange, ModelEntry, ModelProvider,
    Notification, PickerApproval, PickerChoice, PickerClarify, PickerClosed, PickerModel,
    PickerOutcome, MAX_STEP_TEXT,
};
use std::time::Duration;

use super::super::env::PickerIndex;
use super::super::error::AgentError;
use super::asker::{Asker, FormState, MAX_CHOICE_LABEL};
use super::session::provider_of;
use crate::ids::{new_id, now_ms};
use crate::outbox::Lane;
use crate::text::{agent_line, agent_lines, head, reveal_hidden, tail};

/// Approvals of one lane open at once; the agent's further requests are answered `cancelled`
/// without being shown.
const MAX_OPEN_APPROVALS: usize = 8;
/// Choices shown of one approval, and the longest label and option id kept.
const MAX_CHOICES: usize = 16;
const MAX_OPTION_ID_BYTES: usize = 256;

/// An open picker.
pub(crate) enum Pending {
    Approval {
        responder: Asker,
        /// The agent's options: the values a device may answer with, and their labels.
        options: Vec<Choice>,
        deadline: Instant,
    },
    Model {
        models: Vec<String>,
    },
    Reasoning,
    Agent {
        names: Vec<String>,
    },
}

/// What an accepted answer asks of the lane (an approval is answered by the book itself).
#[derive(Debug, PartialEq)]
pub(crate) enum Answer {
    /// The agent's question was answered.
    Approved,
    /// A form's question was answered and its next one opened: show it.
    Next(Box<Opened>),
    /// Switch the session's model to this one (the agent's id).
    Model(String),
    /// Show or hide reasoning.
    Reasoning(bool),
    /// Move the channel to this agent.
    Agent(String),
}

/// A permission request made into a picker: its id, kind and title (for the turn's steps), and
/// the frames that show it.
#[derive(Debug, PartialEq)]
pub(crate) struct Opened {
    pub id: String,
    pub kind: &'static str,
    pub title: String,
    /// The files an approval's call would change.
    pub changes: Vec<FileChange>,
    pub frames: Vec<DurableFrame>,
}

/// The open pickers of one lane and those closed since the lane last told the devices.
pub(crate) struct PickerBook {
    lane: Lane,
    index: Arc<PickerIndex>,
    open: HashMap<String, Pending>,
    /// Closed since the last [`PickerBook::take_closed`], with the chosen label.
    closed: Vec<(PickerClosed, Option<String>)>,
}

impl PickerBook {
    pub(crate) fn new(lane: Lane, index: Arc<PickerIndex>) -> PickerBook {
        PickerBook {
            lane,
            index,
            open: HashMap::new(),
            closed: Vec::new(),
        }
    }

    /// Whether the lane shows as many approvals as it may ([`MAX_OPEN_APPROVALS`]): the agent's
    /// next request is then answered `cancelled`.
    pub(crate) fn approvals_full(&self) -> bool {
        self.approvals() >= MAX_OPEN_APPROVALS
    }

    /// Whether an approval waits for the user (the agent is not hanging then).
    pub(crate) fn waiting_for_user(&self) -> bool {
        self.approvals() > 0
    }

    fn approvals(&self) -> usize {
        self.open
            .values()
            .filter(|p| matches!(p, Pending::Approval { .. }))
            .count()
    }

    /// When the next approval expires.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.open
            .values()
            .filter_map(|p| match p {
                Pending::Approval { deadline, .. } => Some(*deadline),
                _ => None,
            })
            .min()
    }

    /// Closes the approvals whose deadline passed (`cancelled` for the agent, `expired` for the
    /// devices); returns how many.
    pub(crate) fn expire(&mut self, now: Instant) -> usize {
        let expired: Vec<String> = self
            .open
            .iter()
            .filter(|(_, p)| matches!(p, Pending::Approval { deadline, .. } if *deadline <= now))
            .map(|(id, _)| id.clone())
            .collect();
        for id in &expired {
            if let Some(Pending::Approval { responder, .. }) = self.remove(id) {
                responder.cancel();
            }
            self.note_closed(id, PickerOutcome::Expired, None, None);
        }
        expired.len()
    }

    /// Cancels the approvals among `ids` still open (their turn ends or is stopped).
    pub(crate) fn cancel(&mut self, ids: &[String]) {
        for id in ids {
            match self.open.get(id) {
                Some(Pending::Approval { .. }) => {
                    if let Some(Pending::Approval { responder, .. }) = self.remove(id) {
                        responder.cancel();
                    }
                    self.note_closed(id, PickerOutcome::Cancelled, None, None);
                }
                _ => self.index.forget(std::iter::once(id)),
            }
        }
    }

    /// Notes that a picker closed; [`PickerBook::take_closed`] hands the notes over.
    fn note_closed(
        &mut self,
        picker_id: &str,
        outcome: PickerOutcome,
        answer: Option<&Choice>,
        by_device: Option<String>,
    ) {
        let closed = PickerClosed {
            picker_id: picker_id.to_owned(),
            outcome,
            value: answer.map(|c| c.value.clone()),
            by_device,
        };
        self.closed.push((closed, answer.map(|c| c.label.clone())));
    }

    /// The pickers closed since the last call, with the chosen labels.
    pub(crate) fn take_closed(&mut self) -> Vec<(PickerClosed, Option<String>)> {
        std::mem::take(&mut self.closed)
    }

    /// Opens a picker of the gateway's; returns its id.
    pub(crate) fn register(&mut self, pending: Pending) -> String {
        let id = new_id("p_");
        self.open.insert(id.clone(), pending);
        self.index.remember(&id, &self.lane);
        id
    }

    fn remove(&mut self, id: &str) -> Option<Pending> {
        let pending = self.open.remove(id);
        self.index.forget(std::iter::once(&id.to_owned()));
        pending
    }

    fn put_back(&mut self, id: &str, pending: Pending) {
        self.open.insert(id.to_owned(), pending);
        self.index.remember(id, &self.lane);
    }

    /// Takes an answer: a value that is not one of the picker's leaves it open.
    pub(crate) fn answer(
        &mut self,
        picker_id: &str,
        value: &str,
        device: Option<String>,
        find_model: impl Fn(&[String], &str) -> Option<String>,
    ) -> Result<Answer, AgentError> {
        let pending = self.remove(picker_id).ok_or(AgentError::PickerUnknown)?;
        let refuse = |book: &mut PickerBook, pending, why| {
            book.put_back(picker_id, pending);
            Err(AgentError::BadChoice(why))
        };
        let chosen = |label: String| Choice {
            value: value.to_owned(),
            label,
            is_current: true,
        };
        match pending {
            Pending::Approval {
                responder,
                options,
                deadline,
            } => {
                let (choice, next) = match responder.answer(&options, value) {
                    Ok(answered) => answered,
                    Err(responder) => {
                        let pending = Pending::Approval {
                            responder,
                            options,
                            deadline,
                        };
                        return refuse(self, pending, "value is not one of the picker's choices");
                    }
                };
                self.note_closed(picker_id, PickerOutcome::Answered, Some(&choice), device);
                match next {
                    Some(Asker::Form(responder, state)) => Ok(Answer::Next(Box::new(
                        self.open_question(responder, state, false),
                    ))),
                    Some(other) => {
                        other.cancel();
                        Ok(Answer::Approved)
                    }
                    None => Ok(Answer::Approved),
                }
            }
            Pending::Model { models } => match find_model(&models, value) {
                Some(model) => {
                    let choice = chosen(model.clone());
                    self.note_closed(picker_id, PickerOutcome::Answered, Some(&choice), device);
                    Ok(Answer::Model(model))
                }
                None => refuse(
                    self,
                    Pending::Model { models },
                    "value is not one of the offered models",
                ),
            },
            Pending::Agent { names } if names.iter().any(|n| n == value) => {
                Ok(Answer::Agent(value.to_owned()))
            }
            Pending::Agent { names } => refuse(
                self,
                Pending::Agent { names },
                "value is not one of the offered agents",
            ),
            Pending::Reasoning if value == "show" || value == "hide" => {
                let choice = chosen(value.to_owned());
                self.note_closed(picker_id, PickerOutcome::Answered, Some(&choice), device);
                Ok(Answer::Reasoning(value == "show"))
            }
            Pending::Reasoning => refuse(self, Pending::Reasoning, "value must be show or hide"),
        }
    }

    /// Opens the agent's permission request (or clarify question) as a picker with the frames
    /// that show it; `None` (the agent told `cancelled`) when it offers no usable choice.
    pub(crate) fn open_permission(
        &mut self,
        request: RequestPermissionRequest,
        responder: PermissionResponder,
        deadline: Instant,
        changes: Vec<FileChange>,
    ) -> Option<Opened> {
        // What a device shows is bounded like a step of the answer.
        let choices: Vec<Choice> = request
            .options
            .iter()
            .filter(|o| o.option_id.len() <= MAX_OPTION_ID_BYTES)
            .take(MAX_CHOICES)
            .filter_map(|o| {
                Some(Choice {
                    value: o.option_id.clone(),
                    label: choice_label(&o.name, &o.option_id)?,
                    is_current: false,
                })
            })
            .collect();
        if choices.is_empty() {
            responder.cancel();
            return None;
        }
        // One notification while approvals wait: the phone is told once, not for each.
        let notify = !self.waiting_for_user();
        let question = request
            .clarify_question()
            .map(|q| head(&agent_lines(q), MAX_STEP_TEXT));
        let id = self.register(Pending::Approval {
            responder: Asker::Permission(responder),
            options: choices.clone(),
            deadline,
        });
        let (frame, kind, title) = match question {
            Some(q) => (
                DurableFrame::PickerClarify(PickerClarify {
                    picker_id: id.clone(),
                    title: q.clone(),
                    choices,
                    // The agent takes only one of its options (a permission request's answer).
                    free_text: false,
                }),
                "clarify",
                q,
            ),
            None => {
                let title = request
                    .tool_call
                    .title
                    .as_deref()
                    .map(|t| head(&agent_line(t), MAX_STEP_TEXT))
                    .filter(|t| !t.is_empty())
                    .unwrap_or_else(|| "The agent asks for permission".into());
                let preview = request
                    .tool_call
                    .content
                    .as_deref()
                    .and_then(permission_preview)
                    .or_else(|| {
                        request
                            .tool_call
                            .raw_input
                            .as_ref()
                            .map(|v| tail(&v.to_string(), 2000))
                    })
                    .map(|p| reveal_hidden(&p, true));
                (
                    DurableFrame::PickerApproval(PickerApproval {
                        picker_id: id.clone(),
                        title: title.clone(),
                        preview,
                        choices,
                        changes: changes.clone(),
                    }),
                    "approval",
                    title,
                )
            }
        };
        let frames = announce(frame, kind, &title, notify);
        Some(Opened {
            id,
            kind,
            title,
            changes,
            frames,
        })
    }

    /// Opens the agent's form at its first question. Each question waits `timeout`; the form
    /// is answered `cancel` when one expires or the turn ends.
    pub(crate) fn open_form(
        &mut self,
        form: Form,
        responder: ElicitationResponder,
        timeout: Duration,
    ) -> Opened {
        let notify = !self.waiting_for_user();
        let state = Box::new(FormState::new(form, timeout));
        self.open_question(responder, state, notify)
    }

    /// Opens the form's current question as a picker: its choices, and a typed answer where it
    /// has a text field; one of several is titled with its number ("2/3").
    fn open_question(
        &mut self,
        responder: ElicitationResponder,
        state: Box<FormState>,
        notify: bool,
    ) -> Opened {
        let (question, count) = state.current();
        let cleaned = agent_lines(&question.question);
        let text = if cleaned.is_empty() {
            "The agent asks a question"
        } else {
            &cleaned
        };
        let title = match count {
            Some(count) => head(&format!("({count}) {text}"), MAX_STEP_TEXT),
            None => head(text, MAX_STEP_TEXT),
        };
        let choices: Vec<Choice> = question
            .choices
            .iter()
            .filter_map(|c| {
                Some(Choice {
                    value: c.value.clone(),
                    label: choice_label(&c.label, &c.value)?,
                    is_current: false,
                })
            })
            .collect();
        let free_text = question.free_text;
        let deadline = Instant::now() + state.timeout;
        let id = self.register(Pending::Approval {
            responder: Asker::Form(responder, state),
            options: choices.clone(),
            deadline,
        });
        let frame = DurableFrame::PickerClarify(PickerClarify {
            picker_id: id.clone(),
            title: title.clone(),
            choices,
            free_text,
        });
        Opened {
            frames: announce(frame, "clarify", &title, notify),
            id,
            kind: "clarify",
            title,
            changes: Vec::new(),
        }
    }

    /// `/agent` without a name: the agents this channel can talk to, `current` marked. Opened
    /// by itself on `for_device` only (the device that asked).
    pub(crate) fn agent_picker(
        &mut self,
        names: Vec<String>,
        current: &str,
        for_device: Option<String>,
    ) -> DurableFrame {
        let choices = names
            .iter()
            .map(|n| Choice {
                value: n.clone(),
                label: n.clone(),
                is_current: n == current,
            })
            .collect();
        let id = self.register(Pending::Agent { names });
        DurableFrame::PickerChoice(PickerChoice {
            picker_id: id,
            title: "Agent".into(),
            choices,
            for_device,
        })
    }

    /// `/reasoning` without an option: show or hide, the current one marked.
    pub(crate) fn reasoning_picker(
        &mut self,
        shown: bool,
        for_device: Option<String>,
    ) -> DurableFrame {
        let id = self.register(Pending::Reasoning);
        let choice = |value: &str, label: &str, is_current| Choice {
            value: value.into(),
            label: label.into(),
            is_current,
        };
        DurableFrame::PickerChoice(PickerChoice {
            picker_id: id,
            title: "Reasoning".into(),
            choices: vec![
                choice("show", "Show reasoning", shown),
                choice("hide", "Hide reasoning", !shown),
            ],
            for_device,
        })
    }

    /// `/model` without a name: the session's models grouped by provider.
    pub(crate) fn model_picker(
        &mut self,
        models: &SessionModelState,
        for_device: Option<String>,
    ) -> DurableFrame {
        let mut providers: Vec<ModelProvider> = Vec::new();
        for m in &models.available_models {
            let provider = provider_of(&m.model_id).0.to_owned();
            let entry = ModelEntry {
                id: m.model_id.clone(),
                label: agent_line(&m.name),
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
        let ids = models
            .available_models
            .iter()
            .map(|m| m.model_id.clone())
            .collect();
        let id = self.register(Pending::Model { models: ids });
        DurableFrame::PickerModel(PickerModel {
            picker_id: id,
            current_provider: current.split_once(':').map(|(p, _)| p.to_owned()),
            current_model: Some(current),
            providers,
            for_device,
        })
    }

    /// Closes every open picker when the lane ends (approvals answered `cancelled`).
    pub(crate) fn forget_all(&mut self) {
        self.index.forget(self.open.keys());
        self.open.clear();
    }
}

/// A choice's label as a device shows it: the agent's label cleaned like a name
/// ([`agent_line`]), else its value, at most [`MAX_CHOICE_LABEL`] characters; `None` (the
/// choice is not shown) when neither has anything visible.
fn choice_label(label: &str, value: &str) -> Option<String> {
    [label, value]
        .into_iter()
        .map(agent_line)
        .find(|l| !l.is_empty())
        .map(|l| head(&l, MAX_CHOICE_LABEL))
}

/// The frames that show an agent's question: the picker, a notification unless the lane's
/// devices were told already, and `agent.busy {waiting_input}`.
fn announce(frame: DurableFrame, kind: &str, title: &str, notify: bool) -> Vec<DurableFrame> {
    let note = DurableFrame::Notification(Notification {
        kind: kind.into(),
        title: if kind == "clarify" {
            "Question from the agent".into()
        } else {
            "Approval needed".into()
        },
        body: Some(tail(title, 200)),
        ts: now_ms(),
    });
    let busy = DurableFrame::AgentBusy(AgentBusy {
        reason: BusyReason::WaitingInput,
    });
    if notify {
        vec![frame, note, busy]
    } else {
        vec![frame, busy]
    }
}

fn permission_preview(content: &[iris_acp::ToolCallContent]) -> Option<String> {
    let mut out = String::new();
    for c in content {
        match c {
            iris_acp::ToolCallContent::Content(chunk) => {
                if let Some(t) = chunk.content.as_text() {
                    out.push_str(t);
                    out.push('\n');
                }
            }
            iris_acp::ToolCallContent::Diff(d) => {
                out.push_str(&format!("--- {}\n", d.path));
                if let Some(old) = &d.old_text {
                    for l in old.lines() {
                        out.push_str(&format!("-{l}\n"));
                    }
                }
                for l in d.new_text.lines() {
                    out.push_str(&format!("+{l}\n"));
                }
            }
            _ => {}
        }
    }
    let out = out.trim_end().to_owned();
    Some(tail(&out, 4000)).filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn book() -> (PickerBook, Arc<PickerIndex>) {
        let index = Arc::new(PickerIndex::default());
        let lane = Lane {
            chat_id: "c_1".into(),
            thread_id: None,
        };
        (PickerBook::new(lane, index.clone()), index)
    }

    fn exact(models: &[String], value: &str) -> Option<String> {
        models.iter().find(|m| *m == value).cloned()
    }

    #[test]
    fn a_wrong_value_leaves_the_picker_open_and_a_right_one_closes_it() {
        let (mut book, index) = book();
        let id = book.register(Pending::Model {
            models: vec!["demo:echo".into(), "demo:verbose".into()],
        });
        assert!(index.lane_of(&id).is_some(), "answers find the lane");
        assert!(matches!(
            book.answer(&id, "nope", None, exact),
            Err(AgentError::BadChoice(_))
        ));
        assert!(index.lane_of(&id).is_some(), "still open");
        let answer = book.answer(&id, "demo:verbose", Some("d_1".into()), exact);
        assert_eq!(answer.ok(), Some(Answer::Model("demo:verbose".into())));
        assert!(index.lane_of(&id).is_none(), "closed");
        let closed = book.take_closed();
        assert_eq!(closed.len(), 1);
        assert_eq!(closed[0].0.outcome, PickerOutcome::Answered);
        assert_eq!(closed[0].0.by_device.as_deref(), Some("d_1"));
        assert!(book.take_closed().is_empty(), "told once");
        assert!(matches!(
            book.answer(&id, "demo:verbose", None, exact),
            Err(AgentError::PickerUnknown)
        ));
    }

    #[test]
    fn reasoning_and_agent_pickers_answer_what_the_lane_must_do() {
        let (mut book, _) = book();
        let id = book.register(Pending::Reasoning);
        assert_eq!(
            book.answer(&id, "hide", None, exact).ok(),
            Some(Answer::Reasoning(false))
        );
        let id = book.register(Pending::Agent {
            names: vec!["demo".into()],
        });
        assert!(book.answer(&id, "other", None, exact).is_err());
        assert_eq!(
            book.answer(&id, "demo", None, exact).ok(),
            Some(Answer::Agent("demo".into()))
        );
        assert!(!book.waiting_for_user(), "no approval waits");
        assert_eq!(book.next_deadline(), None);
        assert_eq!(book.expire(Instant::now()), 0);
    }

    #[test]
    fn a_closed_lane_forgets_its_pickers() {
        let (mut book, index) = book();
        let id = book.register(Pending::Reasoning);
        book.forget_all();
        assert!(index.lane_of(&id).is_none());
    }
}
