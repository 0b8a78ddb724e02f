//! `[tls]`: TLS served by the gateway itself, from certificate files (reloaded when they change),
//! from a self-signed certificate made on the first start, for a LAN without a domain, or from
//! an ACME certificate authority (`[tls.acme]`); and the plain HTTP listener beside it that
//! redirects to https (`redirect_listen`, `--http-listen`).
//!
//! Ground floor: imports nothing of the gateway above `config`.

use std::net::SocketAddr;
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
    /// A plain HTTP address (e.g. `"0.0.0.0:80"`) that answers every request with a redirect to
    /// https and ACME HTTP-01 challenges; WebSockets are refused there.
    pub redirect_listen: Option<String>,
    /// `[tls.acme]`: certificates from an ACME certificate authority.
    pub acme: Option<AcmeFileConfig>,
}

/// Let's Encrypt's production directory, the default of `[tls.acme] directory`.
pub const LETS_ENCRYPT: &str = "https://acme-v02.api.letsencrypt.org/directory";

/// Certificates are renewed when less than this remains of them, or less than a third of their
/// lifetime, whichever is shorter (30 days of Let's Encrypt's 90; 2 days of a 6-day certificate).
pub const RENEW_BEFORE_DAYS: u64 = 30;

/// `[tls.acme]` in the config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcmeFileConfig {
    /// The names the certificate is for; each must lead to this gateway.
    pub domains: Vec<String>,
    /// Where the certificate authority writes about expiry and problems (`mailto:` is added).
    pub email: Option<String>,
    /// The ACME directory URL (default: Let's Encrypt's production directory).
    pub directory: Option<String>,
    /// A PEM file of a CA certificate the directory's own HTTPS is checked against, besides the
    /// public roots (a private or test certificate authority).
    pub directory_ca: Option<PathBuf>,
    /// `"tls-alpn-01"` (default: proven on the TLS port itself) or `"http-01"` (proven on
    /// `redirect_listen`, which must then be reachable on port 80).
    pub challenge: Option<String>,
    /// Renew when fewer days than this remain (default 30), or less than a third of the
    /// certificate's lifetime.
    pub renew_before_days: Option<u64>,
}

/// How the certificate authority checks that the gateway holds a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Challenge {
    /// RFC 8737: a special certificate on the TLS port, asked for with ALPN `acme-tls/1`.
    TlsAlpn01,
    /// RFC 8555 §8.3: a token under `/.well-known/acme-challenge/` on plain HTTP (port 80).
    Http01,
}

/// `[tls.acme]`, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcmeConfig {
    /// Lowercase DNS names, in the order given.
    pub domains: Vec<String>,
    /// The contact address, without `mailto:`.
    pub email: Option<String>,
    /// The directory URL.
    pub directory: String,
    /// An extra CA the directory's HTTPS is checked against.
    pub directory_ca: Option<PathBuf>,
    /// The challenge answered.
    pub challenge: Challenge,
    /// Renew when less than this remains (or a third of the lifetime, if shorter).
    pub renew_before: Duration,
}

/// Where the certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsSource {
    /// Files the owner keeps (a CA's certificate, renewed by some other tool).
    Files { cert: PathBuf, key: PathBuf },
    /// Made by the gateway in `<data_dir>/tls/` on the first start, kept afterwards.
    SelfSigned,
    /// Issued and renewed over ACME, kept in `<data_dir>/acme/`.
    Acme(AcmeConfig),
}

impl TlsSource {
    /// Its name, as the admin socket tells it: `files`, `self_signed` or `acme`.
    pub fn kind(&self) -> &'static str {
        match self {
            TlsSource::Files { .. } => "files",
            TlsSource::SelfSigned => "self_signed",
            TlsSource::Acme(_) => "acme",
        }
    }
}

/// TLS settings, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    /// The certificate.
    pub source: TlsSource,
    /// How often the files are checked for a change.
    pub reload_check: Duration,
    /// The plain HTTP listener that redirects to https (the address bound, once bound).
    pub redirect_listen: Option<SocketAddr>,
}

impl TlsConfig {
    /// TLS from a self-signed certificate.
    pub fn self_signed() -> TlsConfig {
        TlsConfig {
            source: TlsSource::SelfSigned,
            reload_check: RELOAD_CHECK,
            redirect_listen: None,
        }
    }

    /// TLS from certificate files.
    pub fn files(cert: PathBuf, key: PathBuf) -> TlsConfig {
        TlsConfig {
            source: TlsSource::Files { cert, key },
            reload_check: RELOAD_CHECK,
            redirect_listen: None,
        }
    }

