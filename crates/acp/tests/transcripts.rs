//! Every agent → client message recorded from Hermes decodes into this crate's types.

use iris_acp::*;
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
struct Recorded {
    source: String,
    answers: Option<String>,
    msg: Value,
}

fn recorded() -> Vec<Recorded> {
    include_str!("fixtures/hermes-agent-messages.jsonl")
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).expect("fixture line is JSON"))
        .collect()
}

fn without_meta(mut value: Value) -> Value {
    if let Some(map) = value.as_object_mut() {
        map.remove("_meta");
    }
    value
}

#[test]
fn every_recorded_message_decodes() {
    let mut updates = 0;
    let mut responses = 0;
    for Recorded {
        source,
        answers,
        msg,
    } in recorded()
    {
        let context = format!("{source}: {msg}");
        match (
            msg.get("method").and_then(Value::as_str),
            answers.as_deref(),
        ) {
            (Some(method::SESSION_UPDATE), _) => {
                let params = msg["params"].clone();
                let notification: SessionNotification =
                    serde_json::from_value(params.clone()).expect(&context);
                assert!(
                    !matches!(notification.update, SessionUpdate::Unknown(_)),
                    "not recognised: {context}"
                );
                // Known updates re-encode to what Hermes sent, apart from `_meta`.
                let reencoded = serde_json::to_value(&notification.update).unwrap();
                assert_eq!(
                    reencoded,
                    without_meta(params["update"].clone()),
                    "{source}"
                );
                updates += 1;
            }
            (Some(method::SESSION_REQUEST_PERMISSION), _) => {
                let request: RequestPermissionRequest =
                    serde_json::from_value(msg["params"].clone()).expect(&context);
                assert!(!request.options.is_empty());
                assert!(request.tool_call.title.is_some());
                assert_eq!(request.clarify_question(), None);
            }
            (Some(other), _) => panic!("unexpected agent method {other} in {source}"),
            (None, Some(answered)) => {
                responses += 1;
                if let Some(error) = msg.get("error") {
                    assert!(error["code"].as_i64().is_some(), "{context}");
                    continue;
                }
                let result = msg["result"].clone();
                match answered {
                    method::INITIALIZE => {
                        let init: InitializeResponse =
                            serde_json::from_value(result).expect(&context);
                        assert_eq!(init.protocol_version, 1);
                        assert!(init.agent_capabilities.load_session);
                        assert!(init.agent_capabilities.prompt_capabilities.image);
                        assert!(init
                            .agent_capabilities
                            .other
                            .contains_key("sessionCapabilities"));
                        assert_eq!(init.agent_info.unwrap().name, "hermes-agent");
                    }
                    method::SESSION_NEW | "session/fork" => {
                        let new: NewSessionResponse =
                            serde_json::from_value(result).expect(&context);
                        assert!(!new.session_id.is_empty());
                        let models = new.models.expect("models");
                        assert_eq!(models.current_model_id, "custom:fake-model");
                        assert_eq!(models.available_models[0].model_id, "custom:fake-model");
                        assert_eq!(new.modes.expect("modes").available_modes.len(), 3);
                    }
                    method::SESSION_LOAD | "session/resume" => {
                        let load: LoadSessionResponse =
                            serde_json::from_value(result).expect(&context);
                        assert!(load.models.is_some());
                    }
                    method::SESSION_PROMPT => {
                        let prompt: PromptResponse =
                            serde_json::from_value(result).expect(&context);
                        assert_ne!(prompt.stop_reason, StopReason::Other);
                        if let Some(usage) = prompt.usage {
                            assert_eq!(
                                usage.total_tokens,
                                usage.input_tokens + usage.output_tokens
                            );
                        }
                    }
                    _ => {}
                }
            }
            (None, None) => panic!("unattributed message in {source}"),
        }
    }
    assert!(updates >= 10, "fixture lost its updates");
    assert!(responses >= 10, "fixture lost its responses");
}

