//! The agent's pickers during a turn, and the turn's steps as its checkpoints keep them.

use iris_protocol::{FileChange, PickerClosed};

use super::TurnMapper;

/// The agent's pickers during a turn become steps of its answer.
impl TurnMapper {
    /// The agent opened a picker (`approval` or `clarify`) in this turn.
    pub fn picker_opened(
        &mut self,
        picker_id: &str,
        picker: &str,
        title: &str,
        changes: &[FileChange],
    ) {
        self.steps.picker_opened(picker_id, picker, title, changes);
    }

    /// The file changes in a permission request's tool call, within the turn's diff budget.
    pub fn changes_in(&mut self, content: &[iris_acp::ToolCallContent]) -> Vec<FileChange> {
        self.changes.take(content)
    }

    /// A picker of this turn closed; `label` is the chosen choice's label.
    pub fn picker_closed(&mut self, closed: &PickerClosed, label: Option<String>) {
        self.steps.picker_closed(closed, label);
    }

    /// The turn's steps so far, and how many changes they have had (for checkpoints).
    pub fn steps(&self) -> (Vec<iris_protocol::Step>, u64) {
        (self.steps.to_vec(), self.steps.revision())
    }

    /// How many changes the turn's steps have had.
    pub fn steps_revision(&self) -> u64 {
        self.steps.revision()
    }
}
