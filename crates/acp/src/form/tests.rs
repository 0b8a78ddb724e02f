//! The mapping of elicitation forms to one question, with hostile and oversized schemas.

use serde_json::{json, Value};

use super::*;

/// The form Claude Code's adapter sends for one `AskUserQuestion` question.
fn ask_user_question() -> Value {
    json!({
        "type": "object",
        "properties": {
            "question_0": {
                "type": "string",
                "title": "Color",
                "oneOf": [
                    {"const": "Red", "title": "Red", "description": "warm"},
                    {"const": "Blue", "title": "Blue"}
                ]
            },
            "question_0_custom": {
                "type": "string",
                "title": "Other",
                "description": "Type your own answer, or add a note to the option you chose above (optional)."
            }
        }
    })
}

fn values(form: &Question) -> Vec<&str> {
    form.choices.iter().map(|c| c.value.as_str()).collect()
}

/// The only question of a form.
fn one(message: &str, schema: &Value) -> Question {
    let form = Form::from_schema(message, schema).unwrap();
    assert_eq!(form.questions.len(), 1, "{form:?}");
    form.questions.into_iter().next().unwrap()
}

#[test]
fn one_question_with_other_box_is_choices_and_free_text() {
    let form = one("Which color?", &ask_user_question());
    assert_eq!(form.question, "Which color?");
    assert_eq!(values(&form), ["Red", "Blue"]);
    assert!(form.free_text);
    assert_eq!(
        Value::Object(form.content("Blue").unwrap()),
        json!({"question_0": "Blue"})
    );
    assert_eq!(
        Value::Object(form.content("Green, please").unwrap()),
        json!({"question_0_custom": "Green, please"})
    );
    assert_eq!(
        form.content("   "),
        None,
        "an empty typed answer is no answer"
    );
}

#[test]
fn enum_with_names_boolean_and_array() {
    let schema = json!({"properties": {"size": {
        "type": "string", "enum": ["s", "l"], "enumNames": ["Small", "Large"]
    }}, "required": ["size"]});
    let form = one("Size?", &schema);
    assert_eq!(form.choices[1].label, "Large");
    assert!(!form.free_text);
    assert_eq!(
        Value::Object(form.content("l").unwrap()),
        json!({"size": "l"})
    );
    assert_eq!(
        form.content("xl"),
        None,
        "no text field: only a choice answers"
    );

    let schema = json!({"properties": {"ok": {"type": "boolean", "description": "Go on?"}}});
    let form = one("", &schema);
    assert_eq!(form.question, "Go on?");
    assert_eq!(values(&form), ["true", "false"]);
    assert_eq!(
        Value::Object(form.content("false").unwrap()),
        json!({"ok": false})
    );

    let schema = json!({"properties": {"picks": {
        "type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}, {"const": "b"}]}
    }}});
    let form = one("Pick", &schema);
    assert_eq!(
        form.choices[1].label, "b",
        "a choice without title shows its value"
    );
    assert_eq!(
        Value::Object(form.content("a").unwrap()),
        json!({"picks": ["a"]})
    );
}

#[test]
fn a_lone_string_is_a_typed_answer_within_its_max_length() {
    let schema =
        json!({"properties": {"name": {"type": "string", "maxLength": 5}}, "required": ["name"]});
    let form = one("Your name?", &schema);
    assert!(form.choices.is_empty());
    assert!(form.free_text);
    assert_eq!(
        Value::Object(form.content("Ada").unwrap()),
        json!({"name": "Ada"})
    );
    assert_eq!(form.content("Adelheid"), None);
}

