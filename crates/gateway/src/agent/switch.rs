//! Changing a channel's agent (`channel.set_agent`, `/agent NAME`): the channel remembers the new
//! agent, its lanes forget their agent sessions, a system message says so, and the directory
//! goes out again, all in one transaction. Then the agent epoch moves and the channel's lanes
//! follow (closing their sessions on the old agent). The history stays, and so do messages
//! waiting in a lane: they run on the new agent.

use iris_protocol::{Header, Message, Runtime};
use iris_store::StoreError;

use super::env::LaneEnv;
use super::error::AgentError;
use crate::outbox::{self, Lane, Origin};

/// Moves the channel `chat_id` (and its threads) to `agent` in the store; returns whether it
/// changed. An unknown agent is refused, and so is a thread (threads use their channel's
/// agent). Asking for the agent the channel already has changes nothing but still sends the
/// directory. The caller moves the agent epoch when it changed.
pub(crate) async fn switch_channel(
    env: &LaneEnv,
    chat_id: &str,
    agent: &str,
    origin: &Origin,
) -> Result<bool, AgentError> {
    let agent = agent.trim();
    if !env.hosts.knows(agent) {
        return Err(AgentError::UnknownAgent {
            name: agent.to_owned(),
            known: env.hosts.names().join(", "),
        });
    }
    let (chat, name, origin) = (chat_id.to_owned(), agent.to_owned(), origin.clone());
    let changed = env
        .shared
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
                // Its runtime names the new agent and no model yet: a client's model chip shows
                // the agent alone until the new session's first answer.
                let said = Message {
                    runtime: Some(Runtime {
                        agent: Some(name.clone()),
                        ..Runtime::default()
                    }),
                    ..outbox::system_message(text)
                };
                outbox::post(tx, &lane, said, &Origin::none())?;
            }
            let list = outbox::channel_list(tx)?;
            outbox::append(tx, &Header::default(), list, None, &origin)?;
            Ok(changed)
        })
        .await?;
    Ok(changed)
}
