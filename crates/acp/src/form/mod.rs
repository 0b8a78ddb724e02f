//! An elicitation's form as Iris can show it: one question, with choices and, where the form
//! has a free string field, a typed answer.
//!
//! A device's question picker asks one thing, so a form is shown when it has at most one
//! field to choose in and at most one free string field (Claude Code's `AskUserQuestion` with
//! one question is such a form: the choice `question_0` and its "Other" box
//! `question_0_custom`). The choice field is a string with `enum` or `oneOf`/`anyOf` (`const`,
//! `title`), a boolean (Yes/No), or an array whose `items` are such an enum (a multi-select, of
//! which one choice is taken). A chosen value fills the choice field; any other answer, typed,
//! fills the string field. Everything else (numbers, nested objects, several questions, two
//! fields that are both required) is [`Unsupported`] and is to be declined.
//!
//! The agent is untrusted: the message, labels and values are bounded, and a form with more
//! than [`MAX_FIELDS`] fields is not read.

use serde_json::{Map, Value};

#[cfg(test)]
mod tests;

/// Fields a form may have at all.
pub const MAX_FIELDS: usize = 16;
/// Choices kept of the choice field.
pub const MAX_CHOICES: usize = 16;
/// Longest question kept, in characters.
pub const MAX_QUESTION: usize = 4000;
/// Longest label kept, in characters.
pub const MAX_LABEL: usize = 100;
/// Longest choice value kept, in bytes (longer choices are left out).
pub const MAX_VALUE_BYTES: usize = 256;
/// Longest typed answer taken, in characters (less where the field's `maxLength` says so).
pub const MAX_TEXT: usize = 4000;

/// A form that cannot be shown, and why (for the user).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported(pub String);

/// One choice: what the picker sends back, and what it shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormChoice {
    /// The value (the schema's `const` or enum member; `true`/`false` for a boolean).
    pub value: String,
    /// The label.
    pub label: String,
}

/// How a chosen value goes into the content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChoiceKind {
    String,
    Boolean,
    Array,
}

/// A form reduced to one question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Form {
    /// The question: the agent's message (or the field's description or title).
    pub question: String,
    /// The choices, empty when the form has only a string field.
    pub choices: Vec<FormChoice>,
    /// Whether a typed answer is taken.
    pub free_text: bool,
    choice_field: Option<(String, ChoiceKind)>,
    text_field: Option<(String, usize)>,
}

/// A field of the schema, classified.
enum Field {
    Choice(ChoiceKind, Vec<FormChoice>),
    Text(usize),
}

impl Form {
    /// Reads a form-mode elicitation: its message and `requestedSchema`.
    pub fn from_schema(message: &str, schema: &Value) -> Result<Form, Unsupported> {
        let no = |why: &str| Err(Unsupported(why.into()));
        let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
            return no("the form has no fields");
        };
        if properties.is_empty() {
            return no("the form has no fields");
        }
        if properties.len() > MAX_FIELDS {
            return no("the form has too many fields");
        }
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut choice: Option<(String, ChoiceKind, Vec<FormChoice>)> = None;
        let mut text: Option<(String, usize)> = None;
        let mut hint = String::new();
        for (name, field) in properties {
            match classify(field)? {
                Field::Choice(..) if choice.is_some() => {
                    return no("the form asks more than one question")
                }
                Field::Text(_) if text.is_some() => {
                    return no("the form has more than one text field")
                }
                Field::Choice(kind, choices) => {
                    hint = describe(field);
                    choice = Some((name.clone(), kind, choices));
                }
                Field::Text(max) => {
                    if choice.is_none() {
                        hint = describe(field);
                    }
                    text = Some((name.clone(), max));
                }
            }
        }
        let is_required = |f: &Option<String>| f.as_deref().is_some_and(|n| required.contains(&n));
        let choice_name = choice.as_ref().map(|c| c.0.clone());
        let text_name = text.as_ref().map(|t| t.0.clone());
        if choice.is_some()
            && text.is_some()
            && (is_required(&choice_name) || is_required(&text_name))
        {
            return no("the form needs two answers at once");
        }
        let question = if message.trim().is_empty() {
            hint
        } else {
            message.to_owned()
        };
        let (choice_field, choices) = match choice {
            Some((name, kind, choices)) => (Some((name, kind)), choices),
            None => (None, Vec::new()),
        };
        Ok(Form {
            question: head(question.trim(), MAX_QUESTION),
            choices,
            free_text: text.is_some(),
            choice_field,
            text_field: text,
        })
    }

    /// The content of the form answered with `value`: the choice field when it is one of the
    /// choices, else the string field; `None` when the form takes no such answer.
    pub fn content(&self, value: &str) -> Option<Map<String, Value>> {
        let mut content = Map::new();
        if let Some((name, kind)) = &self.choice_field {
            if self.choices.iter().any(|c| c.value == value) {
                let v = match kind {
                    ChoiceKind::String => Value::String(value.into()),
                    ChoiceKind::Boolean => Value::Bool(value == "true"),
                    ChoiceKind::Array => Value::Array(vec![Value::String(value.into())]),
                };
                content.insert(name.clone(), v);
                return Some(content);
            }
        }
        let (name, max) = self.text_field.as_ref()?;
        if value.trim().is_empty() || value.chars().count() > *max {
            return None;
        }
        content.insert(name.clone(), Value::String(value.into()));
        Some(content)
    }
}

