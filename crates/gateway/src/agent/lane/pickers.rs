//! The lane's pickers: the agent's permission requests and clarify questions (approvals, with
//! a deadline), and the gateway's own model and reasoning choices.
//!
//! However a picker closes (answered on any device, expired, or cancelled with its turn), every
//! device is told with a durable `picker.closed`, and an agent's picker becomes a step of the
//! turn's answer with its outcome.

use std::time::Instant;

use iris_acp::{PermissionResponder, RequestPermissionRequest};
use iris_protocol::{
    AgentBusy, BusyReason, Choice, DurableFrame, Notification, PickerApproval, PickerClarify,
    PickerClosed, PickerOutcome, MAX_STEP_TEXT,
};
use tokio::time::Instant as TokioInstant;

use super::super::turn::TurnMapper;
use super::{LaneActor, Pending};
use crate::ids::{new_id, now_ms};
use crate::text::{head, tail};
use crate::wire::WireError;

/// Approvals of one lane open at once; the agent's further requests are answered `cancelled`
/// without being shown.
const MAX_OPEN_APPROVALS: usize = 8;
/// Choices shown of one approval, and the longest label and option id kept.
const MAX_CHOICES: usize = 16;
const MAX_CHOICE_LABEL: usize = 100;
const MAX_OPTION_ID_BYTES: usize = 256;

impl LaneActor {
    /// Whether the lane shows as many approvals as it may ([`MAX_OPEN_APPROVALS`]): the agent's
    /// next request is then answered `cancelled`.
    pub(super) fn approvals_full(&self) -> bool {
        self.pickers
            .values()
            .filter(|p| matches!(p, Pending::Approval { .. }))
            .count()
            >= MAX_OPEN_APPROVALS
    }

    pub(super) fn next_picker_deadline(&self) -> Option<TokioInstant> {
        self.pickers
            .values()
            .filter_map(|p| match p {
                Pending::Approval { deadline, .. } => Some(TokioInstant::from_std(*deadline)),
                _ => None,
            })
            .min()
    }

