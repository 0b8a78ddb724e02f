//! The TCP listener under the HTTP routes: admission (a cap on open connections per address, an
//! IPv6 address by its /64, and in total, with a quarter of the total kept for connections whose
//! device said `hello`: a new connection beyond the other three quarters closes the one that
//! waited longest without a device), a header read timeout, the read budget of connections that have not said `hello`,
//! and graceful shutdown.
//!
//! `axum::serve` reads request headers without a deadline and accepts without bound, so a
//! stranger holding thousands of half-sent requests would exhaust the gateway's sockets and
//! memory. Here every accepted socket is first admitted (or closed at once), then served by
//! hyper's HTTP/1 connection with `header_read_timeout`; the peer address reaches handlers as
//! axum's `ConnectInfo`, as it did under `axum::serve`.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::acme::answers::ACME_TLS_ALPN;
use crate::conn::ReadBudget;
use crate::metrics::Metrics;

/// Limits of the listener.
#[derive(Debug, Clone)]
pub struct ListenLimits {
    /// A connection must finish its request headers within this time, or it is closed.
    pub header_timeout: Duration,
    /// Open connections (HTTP and WebSocket) from one address; trusted proxies are exempt.
    pub per_address: usize,
    /// Open connections in total.
    pub total: usize,
    /// Addresses exempt from the per-address cap (reverse proxies carry many clients).
    pub exempt: Vec<IpAddr>,
}

/// Bytes of request headers hyper buffers at most (its minimum is 8 KiB).
const MAX_HEADER_BUF: usize = 64 * 1024;
/// How long connections still open at shutdown get to finish their request.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The share of the total cap that connections without a device (before `hello`, or plain
/// HTTP) may hold: the rest is kept for connections whose device said `hello`, so that strangers
/// from many addresses cannot fill every place.
pub const UNAUTHENTICATED_SHARE: (usize, usize) = (3, 4);

/// Counts of open connections, per address and in total.
#[derive(Debug, Default)]
struct Counts {
    total: usize,
    per_address: HashMap<IpAddr, usize>,
}

/// Admits connections under the caps; a [`Ticket`] gives the place back when dropped.
#[derive(Debug)]
pub struct Admission {
    limits: ListenLimits,
    counts: Mutex<Counts>,
    /// Open connections whose device said `hello` (their read budget was lifted).
    authenticated: Arc<AtomicUsize>,
    /// The read budgets of connections without a device, oldest first (some may have said
    /// `hello` or closed since: they are skipped).
    waiting: Mutex<VecDeque<ReadBudget>>,
}

impl Admission {
    /// An admission with these caps.
    pub fn new(limits: ListenLimits) -> Arc<Admission> {
        Arc::new(Admission {
            limits,
            counts: Mutex::new(Counts::default()),
            authenticated: Arc::default(),
            waiting: Mutex::default(),
        })
    }

    /// Closes the connection that waited longest without a device; false when there is none.
    fn evict_oldest(&self) -> bool {
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        while let Some(budget) = waiting.pop_front() {
            if budget.evict() {
                return true;
            }
        }
        false
    }

    /// Most connections without a device there may be at once: [`UNAUTHENTICATED_SHARE`] of
    /// the total, at least one.
    fn unauthenticated_cap(&self) -> usize {
        let (num, den) = UNAUTHENTICATED_SHARE;
        (self.limits.total * num / den).max(1)
    }

    /// A place for a connection from `ip`, or `None` when a cap is reached: the total, the
    /// share of connections without a device, or the address's (an IPv6 /64's).
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<Ticket> {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        if counts.total >= self.limits.total {
            return None;
        }
        let exempt = crate::guard::is_trusted_proxy(ip, &self.limits.exempt);
        let key = crate::guard::throttle_key(ip);
        if !exempt && counts.per_address.get(&key).copied().unwrap_or(0) >= self.limits.per_address
        {
            return None;
        }
        // Connections without a device hold at most their share: beyond it the one that waited
        // longest goes (it had the most time to say `hello`), so strangers cannot keep a device
        // out by holding places; it leaves when its task sees the failed read.
        let authenticated = self.authenticated.load(Ordering::SeqCst);
        if counts.total.saturating_sub(authenticated) >= self.unauthenticated_cap()
            && !self.evict_oldest()
        {
            return None;
        }
        *counts.per_address.entry(key).or_insert(0) += 1;
        counts.total += 1;
        let budget = ReadBudget::counted(Some(self.authenticated.clone()));
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        if waiting.len() >= 2 * self.limits.total {
            waiting.retain(|b| !b.lifted() && !b.evicted());
        }
        waiting.push_back(budget.clone());
        Some(Ticket {
            admission: self.clone(),
            key,
            budget,
        })
    }

