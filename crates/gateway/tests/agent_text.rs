//! What an agent writes for a device to show (tool titles, file changes and their paths,
//! approval titles and choice labels) reaches every device cleaned like a name: no terminal
//! escapes, bidi overrides or zero-width characters, a diff's hidden characters written out as
//! `<U+XXXX>`, and a changed file outside the agent's working directory marked `outside`. HTML
//! stays text (devices render these strings as text). Through the demo agent's `deceive`.

mod common;

use common::*;
use iris_protocol::{FileChange, ServerFrame, Step};

/// No character that changes how text shows is left in `text`.
fn assert_clean(what: &str, text: &str) {
    let hidden = text
        .chars()
        .find(|c| (c.is_control() && *c != '\n') || iris_gateway::text::is_format(*c));
    assert_eq!(hidden, None, "{what}: {text:?}");
}

fn assert_tool_change(change: &FileChange) {
    assert!(change.outside, "{change:?}");
    assert!(
        change.path.ends_with("/../outside<U+202E>txt.exe"),
        "{change:?}"
    );
    assert_clean("diff", &change.diff);
    // The text is the agent's, with what would hide or move it written out; HTML stays.
    assert!(
        change
            .diff
            .contains("+<U+001B>[2J<U+001B>]0;owned<U+0007>ok\n+if (admin) { /*<U+202E> } <U+2066>if (x)*/\n+<script>x</script>\n"),
        "{}",
        change.diff
    );
}

#[tokio::test]
async fn a_hostile_agents_titles_labels_and_diffs_reach_devices_cleaned() {
    let gw = TestGateway::start_demo().await;
    let (mut phone, _) = gw.connect("phone").await;
    let (mut laptop, _) = gw.connect("laptop").await;
    send(&mut phone, default_lane(), "deceive", false).await;
    let live = until(&mut phone, |e| e.frame_type() == "picker.approval").await;

    let start = live
        .iter()
        .find_map(|e| match &e.body {
            ServerFrame::ToolStart(s) => Some(s.clone()),
            _ => None,
        })
        .expect("a tool.start");
    assert_eq!(start.name, "[31mwrite_file");
    assert_eq!(
        start.preview.as_deref(),
        Some("<img src=x onerror=alert(1)>notes")
    );
    assert_eq!(start.changes.len(), 1, "{start:?}");
    assert_tool_change(&start.changes[0]);

    let Some(ServerFrame::PickerApproval(asked)) = live.last().map(|e| &e.body) else {
        unreachable!()
    };
    assert_eq!(
        asked.title,
        "]0;pwnedApprove <b>edit</b> of /etc/iris-hostile.conf"
    );
    let labels: Vec<(&str, &str)> = asked
        .choices
        .iter()
        .map(|c| (c.value.as_str(), c.label.as_str()))
        .collect();
    // An option with nothing visible to show is not offered.
    assert_eq!(
        labels,
        [
            ("allow_once", "[1mAllow once[0m"),
            ("reject_once", "<b>Deny</b>")
        ]
    );
    let change = &asked.changes[0];
    assert!(change.outside && change.new_file, "{change:?}");
    assert_eq!(change.path, "/etc/iris-hostile.conf");
    assert!(
        change.diff.contains("+owned<U+001B>[8m\n"),
        "{}",
        change.diff
    );
    assert_clean("preview", asked.preview.as_deref().unwrap_or_default());
    let invisible = select(&mut phone, &asked.picker_id, "\u{202E}").await;
    let Err(iris_client::ClientError::Server { code, .. }) = invisible else {
        panic!("an option not offered was taken: {invisible:?}")
    };
    assert_eq!(code, iris_protocol::ErrorCode::BadRequest);

    select(&mut phone, &asked.picker_id, "allow_once")
        .await
        .expect("allowed");
    let rest = until_idle(&mut phone).await;
    assert_eq!(final_text(&rest), "Hostile: allow_once. Echo: deceive");
    let on_laptop = until_idle(&mut laptop).await;
    for e in live.iter().chain(&rest).chain(&on_laptop) {
        if let ServerFrame::Notification(n) = &e.body {
            assert_clean("notification", n.body.as_deref().unwrap_or_default());
        }
    }

    // What the answer keeps, for a reload and `history`, is cleaned the same.
    let history = lane_history(&mut laptop, default_lane()).await;
    let steps = &history.last().expect("the answer").steps;
    let tool = steps
        .iter()
        .find_map(|s| match s {
            Step::Tool(t) => Some(t),
            _ => None,
        })
        .expect("a tool step");
    assert_eq!(tool.name, "[31mwrite_file");
    assert_tool_change(&tool.changes[0]);
    let picker = steps
        .iter()
        .find_map(|s| match s {
            Step::Picker(p) => Some(p),
            _ => None,
        })
        .expect("a picker step");
    assert_eq!(picker.title, asked.title);
    assert_eq!(picker.label.as_deref(), Some("[1mAllow once[0m"));
    assert!(picker.changes[0].outside);
    gw.stop().await;
}

#[tokio::test]
async fn a_file_the_agent_edits_in_its_own_directory_is_not_marked() {
    let gw = TestGateway::start_demo().await;
    let (mut phone, _) = gw.connect("phone").await;
    let events = turn(&mut phone, default_lane(), "edit").await;
    let start = events
        .iter()
        .find_map(|e| match &e.body {
            ServerFrame::ToolStart(s) => Some(s.clone()),
            _ => None,
        })
        .expect("a tool.start");
    assert!(!start.changes[0].outside, "{start:?}");
    gw.stop().await;
}
