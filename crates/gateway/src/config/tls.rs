//! `[tls]`: TLS served by the gateway itself, from certificate files (reloaded when they change)
//! or from a self-signed certificate made on the first start, for a LAN without a domain.
//!
//! Ground floor: imports nothing of the gateway above `config`.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::error::ConfigError;

/// How often the certificate files are looked at for a change (on the next handshake after it).
pub const RELOAD_CHECK: Duration = Duration::from_secs(10);

/// `[tls]` in the config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFileConfig {
    /// PEM certificate chain, leaf first (e.g. Let's Encrypt's `fullchain.pem`).
    pub cert: Option<PathBuf>,
    /// PEM private key of the certificate.
    pub key: Option<PathBuf>,
    /// Serve TLS with a certificate the gateway makes on its first start and keeps in the data
    /// dir (`tls/`); its fingerprint goes into pairing links so the app can pin it.
    pub self_signed: Option<bool>,
}

/// Where the certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsSource {
    /// Files the owner keeps (a CA's certificate, renewed by some other tool).
    Files { cert: PathBuf, key: PathBuf },
    /// Made by the gateway in `<data_dir>/tls/` on the first start, kept afterwards.
    SelfSigned,
}

/// TLS settings, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    /// The certificate.
    pub source: TlsSource,
    /// How often the files are checked for a change.
    pub reload_check: Duration,
}

impl TlsConfig {
    /// TLS from a self-signed certificate.
    pub fn self_signed() -> TlsConfig {
        TlsConfig {
            source: TlsSource::SelfSigned,
            reload_check: RELOAD_CHECK,
        }
    }

    /// TLS from certificate files.
    pub fn files(cert: PathBuf, key: PathBuf) -> TlsConfig {
        TlsConfig {
            source: TlsSource::Files { cert, key },
            reload_check: RELOAD_CHECK,
        }
    }

    /// Resolves the file's `[tls]` with `--tls-cert`, `--tls-key` and `--tls-self-signed` (the
    /// flags win): `None` serves plain HTTP.
    pub fn resolve(
        file: TlsFileConfig,
        cert: Option<PathBuf>,
        key: Option<PathBuf>,
        self_signed: bool,
    ) -> Result<Option<TlsConfig>, ConfigError> {
        let cert = cert.or(file.cert);
        let key = key.or(file.key);
        let self_signed = self_signed || file.self_signed.unwrap_or(false);
        match (cert, key, self_signed) {
            (None, None, false) => Ok(None),
            (None, None, true) => Ok(Some(TlsConfig::self_signed())),
            (Some(cert), Some(key), false) => Ok(Some(TlsConfig::files(cert, key))),
            (Some(_), Some(_), true) => Err(ConfigError::Invalid {
                key: "tls.self_signed",
                message: "a certificate file and a self-signed certificate at once".into(),
            }),
            _ => Err(ConfigError::Invalid {
                key: "tls",
                message: "give both the certificate (tls.cert, --tls-cert) and its key \
                          (tls.key, --tls-key)"
                    .into(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificate_and_key_come_together_and_exclude_a_self_signed_one() {
        let none = TlsConfig::resolve(TlsFileConfig::default(), None, None, false);
        assert_eq!(none.unwrap(), None);
        let own = TlsConfig::resolve(
            TlsFileConfig::default(),
            Some("c.pem".into()),
            Some("k.pem".into()),
            false,
        );
        assert_eq!(
            own.unwrap(),
            Some(TlsConfig::files("c.pem".into(), "k.pem".into()))
        );
        let file = TlsFileConfig {
            self_signed: Some(true),
            ..TlsFileConfig::default()
        };
        assert_eq!(
            TlsConfig::resolve(file, None, None, false).unwrap(),
            Some(TlsConfig::self_signed())
        );
        assert!(
            TlsConfig::resolve(TlsFileConfig::default(), Some("c".into()), None, false).is_err()
        );
        assert!(TlsConfig::resolve(
            TlsFileConfig::default(),
            Some("c".into()),
            Some("k".into()),
            true
        )
        .is_err());
    }
}
