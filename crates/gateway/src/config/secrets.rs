//! Where the gateway's secrets live, besides the data dir: the configuration file itself, a
//! `token_file`, and the files the configuration names that hold keys (the TLS key, the FCM
//! service account). Confinement hides all of them from the agent, the file browser never
//! serves them, and `doctor` warns about a secret the agent could reach.

use std::path::{Path, PathBuf};

use super::error::ConfigError;
use super::push::FcmConfig;
use super::secret::Secret;
use super::tls::{TlsConfig, TlsSource};

/// Shortest configured shared token. The failed-`hello` throttle lets an address (an IPv6 /64)
/// make `limits.auth_failures_per_minute` guesses a minute; 16 characters of the weakest usual
/// random alphabet (hex, 4 bits each) are 64 bits, far beyond what many addresses guessing for
/// years can try (the arithmetic is in docs/deployment.md, "Security model").
pub const MIN_TOKEN_CHARS: usize = 16;

/// The secret places a configuration names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretPlaces {
    /// The configuration file (`--config`, `IRIS_CONFIG`).
    pub config_file: Option<PathBuf>,
    /// `token_file`: the file the shared token was read from.
    pub token_file: Option<PathBuf>,
    /// Whether the configuration file itself holds the token (`token = …`).
    pub token_in_config: bool,
}

/// Reads the shared token from `token_file` (surrounding white space dropped), checked like a
/// configured token.
pub fn read_token_file(path: &Path) -> Result<Secret, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Invalid {
        key: "token_file",
        message: format!("cannot read {}: {e}", path.display()),
    })?;
    check_token(text.trim(), "token_file")?;
    Ok(Secret::from(text.trim()))
}

/// A configured token must be long enough to withstand guessing.
pub fn check_token(token: &str, key: &'static str) -> Result<(), ConfigError> {
    if token.trim().chars().count() < MIN_TOKEN_CHARS {
        return Err(ConfigError::Invalid {
            key,
            message: format!(
                "must be at least {MIN_TOKEN_CHARS} characters (a random one, e.g. \
                 `openssl rand -hex 16`)"
            ),
        });
    }
    Ok(())
}

/// The files outside the data dir that hold the gateway's secrets: the configuration file, the
/// token file, the TLS key and the FCM service account, as configured (they may not exist).
pub fn secret_files(
    places: &SecretPlaces,
    tls: Option<&TlsConfig>,
    fcm: Option<&FcmConfig>,
) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = Vec::new();
    files.extend(places.config_file.iter().cloned());
    files.extend(places.token_file.iter().cloned());
    if let Some(TlsSource::Files { key, .. }) = tls.map(|t| &t.source) {
        files.push(key.clone());
    }
    if let Some(fcm) = fcm {
        files.push(fcm.service_account.clone());
    }
    files
}
