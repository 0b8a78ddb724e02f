//! Session requests (`session/new`, `session/load`, model and mode switches, cancel) and the
//! prompt turn (`session/prompt` and its result).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ContentBlock;

/// `session/new` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewSessionRequest {
    /// Absolute working directory for the session.
    pub cwd: String,
    /// MCP servers to attach; Iris attaches none.
    #[serde(default)]
    pub mcp_servers: Vec<Value>,
}

/// `session/new` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewSessionResponse {
    /// The new session's id.
    pub session_id: String,
    /// Models the agent offers, if it reports them (as `models`, or as a `configOptions` select
    /// of category `model`: see [`SessionModelState::from_config_options`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub models: Option<SessionModelState>,
    /// Modes the agent offers, if it reports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modes: Option<SessionModeState>,
    /// The session's configuration options (ACP's session config options), kept raw.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_options: Vec<Value>,
}

/// `session/load` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadSessionRequest {
    /// The session to reopen.
    pub session_id: String,
    /// Absolute working directory.
    pub cwd: String,
    /// MCP servers to attach; Iris attaches none.
    #[serde(default)]
    pub mcp_servers: Vec<Value>,
}

/// `session/load` result. The agent replays the history as `session/update`s before it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadSessionResponse {
    /// Models the agent offers, if it reports them (as `models`, or as a `configOptions` select
    /// of category `model`: see [`SessionModelState::from_config_options`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub models: Option<SessionModelState>,
    /// Modes the agent offers, if it reports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modes: Option<SessionModeState>,
    /// The session's configuration options (ACP's session config options), kept raw.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_options: Vec<Value>,
}

impl NewSessionResponse {
    /// With `models` taken from the config options where the agent reports no `models`.
    pub fn with_config_models(mut self) -> Self {
        if self.models.is_none() {
            self.models = SessionModelState::from_config_options(&self.config_options);
        }
        self
    }
}

impl LoadSessionResponse {
    /// With `models` taken from the config options where the agent reports no `models`.
    pub fn with_config_models(mut self) -> Self {
        if self.models.is_none() {
            self.models = SessionModelState::from_config_options(&self.config_options);
        }
        self
    }
}

/// `models` of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionModelState {
    /// What can be selected with `session/set_model`.
    #[serde(default)]
    pub available_models: Vec<ModelInfo>,
    /// The model in use.
    pub current_model_id: String,
    /// When the models came from a session config option, its id: the model is then switched
    /// with `session/set_config_option`, not `session/set_model`.
    #[serde(skip)]
    pub config_id: Option<String>,
}

impl SessionModelState {
    /// The models of a session that offers them only as a config option (`configOptions`: the
    /// first `select` of category `model`, its `options` flat or in groups), as Claude Code's
    /// `@agentclientprotocol/claude-agent-acp` does.
    pub fn from_config_options(options: &[Value]) -> Option<SessionModelState> {
        let option = options.iter().find(|o| {
            o.get("category").and_then(Value::as_str) == Some("model")
                && o.get("type").and_then(Value::as_str) == Some("select")
        })?;
        let id = option.get("id")?.as_str()?;
        let current = option.get("currentValue")?.as_str()?;
        let mut available_models = Vec::new();
        for entry in option.get("options")?.as_array()? {
            let values = match entry.get("options").and_then(Value::as_array) {
                Some(group) => group.iter().collect(),
                None => vec![entry],
            };
            for v in values {
                let Some(value) = v.get("value").and_then(Value::as_str) else {
                    continue;
                };
                available_models.push(ModelInfo {
                    model_id: value.into(),
                    name: v
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or(value)
                        .into(),
                    description: v.get("description").and_then(Value::as_str).map(Into::into),
                });
            }
        }
        Some(SessionModelState {
            available_models,
            current_model_id: current.into(),
            config_id: Some(id.into()),
        })
    }
}

/// `session/set_config_option` params (for a `select`: the value's id).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetSessionConfigOptionRequest {
    /// The session.
    pub session_id: String,
    /// The option's `id`.
    pub config_id: String,
    /// One of the option's values.
    pub value: String,
}

/// One selectable model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelInfo {
    /// Id to pass to `session/set_model` (Hermes uses `provider:model`).
    pub model_id: String,
    /// Display name.
    pub name: String,
    /// Longer description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// `modes` of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionModeState {
    /// What can be selected with `session/set_mode`.
    #[serde(default)]
    pub available_modes: Vec<SessionMode>,
    /// The mode in use.
    pub current_mode_id: String,
}

