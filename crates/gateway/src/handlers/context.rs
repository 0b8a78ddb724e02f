//! What every handler works with: the request context, and the lane a request names.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use iris_protocol::Header;
use tokio_util::sync::CancellationToken;

use crate::agent::Agents;
use crate::guard::Guard;
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
    /// The file browser of the agents' working directories.
    pub files: Arc<crate::files::Files>,
    /// Cancelled when the gateway shuts down.
    pub shutdown: CancellationToken,
    /// Each device's search rate.
    pub searches: SearchRate,
    /// The push backends, for `push.status` and `push.test`.
    pub push: crate::push::Push,
}

/// Searches each device may run: `limits.searches_per_minute` in any 60 seconds (a sliding
/// window over the times of its last searches).
#[derive(Debug, Default)]
pub struct SearchRate {
    windows: Mutex<HashMap<String, VecDeque<Instant>>>,
}

/// The window of [`SearchRate`].
const SEARCH_WINDOW: Duration = Duration::from_secs(60);

impl SearchRate {
    /// Takes one search from the device's budget; when it is used up, how long until the oldest
    /// search of the window leaves it (when the device may search again).
    pub(super) fn take(
        &self,
        device_id: &str,
        per_minute: u32,
    ) -> std::result::Result<(), Duration> {
        self.take_at(device_id, per_minute, Instant::now())
    }

    fn take_at(
        &self,
        device_id: &str,
        per_minute: u32,
        now: Instant,
    ) -> std::result::Result<(), Duration> {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        // Devices that have not searched for a window are forgotten.
        windows.retain(|_, w| {
            w.back()
                .is_some_and(|t| now.duration_since(*t) < SEARCH_WINDOW)
        });
        let window = windows.entry(device_id.to_owned()).or_default();
        while window
            .front()
            .is_some_and(|t| now.duration_since(*t) >= SEARCH_WINDOW)
        {
            window.pop_front();
        }
        if window.len() >= per_minute as usize {
            let oldest = window.front().copied().unwrap_or(now);
            return Err(SEARCH_WINDOW.saturating_sub(now.duration_since(oldest)));
        }
        window.push_back(now);
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn searches_are_counted_in_any_sixty_seconds() {
        let rate = SearchRate::default();
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        for i in 0..30 {
            assert_eq!(rate.take_at("phone", 30, at(i)), Ok(()), "search {i}");
        }
        // The 31st within the minute of the first: refused until the first leaves the window.
        assert_eq!(
            rate.take_at("phone", 30, at(30)),
            Err(Duration::from_secs(30))
        );
        assert_eq!(rate.take_at("laptop", 30, at(30)), Ok(()));
        assert_eq!(
            rate.take_at("phone", 30, at(59)),
            Err(Duration::from_secs(1))
        );
        assert_eq!(rate.take_at("phone", 30, at(60)), Ok(()));
        assert_eq!(
            rate.take_at("phone", 30, at(60)),
            Err(Duration::from_secs(1))
        );
        // Quiet for a minute: the whole budget again.
        for i in 0..30 {
            assert_eq!(rate.take_at("phone", 30, at(200)), Ok(()), "search {i}");
        }
    }
}
