//! `/model` and the model picker take a model as the seed's catalog and picker example name it,
//! `provider/model` (the provider being the picker's group), and the bare model id still works.

mod common;

use common::*;
use iris_client::{Client, ClientError, Event};
use iris_protocol::{ErrorCode, Role, ServerFrame};

/// Sends a gateway command and returns its frames up to its reply (a system message or a picker).
async fn command(client: &mut Client, text: &str) -> Vec<Event> {
    send(client, default_lane(), text, false).await;
    until(client, |e| {
        matches!(&e.body, ServerFrame::Message(m) if m.role == Role::System)
            || e.frame_type().starts_with("picker.")
    })
    .await
}

/// The model the next answer says it came from.
async fn answering_model(client: &mut Client) -> String {
    let frames = turn(client, default_lane(), "which model").await;
    frames
        .iter()
        .find_map(|e| match &e.body {
            ServerFrame::MessageStop(s) => s.runtime.as_ref()?.model.clone(),
            _ => None,
        })
        .expect("the answer's runtime model")
}

/// Opens the model picker; returns its id and its groups with the model ids they list.
async fn picker(client: &mut Client) -> (String, Vec<(String, Vec<String>)>) {
    let frames = command(client, "/model").await;
    match &frames.last().unwrap().body {
        ServerFrame::PickerModel(p) => (
            p.picker_id.clone(),
            p.providers
                .iter()
                .map(|g| {
                    (
                        g.id.clone(),
                        g.models.iter().map(|m| m.id.clone()).collect(),
                    )
                })
                .collect(),
        ),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn model_picker_and_command_take_provider_slash_model_and_the_bare_id() {
    let gw = TestGateway::start_demo().await;
    let (mut a, _) = gw.connect("a").await;

    // The picker's group and model, joined as in the seed's `"local/qwen3-27b"`.
    let (id, groups) = picker(&mut a).await;
    let (group, models) = groups.iter().find(|(g, _)| g == "other").unwrap();
    let value = format!("{group}/{}", models[0]);
    select(&mut a, &id, &value).await.unwrap();
    assert_eq!(answering_model(&mut a).await, "mini");

    // The provider and the model's own name.
    let (id, _) = picker(&mut a).await;
    let err = select(&mut a, &id, "other/verbose").await.unwrap_err();
    assert!(
        matches!(
            err,
            ClientError::Server {
                code: ErrorCode::BadRequest,
                ..
            }
        ),
        "a model outside the named group is refused: {err:?}"
    );
    select(&mut a, &id, "demo/verbose").await.unwrap();
    assert_eq!(answering_model(&mut a).await, "verbose");

    // `/model <provider/model>` as the catalog's args_hint says, and the bare id.
    let switched = command(&mut a, "/model other/mini").await;
    assert!(
        system_texts(&switched)
            .iter()
            .any(|t| t.contains("switched to other:mini")),
        "{:?}",
        system_texts(&switched)
    );
    assert_eq!(answering_model(&mut a).await, "mini");
    command(&mut a, "/model echo").await;
    assert_eq!(answering_model(&mut a).await, "echo");
    let unknown = command(&mut a, "/model other/echo").await;
    assert!(system_texts(&unknown)
        .iter()
        .any(|t| t.contains("Unknown model")));
    gw.stop().await;
}
