//! A runaway agent (prompt-injected, or simply broken) cannot flood the store or the devices:
//! a turn holds at most `MAX_TURN_TEXT` bytes of text, `MAX_TURN_TOOLS` tool calls and
//! `MAX_TURN_FILES` files. The gateway stops a turn that goes beyond, keeps what fit, says why,
//! and the lane goes on; a scheduled run beyond the bounds fails with them named. A lane shows
//! at most eight approvals at once, cut like the answer's steps; the agent's further requests
//! are answered `cancelled`, and the agent's command list is kept to a bounded catalog.

mod common;

use std::time::Duration;

use common::*;
use iris_client::{Client, Event};
use iris_gateway::cron::ManualClock;
use iris_protocol::{
    ClientFrame, Empty, Header, Role, ServerFrame, TurnEnd, MAX_STEPS, MAX_STEP_TEXT,
    MAX_TURN_FILES, MAX_TURN_TEXT, MAX_TURN_TOOLS,
};

/// A gateway with the demo agent as a process, a device on it, and the frames of one turn.
async fn runaway_turn(prompt: &str) -> (TestGateway, Client, Vec<Event>) {
    runaway_turn_with(prompt, |c| c.agent_command = Some(demo_agent())).await
}

async fn runaway_turn_with(
    prompt: &str,
    tweak: impl FnOnce(&mut iris_gateway::Config),
) -> (TestGateway, Client, Vec<Event>) {
    let gw = TestGateway::start_with(tweak).await;
    let (mut phone, _) = gw.connect("phone").await;
    let frames = turn(&mut phone, default_lane(), prompt).await;
    (gw, phone, frames)
}

/// How many frames of a type a turn holds.
fn count(frames: &[Event], frame_type: &str) -> usize {
    frames
        .iter()
        .filter(|e| e.frame_type() == frame_type)
        .count()
}

/// The final answer of a turn's frames: `message.stop`, or `message` when no text streamed.
struct Final {
    message_id: String,
    text: String,
    ended: Option<TurnEnd>,
    steps: usize,
    media: usize,
}

