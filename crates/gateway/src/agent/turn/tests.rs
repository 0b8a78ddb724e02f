//! Unit tests of the turn mapper.
use super::calls::{unfenced, MAX_TOOL_NAME};
use super::*;
use crate::media::agent::Answer;
use crate::text::tail;
use iris_protocol::MAX_STEP_TEXT;
use serde_json::json;

fn update(v: serde_json::Value) -> SessionUpdate {
    serde_json::from_value(v).unwrap()
}

fn chunk(text: &str) -> SessionUpdate {
    update(
        json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}),
    )
}

fn mapper() -> TurnMapper {
    TurnMapper::new(TurnConfig {
        message_id: "m_1".into(),
        role: Role::Assistant,
        model: Some("custom:fake/model-9".into()),
        agent: Some("hermes".into()),
        cwd: "~".into(),
        workdir: std::path::PathBuf::from("/w"),
        show_reasoning: true,
        update_interval: Duration::from_millis(50),
        rewind: false,
    })
}

fn types(out: &[Out]) -> Vec<String> {
    use iris_protocol::{FrameBody, ServerFrame};
    out.iter()
        .map(|o| match o {
            Out::Durable(f) | Out::Final(f, _) => f.frame_type().to_owned(),
            Out::Ephemeral(f, _) => ServerFrame::from(f.clone()).frame_type().to_owned(),
        })
        .collect()
}

