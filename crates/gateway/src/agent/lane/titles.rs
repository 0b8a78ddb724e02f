//! Naming chats and threads: `/title` from the user, and the agent's session title for an
//! auto-thread the user has not named.

use iris_protocol::{ChannelRenamed, DurableFrame, Header, Notification};

use super::LaneActor;
use crate::ids::now_ms;
use crate::outbox::{self, Origin};
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
        self.rename(&target, &name, true).await;
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
        self.rename(&thread, &name, false).await;
    }

    pub(super) async fn rename(&self, chat_id: &str, name: &str, by_user: bool) {
        let (chat, name) = (chat_id.to_owned(), name.to_owned());
        let parent = self.out.lane().chat_id.clone();
        let is_thread = self.out.lane().thread_id.as_deref() == Some(chat_id);
        let result = self
            .env
            .shared
            .store
            .write(move |tx| {
                if !tx.rename_channel(&chat, &name, by_user)? {
                    return Ok(false);
                }
                let filed = if is_thread {
                    (Some(parent.as_str()), Some(chat.as_str()))
                } else {
                    (Some(chat.as_str()), None)
                };
                let renamed = DurableFrame::ChannelRenamed(ChannelRenamed {
                    chat_id: chat.clone(),
                    name: name.clone(),
                });
                outbox::append_filed(
                    tx,
                    &Header::default(),
                    renamed,
                    filed,
                    None,
                    &Origin::none(),
                )?;
                if !by_user {
                    let note = DurableFrame::Notification(Notification {
                        kind: "channel_renamed".into(),
                        title: name.clone(),
                        body: Some(format!("Renamed topic to {name}")),
                        ts: now_ms(),
                    });
                    outbox::append_filed(
                        tx,
                        &Header::lane(parent.clone(), is_thread.then(|| chat.clone())),
                        note,
                        filed,
                        None,
                        &Origin::none(),
                    )?;
                }
                Ok(true)
            })
            .await;
        if let Err(e) = result {
            tracing::warn!(error = %e, "rename failed");
        }
    }
}
