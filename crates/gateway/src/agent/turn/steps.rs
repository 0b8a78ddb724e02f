//! The steps of one turn as its answer keeps them: the same beats, tool calls, plan and picker
//! outcomes the live frames showed, in order, within the protocol's bounds ([`MAX_STEPS`] steps,
//! args cut to [`iris_protocol::MAX_STEP_ARGS`] bytes, texts to [`MAX_STEP_TEXT`] characters).

use std::collections::HashMap;

use iris_protocol::{
    PickerClosed, PickerStep, Step, ToolEnd, ToolStart, ToolStep, MAX_STEPS, MAX_STEP_TEXT,
};

use crate::text::head;

/// The steps collected so far.
#[derive(Debug, Default)]
pub struct Steps {
    steps: Vec<Step>,
    plan: Option<usize>,
    tools: HashMap<u32, usize>,
    pickers: HashMap<String, usize>,
    /// Counts changes, so that a checkpoint knows when the steps changed.
    revision: u64,
}

impl Steps {
    fn push(&mut self, step: Step) -> Option<usize> {
        self.revision += 1;
        (self.steps.len() < MAX_STEPS).then(|| {
            self.steps.push(step);
            self.steps.len() - 1
        })
    }

    /// A commentary beat.
    pub fn commentary(&mut self, text: &str) {
        self.push(Step::Commentary {
            text: head(text, MAX_STEP_TEXT),
        });
    }

    /// The plan as shown now: it replaces the one shown before, at its place.
    pub fn plan(&mut self, text: &str) {
        let text = head(text, MAX_STEP_TEXT);
        self.revision += 1;
        match self.plan.and_then(|at| self.steps.get_mut(at)) {
            Some(step) => *step = Step::Plan { text },
            None => self.plan = self.push(Step::Plan { text }),
        }
    }

    /// A tool call began.
    pub fn tool_start(&mut self, start: &ToolStart) {
        let step = Step::Tool(ToolStep {
            index: start.index,
            name: start.name.clone(),
            emoji: start.emoji.clone(),
            preview: start.preview.clone(),
            args: ToolStep::bounded_args(start.args.as_ref()),
            changes: start.changes.clone(),
            ..ToolStep::default()
        });
        if let Some(at) = self.push(step) {
            self.tools.insert(start.index, at);
        }
    }

    /// A tool call's input arrived after its start: the card's preview and arguments.
    pub fn tool_input(
        &mut self,
        index: u32,
        preview: Option<String>,
        args: Option<&serde_json::Value>,
    ) {
        let at = self.tools.get(&index).copied();
        self.revision += 1;
        if let Some(Step::Tool(t)) = at.and_then(|at| self.steps.get_mut(at)) {
            if t.preview.is_none() {
                t.preview = preview;
            }
            t.args = ToolStep::bounded_args(args);
        }
    }

    /// A tool call ended.
    pub fn tool_end(&mut self, end: &ToolEnd) {
        let at = self.tools.get(&end.index).copied();
        self.revision += 1;
        if let Some(Step::Tool(t)) = at.and_then(|at| self.steps.get_mut(at)) {
            t.ok = Some(end.ok);
            t.duration = end.duration;
            t.output_preview = end.output_preview.clone();
            if !end.changes.is_empty() {
                t.changes = end.changes.clone();
            }
        }
    }

    /// The agent opened a picker (`approval` or `clarify`).
    pub fn picker_opened(
        &mut self,
        picker_id: &str,
        picker: &str,
        title: &str,
        changes: &[iris_protocol::FileChange],
    ) {
        let step = Step::Picker(PickerStep {
            picker_id: picker_id.to_owned(),
            picker: picker.to_owned(),
            title: head(title, MAX_STEP_TEXT),
            changes: changes.to_vec(),
            ..PickerStep::default()
        });
        if let Some(at) = self.push(step) {
            self.pickers.insert(picker_id.to_owned(), at);
        }
    }

    /// A picker of the turn closed; `label` is the chosen choice's label.
    pub fn picker_closed(&mut self, closed: &PickerClosed, label: Option<String>) {
        let at = self.pickers.get(&closed.picker_id).copied();
        self.revision += 1;
        if let Some(Step::Picker(p)) = at.and_then(|at| self.steps.get_mut(at)) {
            p.outcome = Some(closed.outcome);
            p.value = closed.value.clone();
            p.label = label;
            p.by_device = closed.by_device.clone();
        }
    }

    /// Whether the turn has no step yet.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// The steps so far.
    pub fn to_vec(&self) -> Vec<Step> {
        self.steps.clone()
    }

    /// How many changes the steps have had.
    pub fn revision(&self) -> u64 {
        self.revision
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iris_protocol::{PickerOutcome, MAX_STEP_ARGS};

    #[test]
    fn steps_stay_in_order_and_within_bounds() {
        let mut s = Steps::default();
        s.plan("Plan:\n☐ a");
        s.commentary(&"x".repeat(MAX_STEP_TEXT + 10));
        s.tool_start(&ToolStart {
            index: 0,
            name: "terminal".into(),
            args: Some(serde_json::json!({ "command": "y".repeat(MAX_STEP_ARGS * 2) })),
            ..ToolStart::default()
        });
        s.picker_opened("p_1", "approval", "run it?", &[]);
        s.plan("Plan:\n☑ a");
        s.tool_end(&ToolEnd {
            index: 0,
            name: "terminal".into(),
            ok: true,
            duration: Some(0.5),
            output_preview: Some("ok".into()),
            changes: Vec::new(),
        });
        let closed = PickerClosed {
            picker_id: "p_1".into(),
            outcome: PickerOutcome::Answered,
            value: Some("allow_once".into()),
            by_device: Some("phone".into()),
        };
        s.picker_closed(&closed, Some("Allow once".into()));
        let steps = s.to_vec();
        assert_eq!(steps.len(), 4);
        assert_eq!(
            steps[0],
            Step::Plan {
                text: "Plan:\n☑ a".into()
            }
        );
        let Step::Commentary { text } = &steps[1] else {
            panic!("{steps:?}")
        };
        assert_eq!(text.chars().count(), MAX_STEP_TEXT + 1);
        let Step::Tool(t) = &steps[2] else {
            panic!("{steps:?}")
        };
        assert_eq!(
            (t.ok, t.output_preview.as_deref()),
            (Some(true), Some("ok"))
        );
        let args = t.args.as_ref().and_then(|a| a.as_str()).unwrap();
        assert!(args.len() <= MAX_STEP_ARGS + 3 && args.ends_with('…'));
        let Step::Picker(p) = &steps[3] else {
            panic!("{steps:?}")
        };
        assert_eq!(p.outcome, Some(PickerOutcome::Answered));
        assert_eq!(p.label.as_deref(), Some("Allow once"));
        for i in 0..MAX_STEPS {
            s.commentary(&i.to_string());
        }
        assert_eq!(s.to_vec().len(), MAX_STEPS);
    }
}
