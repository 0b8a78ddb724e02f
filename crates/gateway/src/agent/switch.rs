//! Changing a channel's agent (`channel.set_agent`, `/agent NAME`): the channel remembers the new
//! agent, its lanes forget their agent sessions, a system message says so, and the directory
//! goes out again; then the lanes follow (closing their sessions on the old agent). The history
//! stays, and so do messages waiting in a lane: they run on the new agent.

use iris_protocol::Header;
use iris_store::StoreError;

use super::bridge::Agents;
use crate::outbox::{self, Lane, Origin};
use crate::wire::WireError;

impl Agents {
    /// Moves the channel `chat_id` (and its threads) to `agent`. An unknown agent is
    /// `not_found`, a thread `bad_request` (threads use their channel's agent). Asking for the
    /// agent the channel already has changes nothing but still answers with the directory.
    pub async fn switch_channel(
        &self,
        chat_id: &str,
        agent: &str,
        origin: &Origin,
    ) -> Result<(), WireError> {
        self.switch_channel_from(chat_id, agent, origin, None).await
    }

    /// [`Agents::switch_channel`], asked by the lane `from` itself (`/agent`): that lane is not
    /// waited for; it follows before its next job.
    pub(crate) async fn switch_channel_from(
        &self,
        chat_id: &str,
        agent: &str,
        origin: &Origin,
        from: Option<&Lane>,
    ) -> Result<(), WireError> {
        let agent = agent.trim();
        if !self.knows(agent) {
            return Err(WireError::not_found(format!(
                "there is no agent {agent:?}; this gateway has: {}",
                self.names().join(", ")
            )));
        }
        let (chat, name, origin) = (chat_id.to_owned(), agent.to_owned(), origin.clone());
        let changed = self
            .shared()
            .store
            .write(move |tx| {
                let row = tx.get_channel(&chat)?.ok_or(StoreError::NotFound)?;
                if row.kind == "thread" {
                    return Err(StoreError::Invalid(
                        "a thread uses its channel's agent; change the channel's".into(),
                    ));
                }
                let changed = row.agent.as_deref() != Some(name.as_str());
                if changed {
                    tx.set_channel_agent(&chat, Some(&name))?;
                    tx.forget_lane_sessions(&chat)?;
                    let lane = Lane {
                        chat_id: chat.clone(),
                        thread_id: None,
                    };
                    let text = format!(
                        "This channel now talks to {name}. Its chats start fresh sessions with \
                         the next message; the history stays."
                    );
                    outbox::post(tx, &lane, outbox::system_message(text), &Origin::none())?;
                }
                let list = outbox::channel_list(tx)?;
                outbox::append(tx, &Header::default(), list, None, &origin)?;
                Ok(changed)
            })
            .await?;
        if changed {
            self.follow_agent(chat_id, from).await;
        }
        Ok(())
    }
}
