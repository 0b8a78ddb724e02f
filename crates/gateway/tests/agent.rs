//! The agent bridge through the real server and the built-in demo agent (a child process spoken
//! to over ACP): every mapping of a turn onto frames, the queue, stop, steer, crashes, pickers,
//! commands, auto-threads and two lanes at once.

mod common;

use std::time::Duration;

use common::*;
use iris_client::{Client, ClientError, Event};
use iris_protocol::{
    AgentSteer, BusyReason, ClientFrame, Empty, ErrorCode, Header, MessageSend, Role, ServerFrame,
};

#[tokio::test]
async fn a_streamed_answer_arrives_in_order_on_every_device() {
    let gw = TestGateway::start_demo().await;
    let (mut a, _) = gw.connect("a").await;
    let (mut b, _) = gw.connect("b").await;
    let echo = send(&mut a, default_lane(), "hello world", false).await;
    let user_id = message_id(&echo);
    let frames = until_idle(&mut a).await;
    let t = types(&frames);
    // The lane was idle: busy was stored with the message, before the agent took it.
    assert_eq!(
        &t[0..3],
        ["agent.busy", "read.receipt", "message.start"],
        "{t:?}"
    );
    assert!(t.contains(&"message.update"));
    assert_eq!(&t[t.len() - 2..], ["message.stop", "agent.idle"], "{t:?}");
    match &frames[0].body {
        ServerFrame::AgentBusy(b) => assert_eq!(b.reason, BusyReason::Processing),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        frames[0].cursor.map(|c| c == echo.cursor.unwrap() + 1),
        Some(true),
        "busy is the frame after the message, in its commit"
    );
    match &frames[1].body {
        ServerFrame::ReadReceipt(r) => assert_eq!(r.message_id, user_id),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        frames[1].cursor, None,
        "the sender's receipt is not outboxed"
    );
    // Updates carry the full text so far, growing.
    let updates: Vec<String> = frames
        .iter()
        .filter_map(|e| match &e.body {
            ServerFrame::MessageUpdate(u) => Some(u.text.clone()),
            _ => None,
        })
        .collect();
    assert!(
        updates.windows(2).all(|w| w[1].starts_with(&w[0])),
        "{updates:?}"
    );
    let stop = frames.iter().find_map(|e| match &e.body {
        ServerFrame::MessageStop(s) => Some(s.clone()),
        _ => None,
    });
    let stop = stop.unwrap();
    assert_eq!(stop.final_text, "Echo: hello world");
    let rt = stop
        .runtime
        .expect("runtime footer on final assistant messages");
    assert_eq!(rt.model.as_deref(), Some("echo"));
    assert!(rt.cwd.is_some() && rt.latency.is_some());
    assert!(rt.context_pct.is_some(), "usage_update becomes context_pct");

    // The other device sees the same turn, without the sender's receipt.
    let other = until_idle(&mut b).await;
    assert_eq!(other[0].frame_type(), "message");
    assert!(!types(&other).contains(&"read.receipt"));
    assert_eq!(final_text(&other), "Echo: hello world");
    // And history has both messages.
    let history = a
        .request(default_lane(), ClientFrame::History(Default::default()))
        .await
        .unwrap();
    match history.body {
        ServerFrame::History(h) => {
            let texts: Vec<_> = h
                .messages
                .iter()
                .map(|m| (m.role, m.text.as_str()))
                .collect();
            assert_eq!(
                texts,
                [
                    (Role::User, "hello world"),
                    (Role::Assistant, "Echo: hello world")
                ]
            );
            assert!(h.messages[1].runtime.is_some());
        }
        other => panic!("{other:?}"),
    }
    gw.stop().await;
}

