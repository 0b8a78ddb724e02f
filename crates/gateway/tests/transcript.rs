//! The transcript is what devices saw: how each turn ended is marked on its final message, live
//! and in `history` (stopped, failed and cut-off answers never look complete), and steering text
//! is a user message of the lane, before the answer it changed.

mod common;

use common::*;
use iris_client::Event;
use iris_protocol::{AgentSteer, ClientFrame, Empty, Message, Role, ServerFrame, TurnEnd};

/// The `message.stop` of a turn's frames.
fn stop_of(events: &[Event]) -> (String, Option<TurnEnd>) {
    events
        .iter()
        .find_map(|e| match &e.body {
            ServerFrame::MessageStop(s) => Some((s.message_id.clone(), s.ended)),
            _ => None,
        })
        .expect("the turn's message.stop")
}

fn stored<'a>(messages: &'a [Message], id: &str) -> &'a Message {
    messages
        .iter()
        .find(|m| m.message_id == id)
        .unwrap_or_else(|| panic!("{id} in history: {messages:?}"))
}

#[tokio::test]
async fn completed_stopped_and_failed_answers_are_marked_live_and_in_history() {
    let gw = TestGateway::start_demo().await;
    let (mut a, _) = gw.connect("a").await;

    let done = turn(&mut a, default_lane(), "hello").await;
    let (done_id, ended) = stop_of(&done);
    assert_eq!(ended, Some(TurnEnd::Completed));

    send(&mut a, default_lane(), "slow story", false).await;
    a.wait_for(|e| e.frame_type() == "message.update")
        .await
        .unwrap();
    a.request(default_lane(), ClientFrame::AgentStop(Empty {}))
        .await
        .unwrap();
    let stopped = until_idle(&mut a).await;
    let (stopped_id, ended) = stop_of(&stopped);
    assert_eq!(ended, Some(TurnEnd::Stopped));
    assert!(!final_text(&stopped).is_empty(), "the partial text is kept");

    let crashed = turn(&mut a, default_lane(), "crash now").await;
    let (crashed_id, ended) = stop_of(&crashed);
    assert_eq!(ended, Some(TurnEnd::AgentFailed));

    // A device that was never there reads the same marks from history.
    let (mut fresh, _) = gw.connect("fresh").await;
    let messages = lane_history(&mut fresh, default_lane()).await;
    assert_eq!(stored(&messages, &done_id).ended, Some(TurnEnd::Completed));
    let partial = stored(&messages, &stopped_id);
    assert_eq!(partial.ended, Some(TurnEnd::Stopped));
    assert_eq!(partial.text, final_text(&stopped));
    assert_eq!(
        stored(&messages, &crashed_id).ended,
        Some(TurnEnd::AgentFailed)
    );
    assert!(
        messages
            .iter()
            .filter(|m| m.role != Role::Assistant)
            .all(|m| m.ended.is_none()),
        "only answers say how their turn ended"
    );
    gw.stop().await;
}

#[tokio::test]
async fn steering_is_a_user_message_before_the_answer_it_changed() {
    let gw = TestGateway::start_demo().await;
    let (mut a, _) = gw.connect("a").await;
    let (mut b, _) = gw.connect("b").await;
    send(&mut a, default_lane(), "slow essay", false).await;
    a.wait_for(|e| e.frame_type() == "message.update")
        .await
        .unwrap();
    let steer = ClientFrame::AgentSteer(AgentSteer {
        text: "focus on errors".into(),
        ..Default::default()
    });
    a.request(default_lane(), steer).await.unwrap();
    // The demo agent has no steer command: the turn stops and the text runs as the next one.
    let stopped = until_idle(&mut a).await;
    let next = until_idle(&mut a).await;
    assert_eq!(final_text(&next), "Echo: focus on errors");
    // Every device sees the steering message come in before the answer to it.
    let mut live = until(&mut b, |e| e.frame_type() == "message.stop").await;
    live.extend(until(&mut b, |e| e.frame_type() == "message.stop").await);
    let seen = |pred: &dyn Fn(&ServerFrame) -> bool| live.iter().position(|e| pred(&e.body));
    let steering_at = seen(&|f| matches!(f, ServerFrame::Message(m) if m.steering));
    let answer_at = seen(
        &|f| matches!(f, ServerFrame::MessageStop(s) if s.final_text == "Echo: focus on errors"),
    );
    assert!(
        steering_at.is_some() && steering_at < answer_at,
        "{:?}",
        types(&live)
    );

    let (mut fresh, _) = gw.connect("fresh").await;
    let messages = lane_history(&mut fresh, default_lane()).await;
    let lines: Vec<(Role, bool, &str)> = messages
        .iter()
        .map(|m| (m.role, m.steering, m.text.as_str()))
        .collect();
    let (stopped_id, _) = stop_of(&stopped);
    let (answer_id, _) = stop_of(&next);
    let at = |id: &str| messages.iter().position(|m| m.message_id == id).unwrap();
    let steering = messages
        .iter()
        .position(|m| m.steering)
        .unwrap_or_else(|| panic!("a steering message in {lines:?}"));
    assert_eq!(
        lines[steering],
        (Role::User, true, "focus on errors"),
        "{lines:?}"
    );
    assert!(
        at(&stopped_id) < steering && steering < at(&answer_id),
        "the stopped answer, the steering, the answer to it: {lines:?}"
    );
    assert_eq!(messages.iter().filter(|m| m.steering).count(), 1);
    gw.stop().await;
}