#[test]
fn text_before_a_tool_becomes_commentary_and_the_answer_is_the_text_after() {
    let mut m = mapper();
    let t0 = Instant::now();
    let mut all = m.on_update(&chunk("Let me look."), t0);
    all.extend(m.on_update(
        &update(json!({"sessionUpdate": "tool_call", "toolCallId": "a", "title": "terminal: echo hi", "kind": "execute", "rawInput": {"command": "echo hi"}})),
        t0,
    ));
    all.extend(m.on_update(
        &update(json!({"sessionUpdate": "tool_call_update", "toolCallId": "a", "status": "completed", "content": [{"type": "content", "content": {"type": "text", "text": "hi"}}]})),
        t0 + Duration::from_millis(10),
    ));
    all.extend(m.on_update(&chunk("It printed hi."), t0 + Duration::from_millis(100)));
    all.extend(m.finish(&Ending::default(), t0 + Duration::from_millis(200)));
    assert_eq!(
        types(&all),
        [
            "message.start",
            "message.update",
            "commentary",
            "message.update",
            "tool.start",
            "agent.busy",
            "tool.end",
            "agent.busy",
            "message.update",
            "message.stop"
        ]
    );
    match &all[2] {
        Out::Durable(DurableFrame::Commentary(c)) => assert_eq!(c.text, "Let me look."),
        other => panic!("{other:?}"),
    }
    match &all[4] {
        Out::Durable(DurableFrame::ToolStart(t)) => {
            assert_eq!(
                (
                    t.index,
                    t.name.as_str(),
                    t.preview.as_deref(),
                    t.emoji.as_deref()
                ),
                (0, "terminal", Some("echo hi"), Some("💻"))
            );
            assert_eq!(t.args, Some(json!({"command": "echo hi"})));
        }
        other => panic!("{other:?}"),
    }
    match all.last().unwrap() {
        Out::Final(DurableFrame::MessageStop(s), msg) => {
            assert_eq!(s.final_text, "It printed hi.");
            assert_eq!(msg.text, "It printed hi.");
            let rt = s.runtime.as_ref().unwrap();
            assert_eq!(rt.model.as_deref(), Some("model-9"));
            assert_eq!(rt.agent.as_deref(), Some("hermes"));
            assert_eq!(rt.cwd.as_deref(), Some("~"));
            assert!(rt.latency.unwrap() >= 0.2);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn updates_are_rate_limited_and_the_last_text_is_flushed() {
    let mut m = mapper();
    let t0 = Instant::now();
    let a = m.on_update(&chunk("a"), t0);
    let b = m.on_update(&chunk("b"), t0 + Duration::from_millis(10));
    assert_eq!(types(&a), ["message.start", "message.update"]);
    assert!(b.is_empty(), "within the interval nothing is sent");
    assert!(m.next_flush().is_some());
    match m.flush_due(t0 + Duration::from_millis(60)) {
        Some(Out::Ephemeral(EphemeralFrame::MessageUpdate(u), key)) => {
            assert_eq!(u.text, "ab");
            assert_eq!(key, "mu:m_1");
        }
        other => panic!("{other:?}"),
    }
}

/// Leading edge: a chunk after a quiet interval goes out at once, chunks within an interval
/// wait for its end together, and what still waits at the end precedes `message.stop`.
#[test]
fn updates_go_out_on_the_leading_edge_and_the_rest_before_the_stop() {
    let mut m = mapper();
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    m.on_update(&chunk("a"), t0);
    // Quiet for longer than the interval: the next chunk is not held back.
    let at_once = m.on_update(&chunk("b"), t0 + ms(80));
    assert_eq!(types(&at_once), ["message.update"]);
    assert!(m.next_flush().is_none());
    // Within the interval: held until its end, then sent with everything since.
    assert!(m.on_update(&chunk("c"), t0 + ms(90)).is_empty());
    assert!(m.on_update(&chunk("d"), t0 + ms(100)).is_empty());
    assert_eq!(m.next_flush(), Some(t0 + ms(130)));
    assert!(m.flush_due(t0 + ms(129)).is_none());
    match m.flush_due(t0 + ms(130)) {
        Some(Out::Ephemeral(EphemeralFrame::MessageUpdate(u), _)) => assert_eq!(u.text, "abcd"),
        other => panic!("{other:?}"),
    }
    assert!(m.on_update(&chunk("e"), t0 + ms(140)).is_empty());
    let end = m.finish(&Ending::default(), t0 + ms(141));
    assert_eq!(types(&end), ["message.update", "message.stop"]);
    match &end[0] {
        Out::Ephemeral(EphemeralFrame::MessageUpdate(u), _) => assert_eq!(u.text, "abcde"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn open_tools_are_closed_at_the_end_and_reasoning_and_usage_are_kept() {
    let mut m = mapper();
    let t0 = Instant::now();
    m.on_update(&update(json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm"}})), t0);
    m.on_update(
        &update(json!({"sessionUpdate": "usage_update", "size": 1000, "used": 380})),
        t0,
    );
    m.on_update(&update(json!({"sessionUpdate": "tool_call", "toolCallId": "w", "title": "write: /tmp/x", "kind": "edit"})), t0);
    m.on_update(&chunk("done"), t0);
    let out = m.finish(
        &Ending {
            tokens: Some(11),
            ..Ending::default()
        },
        t0,
    );
    assert_eq!(types(&out), ["tool.end", "message.stop"]);
    match &out[1] {
        Out::Final(DurableFrame::MessageStop(s), _) => {
            assert_eq!(s.reasoning.as_deref(), Some("hmm"));
            assert_eq!(s.tokens, Some(11));
            assert_eq!(s.runtime.as_ref().unwrap().context_pct, Some(38));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_plan_is_a_checklist_kept_as_a_step_and_a_silent_turn_has_no_final_frame() {
    let mut m = mapper();
    let out = m.on_update(
        &update(json!({"sessionUpdate": "plan", "entries": [
            {"content": "Say hi", "priority": "high", "status": "completed"},
            {"content": "Say bye", "priority": "low", "status": "pending"}]})),
        Instant::now(),
    );
    match &out[0] {
        Out::Durable(DurableFrame::Commentary(c)) => {
            assert_eq!(c.text, "Plan:\n☑ Say hi\n☐ Say bye")
        }
        other => panic!("{other:?}"),
    }
    // A turn that only showed a plan keeps it in a message of its own.
    let out = m.finish(&Ending::default(), Instant::now());
    match &out[..] {
        [Out::Final(DurableFrame::Message(msg), _)] => assert_eq!(
            msg.steps,
            [iris_protocol::Step::Plan {
                text: "Plan:\n☑ Say hi\n☐ Say bye".into()
            }]
        ),
        other => panic!("{other:?}"),
    }
    assert!(mapper()
        .finish(&Ending::default(), Instant::now())
        .is_empty());
}

#[test]
fn media_lines_leave_the_text_and_images_become_files() {
    let mut m = mapper();
    let t0 = Instant::now();
    let first = m.on_update(&chunk("Here it is.\nMEDIA:/tmp/a.txt"), t0);
    match &first[1] {
        Out::Ephemeral(EphemeralFrame::MessageUpdate(u), _) => {
            assert_eq!(u.text, "Here it is.")
        }
        other => panic!("{other:?}"),
    }
    m.on_update(&update(json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "image", "data": "aGk=", "mimeType": "image/png"}})), t0);
    assert!(matches!(
        m.take_files().as_slice(),
        [AgentFile::Data { .. }]
    ));
    m.end_text();
    assert_eq!(m.take_files(), [AgentFile::Path("/tmp/a.txt".into())]);
    m.add_media(
        MediaInfo {
            media_id: "md_1".into(),
            kind: "file".into(),
            mime: "text/plain".into(),
            size: 2,
            filename: "a.txt".into(),
            voice: false,
        },
        "ab".into(),
    );
    assert!(m.has_media("ab"));
    match m.finish(&Ending::default(), t0).pop() {
        Some(Out::Final(DurableFrame::MessageStop(s), msg)) => {
            assert_eq!(s.final_text, "Here it is.");
            assert_eq!(s.media.len(), 1);
            assert_eq!(msg.media, s.media);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_final_message_says_how_the_turn_ended() {
    let end = |cancelled, failed| {
        let mut m = mapper();
        m.on_update(&chunk("hi"), Instant::now());
        let ending = Ending {
            cancelled,
            failed,
            ..Ending::default()
        };
        match m.finish(&ending, Instant::now()).pop() {
            Some(Out::Final(DurableFrame::MessageStop(s), msg)) => {
                assert_eq!(s.ended, msg.ended);
                s.ended
            }
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(end(false, false), Some(TurnEnd::Completed));
    assert_eq!(end(true, false), Some(TurnEnd::Stopped));
    assert_eq!(end(true, true), Some(TurnEnd::AgentFailed));
}

#[test]
fn tails_keep_the_end() {
    assert_eq!(tail("hello", 10), "hello");
    assert_eq!(tail("abcdefghij", 5), "…ghij");
    assert_eq!(bare_model("openrouter:openai/gpt-5.4"), "gpt-5.4");
    assert_eq!(bare_model("fake-model"), "fake-model");
}

#[test]
fn a_code_fence_around_a_tool_s_whole_output_is_left_out_of_its_preview() {
    assert_eq!(unfenced("```console\nhi\n```"), "hi");
    assert_eq!(unfenced("```\na\nb\n```\n"), "a\nb");
    assert_eq!(unfenced("````\n```\n````"), "```");
    assert_eq!(unfenced("```\n```"), "");
    for kept in [
        "hi",
        "``` hi ```",
        "```sh\nls\n```\nand more",
        "```\na\n```\n```\nb\n```",
        "``\nhi\n``",
    ] {
        assert_eq!(unfenced(kept), kept);
    }
    let mut m = mapper();
    let t0 = Instant::now();
    m.on_update(
        &update(json!({"sessionUpdate": "tool_call", "toolCallId": "b", "title": "Bash", "kind": "execute", "rawInput": {"command": "echo hi"}})),
        t0,
    );
    let out = m.on_update(
        &update(json!({"sessionUpdate": "tool_call_update", "toolCallId": "b", "status": "completed", "rawOutput": "hi",
            "content": [{"type": "content", "content": {"type": "text", "text": "```console\nhi\n```"}}]})),
        t0,
    );
    let end = out.iter().find_map(|o| match o {
        Out::Durable(DurableFrame::ToolEnd(e)) => Some(e.output_preview.clone()),
        _ => None,
    });
    assert_eq!(end, Some(Some("hi".to_owned())));
}

#[test]
fn a_tool_s_input_sent_after_its_card_reaches_the_card_and_the_answer_s_steps() {
    let mut m = mapper();
    let t0 = Instant::now();
    let mut all = m.on_update(
        &update(json!({"sessionUpdate": "tool_call", "toolCallId": "b", "title": "Bash", "kind": "execute", "rawInput": {}})),
        t0,
    );
    all.extend(m.on_update(
        &update(json!({"sessionUpdate": "tool_call_update", "toolCallId": "b", "rawInput": {"command": "echo hi > greeting.txt"}})),
        t0,
    ));
    all.extend(m.on_update(
        &update(json!({"sessionUpdate": "tool_call_update", "toolCallId": "b", "status": "completed", "rawOutput": "hi"})),
        t0,
    ));
    all.extend(m.on_update(&chunk("Done."), t0));
    all.extend(m.finish(&Ending::default(), t0));
    match &all[0] {
        Out::Durable(DurableFrame::ToolStart(t)) => {
            assert_eq!(
                (t.preview.as_deref(), t.args.as_ref()),
                (None, Some(&json!({})))
            )
        }
        other => panic!("{other:?}"),
    }
    let progress = all.iter().find_map(|o| match o {
        Out::Ephemeral(EphemeralFrame::ToolProgress(p), _) => Some(p.note.clone()),
        _ => None,
    });
    assert_eq!(
        progress,
        Some(Some("echo hi > greeting.txt".to_owned())),
        "the live card learns the command"
    );
    match all.last().unwrap() {
        Out::Final(DurableFrame::MessageStop(s), _) => match s.steps.first() {
            Some(iris_protocol::Step::Tool(t)) => {
                assert_eq!(t.preview.as_deref(), Some("echo hi > greeting.txt"));
                assert_eq!(t.args, Some(json!({"command": "echo hi > greeting.txt"})));
                assert_eq!(t.ok, Some(true));
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_turn_holds_its_bound_of_text_cut_on_a_character_and_live_cards_hold_what_steps_keep() {
    let mut m = mapper();
    let t0 = Instant::now();
    // Reasoning and answer share the bound; two-byte characters never split.
    m.on_update(
        &update(json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "t".repeat(1001)}})),
        t0,
    );
    assert!(!m.runaway());
    m.on_update(&chunk(&"é".repeat(MAX_TURN_TEXT / 2)), t0);
    assert!(m.runaway());
    assert_eq!(
        m.text().len(),
        MAX_TURN_TEXT - 1002,
        "cut before a split character"
    );
    assert!(m.text().chars().all(|c| c == 'é'));
    m.on_update(&chunk("more"), t0);
    assert!(!m.text().ends_with("more"), "nothing after the bound");

    let mut m = mapper();
    let long = "x".repeat(MAX_STEP_TEXT * 2);
    m.on_update(&chunk(&long), t0);
    let out = m.on_update(
        &update(json!({"sessionUpdate": "tool_call", "toolCallId": "a", "title": format!("{} now", "n".repeat(500)), "rawInput": {"data": long}})),
        t0,
    );
    assert_eq!(
        types(&out),
        ["commentary", "message.update", "tool.start", "agent.busy"]
    );
    for o in &out {
        match o {
            Out::Durable(DurableFrame::Commentary(c)) => {
                assert_eq!(c.text.chars().count(), MAX_STEP_TEXT + 1, "cut, with …")
            }
            Out::Durable(DurableFrame::ToolStart(s)) => {
                assert!(s.name.chars().count() <= MAX_TOOL_NAME + 1);
                assert!(serde_json::to_string(&s.args).unwrap().len() < MAX_STEP_TEXT);
            }
            _ => {}
        }
    }
    assert!(!m.runaway());
}

#[test]
fn plan_updates_count_like_tool_calls_toward_the_bound_of_a_turn() {
    let mut m = mapper();
    let t0 = Instant::now();
    let plan = update(json!({"sessionUpdate": "plan", "entries": [
        {"content": "step", "priority": "medium", "status": "pending"}]}));
    let mut shown = 0;
    for _ in 0..MAX_TURN_TOOLS + 5 {
        shown += m.on_update(&plan, t0).len();
    }
    assert_eq!(shown, MAX_TURN_TOOLS, "one commentary per counted update");
    assert!(m.runaway());
}