#[tokio::test]
async fn tool_calls_become_commentary_and_tool_frames() {
    let gw = TestGateway::start_demo().await;
    let (mut a, _) = gw.connect("a").await;
    let frames = turn(&mut a, default_lane(), "run a tool please").await;
    let t = types(&frames);
    let commentary = frames.iter().find_map(|e| match &e.body {
        ServerFrame::Commentary(c) => Some(c.text.clone()),
        _ => None,
    });
    assert_eq!(commentary.as_deref(), Some("Let me run a command."));
    let start = frames.iter().find_map(|e| match &e.body {
        ServerFrame::ToolStart(s) => Some(s.clone()),
        _ => None,
    });
    let start = start.expect("tool.start");
    assert_eq!(
        (start.index, start.name.as_str(), start.emoji.as_deref()),
        (0, "terminal", Some("💻"))
    );
    assert_eq!(start.preview.as_deref(), Some("echo hello"));
    assert_eq!(
        start.args,
        Some(serde_json::json!({"command": "echo hello"}))
    );
    let end = frames.iter().find_map(|e| match &e.body {
        ServerFrame::ToolEnd(s) => Some(s.clone()),
        _ => None,
    });
    let end = end.expect("tool.end");
    assert!(end.ok);
    assert_eq!(end.output_preview.as_deref(), Some("hello"));
    assert!(end.duration.is_some());
    let busy: Vec<BusyReason> = frames
        .iter()
        .filter_map(|e| match &e.body {
            ServerFrame::AgentBusy(b) => Some(b.reason),
            _ => None,
        })
        .collect();
    assert_eq!(
        busy,
        [
            BusyReason::Processing,
            BusyReason::Tool,
            BusyReason::Processing
        ]
    );
    let pos = |ty: &str| t.iter().position(|x| *x == ty).unwrap();
    assert!(
        pos("commentary") < pos("tool.start")
            && pos("tool.start") < pos("tool.end")
            && pos("tool.end") < pos("message.stop")
    );
    assert!(
        !final_text(&frames).contains("Let me run a command."),
        "commentary is not part of the final bubble"
    );

    let failed = turn(&mut a, default_lane(), "fail").await;
    let end = failed.iter().find_map(|e| match &e.body {
        ServerFrame::ToolEnd(s) => Some(s.clone()),
        _ => None,
    });
    assert!(
        !end.expect("tool.end").ok,
        "a failed tool call ends with ok:false"
    );
    gw.stop().await;
}

#[tokio::test]
async fn reasoning_plan_and_reasoning_toggle() {
    let gw = TestGateway::start_demo().await;
    let (mut a, _) = gw.connect("a").await;
    let frames = turn(&mut a, default_lane(), "think and plan").await;
    let stop = frames.iter().find_map(|e| match &e.body {
        ServerFrame::MessageStop(s) => Some(s.clone()),
        _ => None,
    });
    assert!(
        stop.unwrap().reasoning.is_some_and(|r| !r.is_empty()),
        "thoughts become reasoning"
    );
    let plan = frames.iter().find_map(|e| match &e.body {
        ServerFrame::Commentary(c) if c.text.starts_with("Plan:") => Some(c.text.clone()),
        _ => None,
    });
    assert!(plan.expect("plan commentary").lines().count() >= 3);

    let hide = turn_command(&mut a, "/reasoning hide").await;
    assert!(
        system_texts(&hide).iter().any(|t| t.contains("hidden")),
        "{hide:?}"
    );
    let frames = turn(&mut a, default_lane(), "think again").await;
    let stop = frames.iter().find_map(|e| match &e.body {
        ServerFrame::MessageStop(s) => Some(s.clone()),
        _ => None,
    });
    assert_eq!(
        stop.unwrap().reasoning,
        None,
        "hidden reasoning is not sent"
    );
    gw.stop().await;
}

/// Sends a gateway command and returns frames up to its system reply.
async fn turn_command(client: &mut Client, text: &str) -> Vec<Event> {
    send(client, default_lane(), text, false).await;
    let mut out = Vec::new();
    loop {
        let e = client.next_event().await.expect("command reply");
        let done = matches!(&e.body, ServerFrame::Message(m) if m.role == Role::System)
            || e.frame_type().starts_with("picker.");
        out.push(e);
        if done {
            return out;
        }
    }
}

async fn picker_id(client: &mut Client, ty: &str) -> (String, Event) {
    let e = client
        .wait_for(|e| e.frame_type() == ty)
        .await
        .expect("picker");
    let id = e.json()["payload"]["picker_id"]
        .as_str()
        .unwrap()
        .to_owned();
    (id, e)
}

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
async fn messages_sent_while_busy_run_as_the_next_turn() {
    let gw = TestGateway::start_demo().await;
    let (mut a, _) = gw.connect("a").await;
    send(&mut a, default_lane(), "slow one", false).await;
    send(&mut a, default_lane(), "second", false).await;
    let first = until_idle(&mut a).await;
    assert!(
        final_text(&first).ends_with("Echo: slow one"),
        "{}",
        final_text(&first)
    );
    let second = until_idle(&mut a).await;
    // The demo agent refuses a prompt sent into a running turn; this answer proves none was.
    assert_eq!(final_text(&second), "Echo: second");
    assert!(
        system_texts(&second).is_empty(),
        "{:?}",
        system_texts(&second)
    );
    gw.stop().await;
}

