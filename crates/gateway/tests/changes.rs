//! A tool call's file changes (ACP `diff` content) reach every device as a unified diff with its
//! counts, live on `tool.start` and kept in the answer's steps, so a reload and `history` show
//! the same; an edit that asks first (as Hermes' `write_file` does) shows its diff on the
//! approval and keeps it in the picker's step; the Markdown export has them as fenced `diff`
//! blocks. Through the demo agent's `edit` and `patch`.

mod common;

use common::*;
use iris_protocol::{ServerFrame, Step};

#[tokio::test]
async fn an_edit_shows_its_diff_on_every_device_live_and_after_a_reload() {
    let gw = TestGateway::start_demo().await;
    let (mut phone, _) = gw.connect("phone").await;
    let (mut laptop, _) = gw.connect("laptop").await;
    let events = turn(&mut phone, default_lane(), "edit").await;
    assert_eq!(final_text(&events), "Edited notes.txt. Echo: edit");
    let on_laptop = until_idle(&mut laptop).await;
    for (device, events) in [("phone", &events), ("laptop", &on_laptop)] {
        let start = events
            .iter()
            .find_map(|e| match &e.body {
                ServerFrame::ToolStart(s) => Some(s.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{device}: no tool.start"));
        assert_eq!(start.changes.len(), 1, "{device}: {start:?}");
        let change = &start.changes[0];
        assert!(change.path.ends_with("/notes.txt"), "{change:?}");
        assert_eq!((change.added, change.removed), (2, 1));
        assert!(change.diff.contains("-two\n+2\n"), "{}", change.diff);
        assert!(change.diff.contains(" three\n+four\n"), "{}", change.diff);
    }

    // A reload reads the answer's steps: the same change.
    let history = lane_history(&mut laptop, default_lane()).await;
    let answer = history.last().expect("the answer");
    let tool = answer
        .steps
        .iter()
        .find_map(|s| match s {
            Step::Tool(t) => Some(t),
            _ => None,
        })
        .expect("a tool step");
    assert_eq!(tool.changes.len(), 1);
    assert_eq!((tool.changes[0].added, tool.changes[0].removed), (2, 1));

    // The export writes it as a diff block under its tool.
    let md = gw.markdown_export();
    assert!(
        md.contains("/notes.txt` +2 −1\n    ```diff\n    --- "),
        "{md}"
    );
    assert!(md.contains("\n    -two\n    +2\n"), "{md}");
    gw.stop().await;
}

#[tokio::test]
async fn an_edit_that_asks_first_shows_its_diff_on_the_approval_and_keeps_it() {
    let gw = TestGateway::start_demo().await;
    let (mut phone, _) = gw.connect("phone").await;
    send(&mut phone, default_lane(), "patch", false).await;
    let approval = phone
        .wait_for(|e| e.frame_type() == "picker.approval")
        .await
        .expect("an approval");
    let ServerFrame::PickerApproval(asked) = &approval.body else {
        unreachable!()
    };
    assert_eq!(asked.changes.len(), 1, "{asked:?}");
    assert!(
        asked.changes[0].diff.contains("-beta\n+BETA\n"),
        "{asked:?}"
    );
    select(&mut phone, &asked.picker_id, "allow_once")
        .await
        .expect("allowed");
    let events = until_idle(&mut phone).await;
    assert!(final_text(&events).starts_with("Patched notes.txt."));
    let history = lane_history(&mut phone, default_lane()).await;
    let picker = history
        .last()
        .expect("the answer")
        .steps
        .iter()
        .find_map(|s| match s {
            Step::Picker(p) => Some(p.clone()),
            _ => None,
        })
        .expect("the picker step");
    assert_eq!(picker.label.as_deref(), Some("Allow once"));
    assert_eq!((picker.changes[0].added, picker.changes[0].removed), (1, 1));
    gw.stop().await;
}

#[tokio::test]
async fn a_file_edited_twice_in_a_turn_shows_one_change_from_before_to_after() {
    let gw = TestGateway::start_demo().await;
    let (mut phone, _) = gw.connect("phone").await;
    let (mut laptop, _) = gw.connect("laptop").await;
    let events = turn(&mut phone, default_lane(), "revise").await;
    assert!(final_text(&events).starts_with("Revised notes.txt and draft.txt."));
    let on_laptop = until_idle(&mut laptop).await;
    for (device, events) in [("phone", &events), ("laptop", &on_laptop)] {
        let stop = answer_stop(events).unwrap_or_else(|| panic!("{device}: no message.stop"));
        // Each edit keeps its own diff on its tool step.
        let edits: Vec<_> = stop
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Tool(t) => Some(t.changes.len()),
                _ => None,
            })
            .collect();
        assert_eq!(edits, [1, 1, 1, 1], "{device}: {:?}", stop.steps);
        // notes.txt's two edits chain into one change; draft.txt's snippets do not.
        assert_eq!(
            stop.turn_changes.len(),
            1,
            "{device}: {:?}",
            stop.turn_changes
        );
        let notes = &stop.turn_changes[0];
        assert!(notes.path.ends_with("/notes.txt"), "{notes:?}");
        assert_eq!((notes.added, notes.removed), (2, 1));
        assert!(
            notes.diff.contains("-two\n+2\n three\n+four\n"),
            "{}",
            notes.diff
        );
    }

    // A reload reads the same from history, and the export has it too.
    let history = lane_history(&mut laptop, default_lane()).await;
    let answer = history.last().expect("the answer");
    assert_eq!(answer.turn_changes.len(), 1);
    let live = answer_stop(&events).expect("message.stop");
    assert_eq!(answer.turn_changes[0].diff, live.turn_changes[0].diff);
    let md = gw.markdown_export();
    let section = md
        .split("- Changes of this turn")
        .nth(1)
        .unwrap_or_else(|| panic!("no section of combined changes: {md}"));
    assert!(
        section.contains("/notes.txt` +2 −1\n    ```diff\n"),
        "{section}"
    );
    gw.stop().await;
}

/// The answer's `message.stop` among a turn's events.
fn answer_stop(events: &[iris_client::Event]) -> Option<&iris_protocol::MessageStop> {
    events.iter().rev().find_map(|e| match &e.body {
        ServerFrame::MessageStop(stop) => Some(stop),
        _ => None,
    })
}
