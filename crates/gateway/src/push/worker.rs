//! The push worker: scans the outbox for frames that want attention, queues them per device, and
//! sends each device's coalesced push when it is due (see the module docs of [`super`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use iris_protocol::{decode, FrameBody, ServerFrame};
use iris_store::{DeviceRow, PushItem, PushPending, StoreError};
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::backends::{Backends, Route};
use super::outcome::Outcome;
use super::policy::{self, Context};
use super::status;
use crate::ids::now_ms;
use crate::metrics::Metrics;
use crate::state::Shared;

/// Outbox frames read per scan step.
const SCAN_PAGE: usize = 500;
/// Devices whose pushes are sent at the same time.
const MAX_IN_FLIGHT: usize = 8;
/// Pause after a store error before the same work is tried again.
const TROUBLE_PAUSE_MS: i64 = 1000;

pub(crate) struct Worker {
    ctx: Arc<Ctx>,
    wake: Arc<Notify>,
    stop: CancellationToken,
}

/// What the scan and the send tasks share.
struct Ctx {
    shared: Arc<Shared>,
    /// The agent's name, the title of its pushes.
    agent_label: String,
    backends: Arc<Backends>,
}

impl Worker {
    pub(crate) fn new(
        shared: Arc<Shared>,
        agent_label: String,
        backends: Arc<Backends>,
        wake: Arc<Notify>,
        stop: CancellationToken,
    ) -> Worker {
        Worker {
            ctx: Arc::new(Ctx {
                shared,
                agent_label,
                backends,
            }),
            wake,
            stop,
        }
    }