#[tokio::test]
async fn stop_keeps_the_partial_answer_and_the_next_message_works() {
    let gw = TestGateway::start_demo().await;
    let (mut a, _) = gw.connect("a").await;
    send(&mut a, default_lane(), "slow story", false).await;
    a.wait_for(|e| e.frame_type() == "message.update")
        .await
        .unwrap();
    let ack = a
        .request(default_lane(), ClientFrame::AgentStop(Empty {}))
        .await
        .unwrap();
    assert_eq!(ack.frame_type(), "ack");
    let frames = until_idle(&mut a).await;
    let partial = final_text(&frames);
    assert!(
        !partial.is_empty() && partial.len() < "Echo: slow story".len() + 40,
        "{partial:?}"
    );
    let err = a
        .request(default_lane(), ClientFrame::AgentStop(Empty {}))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ClientError::Server {
                code: ErrorCode::NotFound,
                ..
            }
        ),
        "nothing to stop now"
    );
    let next = turn(&mut a, default_lane(), "after stop").await;
    assert_eq!(final_text(&next), "Echo: after stop");
    gw.stop().await;
}

#[tokio::test]
async fn steering_without_agent_support_restarts_the_turn_with_the_new_text() {
    let gw = TestGateway::start_demo().await;
    let (mut a, _) = gw.connect("a").await;
    send(&mut a, default_lane(), "slow essay", false).await;
    a.wait_for(|e| e.frame_type() == "message.update")
        .await
        .unwrap();
    let steer = ClientFrame::AgentSteer(AgentSteer {
        text: "focus on errors".into(),
        ..Default::default()
    });
    assert_eq!(
        a.request(default_lane(), steer).await.unwrap().frame_type(),
        "ack"
    );
    let first = until_idle(&mut a).await;
    assert!(types(&first).contains(&"message.stop"));
    let second = until_idle(&mut a).await;
    assert_eq!(final_text(&second), "Echo: focus on errors");
    gw.stop().await;
}

#[tokio::test]
async fn a_crash_mid_turn_ends_the_turn_and_the_next_message_is_answered() {
    let gw = TestGateway::start_demo().await;
    let (mut a, _) = gw.connect("a").await;
    let frames = turn(&mut a, default_lane(), "crash now").await;
    let t = types(&frames);
    assert!(t.contains(&"message.stop"), "{t:?}");
    assert!(
        system_texts(&frames)
            .iter()
            .any(|s| s.contains("stopped unexpectedly")),
        "{:?}",
        system_texts(&frames)
    );
    let next = turn(&mut a, default_lane(), "are you back").await;
    assert_eq!(final_text(&next), "Echo: are you back");
    assert!(gw.agents.restarts() >= 1);
    gw.stop().await;
}

