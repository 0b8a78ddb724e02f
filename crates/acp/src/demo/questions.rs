//! The rules that put a question to the client: a tool approval (`permission`, `approve`) and
//! a clarifying question (`clarify`), both as `session/request_permission`, and a form
//! (`elicit`) as `elicitation/create`.

use serde_json::json;

use super::script::{Flow, Step, Stop};
use super::server::to_json;
use super::turn::{text_content, Cancelled, Turn};
use crate::types::*;

/// Permission requests a `pester` turn puts at once, and the options of each.
const PESTER_REQUESTS: usize = 20;
const PESTER_OPTIONS: usize = 40;

/// `(option id, name)` of the answers to the clarifying question.
const COLORS: [(&str, &str); 2] = [("red", "Red"), ("blue", "Blue")];

impl Turn<'_> {
    /// Puts a permission request to the client; `None` when it answered with an error.
    pub(super) async fn ask(
        &mut self,
        request: RequestPermissionRequest,
    ) -> Result<Option<RequestPermissionOutcome>, Cancelled> {
        let conn = self.demo.conn.clone();
        let asking = conn.request(method::SESSION_REQUEST_PERMISSION, to_json(&request));
        let answer = tokio::select! {
            answer = asking => answer,
            // A cancelled turn does not wait for the answer: the client must answer `cancelled`
            // anyway, and a late answer is simply ignored.
            _ = self.wait_cancel() => return Err(Cancelled),
        };
        match answer {
            Ok(value) => match serde_json::from_value::<RequestPermissionResponse>(value) {
                Ok(response) => Ok(Some(response.outcome)),
                Err(error) => {
                    tracing::debug!(%error, "demo agent got a malformed permission answer");
                    Ok(None)
                }
            },
            Err(error) => {
                tracing::debug!(%error, "demo agent's permission request failed");
                Ok(None)
            }
        }
    }

    /// `pester`: a runaway agent's permission requests, all at once, each with a 10,000-character
    /// title and 40 long options; counts each cancelled one aloud as it comes back, then says how
    /// many were answered (any option) and how many cancelled.
    pub(super) async fn pester(&mut self) -> Step {
        let mut asks = tokio::task::JoinSet::new();
        for i in 0..PESTER_REQUESTS {
            let options = (0..PESTER_OPTIONS)
                .map(|j| PermissionOption {
                    option_id: format!("option_{j}"),
                    name: format!("{} {j}", "choice ".repeat(100)),
                    kind: PermissionOptionKind::RejectOnce,
                })
                .collect();
            let request = RequestPermissionRequest {
                session_id: self.session_id.into(),
                tool_call: ToolCallUpdate {
                    tool_call_id: format!("pester-{i}"),
                    title: Some(format!("terminal: {}", "x".repeat(10_000))),
                    ..ToolCallUpdate::default()
                },
                options,
            };
            let conn = self.demo.conn.clone();
            asks.spawn(async move {
                let answer = conn
                    .request(method::SESSION_REQUEST_PERMISSION, to_json(&request))
                    .await;
                answer
                    .ok()
                    .and_then(|v| serde_json::from_value::<RequestPermissionResponse>(v).ok())
                    .is_some_and(|r| matches!(r.outcome, RequestPermissionOutcome::Selected { .. }))
            });
        }
        let (mut answered, mut cancelled) = (0, 0);
        loop {
            tokio::select! {
                joined = asks.join_next() => match joined {
                    None => break,
                    Some(Ok(true)) => answered += 1,
                    Some(_) => {
                        cancelled += 1;
                        self.say(&format!("cancelled {cancelled}. "));
                    }
                },
                _ = self.wait_cancel() => return Err(Stop::Cancelled),
            }
        }
        self.say(&format!(
            "Pestered: {answered} answered, {cancelled} cancelled."
        ));
        Ok(Flow::Done)
    }

    /// `permission` or `approve`: a command that runs only if the client allows it.
    pub(super) async fn permission(&mut self) -> Step {
        let command = "rm -rf ./demo-scratch";
        let id = self.start_tool(command);
        let options = approval_options();
        let request = RequestPermissionRequest {
            session_id: self.session_id.into(),
            tool_call: ToolCallUpdate {
                tool_call_id: id.clone(),
                title: Some(format!("terminal: {command}")),
                kind: Some(ToolKind::Execute),
                status: Some(ToolCallStatus::Pending),
                raw_input: Some(json!({ "command": command })),
                content: Some(text_content(&format!("$ {command}"))),
                ..ToolCallUpdate::default()
            },
            options: options.clone(),
        };
        let outcome = self.ask(request).await;
        let chosen = match &outcome {
            Ok(Some(RequestPermissionOutcome::Selected { option_id })) => {
                options.iter().find(|o| &o.option_id == option_id)
            }
            _ => None,
        };
        match chosen {
            Some(option) if option.kind.is_allow() => {
                self.tool_status(&id, ToolCallStatus::InProgress, None, None);
                self.tool_status(
                    &id,
                    ToolCallStatus::Completed,
                    Some("removed ./demo-scratch (simulated)"),
                    None,
                );
                self.say(&format!("Permission granted: {}.\n\n", option.option_id));
                Ok(Flow::Next)
            }
            _ => {
                self.tool_status(
                    &id,
                    ToolCallStatus::Failed,
                    Some("not run: permission refused"),
                    None,
                );
                match outcome {
                    Ok(Some(RequestPermissionOutcome::Cancelled)) | Err(Cancelled) => {
                        Err(Stop::Cancelled)
                    }
                    _ => {
                        self.say("Permission denied.\n\n");
                        Ok(Flow::Next)
                    }
                }
            }
        }
    }

    /// `patch`: an edit whose diff only the permission request shows, as Hermes' `write_file`
    /// does; the file is not written.
    pub(super) async fn patch(&mut self) -> Step {
        let path = format!("{}/notes.txt", self.cwd.trim_end_matches('/'));
        let options = approval_options();
        let request = RequestPermissionRequest {
            session_id: self.session_id.into(),
            tool_call: ToolCallUpdate {
                tool_call_id: format!("edit-approval-{}", self.fresh_tool_id()),
                title: Some(format!("Approve edit: {path}")),
                kind: Some(ToolKind::Edit),
                status: Some(ToolCallStatus::Pending),
                content: Some(vec![ToolCallContent::Diff(Diff {
                    path,
                    old_text: Some("alpha\nbeta\n".into()),
                    new_text: "alpha\nBETA\n".into(),
                })]),
                ..ToolCallUpdate::default()
            },
            options: options.clone(),
        };
        let outcome = self.ask(request).await;
        match outcome {
            Ok(Some(RequestPermissionOutcome::Selected { option_id }))
                if options
                    .iter()
                    .any(|o| o.option_id == option_id && o.kind.is_allow()) =>
            {
                self.say("Patched notes.txt. ");
                Ok(Flow::Next)
            }
            Ok(Some(RequestPermissionOutcome::Cancelled)) | Err(Cancelled) => Err(Stop::Cancelled),
            _ => {
                self.say("Not patched. ");
                Ok(Flow::Next)
            }
        }
    }

    /// `clarify`: a question whose options are the answers.
    pub(super) async fn clarify(&mut self) -> Step {
        let question = "Which color do you prefer?";
        let request = RequestPermissionRequest {
            session_id: self.session_id.into(),
            tool_call: ToolCallUpdate {
                tool_call_id: self.fresh_tool_id(),
                title: Some(format!("{CLARIFY_TITLE_PREFIX} {question}")),
                kind: Some(ToolKind::Other),
                status: Some(ToolCallStatus::Pending),
                raw_input: Some(json!({
                    "question": question,
                    "choices": COLORS.iter().map(|(_, name)| *name).collect::<Vec<_>>(),
                })),
                ..ToolCallUpdate::default()
            },
            options: COLORS
                .iter()
                .map(|(id, name)| PermissionOption {
                    option_id: (*id).into(),
                    name: (*name).into(),
                    kind: PermissionOptionKind::AllowOnce,
                })
                .collect(),
        };
        match self.ask(request).await? {
            Some(RequestPermissionOutcome::Selected { option_id }) => {
                match COLORS.iter().find(|(id, _)| *id == option_id) {
                    Some((_, name)) => self.say(&format!("You chose {name}.\n\n")),
                    None => self.say("That is not one of the choices.\n\n"),
                }
                Ok(Flow::Next)
            }
            Some(RequestPermissionOutcome::Cancelled) => Err(Stop::Cancelled),
            None => {
                self.say("No answer.\n\n");
                Ok(Flow::Next)
            }
        }
    }
}

