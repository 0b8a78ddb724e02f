//! Pickers, commands and titles through the real server and the built-in demo agent: approvals
//! and questions, their expiry, auto-threads and their titles, the command catalog, the model
//! picker and sessions resumed after a restart.

mod common;

use std::time::Duration;

use common::turns::*;
use common::*;
use iris_client::ClientError;
use iris_protocol::{
    BusyReason, ClientFrame, Empty, ErrorCode, Header, MessageSend, Role, ServerFrame,
};

#[tokio::test]
async fn approvals_are_answered_through_picker_approval() {
    let gw = TestGateway::start_demo().await;
    let (mut a, _) = gw.connect("a").await;
    let (mut b, _) = gw.connect("b").await;
    send(&mut a, default_lane(), "ask permission", false).await;
    let (id, picker) = picker_id(&mut a, "picker.approval").await;
    assert!(picker.cursor.is_some(), "pickers are outboxed");
    match &picker.body {
        ServerFrame::PickerApproval(p) => {
            let values: Vec<_> = p.choices.iter().map(|c| c.value.as_str()).collect();
            assert!(
                values.contains(&"allow_once") && values.contains(&"reject_once"),
                "{values:?}"
            );
            assert!(!p.title.is_empty());
        }
        other => panic!("{other:?}"),
    }
    let waiting = a.wait_for(|e| matches!(&e.body, ServerFrame::AgentBusy(b) if b.reason == BusyReason::WaitingInput)).await;
    assert!(waiting.is_ok());
    // The other device sees the same picker and can answer it.
    let (id_b, _) = picker_id(&mut b, "picker.approval").await;
    assert_eq!(id, id_b);
    let err = select(&mut a, &id, "not-an-option").await.unwrap_err();
    assert!(matches!(
        err,
        ClientError::Server {
            code: ErrorCode::BadRequest,
            ..
        }
    ));
    let ack = select(&mut b, &id, "allow_once").await.unwrap();
    assert_eq!(ack.frame_type(), "ack");
    let frames = until_idle(&mut a).await;
    assert!(
        final_text(&frames).contains("Permission granted"),
        "{}",
        final_text(&frames)
    );
    // A stale answer changes nothing.
    let stale = select(&mut a, &id, "allow_once").await.unwrap_err();
    assert!(matches!(
        stale,
        ClientError::Server {
            code: ErrorCode::NotFound,
            ..
        }
    ));

    send(&mut a, default_lane(), "permission again", false).await;
    let (id, _) = picker_id(&mut a, "picker.approval").await;
    select(&mut a, &id, "reject_once").await.unwrap();
    let frames = until_idle(&mut a).await;
    assert!(
        final_text(&frames).contains("Permission denied"),
        "{}",
        final_text(&frames)
    );
    gw.stop().await;
}

#[tokio::test]
async fn clarify_questions_open_a_clarify_picker() {
    let gw = TestGateway::start_demo().await;
    let (mut a, _) = gw.connect("a").await;
    send(&mut a, default_lane(), "clarify the colour", false).await;
    let (id, picker) = picker_id(&mut a, "picker.clarify").await;
    match &picker.body {
        ServerFrame::PickerClarify(p) => assert_eq!(p.choices.len(), 2),
        other => panic!("{other:?}"),
    }
    select(&mut a, &id, "blue").await.unwrap();
    let frames = until_idle(&mut a).await;
    assert!(
        final_text(&frames).contains("Blue"),
        "{}",
        final_text(&frames)
    );
    gw.stop().await;
}