mod killed {
    //! The real binary killed with SIGKILL while an answer streams.

    use std::time::{Duration, Instant};

    use iris_client::{Client, ConnectOptions};
    use iris_protocol::{ClientFrame, Header, MessageSend, ServerFrame, Step, TurnEnd};

    use super::common::binary::{serve, Running, BIN};
    const TOKEN: &str = "transcript-test-token-0123";

    /// The gateway with the demo agent on `dir`.
    async fn start(dir: &std::path::Path) -> Running {
        let data = dir.join("data");
        let agent = format!("'{BIN}' demo-agent");
        let data = data.to_str().expect("utf-8 path");
        let args = [
            "--listen",
            "127.0.0.1:0",
            "--token",
            TOKEN,
            "--data-dir",
            data,
        ];
        let mut cmd = serve(&[&args[..], &["--agent", &agent]].concat());
        cmd.env("IRIS_LOG", "error");
        Running::start(cmd).await
    }

    async fn connect(url: &str) -> Client {
        Client::connect(ConnectOptions::new(url.to_owned(), TOKEN, "phone"))
            .await
            .unwrap()
            .0
    }

    #[tokio::test]
    async fn a_kill_9_during_a_streamed_answer_keeps_its_partial_text_marked_cut_off() {
        let dir = tempfile::tempdir().unwrap();
        let Running {
            child: mut gw, url, ..
        } = start(dir.path()).await;
        let mut phone = connect(&url).await;
        // Six seconds of streaming: 600 chunks 10 ms apart.
        let send = ClientFrame::MessageSend(MessageSend {
            text: "bench 600 10000".into(),
            ..Default::default()
        });
        phone
            .request(Header::lane("default", None), send)
            .await
            .unwrap();
        let mut first: Option<Instant> = None;
        let mut early = String::new();
        let (id, seen) = loop {
            let e = phone
                .next_event_timeout(Duration::from_secs(20))
                .await
                .unwrap();
            let ServerFrame::MessageUpdate(u) = &e.body else {
                continue;
            };
            let since = first.get_or_insert_with(Instant::now).elapsed();
            // What the phone showed a while before the kill must be in the stored answer: the
            // streaming runs on long enough after it for a checkpoint to land.
            if early.is_empty() && since >= Duration::from_millis(1200) {
                early = u.text.clone();
            }
            if since >= Duration::from_secs(3) {
                break (u.message_id.clone(), u.text.clone());
            }
        };
        gw.start_kill().unwrap();
        gw.wait().await.unwrap();
        drop(phone);

        let Running { child: gw, url, .. } = start(dir.path()).await;
        let mut phone = connect(&url).await;
        let answer = super::lane_history(&mut phone, Header::lane("default", None))
            .await
            .into_iter()
            .find(|m| m.message_id == id)
            .expect("the cut-off answer in history");
        assert_eq!(answer.ended, Some(TurnEnd::CutOff));
        assert!(
            !early.is_empty() && answer.text.starts_with(&early),
            "history keeps at least what was shown 1.8 s before the kill: {} of {} bytes",
            answer.text.len(),
            early.len()
        );
        assert!(
            seen.starts_with(&answer.text) || answer.text.starts_with(&seen),
            "the stored text is the text that streamed"
        );
        // Devices that sync get the same closing frame.
        let synced = phone.sync(0).await.unwrap();
        let stop = synced
            .frames
            .iter()
            .find_map(|e| match &e.body {
                ServerFrame::MessageStop(s) if s.message_id == id => Some(s.clone()),
                _ => None,
            })
            .expect("the turn's message.stop");
        assert_eq!(
            (stop.final_text.as_str(), stop.ended),
            (answer.text.as_str(), Some(TurnEnd::CutOff))
        );
        drop(gw);
    }