impl Turn<'_> {
    /// `elicit`: a form of a choice and a free string (`two`: two questions; `number`: one
    /// number field, which a client showing questions declines); says what came back.
    pub(super) async fn elicit(&mut self, prompt: &str) -> Step {
        let colors = json!([{"const": "red", "title": "Red"}, {"const": "blue", "title": "Blue"}]);
        let schema = if prompt.contains("number") {
            json!({"type": "object", "properties": {
                "count": {"type": "number", "minimum": 1, "maximum": 10}
            }, "required": ["count"]})
        } else if prompt.contains("two") {
            json!({"type": "object", "properties": {
                "color": {"type": "string", "description": "Which color?", "oneOf": colors},
                "color_other": {"type": "string", "title": "Other"},
                "large": {"type": "boolean", "description": "Large?"}
            }})
        } else {
            json!({"type": "object", "properties": {
                "color": {"type": "string", "title": "Color", "oneOf": colors},
                "other": {"type": "string", "title": "Other", "maxLength": 200}
            }})
        };
        let request = CreateElicitationRequest {
            session_id: self.session_id.into(),
            mode: "form".into(),
            message: "Which color do you prefer?".into(),
            requested_schema: schema,
            tool_call_id: None,
        };
        let conn = self.demo.conn.clone();
        let asking = conn.request(method::ELICITATION_CREATE, to_json(&request));
        let answer = tokio::select! {
            answer = asking => answer,
            _ = self.wait_cancel() => return Err(Stop::Cancelled),
        };
        let response = answer
            .ok()
            .and_then(|v| serde_json::from_value::<CreateElicitationResponse>(v).ok());
        match response {
            Some(CreateElicitationResponse::Accept { content }) => {
                let content = serde_json::Value::Object(content);
                self.say(&format!("You answered {content}.\n\n"));
            }
            Some(CreateElicitationResponse::Decline) => self.say("Declined.\n\n"),
            Some(CreateElicitationResponse::Cancel) => return Err(Stop::Cancelled),
            None => self.say("No answer.\n\n"),
        }
        Ok(Flow::Next)
    }
}

/// The choices of a tool approval.
fn approval_options() -> Vec<PermissionOption> {
    let option = |id: &str, name: &str, kind| PermissionOption {
        option_id: id.into(),
        name: name.into(),
        kind,
    };
    vec![
        option("allow_once", "Allow once", PermissionOptionKind::AllowOnce),
        option(
            "allow_always",
            "Allow always",
            PermissionOptionKind::AllowAlways,
        ),
        option("reject_once", "Deny", PermissionOptionKind::RejectOnce),
    ]
}