#[tokio::test]
async fn an_unanswered_approval_expires_and_the_lane_goes_on() {
    let gw = TestGateway::start_with(|c| {
        c.agent_command = Some(demo_agent());
        c.approval_timeout = Duration::from_millis(300);
    })
    .await;
    let (mut a, _) = gw.connect("a").await;
    send(&mut a, default_lane(), "permission please", false).await;
    let (id, _) = picker_id(&mut a, "picker.approval").await;
    let frames = until_idle(&mut a).await;
    assert!(
        system_texts(&frames).iter().any(|t| t.contains("expired")),
        "{:?}",
        types(&frames)
    );
    let stale = select(&mut a, &id, "allow_once").await.unwrap_err();
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
async fn auto_threads_get_an_instant_title_then_the_agents_title() {
    let gw = TestGateway::start_demo().await;
    let (mut a, _) = gw.connect("a").await;
    let (mut b, _) = gw.connect("b").await;
    let text = "Please give this conversation a title because it is about many interesting things";
    let echo = send(&mut a, default_lane(), text, true).await;
    let thread = echo
        .header
        .thread_id
        .clone()
        .expect("the echo is in the new thread");
    let created = b
        .wait_for(|e| e.frame_type() == "channel.created")
        .await
        .unwrap();
    match &created.body {
        ServerFrame::ChannelCreated(c) => {
            assert!(c.auto);
            assert_eq!(c.chat_id, thread);
            assert_eq!(c.kind, "thread");
            assert_eq!(c.parent_chat_id.as_deref(), Some("default"));
            assert!(
                c.name.chars().count() <= 48 && text.starts_with(&c.name),
                "{:?}",
                c.name
            );
            assert!(!c.name.ends_with(' '));
        }
        other => panic!("{other:?}"),
    }
    let renamed = a
        .wait_for(|e| e.frame_type() == "channel.renamed")
        .await
        .unwrap();
    match &renamed.body {
        ServerFrame::ChannelRenamed(r) => assert_eq!(
            (r.chat_id.as_str(), r.name.as_str()),
            (thread.as_str(), "Demo title")
        ),
        other => panic!("{other:?}"),
    }
    let note = a
        .wait_for(|e| e.frame_type() == "notification")
        .await
        .unwrap();
    assert_eq!(note.json()["payload"]["kind"], "channel_renamed");

    // A title the user set is never overwritten by the agent.
    let lane = Header::lane("default", Some(thread.clone()));
    let frame = ClientFrame::MessageSend(MessageSend {
        text: "/title My own name".into(),
        ..Default::default()
    });
    a.request(lane.clone(), frame).await.unwrap();
    a.wait_for(|e| matches!(&e.body, ServerFrame::ChannelRenamed(r) if r.name == "My own name"))
        .await
        .unwrap();
    turn(&mut a, lane, "title again").await;
    a.expect_quiet(QUIET)
        .await
        .expect("no rename after a user title");
    let (_c, ack) = gw.connect("c").await;
    assert!(ack
        .channels
        .iter()
        .any(|c| c.chat_id == thread && c.name == "My own name"));
    gw.stop().await;
}

#[tokio::test]
async fn the_catalog_mixes_gateway_and_agent_commands_without_duplicates() {
    let gw = TestGateway::start_demo().await;
    let (mut a, _) = gw.connect("a").await;
    // The agent advertises its commands once a session exists.
    turn(&mut a, default_lane(), "hello").await;
    let catalog = a
        .request(Header::default(), ClientFrame::CommandsCatalog(Empty {}))
        .await
        .unwrap();
    let commands = match catalog.body {
        ServerFrame::CommandsCatalog(c) => c.commands,
        other => panic!("{other:?}"),
    };
    let names: Vec<&str> = commands.iter().map(|c| c.name.as_str()).collect();
    for wanted in [
        "/new",
        "/stop",
        "/status",
        "/model",
        "/reasoning",
        "/title",
        "/help",
        "/tools",
    ] {
        assert!(names.contains(&wanted), "{wanted} missing from {names:?}");
    }
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "no duplicates: {names:?}");
    assert!(commands
        .iter()
        .find(|c| c.name == "/new")
        .unwrap()
        .aliases
        .contains(&"/reset".to_owned()));
    assert!(!names.contains(&"/fast"), "no speed option on this agent");
    // An agent's own command is listed as the agent advertised it.
    let tools = commands.iter().find(|c| c.name == "/tools").unwrap();
    assert_eq!(tools.description, "List the demo's (simulated) tools");
    let complete = a
        .request(
            Header::default(),
            ClientFrame::CommandsComplete(iris_protocol::CommandsCompleteRequest {
                prefix: "/mo".into(),
            }),
        )
        .await
        .unwrap();
    assert_eq!(complete.json()["payload"]["matches"][0]["name"], "/model");

    // Gateway commands answer with a system message; paths are plain text; agent commands go to
    // the agent.
    let status = turn_command(&mut a, "/status").await;
    assert!(
        system_texts(&status)
            .iter()
            .any(|t| t.contains("demo agent")),
        "{:?}",
        system_texts(&status)
    );
    let path = turn(&mut a, default_lane(), "/etc/hosts").await;
    assert!(
        system_texts(&path).is_empty(),
        "a path is not a gateway command"
    );
    assert!(
        final_text(&path).contains("/etc/hosts"),
        "the agent got it as text: {}",
        final_text(&path)
    );
    // An agent command reaches the agent as the command, and the agent answers it.
    let tools = turn(&mut a, default_lane(), "/tools").await;
    assert_eq!(
        final_text(&tools),
        "Tools: terminal (simulated; nothing really runs)"
    );
    gw.stop().await;
}

