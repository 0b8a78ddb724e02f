//! `[auth]`: which credentials the gateway accepts, and how long a pairing code lives.

use std::time::Duration;

use serde::Deserialize;

use super::error::ConfigError;

/// The default lifetime of a pairing code.
pub const DEFAULT_CODE_TTL: Duration = Duration::from_secs(10 * 60);

/// `[auth]` as written in the file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthFileConfig {
    /// Whether the shared token (`token`, the token file) still signs devices in (default
    /// true). Off: only device tokens and pairing codes do.
    pub shared_token: Option<bool>,
    /// Minutes a pairing code stays valid (default 10, 1 to 1440).
    pub pairing_code_minutes: Option<u64>,
}

/// The resolved `[auth]` settings.
#[derive(Debug, Clone)]
pub struct AuthConfig {
    /// Whether the shared token signs devices in.
    pub shared_token: bool,
    /// How long a pairing code stays valid.
    pub pairing_code_ttl: Duration,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            shared_token: true,
            pairing_code_ttl: DEFAULT_CODE_TTL,
        }
    }
}

impl AuthConfig {
    /// Checks and resolves the file's `[auth]` section.
    pub fn resolve(file: AuthFileConfig) -> Result<AuthConfig, ConfigError> {
        let minutes = file.pairing_code_minutes.unwrap_or(10);
        if !(1..=1440).contains(&minutes) {
            return Err(ConfigError::Invalid {
                key: "auth.pairing_code_minutes",
                message: format!("{minutes} is out of range (1 to 1440)"),
            });
        }
        Ok(AuthConfig {
            shared_token: file.shared_token.unwrap_or(true),
            pairing_code_ttl: Duration::from_secs(minutes * 60),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_auth_section_is_read_and_checked() {
        let file: AuthFileConfig =
            toml::from_str("shared_token = false\npairing_code_minutes = 30").expect("toml");
        let auth = AuthConfig::resolve(file).expect("valid");
        assert!(!auth.shared_token);
        assert_eq!(auth.pairing_code_ttl, Duration::from_secs(1800));
        let defaults = AuthConfig::resolve(AuthFileConfig::default()).expect("valid");
        assert!(defaults.shared_token);
        assert_eq!(defaults.pairing_code_ttl, DEFAULT_CODE_TTL);
        for minutes in [0, 1441] {
            let file = AuthFileConfig {
                pairing_code_minutes: Some(minutes),
                ..AuthFileConfig::default()
            };
            let err = AuthConfig::resolve(file).expect_err("out of range");
            assert!(
                err.to_string().contains("auth.pairing_code_minutes"),
                "{err}"
            );
        }
        assert!(toml::from_str::<AuthFileConfig>("shared_tokens = false").is_err());
    }
}