    /// The running answer's checkpointed steps, read from the gateway's database as it runs.
    fn checkpointed_steps(dir: &std::path::Path) -> Option<String> {
        let db = rusqlite::Connection::open_with_flags(
            dir.join("data/iris.db"),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .ok()?;
        db.query_row(
            "SELECT value FROM meta WHERE key LIKE 'turn_steps/%'",
            [],
            |r| r.get(0),
        )
        .ok()
    }

    #[tokio::test]
    async fn a_kill_9_while_an_approval_waits_keeps_the_turns_steps() {
        let dir = tempfile::tempdir().unwrap();
        let Running {
            child: mut gw, url, ..
        } = start(dir.path()).await;
        let mut phone = connect(&url).await;
        let send = ClientFrame::MessageSend(MessageSend {
            text: "tool approve please".into(),
            ..Default::default()
        });
        phone
            .request(Header::lane("default", None), send)
            .await
            .unwrap();
        let id = loop {
            let e = phone
                .next_event_timeout(Duration::from_secs(20))
                .await
                .unwrap();
            match &e.body {
                ServerFrame::MessageStart(s) => break s.message_id.clone(),
                _ => continue,
            }
        };
        loop {
            let e = phone
                .next_event_timeout(Duration::from_secs(20))
                .await
                .unwrap();
            if e.frame_type() == "picker.approval" {
                break;
            }
        }
        // The checkpoint holding the open approval is written off the turn's path: wait for it.
        let deadline = Instant::now() + Duration::from_secs(20);
        while !checkpointed_steps(dir.path()).is_some_and(|s| s.contains("\"approval\"")) {
            assert!(Instant::now() < deadline, "no checkpoint of the steps");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        gw.start_kill().unwrap();
        gw.wait().await.unwrap();
        drop(phone);

        let Running { child: gw, url, .. } = start(dir.path()).await;
        let mut phone = connect(&url).await;
        let answer = super::lane_history(&mut phone, Header::lane("default", None))
            .await
            .into_iter()
            .find(|m| m.message_id == id)
            .expect("the cut-off answer in history");
        assert_eq!(answer.ended, Some(TurnEnd::CutOff));
        let kinds: Vec<String> = answer
            .steps
            .iter()
            .map(|s| match s {
                Step::Commentary { text } => format!("commentary {}", text.trim()),
                Step::Tool(t) => format!("tool {} ok={:?}", t.index, t.ok),
                Step::Picker(p) => format!("{} {:?}", p.picker, p.outcome),
                Step::Plan { .. } => "plan".into(),
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "commentary Let me run a command.",
                "tool 0 ok=Some(true)",
                "commentary The command printed: hello.",
                "tool 1 ok=None",
                "approval Some(Cancelled)",
            ]
        );
        // The approval the phone was offered is closed for every device.
        let synced = phone.sync(0).await.unwrap();
        assert!(synced.frames.iter().any(|e| matches!(&e.body,
            ServerFrame::PickerClosed(c) if c.outcome == iris_protocol::PickerOutcome::Cancelled)));
        drop(gw);
    }
}

/// An agent that reports each turn's own usage (ACP's meaning; the demo does) shows it as is: a
/// short turn after a long one has fewer tokens, not none, and the context share grows with the
/// conversation without ever being a sum of turns.
#[tokio::test]
async fn tokens_and_the_context_share_are_each_turn_s_own() {
    let gw = TestGateway::start_demo().await;
    let (mut a, _) = gw.connect("a").await;
    let meters = |events: &[Event]| {
        events
            .iter()
            .find_map(|e| match &e.body {
                ServerFrame::MessageStop(s) => {
                    Some((s.tokens, s.runtime.as_ref().and_then(|r| r.context_pct)))
                }
                _ => None,
            })
            .expect("the turn's message.stop")
    };
    let long = "a long question that goes on and on ".repeat(40);
    let (long_tokens, long_pct) = meters(&turn(&mut a, default_lane(), &long).await);
    let (short_tokens, short_pct) = meters(&turn(&mut a, default_lane(), "short").await);
    let (long_tokens, short_tokens) = (long_tokens.unwrap(), short_tokens.unwrap());
    assert!(
        short_tokens < long_tokens / 10,
        "{long_tokens} then {short_tokens}"
    );
    let (long_pct, short_pct) = (long_pct.unwrap(), short_pct.unwrap());
    assert!(
        short_pct >= long_pct && short_pct <= 100,
        "{long_pct} then {short_pct}"
    );

    let (mut fresh, _) = gw.connect("fresh").await;
    let answers: Vec<Option<u64>> = lane_history(&mut fresh, default_lane())
        .await
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .map(|m| m.tokens)
        .collect();
    assert_eq!(answers, [Some(long_tokens), Some(short_tokens)]);
    gw.stop().await;
}