    pub(crate) async fn run(self) {
        let ctx = self.ctx;
        let mut in_flight: JoinSet<bool> = JoinSet::new();
        let mut busy: HashMap<tokio::task::Id, String> = HashMap::new();
        // Devices whose last try hit a store error, and when they may be tried again.
        let mut cooling: HashMap<String, i64> = HashMap::new();
        // Frames committed while the gateway was down (or before the first wake) are found by a
        // scan at start.
        let mut rescan = true;
        loop {
            let mut wake_at: Option<i64> = None;
            if rescan {
                match ctx.scan().await {
                    Ok(()) => rescan = false,
                    Err(e) => {
                        tracing::warn!(error = %e, "push: reading the outbox failed");
                        wake_at = Some(now_ms() + TROUBLE_PAUSE_MS);
                    }
                }
            }
            match ctx.shared.store.push_pending().await {
                Ok(pending) => {
                    let now = now_ms();
                    cooling.retain(|_, until| *until > now);
                    for p in pending {
                        if busy.values().any(|d| *d == p.device_id) {
                            continue;
                        }
                        let due = ctx
                            .due_at(&p)
                            .max(cooling.get(&p.device_id).copied().unwrap_or(0));
                        if due > now {
                            wake_at = Some(wake_at.map_or(due, |w| w.min(due)));
                        } else if in_flight.len() < MAX_IN_FLIGHT {
                            let device = p.device_id.clone();
                            let task = ctx.clone();
                            let handle = in_flight.spawn(async move {
                                match task.deliver(&p).await {
                                    Ok(()) => true,
                                    Err(e) => {
                                        tracing::warn!(device_id = %p.device_id, error = %e, "push: store error");
                                        false
                                    }
                                }
                            });
                            busy.insert(handle.id(), device);
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "push: reading the queue failed");
                    wake_at = Some(now_ms() + TROUBLE_PAUSE_MS);
                }
            }
            let sleep = async move {
                match wake_at {
                    Some(at) => {
                        tokio::time::sleep(Duration::from_millis((at - now_ms()).max(0) as u64))
                            .await
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = self.stop.cancelled() => break,
                _ = self.wake.notified() => rescan = true,
                Some(done) = in_flight.join_next_with_id(), if !in_flight.is_empty() => {
                    let (id, ok) = match done {
                        Ok((id, ok)) => (id, ok),
                        Err(e) => {
                            tracing::error!(error = %e, "push: a send task failed");
                            (e.id(), false)
                        }
                    };
                    if let Some(device) = busy.remove(&id) {
                        if !ok {
                            cooling.insert(device, now_ms() + TROUBLE_PAUSE_MS);
                        }
                    }
                }
                _ = sleep => {}
            }
        }
        // A request in flight is abandoned; its attempt is recorded, so it is resent after the
        // restart.
        in_flight.shutdown().await;
        tracing::debug!("push worker stopped");
    }
}

impl Ctx {
    /// When a device's push is due: after the coalescing window of its oldest queued frame, or
    /// once a failed attempt's backoff has passed.
    fn due_at(&self, p: &PushPending) -> i64 {
        match p.next_attempt_at {
            Some(at) => at,
            None => p.first_queued_at + self.backends.config.coalesce.as_millis() as i64,
        }
    }

    /// Queues every frame after the scan position that wants attention, for every device it
    /// should wake, and advances the position in the same store job.
    async fn scan(&self) -> Result<(), StoreError> {
        let store = &self.shared.store;
        let mut position = store.push_scan_position().await?;
        loop {
            let rows = store
                .replay_bytes(position, SCAN_PAGE, 4 * 1024 * 1024)
                .await?;
            let Some(last) = rows.last().map(|r| r.0) else {
                return Ok(());
            };
            let more = rows.len() == SCAN_PAGE;
            let items = self.pick(&rows).await?;
            if !items.is_empty() {
                tracing::debug!(frames = items.len(), upto = last, "push: queued");
            }
            // Lazy: the scan follows every commit, and a push waits for its coalescing window
            // anyway, so this rides along with the store's next commit instead of costing the
            // turn that caused it an fsync of its own.
            store
                .write_lazy(move |tx| {
                    for item in &items {
                        tx.queue_push(item)?;
                    }
                    tx.set_push_scan_position(last)
                })
                .await?;
            position = last;
            if !more {
                return Ok(());
            }
        }
    }

    /// The queue rows for one page of outbox frames.
    async fn pick(&self, rows: &[(u64, Arc<str>)]) -> Result<Vec<PushItem>, StoreError> {
        if self.backends.fcm.is_none()
            && self.backends.ntfy.is_none()
            && self.backends.webpush.is_none()
        {
            return Ok(Vec::new());
        }
        let frames: Vec<_> = rows
            .iter()
            .filter_map(|(cursor, json)| {
                let decoded = decode::<ServerFrame>(json).ok()?;
                policy::classify(&decoded.body).map(|kind| (*cursor, kind, decoded))
            })
            .collect();
        if frames.is_empty() {
            return Ok(Vec::new());
        }
        let store = &self.shared.store;
        let devices: Vec<DeviceRow> = store
            .list_devices()
            .await?
            .into_iter()
            .filter(|d| self.backends.route(d).is_some())
            .collect();
        if devices.is_empty() {
            return Ok(Vec::new());
        }
        let channels = store.list_channels().await?;
        let agent = self.agent_label.as_str();
        let now = now_ms();
        let mut items = Vec::new();
        for (cursor, kind, decoded) in frames {
            let lane = decoded
                .header
                .thread_id
                .as_deref()
                .or(decoded.header.chat_id.as_deref());
            let chat_name = lane
                .and_then(|id| channels.iter().find(|c| c.chat_id == id))
                .map(|c| c.name.as_str());
            let ctx = Context {
                agent,
                chat_name,
                previews: self.backends.config.previews,
            };
            let (title, preview) = policy::describe(&decoded.body, kind, ctx);
            for d in &devices {
                // Only a device that is not connected and has not confirmed the frame needs waking.
                if d.confirmed_cursor >= cursor
                    || d.last_pushed_cursor >= cursor
                    || self.shared.hub.is_online(&d.device_id)
                {
                    continue;
                }
                items.push(PushItem {
                    device_id: d.device_id.clone(),
                    cursor,
                    frame_type: decoded.body.frame_type().to_owned(),
                    kind: kind.as_str().to_owned(),
                    chat_id: decoded.header.chat_id.clone(),
                    thread_id: decoded.header.thread_id.clone(),
                    message_id: policy::message_id(&decoded.body),
                    title: title.clone(),
                    preview: preview.clone(),
                    queued_at: now,
                });
            }
        }
        Ok(items)
    }

    /// The delay before attempt `attempt + 1`: doubling from the initial delay up to the maximum,
    /// with ±20 % jitter so that many devices do not retry in lockstep.
    fn backoff(&self, attempt: u32) -> Duration {
        let cfg = &self.backends.config;
        let base = cfg
            .retry_initial
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(20))
            .min(cfg.retry_max);
        base.mul_f64(0.8 + 0.4 * rand::random::<f64>())
    }

    /// Removes the device's rows up to `upto` without recording a push.
    async fn drop_queued(&self, device_id: &str, upto: u64) -> Result<(), StoreError> {
        let id = device_id.to_owned();
        self.shared
            .store
            .write(move |tx| tx.finish_push(&id, upto).map(|_| ()))
            .await
    }

    /// The answers a push describing a picker offers as buttons, with a new token for this
    /// device: only while the picker is open, and only for approvals and short questions.
    fn action_for(
        &self,
        content: &policy::PushContent,
        items: &[PushItem],
        device_id: &str,
    ) -> Option<policy::PushAction> {
        if !matches!(content.kind, policy::Kind::Approval | policy::Kind::Clarify) {
            return None;
        }
        // The latest picker of the kind described (its notification frame comes just after it).
        let item = items.iter().rev().find(|i| {
            i.frame_type.starts_with("picker.") && policy::Kind::parse(&i.kind) == content.kind
        })?;
        let frame = self.shared.hub.open_picker(item.cursor)?;
        let (picker_id, choices) = policy::action_choices(&frame)?;
        let grant = crate::actions::Grant {
            device_id: device_id.to_owned(),
            picker_id: picker_id.clone(),
            values: choices.iter().map(|(v, _)| v.clone()).collect(),
        };
        let token = self.shared.actions.mint(grant, std::time::Instant::now());
        let base = self.shared.config.public_url();
        Some(policy::PushAction {
            picker_id,
            token,
            choices,
            url: format!("{}/v1/actions", base.trim_end_matches('/')),
        })
    }

    /// Sends one device's coalesced push and records the outcome.
    async fn deliver(&self, p: &PushPending) -> Result<(), StoreError> {
        let store = &self.shared.store;
        let device_id = p.device_id.as_str();
        // A deleted device takes its queue rows with it.
        let Some(device) = store.get_device(device_id).await? else {
            return Ok(());
        };
        let items = store.push_items(device_id).await?;
        let Some(last) = items.last().map(|i| i.cursor) else {
            return Ok(());
        };
        if self.shared.hub.is_online(device_id) {
            // Connected again: the app gets the frames by sync and notifies on its own, since they
            // are above its `last_pushed_cursor`.
            tracing::debug!(
                device_id,
                "push: device came back; dropping its queued push"
            );
            return self.drop_queued(device_id, last).await;
        }
        let items: Vec<PushItem> = items
            .into_iter()
            .filter(|i| i.cursor > device.confirmed_cursor)
            .collect();
        let (Some(route), Some(mut content)) =
            (self.backends.route(&device), policy::summarize(&items))
        else {
            // Received meanwhile, or no registration left for a configured backend.
            return self.drop_queued(device_id, last).await;
        };
        if p.attempts >= self.backends.config.max_attempts {
            tracing::warn!(device_id, attempts = p.attempts, "push: giving up");
            Metrics::inc(&self.shared.metrics.push_failed);
            let entry = status::unreachable_entry(device_id, route.backend(), p.attempts);
            status::record(&self.shared, entry).await;
            return self.drop_queued(device_id, last).await;
        }
        let private = self.backends.config.private_for(route.backend());
        if private {
            content.make_private();
        }
        // A token is minted only for buttons the push will carry.
        if content.offers_buttons(private) {
            content.action = self.action_for(&content, &items, device_id);
        }
        // Recorded before the request: should the gateway die during it, the push is sent again
        // after the restart, with the same collapse key, so the device shows it once.
        let next_at = now_ms() + self.backoff(p.attempts + 1).as_millis() as i64;
        let id = device_id.to_owned();
        let attempt = store
            .write(move |tx| tx.record_push_attempt(&id, next_at))
            .await?;
        let backends = &self.backends;
        let outcome = backends.send(&route, &content).await;
        let backend = route.backend();
        // Recorded once the outcome's effects are stored, so what `devices list` says is so.
        let entry = status::log_entry(device_id, backend, &outcome, false);
        let id = device_id.to_owned();
        match outcome {
            Outcome::Delivered => {
                Metrics::inc(&self.shared.metrics.push_sent);
                let cursor = content.cursor;
                store
                    .write(move |tx| {
                        tx.finish_push(&id, last)?;
                        tx.set_last_pushed(&id, cursor)
                    })
                    .await?;
                tracing::info!(
                    device_id,
                    backend,
                    cursor,
                    frames = content.count,
                    attempt,
                    "push delivered"
                );
            }
            Outcome::Retry { after, reason } => {
                tracing::warn!(device_id, backend, attempt, %reason, "push failed; will retry");
                if let Some(after) = after {
                    let at =
                        now_ms() + after.min(self.backends.config.retry_max).as_millis() as i64;
                    store.write(move |tx| tx.delay_push(&id, at)).await?;
                }
            }
            Outcome::Unregistered => {
                tracing::info!(
                    device_id,
                    backend,
                    "push registration no longer valid; removed"
                );
                self.unregistered(&device, route, last).await?;
            }
            Outcome::Rejected(reason) => {
                tracing::warn!(device_id, backend, %reason, "push refused; dropped");
                Metrics::inc(&self.shared.metrics.push_failed);
                self.drop_queued(device_id, last).await?;
            }
        }
        status::record(&self.shared, entry).await;
        Ok(())
    }

    /// Removes the registration `route` used, which its backend said is gone. Another
    /// registration of the device, if any, takes over at once with the same push.
    async fn unregistered(
        &self,
        device: &DeviceRow,
        route: Route,
        last: u64,
    ) -> Result<(), StoreError> {
        let mut rest = device.clone();
        match &route {
            Route::Fcm(_) => rest.fcm_token = None,
            Route::WebPush(_) => rest.webpush = None,
            // ntfy has no registrations to lose; never retry it in a loop.
            Route::Ntfy(_) => return self.drop_queued(&device.device_id, last).await,
        }
        let fallback = self.backends.route(&rest).is_some();
        if !fallback {
            Metrics::inc(&self.shared.metrics.push_failed);
        }
        let id = device.device_id.clone();
        self.shared
            .store
            .write(move |tx| {
                status::clear_registration(tx, &id, &route)?;
                if fallback {
                    // The same push goes out through the next backend right away.
                    tx.reset_push_attempts(&id)
                } else {
                    tx.finish_push(&id, last).map(|_| ())
                }
            })
            .await
    }
}