    /// TLS from an ACME certificate authority.
    pub fn acme(acme: AcmeConfig) -> TlsConfig {
        TlsConfig {
            source: TlsSource::Acme(acme),
            reload_check: RELOAD_CHECK,
            redirect_listen: None,
        }
    }

    /// Whether browsers may be told to use only https for this host (`Strict-Transport-Security`):
    /// with a certificate they trust, not with a self-signed one, whose warning HSTS would make
    /// impossible to click through.
    pub fn hsts(&self) -> bool {
        !matches!(self.source, TlsSource::SelfSigned)
    }

    /// Resolves the file's `[tls]` with `--tls-cert`, `--tls-key`, `--tls-self-signed` and
    /// `--http-listen` (the flags win): `None` serves plain HTTP.
    pub fn resolve(
        file: TlsFileConfig,
        cert: Option<PathBuf>,
        key: Option<PathBuf>,
        self_signed: bool,
        http_listen: Option<String>,
    ) -> Result<Option<TlsConfig>, ConfigError> {
        let redirect = http_listen.or(file.redirect_listen.clone());
        let acme = file.acme.clone().map(AcmeConfig::resolve).transpose()?;
        let mut tls = match (acme, Self::resolve_files(file, cert, key, self_signed)?) {
            (None, tls) => tls,
            (Some(acme), None) => Some(TlsConfig::acme(acme)),
            (Some(_), Some(_)) => {
                return Err(ConfigError::Invalid {
                    key: "tls.acme",
                    message: "ACME and a certificate file or a self-signed certificate at once"
                        .into(),
                })
            }
        };
        if let Some(text) = redirect {
            let Some(tls) = tls.as_mut() else {
                return Err(ConfigError::Invalid {
                    key: "tls.redirect_listen",
                    message: "a redirect to https needs TLS (tls.cert and tls.key, \
                              tls.self_signed or [tls.acme])"
                        .into(),
                });
            };
            tls.redirect_listen = Some(text.parse().map_err(|e| ConfigError::Invalid {
                key: "tls.redirect_listen",
                message: format!("{text:?} is not an address like 0.0.0.0:80 ({e})"),
            })?);
        }
        if let Some(TlsSource::Acme(acme)) = tls.as_ref().map(|t| &t.source) {
            let redirect = tls.as_ref().and_then(|t| t.redirect_listen);
            if acme.challenge == Challenge::Http01 && redirect.is_none() {
                return Err(ConfigError::Invalid {
                    key: "tls.acme.challenge",
                    message: "http-01 is answered on plain HTTP: set tls.redirect_listen \
                              (port 80), or use tls-alpn-01"
                        .into(),
                });
            }
        }
        Ok(tls)
    }