#[tokio::test]
async fn two_lanes_run_at_once() {
    let gw = TestGateway::start_demo().await;
    let (mut a, _) = gw.connect("a").await;
    let chan = create_channel(&mut a, "Work", None).await;
    send(&mut a, default_lane(), "slow in default", false).await;
    send(
        &mut a,
        Header::lane(chan.clone(), None),
        "slow in work",
        false,
    )
    .await;
    let mut finals = Vec::new();
    let mut idles = 0;
    let mut saw_interleaving = false;
    let mut current: Option<String> = None;
    while idles < 2 {
        let e = a.next_event_timeout(Duration::from_secs(20)).await.unwrap();
        if e.frame_type() == "message.update" {
            let chat = e.header.chat_id.clone();
            if current.is_some() && current != chat {
                saw_interleaving = true;
            }
            current = chat;
        }
        if let ServerFrame::MessageStop(s) = &e.body {
            finals.push((e.header.chat_id.clone().unwrap(), s.final_text.clone()));
        }
        if e.frame_type() == "agent.idle" {
            idles += 1;
        }
    }
    finals.sort();
    assert!(
        finals
            .iter()
            .any(|(c, t)| c == "default" && t.ends_with("Echo: slow in default")),
        "{finals:?}"
    );
    assert!(
        finals
            .iter()
            .any(|(c, t)| c == &chan && t.ends_with("Echo: slow in work")),
        "{finals:?}"
    );
    assert!(saw_interleaving, "both lanes streamed at the same time");
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
    let tools = turn(&mut a, default_lane(), "/tools").await;
    assert!(
        !final_text(&tools).starts_with("Echo:"),
        "agent commands reach the agent: {}",
        final_text(&tools)
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

#[tokio::test]
async fn deleting_a_channel_mid_turn_cancels_the_turn_and_leaves_nothing_behind() {
    let gw = TestGateway::start_demo().await;
    let (mut a, _) = gw.connect("a").await;
    let chan = create_channel(&mut a, "Doomed", None).await;
    send(
        &mut a,
        Header::lane(chan.clone(), None),
        "slow goodbye",
        false,
    )
    .await;
    a.wait_for(|e| e.frame_type() == "message.update")
        .await
        .unwrap();
    let deleted = a
        .request(
            Header::lane(chan.clone(), None),
            ClientFrame::ChannelDelete(Empty {}),
        )
        .await
        .unwrap();
    assert_eq!(deleted.frame_type(), "channel.deleted");
    // What arrived before the response is history; after it, nothing more for that lane.
    while a.try_next_event().is_some() {}
    a.expect_quiet(Duration::from_millis(300))
        .await
        .expect("no frames for a deleted lane");
    let (mut late, _) = gw.connect("late").await;
    let replay = late.sync(0).await.unwrap();
    let left: Vec<&str> = replay
        .frames
        .iter()
        .filter(|e| e.frame_type() != "channel.deleted" && e.raw.contains(chan.as_str()))
        .map(|e| e.raw.as_str())
        .collect();
    assert!(left.is_empty(), "no trace of the lane: {left:?}");
    // The rest of the gateway goes on.
    let next = turn(&mut a, default_lane(), "still here").await;
    assert_eq!(final_text(&next), "Echo: still here");
    gw.stop().await;
}

#[tokio::test]
async fn a_busy_lane_queues_a_bounded_number_of_messages_and_refuses_the_rest_unstored() {
    use iris_gateway::agent::LANE_QUEUE;
    let gw = TestGateway::start_with(|c| {
        c.agent_command = Some(demo_agent());
        c.limits.sends_per_minute = 100_000;
    })
    .await;
    let (mut a, _) = gw.connect("a").await;
    send(&mut a, default_lane(), "hang until stopped", false).await;
    until(&mut a, |e| e.frame_type() == "agent.busy").await;
    // The hanging turn holds one place; the rest of the queue fills, then messages are refused.
    let (mut accepted, mut refused) = (1, 0);
    for i in 0..LANE_QUEUE + 5 {
        let frame = ClientFrame::MessageSend(MessageSend {
            text: format!("queued {i}"),
            ..Default::default()
        });
        match a.request(default_lane(), frame).await {
            Ok(_) => accepted += 1,
            Err(ClientError::Server { code, message }) => {
                assert_eq!(code, ErrorCode::RateLimited, "{message}");
                assert!(message.contains("waiting in this chat"), "{message}");
                refused += 1;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!((accepted, refused), (LANE_QUEUE, 6));
    // Nothing refused was stored: history holds exactly the accepted messages.
    let history = a
        .request(
            default_lane(),
            ClientFrame::History(iris_protocol::HistoryRequest {
                limit: Some(200),
                ..Default::default()
            }),
        )
        .await
        .unwrap();
    let ServerFrame::History(h) = history.body else {
        panic!("{:?}", history.body)
    };
    let users = h.messages.iter().filter(|m| m.role == Role::User).count();
    assert_eq!(users, LANE_QUEUE);
    // Another lane is not held up by this one.
    let other = create_channel(&mut a, "elsewhere", None).await;
    let frames = turn(&mut a, Header::lane(other.as_str(), None), "still here").await;
    assert_eq!(final_text(&frames), "Echo: still here");
    // Stopping the hanging turn frees its place: the lane takes a message again.
    a.request(default_lane(), ClientFrame::AgentStop(Empty {}))
        .await
        .unwrap();
    until(&mut a, |e| {
        e.header.chat_id.as_deref() == Some("default") && e.frame_type() == "agent.idle"
    })
    .await;
    send(&mut a, default_lane(), "one more", false).await;
    gw.stop().await;
}

#[tokio::test]
async fn the_agent_and_the_default_session_are_ready_before_the_first_message() {
    let gw = TestGateway::start_demo().await;
    gw.agents.warmed().await;
    assert!(
        gw.agents.last_start().is_some(),
        "the agent started with the gateway"
    );
    let prepared = gw
        .shared
        .store
        .lane_session("default", None)
        .await
        .unwrap()
        .expect("the default channel's session was opened at start");
    let (mut a, _) = gw.connect("a").await;
    let frames = turn(&mut a, default_lane(), "hello early").await;
    assert_eq!(final_text(&frames), "Echo: hello early");
    let used = gw.shared.store.lane_session("default", None).await.unwrap();
    assert_eq!(
        used,
        Some(prepared),
        "the first turn ran in the prepared session"
    );
    assert_eq!(gw.agents.restarts(), 0);
    gw.stop().await;
}