#[test]
fn hermes_field_names_land_in_typed_fields() {
    let all = recorded();
    let updates: Vec<SessionUpdate> = all
        .iter()
        .filter(|r| r.msg["method"] == method::SESSION_UPDATE)
        .map(|r| serde_json::from_value(r.msg["params"]["update"].clone()).unwrap())
        .collect();

    let tool_call = updates
        .iter()
        .find_map(|u| match u {
            SessionUpdate::ToolCall(call) if call.kind == ToolKind::Execute => Some(call),
            _ => None,
        })
        .expect("an execute tool call");
    assert!(tool_call.title.starts_with("terminal: "));
    assert!(tool_call.tool_call_id.starts_with("tc-"));
    assert_eq!(
        tool_call.status, None,
        "Hermes omits the status of a new tool call"
    );
    assert!(
        matches!(&tool_call.content[0], ToolCallContent::Content(c) if c.content.as_text().unwrap().starts_with("$ "))
    );

    assert!(updates.iter().any(|u| matches!(u,
        SessionUpdate::ToolCallUpdate(update) if update.status == Some(ToolCallStatus::Failed))));
    assert!(updates.iter().any(|u| matches!(
        u,
        SessionUpdate::UsageUpdate(UsageUpdate {
            size: Some(65536),
            used: Some(_),
            ..
        })
    )));
    assert!(updates.iter().any(|u| matches!(u,
        SessionUpdate::SessionInfoUpdate(info) if info.title.as_deref().is_some_and(|t| t.starts_with("Fake Session Title")))));
    let commands = updates
        .iter()
        .find_map(|u| match u {
            SessionUpdate::AvailableCommandsUpdate(c) => Some(&c.available_commands),
            _ => None,
        })
        .expect("commands");
    let model = commands
        .iter()
        .find(|c| c.name == "model")
        .expect("model command");
    assert_eq!(
        model.input.as_ref().unwrap().hint,
        "model name to switch to"
    );
    let plan = updates
        .iter()
        .find_map(|u| match u {
            SessionUpdate::Plan(plan) => Some(plan),
            _ => None,
        })
        .expect("plan");
    assert_eq!(plan.entries[1].status, PlanEntryStatus::InProgress);

    let edit = all
        .iter()
        .filter(|r| r.msg["method"] == method::SESSION_REQUEST_PERMISSION)
        .map(|r| {
            serde_json::from_value::<RequestPermissionRequest>(r.msg["params"].clone()).unwrap()
        })
        .find(|p| p.tool_call.kind == Some(ToolKind::Edit))
        .expect("an edit approval");
    assert!(matches!(&edit.tool_call.content.as_deref().unwrap()[0],
        ToolCallContent::Diff(diff) if diff.new_text == "written by hermes\n" && diff.old_text.is_none()));
    assert_eq!(edit.options[1].kind, PermissionOptionKind::RejectOnce);
}

#[test]
fn unknown_and_malformed_updates_are_kept_raw() {
    let unknown = serde_json::json!({"sessionUpdate": "brand_new_thing", "x": 1});
    let parsed: SessionUpdate = serde_json::from_value(unknown.clone()).unwrap();
    assert_eq!(parsed, SessionUpdate::Unknown(unknown.clone()));
    assert_eq!(parsed.kind(), Some("brand_new_thing"));
    assert_eq!(serde_json::to_value(&parsed).unwrap(), unknown);

    // A known tag whose required field is missing must not fail the whole notification.
    let broken = serde_json::json!({"sessionUpdate": "tool_call", "title": "no id"});
    assert!(matches!(
        serde_json::from_value::<SessionUpdate>(broken).unwrap(),
        SessionUpdate::Unknown(_)
    ));

    let block: ContentBlock =
        serde_json::from_value(serde_json::json!({"type": "video", "url": "x"})).unwrap();
    assert!(matches!(block, ContentBlock::Unknown(_)));
}

#[test]
fn outgoing_messages_use_acp_field_names() {
    let selected = serde_json::to_value(RequestPermissionResponse::selected("allow_once")).unwrap();
    assert_eq!(
        selected,
        serde_json::json!({"outcome": {"outcome": "selected", "optionId": "allow_once"}})
    );
    let cancelled = serde_json::to_value(RequestPermissionResponse::cancelled()).unwrap();
    assert_eq!(
        cancelled,
        serde_json::json!({"outcome": {"outcome": "cancelled"}})
    );

    let prompt = PromptRequest {
        session_id: "s".into(),
        prompt: vec![
            ContentBlock::text("hi"),
            ContentBlock::image("AAAA", "image/png"),
            ContentBlock::resource_link("file:///w/a.txt", "a.txt"),
        ],
    };
    assert_eq!(
        serde_json::to_value(prompt).unwrap(),
        serde_json::json!({"sessionId": "s", "prompt": [
            {"type": "text", "text": "hi"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "resource_link", "uri": "file:///w/a.txt", "name": "a.txt"},
        ]})
    );
}
