//! A connection after `hello`: a single loop that writes the queue, reads requests, replays
//! `sync`, and confirms delivery with pings (WebSocket pings, or their kind in the transport
//! binding: the same frames either way, see [`super::duplex`]).
//!
//! Delivery bookkeeping on a connection:
//! - `live_base`: durable frames above it arrive live, each exactly once, in cursor order (the
//!   head when the connection attached, then the `sync.done` cursor after each sync);
//! - `live_last`: the last durable frame written live;
//! - `written`: the highest cursor C such that every durable frame up to C has been written to
//!   this socket (or confirmed on an earlier one). A Ping sent after writing carries
//!   `written`; its Pong proves receipt, and only then is the device's watermark raised (in
//!   memory at once, in the store by the hub's writer task: `Hub::spawn_watermark_writer`).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use iris_protocol::{
    decode, encode, splice_cursor, ClientFrame, ErrorCode, ErrorPayload, Header, RequestId,
    ResponseFrame, ServerFrame, SyncDone,
};
use iris_store::Committed;

use crate::handlers::{self, Context};
use crate::hub::{CloseReason, ConnQueue, Outgoing};
use crate::outbox::Origin;
use crate::wire::{Reply, WireError};

use super::close::close_code;
use super::duplex::{Duplex, Frame, RecvError};
use super::stream;

/// Replay page size for `sync`, in frames and in bytes: a device that does not read holds at
/// most one page (and the socket's write buffer) in the gateway's memory.
const REPLAY_PAGE: usize = 1000;
const REPLAY_BYTES: usize = 1024 * 1024;

/// A connection after `hello`.
pub struct Conn {
    pub(crate) ctx: Arc<Context>,
    pub(crate) conn_id: u64,
    pub(crate) device_id: String,
    socket: Duplex,
    queue: Arc<ConnQueue>,
    live_base: u64,
    live_last: u64,
    written: u64,
    /// True while frames below `live_base` may still be missing on this device.
    gap_before_live: bool,
    pings: VecDeque<(u64, u64, Instant)>,
    ping_seq: u64,
    last_pong: Instant,
    /// The open upload and the pulls of this connection.
    pub(crate) media: crate::media::ConnMedia,
    /// What this connection wrote of each streaming bubble, when its device asked for
    /// append-form `message.update` (`hello.caps.append_updates`).
    appends: Option<stream::Appends>,
    /// What the device sent while a search ran, handled next.
    waiting: VecDeque<Option<Result<Frame, RecvError>>>,
}

/// Most messages kept while a search runs; beyond that the socket is not read until it ends.
const MAX_WAITING: usize = 16;

/// Awaits `work` while reading the socket: what the device sends meanwhile waits in `waiting`
/// (up to [`MAX_WAITING`]); when the device goes away or closes, `work` is dropped and `None`
/// returned. A failed read is kept for later, and `work` finishes first.
async fn watch_socket<T>(
    work: impl std::future::Future<Output = T>,
    socket: &mut Duplex,
    waiting: &mut VecDeque<Option<Result<Frame, RecvError>>>,
) -> Option<T> {
    tokio::pin!(work);
    loop {
        if waiting.len() >= MAX_WAITING
            || waiting
                .back()
                .is_some_and(|m| m.as_ref().is_some_and(|r| r.is_err()))
        {
            return Some(work.await);
        }
        tokio::select! {
            biased;
            out = &mut work => return Some(out),
            msg = socket.recv() => match msg {
                None | Some(Ok(Frame::Close(_))) => return None,
                other => waiting.push_back(other),
            },
        }
    }
}

