//! Naming chats and threads: `/title` from the user, and the agent's session title for an
//! auto-thread the user has not named.

use super::output::Output;
use crate::text::clean_title;

/// Titles the agent may give a thread from the start of one turn to the start of the next
/// (while it is idle as well); later ones are ignored.
pub(super) const AGENT_TITLES_PER_TURN: u8 = 3;

/// Renames this lane's thread (or channel) at the user's request.
pub(super) async fn user_title(out: &Output, title: &str) {
    let Some(name) = clean_title(title) else {
        out.system("A title needs 1-100 characters.").await;
        return;
    };
    let target = out
        .lane()
        .thread_id
        .clone()
        .unwrap_or_else(|| out.lane().chat_id.clone());
    out.rename(&target, &name, true).await;
    out.system(format!("Renamed to {name}.")).await;
}

/// The agent named the session: rename the thread unless the user named it. `left` counts the
/// titles the agent may still give before the next turn starts.
pub(super) async fn agent_title(out: &Output, left: &mut u8, title: &str) {
    let (Some(thread), Some(name)) = (out.lane().thread_id.clone(), clean_title(title)) else {
        return;
    };
    // Each rename is a commit and a frame to every device: a runaway agent gets a few.
    if *left == 0 {
        return;
    }
    *left -= 1;
    out.rename(&thread, &name, false).await;
}