/// A field as a choice or a text field; anything else cannot be shown.
fn classify(field: &Value) -> Result<Field, Unsupported> {
    let no = |why: &str| Err(Unsupported(why.into()));
    match field.get("type").and_then(Value::as_str) {
        Some("boolean") => {
            let choice = |value: &str, label: &str| FormChoice {
                value: value.into(),
                label: label.into(),
            };
            Ok(Field::Choice(
                ChoiceKind::Boolean,
                vec![choice("true", "Yes"), choice("false", "No")],
            ))
        }
        Some("string") => match enum_choices(field) {
            Some(choices) if choices.is_empty() => no("a field offers no usable choice"),
            Some(choices) => Ok(Field::Choice(ChoiceKind::String, choices)),
            None => {
                let max = field
                    .get("maxLength")
                    .and_then(Value::as_u64)
                    .map_or(MAX_TEXT, |m| (m as usize).min(MAX_TEXT));
                if max == 0 {
                    return no("a text field takes no text");
                }
                Ok(Field::Text(max))
            }
        },
        Some("array") => match field.get("items").and_then(enum_choices) {
            Some(choices) if !choices.is_empty() => Ok(Field::Choice(ChoiceKind::Array, choices)),
            _ => no("a list field offers no choices"),
        },
        Some(other) => Err(Unsupported(format!(
            "a field of type {} cannot be shown",
            head(other, 20)
        ))),
        None => no("a field has no type"),
    }
}

/// The choices of `enum` (with `enumNames` as labels) or of `oneOf`/`anyOf` (`const`,
/// `title`); `None` when the field has neither. Values too long are left out, and only the
/// first [`MAX_CHOICES`] are kept.
fn enum_choices(field: &Value) -> Option<Vec<FormChoice>> {
    let names = field.get("enumNames").and_then(Value::as_array);
    let pairs: Vec<(Option<&str>, Option<&str>)> =
        if let Some(values) = field.get("enum").and_then(Value::as_array) {
            values
                .iter()
                .enumerate()
                .map(|(i, v)| (v.as_str(), names.and_then(|n| n.get(i)?.as_str())))
                .collect()
        } else {
            let options = field
                .get("oneOf")
                .or_else(|| field.get("anyOf"))
                .and_then(Value::as_array)?;
            options
                .iter()
                .map(|o| {
                    let value = o.get("const").and_then(Value::as_str);
                    (value, o.get("title").and_then(Value::as_str))
                })
                .collect()
        };
    let choices = pairs
        .into_iter()
        .filter_map(|(value, label)| {
            let value = value.filter(|v| !v.is_empty() && v.len() <= MAX_VALUE_BYTES)?;
            let label = label.filter(|l| !l.trim().is_empty()).unwrap_or(value);
            Some(FormChoice {
                value: value.to_owned(),
                label: head(label.trim(), MAX_LABEL),
            })
        })
        .take(MAX_CHOICES)
        .collect();
    Some(choices)
}

/// A field's own words: its description, else its title.
fn describe(field: &Value) -> String {
    ["description", "title"]
        .iter()
        .filter_map(|k| field.get(*k).and_then(Value::as_str))
        .find(|s| !s.trim().is_empty())
        .unwrap_or_default()
        .to_owned()
}

/// The first `max` characters of `s`, with `…` when cut.
fn head(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_owned(),
    }
}