/// How a connection ended.
#[derive(Debug)]
pub enum Ended {
    /// The device closed or the socket failed.
    Disconnected,
    /// Closed by the gateway for this reason.
    Closed(#[allow(dead_code, reason = "read by the log line through Debug")] CloseReason),
    /// No pong for too long.
    Dead,
}

impl Conn {
    /// A connection whose device was registered and told `hello.ack`, attached to the hub
    /// (`queue`) at cursor `head`; the device proved it holds every frame up to `confirmed`.
    pub(super) fn attached(
        ctx: Arc<Context>,
        conn_id: u64,
        device_id: String,
        socket: Duplex,
        queue: Arc<ConnQueue>,
        (head, confirmed): (u64, u64),
        appends: bool,
    ) -> Conn {
        Conn {
            ctx,
            conn_id,
            device_id,
            socket,
            queue,
            live_base: head,
            live_last: head,
            written: confirmed,
            gap_before_live: confirmed < head,
            pings: VecDeque::new(),
            ping_seq: 0,
            last_pong: Instant::now(),
            media: crate::media::ConnMedia::default(),
            appends: appends.then(stream::Appends::default),
            waiting: VecDeque::new(),
        }
    }

    /// The hub's queue of this connection.
    pub(super) fn queue(&self) -> &Arc<ConnQueue> {
        &self.queue
    }

    pub(super) async fn run(&mut self) -> Ended {
        let mut tick = tokio::time::interval(self.ctx.shared.config.limits.ping_interval);
        tick.tick().await;
        loop {
            // What the device sent while a search ran comes first, in order.
            if let Some(msg) = self.waiting.pop_front() {
                if let Err(ended) = self.on_received(msg).await {
                    return ended;
                }
                continue;
            }
            let queue = self.queue.clone();
            tokio::select! {
                biased;
                _ = queue.wait() => {
                    if let Some(ended) = self.flush_queue(None).await {
                        return ended;
                    }
                }
                msg = self.socket.recv() => {
                    if let Err(ended) = self.on_received(msg).await {
                        return ended;
                    }
                }
                // After the queue and the device's requests: a pull's chunks go out between them.
                item = self.media.next_pull_item() => {
                    if let Err(ended) = self.write_pull_item(item).await {
                        return ended;
                    }
                }
                _ = tick.tick() => {
                    if let Some(ended) = self.keepalive().await {
                        return ended;
                    }
                }
            }
        }
    }

    /// Writes everything queued (durable frames at or below `skip_upto` are dropped: a replay
    /// already delivered them), then pings to confirm. Returns `Some` when the connection ended.
    async fn flush_queue(&mut self, skip_upto: Option<u64>) -> Option<Ended> {
        let drained = self.queue.drain();
        if drained.close == Some(CloseReason::Revoked) {
            // Not one more frame: only why, so that the device does not come back.
            tracing::info!(device_id = %self.device_id, "closing a revoked device's connection");
            let why = WireError::new(ErrorCode::Auth, CloseReason::REVOKED);
            if self.send_error(None, why).await.is_ok() {
                self.close(close_code::AUTH, CloseReason::REVOKED).await;
            }
            return Some(Ended::Closed(CloseReason::Revoked));
        }
        if drained.close == Some(CloseReason::Overflow) {
            tracing::warn!(device_id = %self.device_id, "device too far behind; disconnecting");
            self.close(close_code::TOO_SLOW, "too far behind; reconnect and sync")
                .await;
            return Some(Ended::Closed(CloseReason::Overflow));
        }
        let mut wrote = false;
        for item in drained.items {
            let text = match item {
                Outgoing::Durable(frame) => {
                    // Nothing at or below `live_base` goes out live: the device has it from a
                    // replay. Such a frame can still reach the queue after the replay, because the
                    // store publishes a batch just after committing it, and a replay may already
                    // have read it; sending it would make it count twice on the device.
                    if frame.cursor <= self.live_base
                        || skip_upto.is_some_and(|h| frame.cursor <= h)
                    {
                        continue;
                    }
                    let text = self.durable_text(&frame);
                    if let Some(appends) = self.appends.as_mut().filter(|a| !a.is_empty()) {
                        if &*frame.frame_type == "message.stop" {
                            if let Some(id) = stream::stop_message_id(&frame.json) {
                                appends.forget(id);
                            }
                        }
                    }
                    self.live_last = frame.cursor;
                    if !self.gap_before_live {
                        self.written = frame.cursor;
                    }
                    text
                }
                Outgoing::Ephemeral(json) => json.to_string(),
                Outgoing::Update(update) => match self.appends.as_mut() {
                    None => update.full_json().to_string(),
                    Some(appends) => match appends.encode(&update) {
                        Some(text) => text,
                        None => continue,
                    },
                },
            };
            match self.write_or_abort(Some(Frame::Text(text.into()))).await {
                Ok(()) => wrote = true,
                Err(ended) => return Some(ended),
            }
        }
        if wrote {
            if let Err(ended) = self.write_or_abort(None).await {
                return Some(ended);
            }
        }
        if let Some(reason) = drained.close {
            let (code, text) = match reason {
                CloseReason::Replaced => (
                    close_code::REPLACED,
                    "replaced by a newer connection of this device",
                ),
                CloseReason::GoingAway => (close_code::GOING_AWAY, "gateway restarting"),
                CloseReason::Overflow | CloseReason::Revoked => unreachable!("handled above"),
            };
            self.close(code, text).await;
            return Some(Ended::Closed(reason));
        }
        self.confirm_ping().await.err()
    }

