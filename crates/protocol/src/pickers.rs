//! The picker frames: what the gateway asks a device to choose (models, choices, clarify
//! questions, approvals, confirmations).

use serde::{Deserialize, Serialize};

/// A provider group in the model picker.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelProvider {
    /// Provider id.
    pub id: String,
    /// Display label.
    pub label: String,
    /// Its models.
    pub models: Vec<ModelEntry>,
}

/// A model in the model picker.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelEntry {
    /// Model id (the value to select).
    pub id: String,
    /// Display label.
    pub label: String,
}

/// `picker.model`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PickerModel {
    /// Id to answer with.
    pub picker_id: String,
    /// Current model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_model: Option<String>,
    /// Current provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_provider: Option<String>,
    /// Models grouped by provider.
    pub providers: Vec<ModelProvider>,
    /// The device whose command opened this picker: only it opens the picker by itself, the
    /// others list it. An Iris extension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_device: Option<String>,
}

/// One choice of a picker.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    /// Value to answer with.
    pub value: String,
    /// Display label.
    pub label: String,
    /// Whether this is the current setting.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_current: bool,
}

/// `picker.choice`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PickerChoice {
    /// Id to answer with.
    pub picker_id: String,
    /// Title.
    pub title: String,
    /// The choices.
    pub choices: Vec<Choice>,
    /// The device whose command opened this picker: only it opens the picker by itself, the
    /// others list it. An Iris extension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_device: Option<String>,
}

/// `picker.clarify`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PickerClarify {
    /// Id to answer with.
    pub picker_id: String,
    /// The question.
    pub title: String,
    /// Suggested answers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<Choice>,
    /// Whether a typed answer is accepted besides the choices (additive; absent: only the
    /// choices).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub free_text: bool,
}

/// `picker.approval`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PickerApproval {
    /// Id to answer with.
    pub picker_id: String,
    /// What is asked.
    pub title: String,
    /// The command, diff or other preview of what would run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
    /// The agent's options.
    pub choices: Vec<Choice>,
    /// The files the call would change, as diffs (an edit shows what it writes before Allow).
    /// An Iris extension.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<crate::FileChange>,
}

/// `picker.confirm`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PickerConfirm {
    /// Id to answer with.
    pub picker_id: String,
    /// What is asked.
    pub title: String,
    /// Details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}