    fn resolve_files(
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

impl AcmeConfig {
    /// Checks `[tls.acme]`: at least one domain, each a plain DNS name; an `https` directory.
    pub fn resolve(file: AcmeFileConfig) -> Result<AcmeConfig, ConfigError> {
        let invalid = |key, message: String| ConfigError::Invalid { key, message };
        if file.domains.is_empty() {
            return Err(invalid(
                "tls.acme.domains",
                "name at least one domain that leads to this gateway".into(),
            ));
        }
        let mut domains = Vec::new();
        for domain in &file.domains {
            let name = domain.trim().trim_end_matches('.').to_ascii_lowercase();
            let plain = !name.is_empty()
                && name.len() <= 253
                && name.parse::<std::net::IpAddr>().is_err()
                && name.split('.').all(|label| {
                    !label.is_empty()
                        && label.len() <= 63
                        && !label.starts_with('-')
                        && !label.ends_with('-')
                        && label
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                });
            if !plain {
                return Err(invalid(
                    "tls.acme.domains",
                    format!("{domain:?} is not a DNS name like iris.example.com"),
                ));
            }
            if !domains.contains(&name) {
                domains.push(name);
            }
        }
        let directory = file.directory.unwrap_or_else(|| LETS_ENCRYPT.to_owned());
        match url::Url::parse(&directory) {
            Ok(u) if u.scheme() == "https" && u.host().is_some() => {}
            _ => {
                return Err(invalid(
                    "tls.acme.directory",
                    format!("{directory:?} is not an https URL of an ACME directory"),
                ))
            }
        }
        let challenge = match file.challenge.as_deref() {
            None | Some("tls-alpn-01") => Challenge::TlsAlpn01,
            Some("http-01") => Challenge::Http01,
            Some(other) => {
                return Err(invalid(
                    "tls.acme.challenge",
                    format!("{other:?}: use \"tls-alpn-01\" or \"http-01\""),
                ))
            }
        };
        let email = file
            .email
            .map(|e| e.trim().trim_start_matches("mailto:").to_owned());
        if let Some(e) = &email {
            if !e.contains('@') || e.contains(char::is_whitespace) {
                return Err(invalid(
                    "tls.acme.email",
                    format!("{e:?} is not an email address"),
                ));
            }
        }
        let days = file.renew_before_days.unwrap_or(RENEW_BEFORE_DAYS);
        Ok(AcmeConfig {
            domains,
            email,
            directory,
            directory_ca: file.directory_ca,
            challenge,
            renew_before: Duration::from_secs(days.min(3650) * 86_400),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(
        file: TlsFileConfig,
        cert: Option<&str>,
        key: Option<&str>,
        self_signed: bool,
    ) -> Result<Option<TlsConfig>, ConfigError> {
        TlsConfig::resolve(
            file,
            cert.map(Into::into),
            key.map(Into::into),
            self_signed,
            None,
        )
    }

    #[test]
    fn certificate_and_key_come_together_and_exclude_a_self_signed_one() {
        assert_eq!(
            resolve(TlsFileConfig::default(), None, None, false).unwrap(),
            None
        );
        let own = resolve(
            TlsFileConfig::default(),
            Some("c.pem"),
            Some("k.pem"),
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
            resolve(file, None, None, false).unwrap(),
            Some(TlsConfig::self_signed())
        );
        assert!(resolve(TlsFileConfig::default(), Some("c"), None, false).is_err());
        assert!(resolve(TlsFileConfig::default(), Some("c"), Some("k"), true).is_err());
    }

    fn acme(domains: &[&str]) -> AcmeFileConfig {
        AcmeFileConfig {
            domains: domains.iter().map(|d| (*d).to_owned()).collect(),
            ..AcmeFileConfig::default()
        }
    }

    #[test]
    fn acme_takes_dns_names_and_defaults_to_lets_encrypt_over_tls_alpn() {
        let file = TlsFileConfig {
            acme: Some(acme(&["Iris.Example.com.", "iris.example.com"])),
            ..TlsFileConfig::default()
        };
        let tls = resolve(file, None, None, false).unwrap().expect("tls");
        let TlsSource::Acme(a) = tls.source else {
            panic!("acme")
        };
        assert_eq!(a.domains, vec!["iris.example.com".to_owned()]);
        assert_eq!(a.directory, LETS_ENCRYPT);
        assert_eq!(a.challenge, Challenge::TlsAlpn01);
        assert_eq!(a.renew_before, Duration::from_secs(30 * 86_400));
        for bad in [
            &[][..],
            &["127.0.0.1"],
            &["a b"],
            &["-x.example.com"],
            &["x/y"],
        ] {
            assert!(AcmeConfig::resolve(acme(bad)).is_err(), "{bad:?}");
        }
        let plain_directory = AcmeFileConfig {
            directory: Some("http://ca.example/dir".into()),
            ..acme(&["iris.example.com"])
        };
        assert!(AcmeConfig::resolve(plain_directory).is_err());
    }

    #[test]
    fn http_01_and_the_redirect_need_their_listener_and_tls() {
        let http01 = TlsFileConfig {
            acme: Some(AcmeFileConfig {
                challenge: Some("http-01".into()),
                ..acme(&["iris.example.com"])
            }),
            ..TlsFileConfig::default()
        };
        let err = resolve(http01.clone(), None, None, false).unwrap_err();
        assert!(err.to_string().contains("redirect_listen"), "{err}");
        let with_port = TlsFileConfig {
            redirect_listen: Some("127.0.0.1:8080".into()),
            ..http01
        };
        let tls = resolve(with_port, None, None, false).unwrap().expect("tls");
        assert_eq!(tls.redirect_listen, Some("127.0.0.1:8080".parse().unwrap()));
        let plain = TlsFileConfig {
            redirect_listen: Some("127.0.0.1:8080".into()),
            ..TlsFileConfig::default()
        };
        assert!(
            resolve(plain, None, None, false).is_err(),
            "no TLS to redirect to"
        );
        let both = TlsFileConfig {
            self_signed: Some(true),
            acme: Some(acme(&["iris.example.com"])),
            ..TlsFileConfig::default()
        };
        assert!(resolve(both, None, None, false).is_err());
    }
}
