//! ACP elicitation (`elicitation/create`, form mode) through the real server and the demo agent
//! (`elicit`): the form shown as a question picker with choices and a typed answer, answered
//! from any device (also one that connects later), two questions asked one after the other,
//! declined when it cannot be shown, cancelled when the turn is stopped, and expired like an
//! approval.

mod common;

use std::time::Duration;

use common::turns::*;
use common::*;
use iris_client::ClientError;
use iris_protocol::{ClientFrame, Empty, ErrorCode, PickerOutcome, ServerFrame};

/// The closing frame of picker `id`, once it comes.
async fn closed(client: &mut iris_client::Client, id: &str) -> iris_protocol::PickerClosed {
    let e = client
        .wait_for(|e| matches!(&e.body, ServerFrame::PickerClosed(c) if c.picker_id == id))
        .await
        .expect("picker.closed");
    match e.body {
        ServerFrame::PickerClosed(c) => c,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_form_is_a_question_with_choices_and_a_typed_answer_from_any_device() {
    let gw = TestGateway::start_demo().await;
    let (mut a, _) = gw.connect("a").await;
    let (mut b, _) = gw.connect("b").await;
    send(&mut a, default_lane(), "elicit a colour", false).await;
    let (id, picker) = picker_id(&mut a, "picker.clarify").await;
    assert!(picker.cursor.is_some(), "the question is outboxed");
    match &picker.body {
        ServerFrame::PickerClarify(p) => {
            assert_eq!(p.title, "Which color do you prefer?");
            let choices: Vec<_> = p
                .choices
                .iter()
                .map(|c| (c.value.as_str(), c.label.as_str()))
                .collect();
            assert_eq!(choices, [("red", "Red"), ("blue", "Blue")]);
            assert!(
                p.free_text,
                "the form's free string field takes a typed answer"
            );
        }
        other => panic!("{other:?}"),
    }
    // Too long for the field's maxLength (200): refused, the question stays open.
    let err = select(&mut a, &id, &"x".repeat(201)).await.unwrap_err();
    assert!(matches!(
        err,
        ClientError::Server {
            code: ErrorCode::BadRequest,
            ..
        }
    ));
    // The other device answers with a choice.
    let (id_b, _) = picker_id(&mut b, "picker.clarify").await;
    assert_eq!(id, id_b);
    select(&mut b, &id, "blue").await.unwrap();
    let shut = closed(&mut a, &id).await;
    assert_eq!(shut.outcome, PickerOutcome::Answered);
    assert_eq!(shut.value.as_deref(), Some("blue"));
    let frames = until_idle(&mut a).await;
    assert!(
        final_text(&frames).starts_with(r#"You answered {"color":"blue"}."#),
        "{}",
        final_text(&frames)
    );

    // A typed answer fills the free string field.
    send(&mut a, default_lane(), "elicit again", false).await;
    let (id, _) = picker_id(&mut a, "picker.clarify").await;
    select(&mut a, &id, "green, please").await.unwrap();
    let shut = closed(&mut a, &id).await;
    assert_eq!(shut.value.as_deref(), Some("green, please"));
    let frames = until_idle(&mut a).await;
    assert!(
        final_text(&frames).starts_with(r#"You answered {"other":"green, please"}."#),
        "{}",
        final_text(&frames)
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_form_of_two_questions_asks_them_one_after_the_other() {
    let gw = TestGateway::start_demo().await;
    let (mut a, _) = gw.connect("a").await;
    let (mut b, _) = gw.connect("b").await;
    send(&mut a, default_lane(), "elicit two things", false).await;
    let (first, picker) = picker_id(&mut a, "picker.clarify").await;
    let ServerFrame::PickerClarify(p) = &picker.body else {
        unreachable!()
    };
    assert_eq!(p.title, "(1/2) Which color?");
    assert!(p.free_text, "color_other goes with color");
    select(&mut a, &first, "purple").await.unwrap();
    // The answered question closes before the next one shows, on every device.
    let frames = until(&mut b, |e| {
        e.frame_type() == "picker.clarify" && e.json()["payload"]["picker_id"] != first.as_str()
    })
    .await;
    let closed_at = frames
        .iter()
        .position(|e| matches!(&e.body, ServerFrame::PickerClosed(c) if c.picker_id == first))
        .unwrap_or_else(|| panic!("{:?}", types(&frames)));
    assert!(closed_at < frames.len() - 1);
    let ServerFrame::PickerClarify(second) = &frames.last().unwrap().body else {
        unreachable!()
    };
    assert_eq!(second.title, "(2/2) Large?");
    assert!(!second.free_text);
    let values: Vec<_> = second.choices.iter().map(|c| c.value.as_str()).collect();
    assert_eq!(values, ["true", "false"]);
    select(&mut b, &second.picker_id, "true").await.unwrap();
    let frames = until_idle(&mut a).await;
    assert!(
        final_text(&frames).starts_with(r#"You answered {"color_other":"purple","large":true}."#),
        "{}",
        final_text(&frames)
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_device_that_connects_while_the_form_waits_is_told_and_answers_it() {
    let gw = TestGateway::start_demo().await;
    let (mut a, _) = gw.connect("a").await;
    send(&mut a, default_lane(), "elicit", false).await;
    let (id, _) = picker_id(&mut a, "picker.clarify").await;
    let (mut phone, ack) = gw.connect("phone").await;
    let listed: Vec<_> = ack
        .open_pickers
        .iter()
        .map(|f| f["payload"]["picker_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(listed, std::slice::from_ref(&id));
    assert_eq!(ack.open_pickers[0]["payload"]["free_text"], true);
    select(&mut phone, &id, "red").await.unwrap();
    let frames = until_idle(&mut a).await;
    assert!(
        final_text(&frames).starts_with(r#"You answered {"color":"red"}."#),
        "{}",
        final_text(&frames)
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_form_that_cannot_be_shown_is_declined_at_once_and_said() {
    let gw = TestGateway::start_demo().await;
    let (mut a, _) = gw.connect("a").await;
    let frames = turn(&mut a, default_lane(), "elicit a number").await;
    assert!(
        !types(&frames).contains(&"picker.clarify"),
        "{:?}",
        types(&frames)
    );
    let said = system_texts(&frames);
    assert!(
        said.iter()
            .any(|t| t.contains("cannot show") && t.contains("number")),
        "{said:?}"
    );
    assert!(
        final_text(&frames).starts_with("Declined."),
        "{}",
        final_text(&frames)
    );
    gw.stop().await;
}

#[tokio::test]
async fn stopping_the_turn_cancels_the_form() {
    let gw = TestGateway::start_demo().await;
    let (mut a, _) = gw.connect("a").await;
    send(&mut a, default_lane(), "elicit", false).await;
    let (id, _) = picker_id(&mut a, "picker.clarify").await;
    a.request(default_lane(), ClientFrame::AgentStop(Empty {}))
        .await
        .unwrap();
    let shut = closed(&mut a, &id).await;
    assert_eq!(shut.outcome, PickerOutcome::Cancelled);
    until_idle(&mut a).await;
    let stale = select(&mut a, &id, "red").await.unwrap_err();
    assert!(matches!(
        stale,
        ClientError::Server {
            code: ErrorCode::NotFound,
            ..
        }
    ));
    let next = turn(&mut a, default_lane(), "still there?").await;
    assert_eq!(final_text(&next), "Echo: still there?");
    gw.stop().await;
}

#[tokio::test]
async fn an_unanswered_form_expires_like_an_approval() {
    let gw = TestGateway::start_with(|c| {
        c.agent_command = Some(demo_agent());
        c.approval_timeout = Duration::from_millis(300);
    })
    .await;
    let (mut a, _) = gw.connect("a").await;
    send(&mut a, default_lane(), "elicit", false).await;
    let (id, _) = picker_id(&mut a, "picker.clarify").await;
    let frames = until_idle(&mut a).await;
    let expired = frames.iter().any(|e| {
        matches!(&e.body, ServerFrame::PickerClosed(c)
            if c.picker_id == id && c.outcome == PickerOutcome::Expired)
    });
    assert!(expired, "{:?}", types(&frames));
    assert!(
        system_texts(&frames).iter().any(|t| t.contains("expired")),
        "{:?}",
        types(&frames)
    );
    let next = turn(&mut a, default_lane(), "still there?").await;
    assert_eq!(final_text(&next), "Echo: still there?");
    gw.stop().await;
}