    /// Open connections in total.
    pub fn open(&self) -> usize {
        self.counts.lock().unwrap_or_else(|e| e.into_inner()).total
    }
}

/// A connection's place; dropping it (when the socket is dropped) frees the place.
#[derive(Debug)]
pub struct Ticket {
    admission: Arc<Admission>,
    key: IpAddr,
    /// The connection's read budget: lifted once its device said `hello`, which moves the
    /// connection to the authenticated count.
    budget: ReadBudget,
}

impl Ticket {
    /// The connection's read budget.
    pub fn budget(&self) -> ReadBudget {
        self.budget.clone()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut counts = self
            .admission
            .counts
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        counts.total = counts.total.saturating_sub(1);
        if self.budget.lifted() {
            self.admission.authenticated.fetch_sub(1, Ordering::SeqCst);
        }
        // Closed: an eviction passes it by.
        self.budget.evict();
        if let Some(n) = counts.per_address.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                counts.per_address.remove(&self.key);
            }
        }
    }
}

/// A socket (or a stream through a relay) that counts what it reads against a [`ReadBudget`]
/// and holds its [`Ticket`].
pub struct Metered<T = TcpStream> {
    io: T,
    budget: ReadBudget,
    _ticket: Ticket,
}

impl<T> Metered<T> {
    /// `io`, counting its reads against the ticket's budget; the place is freed when it is
    /// dropped.
    pub fn new(io: T, ticket: Ticket) -> Metered<T> {
        Metered {
            io,
            budget: ticket.budget(),
            _ticket: ticket,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Metered<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        // A read may overshoot the limit by one buffer; the next one fails.
        if self.budget.exceeded() {
            return Poll::Ready(Err(io::Error::other("read budget exceeded")));
        }
        if self.budget.evicted() {
            return Poll::Ready(Err(io::Error::other("closed for a newer connection")));
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if polled.is_pending() {
            self.budget.park(cx.waker());
        }
        let n = buf.filled().len() - before;
        self.budget.count(n);
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Metered<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// Accepts and serves connections until `stop` is cancelled, then waits (a bounded time) for
/// the HTTP connections still open to finish their request. Upgraded WebSockets are not
/// waited for here: they belong to their own tasks.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    admission: Arc<Admission>,
    metrics: Arc<Metrics>,
    tls: Option<TlsAcceptor>,
    stop: CancellationToken,
) -> io::Result<()> {
    let conns = TaskTracker::new();
    loop {
        let (tcp, peer) = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors, say: wait a little instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::select! {
                        _ = stop.cancelled() => break,
                        _ = tokio::time::sleep(Duration::from_millis(100)) => continue,
                    }
                }
            },
        };
        let Some(ticket) = admission.admit(peer.ip()) else {
            tracing::debug!(peer = %peer, "connection over the cap closed");
            Metrics::inc(&metrics.connections_refused);
            drop(tcp);
            continue;
        };
        // Frames are small and written as soon as they are ready: without TCP_NODELAY, Nagle's
        // algorithm holds a frame back until the previous one is acknowledged, which with the
        // device's delayed ACKs adds up to 40 ms to streamed chunks (see BENCHMARKS.md).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY");
        }
        let budget = ticket.budget();
        let io = Metered::new(tcp, ticket);
        let header_timeout = admission.limits.header_timeout;
        let conn = Conn {
            peer,
            budget,
            router: router.clone(),
            header_timeout,
            metrics: metrics.clone(),
            stop: stop.clone(),
        };
        match tls.clone() {
            None => conns.spawn(conn.serve(io)),
            Some(acceptor) => conns.spawn(async move {
                // The handshake has the time the request headers have, and counts against the
                // same read budget.
                match tokio::time::timeout(header_timeout, acceptor.accept(io)).await {
                    // A TLS-ALPN-01 validation ends with its handshake (RFC 8737).
                    Ok(Ok(tls)) if tls.get_ref().1.alpn_protocol() == Some(ACME_TLS_ALPN) => {}
                    Ok(Ok(tls)) => conn.serve(tls).await,
                    Ok(Err(e)) => tracing::debug!(peer = %peer, error = %e, "TLS handshake failed"),
                    Err(_) => {
                        Metrics::inc(&conn.metrics.header_timeouts);
                        tracing::debug!(peer = %peer, "TLS handshake timed out");
                    }
                }
            }),
        };
    }
    drop(listener);
    conns.close();
    conns.wait().await;
    Ok(())
}