    /// Feeds one message (or flushes, with `None`), giving up when the queue overflows meanwhile
    /// or the write blocks beyond `limits.write_timeout`: a device that does not read blocks the
    /// write, and must not hold its frames in memory (it resumes by `sync`).
    async fn write_or_abort(&mut self, msg: Option<Frame>) -> Result<(), Ended> {
        let queue = self.queue.clone();
        let deadline = self.ctx.shared.config.limits.write_timeout;
        let write = async {
            match msg {
                Some(m) => self.socket.feed(m).await,
                None => self.socket.flush().await,
            }
        };
        tokio::select! {
            r = write => r.map_err(|_| Ended::Disconnected),
            _ = queue.overflowed() => {
                tracing::warn!(device_id = %self.device_id, "device too far behind; dropping connection");
                Err(Ended::Closed(CloseReason::Overflow))
            }
            _ = tokio::time::sleep(deadline) => {
                tracing::warn!(device_id = %self.device_id, "device does not read; dropping connection");
                Err(Ended::Dead)
            }
        }
    }

    fn durable_text(&self, frame: &Committed) -> String {
        match (
            &frame.meta.request_id,
            frame.meta.origin_conn == self.conn_id,
        ) {
            (Some(id), true) => iris_protocol::splice_id_json(&frame.json, id),
            _ => frame.json.to_string(),
        }
    }

    /// Sends a delivery-confirming Ping when something new was written and none is in flight.
    async fn confirm_ping(&mut self) -> Result<(), Ended> {
        let pinged = self.pings.back().map(|p| p.1).unwrap_or(0);
        if self.written > pinged && self.pings.is_empty() {
            self.send_ping().await?;
        }
        Ok(())
    }

    async fn send_ping(&mut self) -> Result<(), Ended> {
        self.ping_seq += 1;
        self.pings
            .push_back((self.ping_seq, self.written, Instant::now()));
        let payload = bytes::Bytes::copy_from_slice(&self.ping_seq.to_be_bytes());
        self.socket
            .send(Frame::Ping(payload))
            .await
            .map_err(|_| Ended::Disconnected)
    }

    async fn keepalive(&mut self) -> Option<Ended> {
        let timeout = self.ctx.shared.config.limits.ping_timeout;
        if self.pings.front().is_some_and(|p| p.2.elapsed() > timeout)
            && self.last_pong.elapsed() > timeout
        {
            tracing::info!(device_id = %self.device_id, "no pong; dropping connection");
            return Some(Ended::Dead);
        }
        if self.pings.is_empty() {
            return self.send_ping().await.err();
        }
        None
    }

    fn on_pong(&mut self, payload: &[u8]) {
        let Ok(bytes) = <[u8; 8]>::try_from(payload) else {
            return;
        };
        let seq = u64::from_be_bytes(bytes);
        let mut confirmed = None;
        while self.pings.front().is_some_and(|p| p.0 <= seq) {
            confirmed = self.pings.pop_front().map(|p| p.1);
        }
        self.last_pong = Instant::now();
        let Some(cursor) = confirmed.filter(|c| *c > 0) else {
            return;
        };
        // Recorded in memory and stored by the hub's writer task, so the next delivery does not
        // wait for the store; a reconnect within the lag is told this value (`hello`).
        self.ctx
            .shared
            .hub
            .confirm_watermark(&self.device_id, cursor);
    }