/// One selectable mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionMode {
    /// Id to pass to `session/set_mode`.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Longer description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// `session/set_model` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetSessionModelRequest {
    /// The session.
    pub session_id: String,
    /// One of the session's `availableModels`.
    pub model_id: String,
}

/// `session/set_mode` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetSessionModeRequest {
    /// The session.
    pub session_id: String,
    /// One of the session's `availableModes`.
    pub mode_id: String,
}

/// `session/list` result (only what Iris reads; the rest is ignored).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListSessionsResponse {
    /// The sessions, each at least with its `sessionId`.
    #[serde(default)]
    pub sessions: Vec<Value>,
}

/// `session/close` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CloseSessionRequest {
    /// The session to end.
    pub session_id: String,
}

/// `session/cancel` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelNotification {
    /// The session whose turn should stop.
    pub session_id: String,
}

/// `session/prompt` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptRequest {
    /// The session.
    pub session_id: String,
    /// The user's message.
    pub prompt: Vec<ContentBlock>,
}

/// `session/prompt` result: the turn is over.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptResponse {
    /// Why the turn ended.
    pub stop_reason: StopReason,
    /// Token counts, if the agent reports them: the turn's own in ACP; Hermes sends the session's
    /// running totals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// Why a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The agent finished.
    EndTurn,
    /// The model hit its token limit.
    MaxTokens,
    /// The agent hit its limit of model requests in one turn.
    MaxTurnRequests,
    /// The model refused.
    Refusal,
    /// The client cancelled the turn.
    Cancelled,
    /// A reason this crate does not know.
    #[serde(other)]
    Other,
}

/// Token counts of a prompt result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Prompt tokens.
    #[serde(default)]
    pub input_tokens: u64,
    /// Completion tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Sum of all tokens.
    #[serde(default)]
    pub total_tokens: u64,
    /// Reasoning tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought_tokens: Option<u64>,
    /// Prompt tokens served from cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_read_tokens: Option<u64>,
    /// Prompt tokens written to cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_write_tokens: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Part of `@agentclientprotocol/claude-agent-acp` 0.101.0's `session/new` answer: no
    /// `models`, a model select among its `configOptions`.
    #[test]
    fn models_come_from_a_model_config_option_when_the_agent_reports_no_models() {
        let answer = json!({
            "sessionId": "s1",
            "modes": {"currentModeId": "default", "availableModes": [{"id": "default", "name": "Manual"}]},
            "configOptions": [
                {"id": "mode", "name": "Mode", "category": "mode", "type": "select", "currentValue": "default",
                 "options": [{"value": "default", "name": "Manual"}]},
                {"id": "model", "name": "Model", "category": "model", "type": "select", "currentValue": "default",
                 "options": [
                     {"value": "default", "name": "Default (recommended)", "description": "Opus"},
                     {"value": "opus", "name": "Opus 5.5"},
                     {"group": "older", "name": "Older", "options": [{"value": "haiku", "name": "Haiku 5.5"}]}
                 ]},
                {"id": "fast", "name": "Fast mode", "category": "model_config", "type": "select",
                 "currentValue": "off", "options": [{"value": "on", "name": "On"}]}
            ]
        });
        let response: NewSessionResponse = serde_json::from_value(answer).unwrap();
        let models = response.with_config_models().models.unwrap();
        assert_eq!(models.config_id.as_deref(), Some("model"));
        assert_eq!(models.current_model_id, "default");
        let ids: Vec<&str> = models
            .available_models
            .iter()
            .map(|m| m.model_id.as_str())
            .collect();
        assert_eq!(ids, ["default", "opus", "haiku"]);
        assert_eq!(
            models.available_models[0].description.as_deref(),
            Some("Opus")
        );

        // `models` wins where the agent reports both; none without a model select.
        let both = json!({"models": {"currentModelId": "a", "availableModels": [{"modelId": "a", "name": "A"}]},
            "configOptions": answer_options()});
        let both: LoadSessionResponse = serde_json::from_value(both).unwrap();
        assert_eq!(both.with_config_models().models.unwrap().config_id, None);
        let none: LoadSessionResponse =
            serde_json::from_value(json!({"configOptions": [{"id": "fast", "type": "select",
                "category": "model_config", "currentValue": "off", "options": []}]}))
            .unwrap();
        assert_eq!(none.with_config_models().models, None);
    }

    fn answer_options() -> Value {
        json!([{"id": "model", "name": "Model", "category": "model", "type": "select",
                "currentValue": "b", "options": [{"value": "b", "name": "B"}]}])
    }
}
