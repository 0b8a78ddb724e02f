//! `[limits]`: what one device or connection may ask of the gateway (frame size, request rates,
//! queued frames, connections, searches) and how long the gateway waits for it; the file's
//! values resolved over the defaults and checked, so that no limit makes the gateway unusable.

use std::time::Duration;

use serde::Deserialize;

use super::error::ConfigError;

/// `[limits]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsFileConfig {
    /// Largest accepted text frame in bytes (default 1 MiB).
    pub max_frame_bytes: Option<usize>,
    /// Messages a device may send per minute (default 120).
    pub sends_per_minute: Option<u32>,
    /// Other requests that change something (receipts, renames, deletes, …) a device may make
    /// per minute (default 240).
    pub requests_per_minute: Option<u32>,
    /// Durable frames a connection may have queued before it is disconnected (default 4096).
    pub max_queued_frames: Option<usize>,
    /// Channels and threads together that `channel.create` may bring about (default 1000).
    pub max_channels: Option<usize>,
    /// Failed `hello`s per address per minute before further attempts are refused (default 10).
    pub auth_failures_per_minute: Option<u32>,
    /// Seconds a new connection has to send its request headers (default 10).
    pub header_timeout_secs: Option<u64>,
    /// Seconds one write to a device may block before the device is dropped (default 30).
    pub write_timeout_secs: Option<u64>,
    /// Open connections per client address; trusted proxies are exempt (default 64).
    pub max_connections_per_address: Option<usize>,
    /// Open connections in total (default 4096).
    pub max_connections: Option<usize>,
    /// Searches a device may run per minute (default 30).
    pub searches_per_minute: Option<u32>,
    /// Milliseconds one search may run before it is stopped (default 500).
    pub search_budget_ms: Option<u64>,
}

/// Limits enforced per connection.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest accepted text frame in bytes.
    pub max_frame_bytes: usize,
    /// Messages a device may send per minute.
    pub sends_per_minute: u32,
    /// Other requests that change something a device may make per minute.
    pub requests_per_minute: u32,
    /// Durable frames a connection may have queued before it is disconnected.
    pub max_queued_frames: usize,
    /// Channels and threads together beyond which `channel.create` is refused.
    pub max_channels: usize,
    /// Failed `hello`s per address per minute.
    pub auth_failures_per_minute: u32,
    /// Time a new connection has to send `hello`.
    pub hello_timeout: Duration,
    /// Interval of delivery/keepalive WebSocket pings on an idle connection.
    pub ping_interval: Duration,
    /// A connection whose pings go unanswered this long is dropped.
    pub ping_timeout: Duration,
    /// Time a new connection has to send its request headers.
    pub header_timeout: Duration,
    /// How long one write to a device may block: a device that does not read is dropped then
    /// (and resumes by `sync`), so it holds no memory for longer.
    pub write_timeout: Duration,
    /// Open connections per client address (trusted proxies are exempt).
    pub max_connections_per_address: usize,
    /// Open connections in total.
    pub max_connections: usize,
    /// Bytes a WebSocket may send before its `hello` succeeds.
    pub pre_hello_bytes: usize,
    /// Searches a device may run in any 60 seconds.
    pub searches_per_minute: u32,
    /// How long one search may run before it is stopped.
    pub search_budget: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_frame_bytes: 1024 * 1024,
            sends_per_minute: 120,
            requests_per_minute: 240,
            max_queued_frames: 4096,
            max_channels: 1000,
            auth_failures_per_minute: 10,
            hello_timeout: Duration::from_secs(10),
            ping_interval: Duration::from_secs(15),
            ping_timeout: Duration::from_secs(45),
            header_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(30),
            max_connections_per_address: 64,
            max_connections: 4096,
            pre_hello_bytes: 16 * 1024,
            searches_per_minute: 30,
            search_budget: Duration::from_millis(500),
        }
    }
}

/// `[limits]`, resolved over the defaults and checked.
pub(super) fn resolve(file: &LimitsFileConfig) -> Result<Limits, ConfigError> {
    let defaults = Limits::default();
    let limits = Limits {
        max_frame_bytes: file.max_frame_bytes.unwrap_or(defaults.max_frame_bytes),
        sends_per_minute: file.sends_per_minute.unwrap_or(defaults.sends_per_minute),
        requests_per_minute: file
            .requests_per_minute
            .unwrap_or(defaults.requests_per_minute),
        max_queued_frames: file.max_queued_frames.unwrap_or(defaults.max_queued_frames),
        max_channels: file.max_channels.unwrap_or(defaults.max_channels),
        auth_failures_per_minute: file
            .auth_failures_per_minute
            .unwrap_or(defaults.auth_failures_per_minute),
        header_timeout: file
            .header_timeout_secs
            .map_or(defaults.header_timeout, Duration::from_secs),
        write_timeout: file
            .write_timeout_secs
            .map_or(defaults.write_timeout, Duration::from_secs),
        max_connections_per_address: file
            .max_connections_per_address
            .unwrap_or(defaults.max_connections_per_address),
        max_connections: file.max_connections.unwrap_or(defaults.max_connections),
        searches_per_minute: file
            .searches_per_minute
            .unwrap_or(defaults.searches_per_minute),
        search_budget: file
            .search_budget_ms
            .map_or(defaults.search_budget, Duration::from_millis),
        ..defaults
    };
    check_limits(&limits)?;
    Ok(limits)
}

/// Checks the `[limits]` that would make the gateway unusable when set too low.
fn check_limits(limits: &Limits) -> Result<(), ConfigError> {
    let invalid = |key, message: &str| {
        Err(ConfigError::Invalid {
            key,
            message: message.into(),
        })
    };
    if limits.max_queued_frames < 16 {
        return invalid("limits.max_queued_frames", "must be at least 16");
    }
    if limits.write_timeout.is_zero() {
        return invalid("limits.write_timeout_secs", "must be at least 1");
    }
    if limits.header_timeout.is_zero() {
        return invalid("limits.header_timeout_secs", "must be at least 1");
    }
    if limits.max_connections_per_address == 0 || limits.max_connections == 0 {
        return invalid(
            "limits.max_connections",
            "connection caps must be at least 1",
        );
    }
    if limits.search_budget.is_zero() {
        return invalid("limits.search_budget_ms", "must be at least 1");
    }
    if limits.searches_per_minute == 0 {
        return invalid("limits.searches_per_minute", "must be at least 1");
    }
    Ok(())
}