fn final_of(frames: &[Event]) -> Final {
    frames
        .iter()
        .find_map(|e| match &e.body {
            ServerFrame::MessageStop(s) => Some(Final {
                message_id: s.message_id.clone(),
                text: s.final_text.clone(),
                ended: s.ended,
                steps: s.steps.len(),
                media: s.media.len(),
            }),
            ServerFrame::Message(m) if m.role == Role::Assistant => Some(Final {
                message_id: m.message_id.clone(),
                text: m.text.clone(),
                ended: m.ended,
                steps: m.steps.len(),
                media: m.media.len(),
            }),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no final answer in {:?}", types(frames)))
}

/// The lane says why the turn was stopped, stores the answer as it was sent, and answers the
/// next message.
async fn assert_stopped_and_recovered(client: &mut Client, frames: &[Event], case: &str) {
    let stop = final_of(frames);
    assert_eq!(stop.ended, Some(TurnEnd::AgentFailed), "{case}");
    let notices = system_texts(frames);
    assert!(
        notices
            .iter()
            .any(|n| n.contains("more than one answer may hold")),
        "{case}: {notices:?}"
    );
    let stored = lane_history(client, default_lane()).await;
    let kept = stored
        .iter()
        .find(|m| m.message_id == stop.message_id)
        .unwrap_or_else(|| panic!("{case}: the answer is in history"));
    assert_eq!(kept.text, stop.text, "{case}: history holds what was sent");
    assert_eq!(kept.ended, Some(TurnEnd::AgentFailed), "{case}");

    let frames = turn(client, default_lane(), "after the runaway").await;
    assert_eq!(
        answer(&frames).as_deref(),
        Some("Echo: after the runaway"),
        "{case}: the lane goes on"
    );
}

#[tokio::test]
async fn an_agent_writing_without_end_is_stopped_at_the_bound_of_a_turn() {
    // The demo agent would write 8 MiB.
    let (gw, mut phone, frames) = runaway_turn("flood").await;

    let stop = final_of(&frames);
    assert!(
        stop.text.len() <= MAX_TURN_TEXT && stop.text.len() > MAX_TURN_TEXT - 64 * 1024,
        "the answer keeps what fit: {} bytes",
        stop.text.len()
    );
    assert!(stop.text.starts_with("flood flood"));
    let largest_update = frames
        .iter()
        .filter_map(|e| match &e.body {
            ServerFrame::MessageUpdate(u) => Some(u.text.len()),
            _ => None,
        })
        .max()
        .expect("the answer streamed");
    assert!(largest_update <= MAX_TURN_TEXT, "{largest_update} bytes");
    assert_stopped_and_recovered(&mut phone, &frames, "flood").await;
    gw.stop().await;
}

#[tokio::test]
async fn an_agent_starting_tool_calls_without_end_is_stopped_at_the_bound_of_a_turn() {
    // The demo agent would start 2,000.
    let (gw, mut phone, frames) = runaway_turn("spree").await;

    assert_eq!(
        count(&frames, "tool.start"),
        MAX_TURN_TOOLS,
        "tool cards shown"
    );
    let stop = final_of(&frames);
    assert_eq!(stop.steps, MAX_STEPS, "steps kept on the answer");
    assert_stopped_and_recovered(&mut phone, &frames, "spree").await;
    gw.stop().await;
}

#[tokio::test]
async fn an_agent_sending_files_without_end_is_stopped_at_the_bound_of_a_turn() {
    // The demo agent would send 100.
    let (gw, mut phone, frames) = runaway_turn("hoard").await;

    assert_eq!(
        count(&frames, "media.offer"),
        MAX_TURN_FILES,
        "files offered"
    );
    assert_eq!(
        final_of(&frames).media,
        MAX_TURN_FILES,
        "files on the answer"
    );
    assert_stopped_and_recovered(&mut phone, &frames, "hoard").await;
    gw.stop().await;
}

#[tokio::test]
async fn a_scheduled_run_of_a_runaway_agent_fails_with_the_bound_named() {
    let clock = ManualClock::new(1_906_696_800_000);
    let gw = TestGateway::start_with({
        let clock = clock.clone();
        move |c| {
            c.agent_command = Some(demo_agent());
            c.cron.clock = clock.clock();
        }
    })
    .await;
    let (mut phone, _) = gw.connect("phone").await;
    send(
        &mut phone,
        default_lane(),
        "/cron add every 1h flood job",
        false,
    )
    .await;
    let added = until(&mut phone, |e| {
        !system_texts(std::slice::from_ref(e)).is_empty()
    })
    .await;
    assert!(system_texts(&added)[0].contains("flood job"), "{added:?}");

    clock.advance(Duration::from_secs(3600));
    tokio::time::timeout(FRAME_WAIT, gw.cron.settled(gw.cron.now_ms()))
        .await
        .expect("the scheduler looked at the job");
    let run = until_idle(&mut phone).await;
    let reports = system_texts(&run);
    assert!(
        reports.iter().any(|r| r.starts_with(
            "Scheduled job 1 “flood job” failed: the agent wrote more than one answer may hold \
             (512 KiB of text, 1000 tool calls or 64 files)"
        )),
        "{reports:?}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn an_agent_asking_without_end_shows_a_few_bounded_approvals_and_the_rest_are_cancelled() {
    let gw = TestGateway::start_with(|c| c.agent_command = Some(demo_agent())).await;
    let (mut phone, _) = gw.connect("phone").await;
    // The demo agent asks 20 approvals at once, each with a 10,000-character title and 40
    // options, and counts aloud those that come back cancelled.
    send(&mut phone, default_lane(), "pester", false).await;
    let mut shown = Vec::new();
    let mut twelve_cancelled = false;
    let mut notified = 0;
    until(&mut phone, |e| {
        match &e.body {
            ServerFrame::Notification(n) if n.kind == "approval" => notified += 1,
            ServerFrame::PickerApproval(p) => shown.push(p.clone()),
            ServerFrame::MessageUpdate(u) => twelve_cancelled |= u.text.contains("cancelled 12."),
            _ => {}
        }
        shown.len() == 8 && twelve_cancelled
    })
    .await;
    assert_eq!(notified, 1, "the phone is told once while approvals wait");
    for approval in &shown {
        assert!(
            approval.title.chars().count() <= MAX_STEP_TEXT + 1,
            "title cut"
        );
        assert_eq!(approval.choices.len(), 16, "choices shown");
        assert!(approval
            .choices
            .iter()
            .all(|c| c.label.chars().count() <= 101));
    }
    for approval in &shown {
        select(&mut phone, &approval.picker_id, "option_0")
            .await
            .expect("answered");
    }
    let frames = until_idle(&mut phone).await;
    assert_eq!(
        count(&frames, "picker.approval"),
        0,
        "no approval beyond the eight open ones"
    );
    let text = final_of(&frames).text;
    assert!(
        text.ends_with("Pestered: 8 answered, 12 cancelled."),
        "{text}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn an_agent_advertising_commands_without_end_is_kept_to_a_bounded_catalog() {
    // 5,001 commands, the first with a 1,000-character name, all with long texts. An agent's
    // catalog is the latest list it advertised, for any session: without forks and spare
    // sessions, so that no new session of the demo (the checkpoint forked after the turn, the
    // spare opened for the next chat) advertises its usual commands over the crowd.
    let only_this_session = |c: &mut iris_gateway::Config| {
        demo_without_fork(c);
        c.spare_session = false;
        c.agents[0].spare_session = Some(false);
    };
    let (gw, mut phone, frames) = runaway_turn_with("crowd", only_this_session).await;
    assert_eq!(answer(&frames).as_deref(), Some("Crowded."));

    let reply = phone
        .request(Header::default(), ClientFrame::CommandsCatalog(Empty {}))
        .await
        .expect("catalog answered");
    let ServerFrame::CommandsCatalog(catalog) = reply.body else {
        panic!("expected the catalog, got {reply:?}");
    };
    let agent: Vec<_> = catalog
        .commands
        .iter()
        .filter(|c| c.category == "Agent")
        .collect();
    assert_eq!(agent.len(), 200, "commands kept");
    assert_eq!(
        agent[0].name, "/crowd0",
        "a name no one can type is left out"
    );
    for c in &agent {
        assert!(c.description.chars().count() <= 301, "{}", c.name);
        assert!(c.args_hint.chars().count() <= 101, "{}", c.name);
    }
    gw.stop().await;
}

#[tokio::test]
async fn an_agent_renaming_without_end_renames_the_thread_a_few_times_per_turn() {
    let gw = TestGateway::start_with(|c| c.agent_command = Some(demo_agent())).await;
    let (mut phone, _) = gw.connect("phone").await;
    // 50 titles during the turn, in a new thread the agent may name.
    let echo = send(&mut phone, default_lane(), "rename this thread", true).await;
    let thread = echo.header.thread_id.clone().expect("a new thread");
    let frames = until_idle(&mut phone).await;
    let renames: Vec<&str> = frames
        .iter()
        .filter_map(|e| match &e.body {
            ServerFrame::ChannelRenamed(r) if r.chat_id == thread => Some(r.name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(renames, ["Title 1", "Title 2", "Title 3"]);
    gw.stop().await;
}