    async fn close(&mut self, code: u16, reason: &str) {
        self.socket.close(code, reason).await;
    }

    /// What the transport gave: a frame, a fault of the device's (closed with its code), or
    /// the end.
    async fn on_received(&mut self, msg: Option<Result<Frame, RecvError>>) -> Result<(), Ended> {
        match msg {
            Some(Ok(msg)) => self.on_message(msg).await,
            Some(Err(RecvError::Refused(code, reason))) => {
                tracing::warn!(device_id = %self.device_id, code, reason, "closing a connection");
                self.close(code, reason).await;
                Err(Ended::Disconnected)
            }
            Some(Err(RecvError::Broken)) | None => Err(Ended::Disconnected),
        }
    }

    async fn on_message(&mut self, msg: Frame) -> Result<(), Ended> {
        match msg {
            Frame::Text(text) => self.on_text(&text).await,
            Frame::Binary(bytes) => match self.media.on_binary(bytes).await {
                Some((id, err)) => self.send_error(id, err).await,
                None => Ok(()),
            },
            Frame::Pong(payload) => {
                self.on_pong(&payload);
                Ok(())
            }
            Frame::Ping(_) => Ok(()),
            Frame::Close(_) => Err(Ended::Disconnected),
        }
    }

    async fn on_text(&mut self, text: &str) -> Result<(), Ended> {
        if text.len() > self.ctx.shared.config.limits.max_frame_bytes {
            let limit = self.ctx.shared.config.limits.max_frame_bytes;
            let id = iris_protocol::sniff_id(text);
            return self
                .send_error(
                    id,
                    WireError::bad_request(format!("frame larger than {limit} bytes")),
                )
                .await;
        }
        let decoded = match decode::<ClientFrame>(text) {
            Ok(d) => d,
            Err(e) if e.version_mismatch => {
                self.send_error(e.id, WireError::new(ErrorCode::Unsupported, e.message))
                    .await?;
                self.close(close_code::VERSION, "unsupported protocol version")
                    .await;
                return Err(Ended::Disconnected);
            }
            // The decoder finds the id even where it gives up early (too deep, truncated).
            Err(e) => {
                return self
                    .send_error(e.id, WireError::new(e.code, e.message))
                    .await
            }
        };
        let id = decoded.header.id.clone();
        let origin = Origin {
            conn: self.conn_id,
            request_id: id.as_ref().map(|i| Arc::from(i.to_json())),
        };
        let reply = match decoded.body {
            ClientFrame::Sync(sync) => return self.sync(id, sync.cursor).await,
            ClientFrame::Ping(ping) => Ok(Reply::Direct(
                ResponseFrame::Pong(iris_protocol::Pong { ts: ping.ts }),
                Header::default(),
            )),
            ClientFrame::FocusSet(req) => {
                super::focus::set(&self.ctx, &self.device_id, &self.queue, req).await
            }
            ClientFrame::Hello(_) => Err(WireError::bad_request(
                "already authenticated; hello is sent once",
            )),
            ClientFrame::Search(req) => {
                let ctx = self.ctx.clone();
                let search = handlers::search(&ctx, &self.device_id, &decoded.header, req);
                match watch_socket(search, &mut self.socket, &mut self.waiting).await {
                    Some(reply) => reply,
                    // The device went away: the search was dropped, and the store stopped it.
                    None => return Err(Ended::Disconnected),
                }
            }
            body => {
                let ctx = self.ctx.clone();
                let device = self.device_id.as_str();
                handlers::handle(
                    &ctx,
                    device,
                    &mut self.media,
                    &decoded.header,
                    body,
                    &origin,
                )
                .await
            }
        };
        match reply {
            Ok(Reply::Direct(frame, header)) => {
                self.send_direct(&header.with_id(id), &frame.into()).await
            }
            Ok(Reply::ViaOutbox) | Ok(Reply::Nothing) => Ok(()),
            Err(e) => self.send_error(id, e).await,
        }
    }

