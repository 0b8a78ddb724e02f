//! `session/request_permission`: the agent asks the user to approve a tool call (or, by the
//! demo's convention, to answer a question).

use serde::{Deserialize, Serialize};

use super::{ToolCallUpdate, CLARIFY_TITLE_PREFIX};

/// `session/request_permission` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestPermissionRequest {
    /// The session asking.
    pub session_id: String,
    /// What would run. Its id may differ from the live tool call's id (Hermes: `perm-check-N`).
    pub tool_call: ToolCallUpdate,
    /// The choices.
    pub options: Vec<PermissionOption>,
}

impl RequestPermissionRequest {
    /// The question, when this request is a clarifying question (its title starts with
    /// [`CLARIFY_TITLE_PREFIX`]); the options are then the possible answers.
    pub fn clarify_question(&self) -> Option<&str> {
        let title = self.tool_call.title.as_deref()?;
        Some(title.strip_prefix(CLARIFY_TITLE_PREFIX)?.trim_start())
    }
}

/// One choice of a permission request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionOption {
    /// Id to answer with.
    pub option_id: String,
    /// Label shown to people.
    pub name: String,
    /// What choosing it means.
    pub kind: PermissionOptionKind,
}

/// Meaning of a permission option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionOptionKind {
    /// Allow this once.
    AllowOnce,
    /// Allow from now on.
    AllowAlways,
    /// Refuse this once.
    RejectOnce,
    /// Refuse from now on.
    RejectAlways,
}

impl PermissionOptionKind {
    /// True for the allow kinds.
    pub fn is_allow(self) -> bool {
        matches!(
            self,
            PermissionOptionKind::AllowOnce | PermissionOptionKind::AllowAlways
        )
    }
}

/// `session/request_permission` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestPermissionResponse {
    /// The user's decision.
    pub outcome: RequestPermissionOutcome,
}

impl RequestPermissionResponse {
    /// The user picked `option_id`.
    pub fn selected(option_id: impl Into<String>) -> Self {
        RequestPermissionResponse {
            outcome: RequestPermissionOutcome::Selected {
                option_id: option_id.into(),
            },
        }
    }

    /// The turn was cancelled before the user decided.
    pub fn cancelled() -> Self {
        RequestPermissionResponse {
            outcome: RequestPermissionOutcome::Cancelled,
        }
    }
}

/// The decision on a permission request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum RequestPermissionOutcome {
    /// No decision: the turn was cancelled.
    Cancelled,
    /// The user picked an option.
    Selected {
        /// The chosen option's id.
        #[serde(rename = "optionId")]
        option_id: String,
    },
}
