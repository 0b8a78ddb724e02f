//! `elicitation/create` (ACP, unstable): the agent asks the user to fill in a form (`mode:
//! "form"`, a flat JSON Schema of fields) or to visit a URL (`mode: "url"`, never offered by
//! Iris). Claude Code's adapter asks its `AskUserQuestion` questions this way.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `elicitation/create` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateElicitationRequest {
    /// The session asking.
    pub session_id: String,
    /// `form` or `url`.
    #[serde(default = "form_mode")]
    pub mode: String,
    /// What the agent asks, for people.
    #[serde(default)]
    pub message: String,
    /// The form: a JSON Schema object whose `properties` are the fields (form mode).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub requested_schema: Value,
    /// The tool call the question belongs to, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

fn form_mode() -> String {
    "form".into()
}

/// `elicitation/create` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum CreateElicitationResponse {
    /// The user filled in the form.
    Accept {
        /// Field name to value.
        content: Map<String, Value>,
    },
    /// The user (or the client, for a form it cannot show) refused.
    Decline,
    /// Nobody answered: the turn was stopped or the question expired.
    Cancel,
}