    pub(super) async fn expire_pickers(&mut self) {
        let now = Instant::now();
        let expired: Vec<String> = self
            .pickers
            .iter()
            .filter(|(_, p)| matches!(p, Pending::Approval { deadline, .. } if *deadline <= now))
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            if let Some(Pending::Approval { responder, .. }) = self.pickers.remove(&id) {
                responder.cancel();
            }
            self.bridge.forget_pickers(std::iter::once(&id));
            self.picker_closed(&id, PickerOutcome::Expired, None, None);
            self.system("The approval request expired without an answer and was cancelled.")
                .await;
        }
    }

    /// Notes that a picker closed; [`LaneActor::flush_closed`] tells the devices.
    pub(super) fn picker_closed(
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

    /// Sends `picker.closed` for the pickers closed since the last call (one transaction), and
    /// records their outcomes in the running turn's steps.
    pub(super) async fn flush_closed(&mut self, mapper: Option<&mut TurnMapper>) {
        if self.closed.is_empty() {
            return;
        }
        let closed = std::mem::take(&mut self.closed);
        if let Some(mapper) = mapper {
            for (c, label) in &closed {
                mapper.picker_closed(c, label.clone());
            }
        }
        let frames = closed
            .into_iter()
            .map(|(c, _)| DurableFrame::PickerClosed(c))
            .collect();
        self.durable(frames, None, None).await;
    }

    pub(super) fn register_picker(&mut self, pending: Pending) -> String {
        let id = new_id("p_");
        self.pickers.insert(id.clone(), pending);
        self.bridge.remember_picker(&id, &self.lane);
        id
    }

    pub(super) async fn open_permission(
        &mut self,
        request: RequestPermissionRequest,
        responder: PermissionResponder,
        mapper: &mut TurnMapper,
    ) -> Option<String> {
        // What a device shows is bounded like a step of the answer.
        let choices: Vec<Choice> = request
            .options
            .iter()
            .filter(|o| o.option_id.len() <= MAX_OPTION_ID_BYTES)
            .take(MAX_CHOICES)
            .map(|o| Choice {
                value: o.option_id.clone(),
                label: head(&o.name, MAX_CHOICE_LABEL),
                is_current: false,
            })
            .collect();
        if choices.is_empty() {
            responder.cancel();
            return None;
        }
        // One notification while approvals wait: the phone is told once, not for each.
        let notify = !self
            .pickers
            .values()
            .any(|p| matches!(p, Pending::Approval { .. }));
        let deadline = Instant::now() + self.host().timeouts.approval;
        let question = request.clarify_question().map(|q| head(q, MAX_STEP_TEXT));
        let id = self.register_picker(Pending::Approval {
            responder,
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
                let title = request.tool_call.title.as_deref().map_or_else(
                    || "The agent asks for permission".into(),
                    |t| head(t, MAX_STEP_TEXT),
                );
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
                    });
                (
                    DurableFrame::PickerApproval(PickerApproval {
                        picker_id: id.clone(),
                        title: title.clone(),
                        preview,
                        choices,
                    }),
                    "approval",
                    title,
                )
            }
        };
        mapper.picker_opened(&id, kind, &title);
        let note = DurableFrame::Notification(Notification {
            kind: kind.into(),
            title: if kind == "clarify" {
                "Question from the agent".into()
            } else {
                "Approval needed".into()
            },
            body: Some(tail(&title, 200)),
            ts: now_ms(),
        });
        let busy = DurableFrame::AgentBusy(AgentBusy {
            reason: BusyReason::WaitingInput,
        });
        let frames = if notify {
            vec![frame, note, busy]
        } else {
            vec![frame, busy]
        };
        self.durable(frames, None, None).await;
        Some(id)
    }

    pub(super) async fn answer_picker(
        &mut self,
        picker_id: &str,
        value: &str,
        device: Option<String>,
    ) -> Result<(), WireError> {
        let Some(pending) = self.pickers.remove(picker_id) else {
            return Err(WireError::not_found("picker unknown or expired"));
        };
        self.bridge
            .forget_pickers(std::iter::once(&picker_id.to_owned()));
        match pending {
            Pending::Approval {
                responder,
                options,
                deadline,
            } => {
                let Some(choice) = options.iter().find(|o| o.value == value).cloned() else {
                    self.pickers.insert(
                        picker_id.to_owned(),
                        Pending::Approval {
                            responder,
                            options,
                            deadline,
                        },
                    );
                    self.bridge.remember_picker(picker_id, &self.lane);
                    return Err(WireError::bad_request(
                        "value is not one of the picker's choices",
                    ));
                };
                responder.select(value);
                self.picker_closed(picker_id, PickerOutcome::Answered, Some(&choice), device);
                Ok(())
            }
            Pending::Model { models } => {
                let found = super::commands::find_model(models.iter().map(String::as_str), value);
                let Some(model) = found else {
                    self.pickers
                        .insert(picker_id.to_owned(), Pending::Model { models });
                    self.bridge.remember_picker(picker_id, &self.lane);
                    return Err(WireError::bad_request(
                        "value is not one of the offered models",
                    ));
                };
                self.set_model(&model).await;
                let choice = Choice {
                    value: value.to_owned(),
                    label: model,
                    is_current: true,
                };
                self.picker_closed(picker_id, PickerOutcome::Answered, Some(&choice), device);
                Ok(())
            }
            Pending::Agent { names } => {
                if !names.iter().any(|n| n == value) {
                    self.pickers
                        .insert(picker_id.to_owned(), Pending::Agent { names });
                    self.bridge.remember_picker(picker_id, &self.lane);
                    return Err(WireError::bad_request(
                        "value is not one of the offered agents",
                    ));
                }
                self.switch_agent(value).await;
                Ok(())
            }
            Pending::Reasoning => match value {
                "show" | "hide" => {
                    self.set_reasoning(value == "show").await;
                    let choice = Choice {
                        value: value.to_owned(),
                        label: value.to_owned(),
                        is_current: true,
                    };
                    self.picker_closed(picker_id, PickerOutcome::Answered, Some(&choice), device);
                    Ok(())
                }
                _ => {
                    self.pickers
                        .insert(picker_id.to_owned(), Pending::Reasoning);
                    self.bridge.remember_picker(picker_id, &self.lane);
                    Err(WireError::bad_request("value must be show or hide"))
                }
            },
        }
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
