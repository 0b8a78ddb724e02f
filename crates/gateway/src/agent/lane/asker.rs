//! Who waits for the answer to an agent's question: a permission request, answered with one of
//! its options, or a form (`elicitation/create`), asked one question after the other and
//! answered `accept` with the content of all of them.

use std::time::Duration;

use iris_acp::form::Question;
use iris_acp::{ElicitationResponder, Form, PermissionResponder};
use iris_protocol::Choice;
use serde_json::{Map, Value};

use crate::text::head;

/// The longest label kept of a choice (and of a typed answer, as its label).
pub(crate) const MAX_CHOICE_LABEL: usize = 100;

/// A form being asked: its questions, the one shown now, the content so far, and how long
/// each question waits.
pub(crate) struct FormState {
    form: Form,
    at: usize,
    content: Map<String, Value>,
    pub(crate) timeout: Duration,
}

impl FormState {
    pub(crate) fn new(form: Form, timeout: Duration) -> FormState {
        FormState {
            form,
            at: 0,
            content: Map::new(),
            timeout,
        }
    }

    /// The question shown now, and whether it is one of several ("2/3").
    pub(crate) fn current(&self) -> (&Question, Option<String>) {
        let total = self.form.questions.len();
        let count = (total > 1).then(|| format!("{}/{total}", self.at + 1));
        (&self.form.questions[self.at], count)
    }
}

/// Who waits for the answer to an agent's question.
pub(crate) enum Asker {
    /// A permission request: answered with one of its options.
    Permission(PermissionResponder),
    /// A form: answered with its content, filled in from a choice or a typed answer to each of
    /// its questions.
    Form(ElicitationResponder, Box<FormState>),
}

impl Asker {
    /// Nobody answered: `cancelled` (a permission request) or `cancel` (a form).
    pub(crate) fn cancel(self) {
        match self {
            Asker::Permission(responder) => responder.cancel(),
            Asker::Form(responder, _) => responder.cancel(),
        }
    }

    /// Answers with `value` when it is an answer this question takes: one of `options`, or for
    /// a form's question with a text field any typed text (its label the text itself). Given
    /// back when it is not. A form with questions left is given back too, at its next question,
    /// beside the choice: the agent is answered after the last.
    pub(crate) fn answer(
        self,
        options: &[Choice],
        value: &str,
    ) -> Result<(Choice, Option<Asker>), Asker> {
        let choice = options.iter().find(|o| o.value == value).cloned();
        match (self, choice) {
            (Asker::Permission(responder), Some(choice)) => {
                responder.select(value);
                Ok((choice, None))
            }
            (Asker::Form(responder, mut state), choice) => {
                let Some(content) = state.current().0.content(value) else {
                    return Err(Asker::Form(responder, state));
                };
                let choice = choice.unwrap_or_else(|| Choice {
                    value: value.to_owned(),
                    label: head(value, MAX_CHOICE_LABEL),
                    is_current: true,
                });
                state.content.extend(content);
                state.at += 1;
                if state.at < state.form.questions.len() {
                    return Ok((choice, Some(Asker::Form(responder, state))));
                }
                responder.accept(std::mem::take(&mut state.content));
                Ok((choice, None))
            }
            (asker, None) => Err(asker),
        }
    }
}