    /// Writes one frame of a pull. The write waits for a slow device, so the pull task (which
    /// feeds at most two items ahead) stops reading the file meanwhile.
    async fn write_pull_item(&mut self, item: crate::media::pull::PullItem) -> Result<(), Ended> {
        let msg = match item {
            crate::media::pull::PullItem::Text(text) => Frame::Text(text.into()),
            crate::media::pull::PullItem::Binary(bytes) => Frame::Binary(bytes),
        };
        self.write_or_abort(Some(msg)).await?;
        self.write_or_abort(None).await
    }

    async fn send_direct(&mut self, header: &Header, frame: &ServerFrame) -> Result<(), Ended> {
        let text = encode(header, frame);
        self.write_or_abort(Some(Frame::Text(text.into()))).await?;
        self.write_or_abort(None).await
    }

    async fn send_error(&mut self, id: Option<RequestId>, err: WireError) -> Result<(), Ended> {
        let frame = ServerFrame::Error(ErrorPayload {
            code: err.code,
            message: err.message,
        });
        self.send_direct(&Header::default().with_id(id), &frame)
            .await
    }

    /// Replays the outbox after `after`, holding live frames meanwhile (see the module docs).
    async fn sync(&mut self, id: Option<RequestId>, after: u64) -> Result<(), Ended> {
        let ctx = self.ctx.clone();
        let store = &ctx.shared.store;
        let head = self.queue.last_cursor().max(self.live_base);
        let (floor, db_head) = match (store.outbox_floor().await, store.outbox_head().await) {
            (Ok(f), Ok(h)) => (f, h),
            (Err(e), _) | (_, Err(e)) => return self.send_error(id, WireError::internal(e)).await,
        };
        if after > db_head.max(head) {
            let msg = format!(
                "cursor {after} is beyond the outbox head {}",
                db_head.max(head)
            );
            return self.send_error(id, WireError::bad_request(msg)).await;
        }
        let gap = after < floor;
        crate::metrics::Metrics::inc(&self.ctx.shared.metrics.sync_replays);
        if gap {
            crate::metrics::Metrics::inc(&self.ctx.shared.metrics.sync_gaps);
        }
        // Frames at or below this were either in the outbox before the final read below, or are
        // queued: a replay that reaches the end has delivered every one of them.
        let queued_before = self.queue.last_cursor();
        let (skip_from, skip_to) = (self.live_base, self.live_last);
        let mut cursor = after;
        let mut replayed_to = after;
        loop {
            let rows = match store.replay_bytes(cursor, REPLAY_PAGE, REPLAY_BYTES).await {
                Ok(rows) => rows,
                Err(e) => return self.send_error(id, WireError::internal(e)).await,
            };
            let Some(last) = rows.last().map(|r| r.0) else {
                break;
            };
            let mut written = 0;
            for (c, json) in rows {
                if c > skip_from && c <= skip_to {
                    continue;
                }
                written += 1;
                let text = splice_cursor(&json, c);
                self.write_or_abort(Some(Frame::Text(text.into()))).await?;
            }
            self.write_or_abort(None).await?;
            self.ctx
                .shared
                .metrics
                .frames_replayed
                .fetch_add(written, std::sync::atomic::Ordering::Relaxed);
            cursor = last;
            replayed_to = last;
        }
        let done_at = after.max(queued_before).max(replayed_to).max(skip_to);
        let done = ServerFrame::SyncDone(SyncDone {
            cursor: done_at,
            gap,
        });
        self.send_direct(&Header::default().with_id(id), &done)
            .await?;
        tracing::debug!(device_id = %self.device_id, after, done_at, gap, "sync replayed");
        self.live_base = done_at;
        self.live_last = done_at;
        self.written = self.written.max(done_at);
        self.gap_before_live = false;
        match self.flush_queue(Some(done_at)).await {
            Some(ended) => Err(ended),
            None => Ok(()),
        }
    }
}
