//! Naming chats and threads: `/title` from the user, and the agent's session title for an
//! auto-thread the user has not named.

use super::LaneActor;
use crate::text::clean_title;

impl LaneActor {
    /// Renames this lane's thread (or channel) at the user's request.
    pub(super) async fn user_title(&mut self, title: &str) {
        let Some(name) = clean_title(title) else {
            self.out.system("A title needs 1-100 characters.").await;
            return;
        };
        let target = self
            .lane()
            .thread_id
            .clone()
            .unwrap_or_else(|| self.out.lane().chat_id.clone());
        self.out.rename(&target, &name, true).await;
        self.out.system(format!("Renamed to {name}.")).await;
    }

    /// The agent named the session: rename the thread unless the user named it.
    pub(super) async fn agent_title(&mut self, title: &str) {
        let (Some(thread), Some(name)) = (self.out.lane().thread_id.clone(), clean_title(title))
        else {
            return;
        };
        // Each rename is a commit and a frame to every device: a runaway agent gets a few.
        if self.agent_titles_left == 0 {
            return;
        }
        self.agent_titles_left -= 1;
        self.out.rename(&thread, &name, false).await;
    }
}
