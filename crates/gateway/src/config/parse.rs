//! Checks of single configuration values: URLs, origins, proxy addresses and day counts.

use std::net::IpAddr;

use super::error::ConfigError;

/// Checks a configured `public_url`: `http://` or `https://`, a host, no query or fragment.
pub(super) fn parse_public_url(url: &str) -> Result<String, ConfigError> {
    let invalid = |message: &str| ConfigError::Invalid {
        key: "public_url",
        message: format!("{url:?}: {message}"),
    };
    let trimmed = url.trim().trim_end_matches('/');
    let rest = trimmed
        .strip_prefix("https://")
        .or_else(|| trimmed.strip_prefix("http://"))
        .ok_or_else(|| invalid("must start with http:// or https://"))?;
    let host = rest.split('/').next().unwrap_or("");
    if host.is_empty() {
        return Err(invalid("has no host"));
    }
    if rest.contains(['?', '#']) || rest.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(invalid(
            "must be a plain base URL (no query, fragment or spaces)",
        ));
    }
    Ok(trimmed.to_owned())
}

/// Checks `outbox.retention_days`: 1 to 36500, so that the retention in seconds cannot wrap.
pub(super) fn check_retention_days(days: u64) -> Result<u64, ConfigError> {
    if (1..=36_500).contains(&days) {
        return Ok(days);
    }
    Err(ConfigError::Invalid {
        key: "outbox.retention_days",
        message: format!("{days} is out of range (1 to 36500 days)"),
    })
}

/// Checks `trusted_proxies`: each entry an IP address.
pub(super) fn parse_proxies(list: Vec<String>) -> Result<Vec<IpAddr>, ConfigError> {
    list.iter()
        .map(|p| {
            p.trim().parse().map_err(|_| ConfigError::Invalid {
                key: "trusted_proxies",
                message: format!("{p:?} is not an IP address like 127.0.0.1 or ::1"),
            })
        })
        .collect()
}

/// Checks an `allowed_origins` entry: `http(s)://host[:port]`, nothing after it; returned in
/// lower case without a trailing slash, the form browsers send.
pub(super) fn parse_origin(origin: &str) -> Result<String, ConfigError> {
    let trimmed = origin.trim().trim_end_matches('/').to_ascii_lowercase();
    let rest = trimmed
        .strip_prefix("https://")
        .or_else(|| trimmed.strip_prefix("http://"));
    match rest {
        Some(host) if !host.is_empty() && !host.contains(['/', '?', '#', ' ', '@']) => Ok(trimmed),
        _ => Err(ConfigError::Invalid {
            key: "allowed_origins",
            message: format!("{origin:?} is not an origin like https://app.example.com"),
        }),
    }
}