/// What one connection is served with.
struct Conn {
    peer: SocketAddr,
    budget: ReadBudget,
    router: Router,
    header_timeout: Duration,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
}

impl Conn {
    /// One HTTP/1 connection (over TCP or TLS): requests with the peer address and read budget
    /// attached, upgrades handed over, a graceful end at shutdown.
    async fn serve<I>(self, io: I)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let Conn {
            peer,
            budget,
            router,
            header_timeout,
            metrics,
            stop,
        } = self;
        let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
            req.extensions_mut().insert(ConnectInfo(peer));
            req.extensions_mut().insert(budget.clone());
            let mut router = router.clone();
            async move {
                let response = tower_service::Service::call(&mut router, req).await;
                Ok::<_, Infallible>(response.unwrap_or_else(|never| match never {}))
            }
        });
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(header_timeout)
            .max_buf_size(MAX_HEADER_BUF);
        let conn = builder
            .serve_connection(TokioIo::new(io), service)
            .with_upgrades();
        tokio::pin!(conn);
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    if e.is_timeout() {
                        Metrics::inc(&metrics.header_timeouts);
                    }
                    tracing::debug!(peer = %peer, error = %e, "HTTP connection ended");
                }
                return;
            }
            _ = stop.cancelled() => {}
        }
        conn.as_mut().graceful_shutdown();
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, conn).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(per_address: usize, total: usize) -> ListenLimits {
        ListenLimits {
            header_timeout: Duration::from_secs(1),
            per_address,
            total,
            exempt: vec!["10.0.0.1".parse().unwrap()],
        }
    }

    #[test]
    fn caps_per_address_and_in_total_and_gives_places_back() {
        let admission = Admission::new(limits(2, 4));
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let first = admission.admit(a).expect("first");
        let _second = admission.admit(a).expect("second");
        assert!(admission.admit(a).is_none(), "third from one address");
        let other = admission.admit(b).expect("another address");
        other.budget().lift();
        let _fourth = admission.admit(b).expect("the fourth");
        assert!(admission.admit(b).is_none(), "total reached");
        drop(first);
        let again = admission.admit(a);
        assert!(again.is_some(), "a place was given back");
        assert_eq!(admission.open(), 4);
        drop(other);
        assert_eq!(admission.authenticated.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn beyond_their_share_connections_without_a_device_make_room_from_the_oldest() {
        let admission = Admission::new(limits(10, 8));
        let ip = |i: u8| IpAddr::from([192, 0, 2, i]);
        let strangers: Vec<Ticket> = (1..=6)
            .map(|i| admission.admit(ip(i)).expect("in"))
            .collect();
        // Six of eight without a device: the seventh closes the oldest, which then leaves.
        let device = admission.admit(ip(7)).expect("a device gets in");
        assert!(strangers[0].budget().evicted(), "the oldest stranger goes");
        assert!(!strangers[1].budget().evicted());
        device.budget().lift();
        assert!(!device.budget().evict(), "a device that said hello stays");
        drop(strangers);
        assert_eq!(admission.open(), 1);
    }

    #[test]
    fn an_ipv6_network_counts_as_one_address() {
        let admission = Admission::new(limits(2, 100));
        let one: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let two: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let elsewhere: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        let _a = admission.admit(one).expect("first");
        let _b = admission.admit(two).expect("second");
        assert!(admission.admit(one).is_none(), "a third from the same /64");
        assert!(admission.admit(elsewhere).is_some(), "another /64");
    }

    #[test]
    fn a_trusted_proxy_is_exempt_from_the_per_address_cap() {
        let admission = Admission::new(limits(1, 10));
        let proxy: IpAddr = "10.0.0.1".parse().unwrap();
        let held: Vec<_> = (0..5).map(|_| admission.admit(proxy)).collect();
        assert!(held.iter().all(Option::is_some));
    }
}