#[test]
fn several_questions_are_asked_one_after_the_other_each_with_its_other_box() {
    // As Claude Code's adapter asks two `AskUserQuestion` questions.
    let choice = |a: &str, b: &str| json!([{"const": a, "title": a}, {"const": b, "title": b}]);
    let schema = json!({"type": "object", "properties": {
        "question_0": {"type": "string", "title": "Color", "description": "Which color?",
            "oneOf": choice("Red", "Blue")},
        "question_0_custom": {"type": "string", "title": "Other"},
        "question_1": {"type": "array", "title": "Fruit", "description": "Which fruits?",
            "items": {"anyOf": choice("Apple", "Pear")}},
        "question_1_custom": {"type": "string", "title": "Other"}
    }});
    let form = Form::from_schema("Please answer the following questions.", &schema).unwrap();
    let q: Vec<_> = form.questions.iter().map(|q| q.question.as_str()).collect();
    assert_eq!(
        q,
        ["Which color?", "Which fruits?"],
        "each asks in its own words"
    );
    assert!(form.questions.iter().all(|q| q.free_text));
    assert_eq!(
        Value::Object(form.questions[1].content("Pear").unwrap()),
        json!({"question_1": ["Pear"]})
    );
    assert_eq!(
        Value::Object(form.questions[1].content("Plums").unwrap()),
        json!({"question_1_custom": "Plums"})
    );
    // Booleans without text: one question each.
    let schema = json!({"properties": {"a": {"type": "boolean"}, "b": {"type": "boolean"}}});
    let form = Form::from_schema("Both?", &schema).unwrap();
    assert_eq!(form.questions.len(), 2);
    assert!(form.questions.iter().all(|q| !q.free_text));
    // More questions than a form may ask.
    let many: serde_json::Map<String, Value> = (0..=MAX_QUESTIONS)
        .map(|i| (format!("f{i}"), json!({"type": "boolean"})))
        .collect();
    let err = Form::from_schema("?", &json!({ "properties": many })).unwrap_err();
    assert!(err.0.contains("too many questions"), "{err:?}");
}

#[test]
fn forms_that_cannot_be_shown_are_unsupported() {
    let cases = [
        json!({}),
        json!({"type": "object", "properties": {}}),
        json!({"properties": "nope"}),
        json!({"properties": {"n": {"type": "number", "minimum": 1, "maximum": 5}}}),
        json!({"properties": {"n": {"type": "integer"}}}),
        json!({"properties": {"o": {"type": "object", "properties": {"x": {"type": "string"}}}}}),
        json!({"properties": {"x": {}}}),
        json!({"properties": {"a": {"type": "string"}, "b": {"type": "string"}}}),
        // Two choice fields and a string field that goes with neither.
        json!({"properties": {"a": {"type": "boolean"}, "b": {"type": "boolean"}, "t": {"type": "string"}}}),
        // Two string fields for one choice.
        json!({"properties": {"q": {"type": "boolean"}, "q_x": {"type": "string"}, "q_y": {"type": "string"}}}),
        json!({"properties": {"l": {"type": "array", "items": {"type": "string"}}}}),
        json!({"properties": {"s": {"type": "string", "enum": [1, 2, ""]}}}),
        json!({"properties": {"s": {"type": "string", "maxLength": 0}}}),
        // A choice and a text field that are both to be filled in.
        json!({"properties": {"c": {"type": "boolean"}, "t": {"type": "string"}}, "required": ["t"]}),
    ];
    for schema in cases {
        assert!(
            Form::from_schema("?", &schema).is_err(),
            "should be unsupported: {schema}"
        );
    }
}

#[test]
fn hostile_forms_are_bounded() {
    let many: serde_json::Map<String, Value> = (0..=MAX_FIELDS)
        .map(|i| (format!("f{i}"), json!({"type": "boolean"})))
        .collect();
    let err = Form::from_schema("?", &json!({ "properties": many })).unwrap_err();
    assert!(err.0.contains("too many"), "{err:?}");

    let long = "x".repeat(100_000);
    let mut options: Vec<Value> = (0..1000)
        .map(|i| json!({"const": format!("v{i}"), "title": long}))
        .collect();
    options.insert(
        0,
        json!({"const": "y".repeat(MAX_VALUE_BYTES + 1), "title": "too long"}),
    );
    let schema = json!({"properties": {"c": {"type": "string", "oneOf": options},
        "t": {"type": "string", "maxLength": 1_000_000_000u64}}});
    let form = one(&long, &schema);
    assert_eq!(
        form.question.chars().count(),
        MAX_QUESTION + 1,
        "cut, with an ellipsis"
    );
    assert_eq!(form.choices.len(), MAX_CHOICES);
    assert_eq!(
        form.choices[0].value, "v0",
        "an over-long value is left out"
    );
    assert!(form
        .choices
        .iter()
        .all(|c| c.label.chars().count() <= MAX_LABEL + 1));
    assert!(
        form.content(&"z".repeat(MAX_TEXT + 1)).is_none(),
        "typed answers are bounded"
    );
    assert!(form.content(&"z".repeat(MAX_TEXT)).is_some());
}
