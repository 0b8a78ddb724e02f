//! What every handler works with: the request context, and the lane a request names.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use iris_protocol::Header;
use tokio_util::sync::CancellationToken;

use crate::agent::Agents;
use crate::guard::{Guard, TokenBucket};
use crate::media::Media;
use crate::outbox::Lane;
use crate::state::Shared;
use crate::wire::{Result, WireError};

/// What request handlers work with: the shared state, the door guard, the agent bridge and
/// media, handed down by the server to every connection.
pub struct Context {
    /// Configuration, store, hub and counters.
    pub shared: Arc<Shared>,
    /// Credentials and budgets.
    pub guard: Arc<Guard>,
    /// The lanes' actors.
    pub agents: Agents,
    /// Uploads, pulls and files from the agent.
    pub media: Arc<Media>,
    /// Cancelled when the gateway shuts down.
    pub shutdown: CancellationToken,
    /// Each device's search rate.
    pub searches: SearchRate,
}

/// Searches each device may still run: `limits.searches_per_minute`, in bursts of a quarter.
#[derive(Debug, Default)]
pub struct SearchRate {
    buckets: Mutex<HashMap<String, TokenBucket>>,
}

impl SearchRate {
    /// Takes one search from the device's budget; false when it is used up.
    pub(super) fn take(&self, device_id: &str, per_minute: u32) -> bool {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        buckets
            .entry(device_id.to_owned())
            .or_insert_with(|| TokenBucket::new(per_minute))
            .take()
    }
}

/// Resolves the lane a request names. A missing `chat_id` means the default channel; a `chat_id`
/// naming a thread means that thread in its channel.
pub async fn resolve_lane(ctx: &Context, header: &Header) -> Result<Lane> {
    let channels = ctx.shared.store.channel_directory().await?;
    let chat = match &header.chat_id {
        Some(id) => channels
            .iter()
            .find(|c| &c.chat_id == id)
            .ok_or_else(|| WireError::not_found("chat_id unknown"))?,
        None => channels
            .iter()
            .find(|c| c.is_default)
            .ok_or_else(|| WireError::not_found("no default channel"))?,
    };
    if chat.kind == "thread" {
        if header
            .thread_id
            .as_ref()
            .is_some_and(|t| t != &chat.chat_id)
        {
            return Err(WireError::bad_request(
                "chat_id names a thread; thread_id must be that thread or omitted",
            ));
        }
        let parent = chat
            .parent_chat_id
            .clone()
            .ok_or_else(|| WireError::internal("thread without parent"))?;
        return Ok(Lane {
            chat_id: parent,
            thread_id: Some(chat.chat_id.clone()),
        });
    }
    if let Some(thread) = &header.thread_id {
        let ok = channels
            .iter()
            .any(|c| &c.chat_id == thread && c.parent_chat_id.as_ref() == Some(&chat.chat_id));
        if !ok {
            return Err(WireError::not_found("thread_id unknown in this chat"));
        }
    }
    Ok(Lane {
        chat_id: chat.chat_id.clone(),
        thread_id: header.thread_id.clone(),
    })
}
