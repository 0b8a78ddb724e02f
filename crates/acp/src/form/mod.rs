//! An elicitation's form as Iris can show it: questions asked one after the other, each with
//! choices and, where it has a free string field, a typed answer.
//!
//! A device's question picker asks one thing, so a form becomes one question per field to
//! choose in, each with the free string field that goes with it, if any: the one whose name
//! begins with the choice field's name (Claude Code's `AskUserQuestion` sends the choice
//! `question_<n>` and its "Other" box `question_<n>_custom`), or the only one beside the only
//! choice field. A form of one free string field alone is one question with a typed answer.
//! A choice field is a string with `enum` or `oneOf`/`anyOf` (`const`, `title`), a boolean
//! (Yes/No), or an array whose `items` are such an enum (a multi-select, of which one choice is
//! taken). A chosen value fills the choice field; any other answer, typed, fills the string
//! field. Everything else (numbers, nested objects, a string field that goes with no question,
//! a choice and its string field that are required) is [`Unsupported`] and is to be declined.
//!
//! The agent is untrusted: the message, labels and values are bounded, and a form with more
//! than [`MAX_FIELDS`] fields is not read.

use serde_json::{Map, Value};

#[cfg(test)]
mod tests;

/// Fields a form may have at all.
pub const MAX_FIELDS: usize = 16;
/// Questions a form may ask (Claude Code's `AskUserQuestion` asks at most 4).
pub const MAX_QUESTIONS: usize = 8;
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

/// A form as questions, asked one after the other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Form {
    /// The questions, at least one and at most [`MAX_QUESTIONS`].
    pub questions: Vec<Question>,
}

/// One question of a form: a choice field, a free string field, or a choice field with its
/// free string companion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// The question: the agent's message for a form of one question (else the field's
    /// description or title), the field's own words for one of several.
    pub question: String,
    /// The choices, empty when the question has only a string field.
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

/// A choice field with its name, its own words and, once paired, its string companion.
struct Group {
    choice: Option<(String, ChoiceKind, Vec<FormChoice>)>,
    text: Option<(String, usize)>,
    words: String,
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
        let groups = group(properties)?;
        if groups.len() > MAX_QUESTIONS {
            return no("the form asks too many questions");
        }
        let single = groups.len() == 1;
        let mut questions = Vec::with_capacity(groups.len());
        for g in groups {
            let is_required =
                |name: Option<&String>| name.is_some_and(|n| required.contains(&n.as_str()));
            if let (Some(c), Some(t)) = (&g.choice, &g.text) {
                if is_required(Some(&c.0)) || is_required(Some(&t.0)) {
                    return no("the form needs two answers to one question");
                }
            }
            let question = if (single && !message.trim().is_empty()) || g.words.trim().is_empty() {
                message
            } else {
                &g.words
            };
            let (choice_field, choices) = match g.choice {
                Some((name, kind, choices)) => (Some((name, kind)), choices),
                None => (None, Vec::new()),
            };
            questions.push(Question {
                question: head(question.trim(), MAX_QUESTION),
                choices,
                free_text: g.text.is_some(),
                choice_field,
                text_field: g.text,
            });
        }
        Ok(Form { questions })
    }
}

/// The form's fields as questions: each choice field, with the free string field whose name
/// begins with its name (Claude Code's `question_<n>_custom` beside `question_<n>`), or with
/// the only string field when there is one choice field; a lone string field is a question of
/// its own when it is the only field to fill in. Any other string field cannot be placed.
fn group(properties: &Map<String, Value>) -> Result<Vec<Group>, Unsupported> {
    let mut groups: Vec<Group> = Vec::new();
    let mut texts: Vec<(String, usize, String)> = Vec::new();
    for (name, field) in properties {
        match classify(field)? {
            Field::Choice(kind, choices) => groups.push(Group {
                choice: Some((name.clone(), kind, choices)),
                text: None,
                words: describe(field),
            }),
            Field::Text(max) => texts.push((name.clone(), max, describe(field))),
        }
    }
    if groups.is_empty() {
        return match texts.len() {
            1 => {
                let (name, max, words) = texts.remove(0);
                Ok(vec![Group {
                    choice: None,
                    text: Some((name, max)),
                    words,
                }])
            }
            _ => Err(Unsupported("the form has more than one text field".into())),
        };
    }
    let lone = groups.len() == 1 && texts.len() == 1;
    for (name, max, _) in texts {
        let owner = groups
            .iter_mut()
            .filter(|g| lone || g.choice.as_ref().is_some_and(|c| name.starts_with(&c.0)))
            .max_by_key(|g| g.choice.as_ref().map_or(0, |c| c.0.len()));
        match owner {
            Some(g) if g.text.is_none() => g.text = Some((name, max)),
            _ => return Err(Unsupported("a text field belongs to no question".into())),
        }
    }
    Ok(groups)
}

impl Question {
    /// The content of this question answered with `value`: the choice field when it is one of
    /// the choices, else the string field; `None` when the question takes no such answer.
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