#[tokio::test]
async fn the_model_picker_switches_models() {
    let gw = TestGateway::start_demo().await;
    let (mut a, _) = gw.connect("a").await;
    let frames = turn_command(&mut a, "/model").await;
    let picker = frames.last().unwrap();
    let (id, providers) = match &picker.body {
        ServerFrame::PickerModel(p) => (p.picker_id.clone(), p.providers.clone()),
        other => panic!("{other:?}"),
    };
    let groups: Vec<(&str, usize)> = providers
        .iter()
        .map(|p| (p.id.as_str(), p.models.len()))
        .collect();
    assert_eq!(groups, [("demo", 2), ("other", 1)]);
    select(&mut a, &id, "demo:verbose").await.unwrap();
    let reply = a
        .wait_for(|e| matches!(&e.body, ServerFrame::Message(m) if m.role == Role::System))
        .await
        .unwrap();
    assert!(message_text(&reply).contains("demo:verbose"));
    let frames = turn(&mut a, default_lane(), "which model").await;
    let stop = frames.iter().find_map(|e| match &e.body {
        ServerFrame::MessageStop(s) => Some(s.clone()),
        _ => None,
    });
    assert_eq!(
        stop.unwrap().runtime.unwrap().model.as_deref(),
        Some("verbose")
    );
    let direct = turn_command(&mut a, "/model other:mini").await;
    assert!(system_texts(&direct)
        .iter()
        .any(|t| t.contains("other:mini")));
    let unknown = turn_command(&mut a, "/model nope").await;
    assert!(system_texts(&unknown)
        .iter()
        .any(|t| t.contains("Unknown model")));
    gw.stop().await;
}

#[tokio::test]
async fn lanes_resume_their_session_after_a_gateway_restart() {
    let dir = tempfile::tempdir().unwrap();
    let gw = TestGateway::start_in(dir.path(), |c| c.agent_command = Some(demo_agent())).await;
    let (mut a, _) = gw.connect("a").await;
    turn(&mut a, default_lane(), "first").await;
    let session = gw
        .shared
        .store
        .lane_session("default", None)
        .await
        .unwrap()
        .expect("session stored");
    drop(a);
    gw.stop().await;
    let gw = TestGateway::start_in(dir.path(), |c| c.agent_command = Some(demo_agent())).await;
    let (mut a, _) = gw.connect("a").await;
    let frames = turn(&mut a, default_lane(), "second").await;
    assert_eq!(final_text(&frames), "Echo: second");
    assert!(
        system_texts(&frames).is_empty(),
        "the session was restored, not replaced: {:?}",
        system_texts(&frames)
    );
    assert_eq!(
        gw.shared.store.lane_session("default", None).await.unwrap(),
        Some(session)
    );
    // /new starts a fresh one.
    let fresh = turn_command(&mut a, "/new").await;
    assert!(system_texts(&fresh)
        .iter()
        .any(|t| t.contains("new session")));
    gw.stop().await;
}
