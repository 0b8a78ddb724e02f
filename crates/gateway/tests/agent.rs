//! The agent bridge through the real server and the built-in demo agent (a child process spoken
//! to over ACP): every mapping of a turn onto frames, the queue, stop, steer, crashes, deletes
//! and two lanes at once. Pickers, commands and titles are in `agent_commands.rs`.

mod common;

use std::time::Duration;

use common::turns::*;
use common::*;
use iris_client::ClientError;
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
