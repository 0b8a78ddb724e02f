//! `[reach]`: reaching the gateway away from home, through relays the owner runs (see
//! `iris-gateway relay`). With no relay configured the gateway starts no endpoint for it and
//! contacts nothing: no relay, no discovery service, no DNS publishing.

use serde::Deserialize;

use super::error::ConfigError;

/// The gateway's endpoint key in the data dir (private: whoever holds it is this gateway to
/// every device that dials its endpoint id). `iris-gateway backup` copies it.
pub const ENDPOINT_KEY_FILE: &str = "endpoint.key";

/// `[reach]` in the file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReachFileConfig {
    /// The relays the gateway registers at, e.g. `["https://relay.example.org"]`.
    pub relays: Option<Vec<String>>,
    /// The UDP address the endpoint binds, e.g. `"127.0.0.1:0"` (default: every interface, a
    /// port of the system's choice).
    pub bind: Option<String>,
}

/// Where the gateway can be reached from away.
#[derive(Debug, Clone, Default)]
pub struct ReachConfig {
    /// The relays, in the order given; empty: not reachable through any.
    pub relays: Vec<iroh::RelayUrl>,
    /// The UDP address the endpoint binds; `None`: every interface.
    pub bind: Option<std::net::SocketAddr>,
}

impl ReachConfig {
    /// The section from the file: every relay an `https://` URL (or `http://`, for a relay on
    /// this machine in tests and development).
    pub fn resolve(file: ReachFileConfig) -> Result<ReachConfig, ConfigError> {
        let mut relays = Vec::new();
        for text in file.relays.unwrap_or_default() {
            relays.push(parse_relay(&text)?);
        }
        let bind = match file.bind {
            None => None,
            Some(text) => Some(text.parse().map_err(|e| ConfigError::Invalid {
                key: "reach.bind",
                message: format!("{text}: {e}"),
            })?),
        };
        Ok(ReachConfig { relays, bind })
    }

    /// Whether any relay is configured.
    pub fn enabled(&self) -> bool {
        !self.relays.is_empty()
    }
}

/// A relay's URL: `https://host[:port]`, or `http://` (no TLS, for a relay on loopback).
pub fn parse_relay(text: &str) -> Result<iroh::RelayUrl, ConfigError> {
    let invalid = |message: String| ConfigError::Invalid {
        key: "reach.relays",
        message,
    };
    let url = url::Url::parse(text).map_err(|e| invalid(format!("{text}: {e}")))?;
    if !matches!(url.scheme(), "https" | "http") || url.host_str().is_none() {
        return Err(invalid(format!("{text}: not an https:// URL of a relay")));
    }
    Ok(iroh::RelayUrl::from(url))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relays_are_urls_of_https_or_http() {
        let file = ReachFileConfig {
            relays: Some(vec!["https://relay.example.org".into()]),
            bind: Some("127.0.0.1:0".into()),
        };
        let config = ReachConfig::resolve(file).unwrap();
        assert!(config.enabled());
        assert!(config.relays[0]
            .to_string()
            .starts_with("https://relay.example.org"));
        for bad in ["relay.example.org", "ftp://relay.example.org", "https://"] {
            assert!(parse_relay(bad).is_err(), "{bad}");
        }
        assert!(!ReachConfig::default().enabled());
    }
}
