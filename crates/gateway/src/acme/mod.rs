//! Certificates from an ACME certificate authority (`[tls.acme]`; Let's Encrypt by default):
//! issued on the first start, kept in `<data_dir>/acme/` (0600), renewed in the background
//! before they expire and put in service without a restart (the next handshake gets the new
//! one). Challenges are answered by the gateway's own listeners: TLS-ALPN-01 on the TLS port
//! (`answers.rs`), HTTP-01 on the plain redirect listener. A failed attempt keeps the
//! certificate in service, is written to `status.json` for `doctor`, and is tried again with a
//! backoff (30 s doubling to 6 h).
//!
//! Ground floor: it uses `config` and `tls`; the server wires it to the listeners.

pub mod answers;
mod http;
mod issue;
pub mod store;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::config::tls::{AcmeConfig, Challenge};
use crate::tls::{Tls, TlsError};
use answers::{Answers, Resolver, ACME_TLS_ALPN};
use store::{Files, Status};

/// The first wait after a failed attempt; it doubles up to [`MAX_RETRY`].
const FIRST_RETRY: Duration = Duration::from_secs(30);
/// The longest wait between failed attempts.
const MAX_RETRY: Duration = Duration::from_secs(6 * 3600);
/// How long one order may take in all.
const ORDER_DEADLINE: Duration = Duration::from_secs(300);
/// The longest sleep before the due time is looked at again (a suspended machine's monotonic
/// clock stands still).
const LOOK_AGAIN: Duration = Duration::from_secs(3600);

/// When a certificate is valid, in ms since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    /// Not before.
    pub from_ms: i64,
    /// Not after.
    pub until_ms: i64,
}

impl Validity {
    /// The validity of the first certificate of a PEM chain.
    pub fn of_pem(chain: &[u8]) -> Option<Validity> {
        use rustls_pki_types::pem::PemObject;
        let leaf = rustls_pki_types::CertificateDer::pem_slice_iter(chain)
            .next()?
            .ok()?;
        let (_, parsed) = x509_parser::parse_x509_certificate(&leaf).ok()?;
        let v = parsed.validity();
        Some(Validity {
            from_ms: v.not_before.timestamp() * 1000,
            until_ms: v.not_after.timestamp() * 1000,
        })
    }

    /// When to renew: once less than `before` remains, or less than a third of the lifetime,
    /// whichever comes later (so a short-lived certificate is not renewed at once).
    pub fn renew_at_ms(&self, before: Duration) -> i64 {
        let lifetime = (self.until_ms - self.from_ms).max(0);
        let margin = (before.as_millis() as i64).min(lifetime / 3);
        self.until_ms - margin
    }
}

/// The ACME service: the certificate in service and its renewal.
pub struct Acme {
    cfg: AcmeConfig,
    files: Files,
    answers: Arc<Answers>,
    /// The certificate in service, and whether it is the one the configuration asks for.
    held: Option<(Validity, bool)>,
}

impl Acme {
    /// Opens `<data_dir>/acme/` and puts a stored certificate in service (even one for other
    /// names or another directory, renewed at once: it serves the names it has meanwhile).
    pub fn load(cfg: &AcmeConfig, data_dir: &Path) -> Result<Acme, TlsError> {
        let files = Files::open(data_dir).map_err(|e| TlsError::Load {
            path: data_dir.join(store::DIR),
            message: e.to_string(),
        })?;
        let answers = Arc::new(Answers::default());
        let mut held = None;
        if let Some((chain, key)) = files.certificate() {
            match crate::tls::certified_key(&chain, &key) {
                Ok(certified) => {
                    let status = files.status();
                    let same = status.directory == cfg.directory && status.domains == cfg.domains;
                    held = Validity::of_pem(&chain).map(|v| (v, same));
                    answers.install(certified);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the stored ACME certificate does not load; a new one is ordered")
                }
            }
        }
        Ok(Acme {
            cfg: cfg.clone(),
            files,
            answers,
            held,
        })
    }

    /// TLS serving the certificate in service (and TLS-ALPN-01 answers), with HSTS.
    pub fn tls(&self) -> Result<Tls, TlsError> {
        let extra: &[&[u8]] = match self.cfg.challenge {
            Challenge::TlsAlpn01 => &[ACME_TLS_ALPN],
            Challenge::Http01 => &[],
        };
        crate::tls::serve_with(Arc::new(Resolver(self.answers.clone())), extra)
    }

    /// The challenge answers, for the plain listener's `/.well-known/acme-challenge/`.
    pub fn answers(&self) -> Arc<Answers> {
        self.answers.clone()
    }

    /// Runs the renewal until `stop`.
    pub fn spawn(self, stop: CancellationToken) {
        tokio::spawn(self.run(stop));
    }

    /// When the next order is due (ms since the epoch): now without a fitting certificate.
    fn due_ms(&self) -> i64 {
        match self.held {
            Some((validity, true)) => validity.renew_at_ms(self.cfg.renew_before),
            _ => 0,
        }
    }

    async fn run(mut self, stop: CancellationToken) {
        let mut retry = FIRST_RETRY;
        loop {
            let wait = self.due_ms() - crate::ids::now_ms();
            if wait > 0 {
                let wait = Duration::from_millis(wait as u64).min(LOOK_AGAIN);
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(wait) => continue,
                }
            }
            let attempt = tokio::select! {
                _ = stop.cancelled() => return,
                a = tokio::time::timeout(ORDER_DEADLINE, issue::order(&self.cfg, &self.files, &self.answers)) => a,
            };
            let outcome = match attempt {
                Ok(Ok(issued)) => self.put_in_service(issued),
                Ok(Err(e)) => Err(e),
                Err(_) => Err(format!(
                    "no certificate within {} s",
                    ORDER_DEADLINE.as_secs()
                )),
            };
            let Err(error) = outcome else {
                retry = FIRST_RETRY;
                continue;
            };
            tracing::warn!(error = %error, retry_in_secs = retry.as_secs(), domains = ?self.cfg.domains, "ACME certificate order failed");
            let mut status = self.files.status();
            status.last_error = Some(error);
            status.last_error_ms = Some(crate::ids::now_ms());
            if let Err(e) = self.files.save_status(&status) {
                tracing::warn!(error = %e, "could not write the ACME status");
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(retry) => {}
            }
            retry = (retry * 2).min(MAX_RETRY);
        }
    }

    /// Keeps a new certificate and puts it in service.
    fn put_in_service(&mut self, issued: issue::Issued) -> Result<(), String> {
        let certified = crate::tls::certified_key(issued.chain.as_bytes(), issued.key.as_bytes())?;
        let validity = Validity::of_pem(issued.chain.as_bytes())
            .ok_or("the issued certificate cannot be read")?;
        self.files
            .save_certificate(issued.chain.as_bytes(), issued.key.as_bytes())?;
        self.files.save_status(&Status {
            directory: self.cfg.directory.clone(),
            domains: self.cfg.domains.clone(),
            renewed_ms: Some(crate::ids::now_ms()),
            not_after_ms: Some(validity.until_ms),
            last_error: None,
            last_error_ms: None,
        })?;
        self.answers.install(certified);
        self.held = Some((validity, true));
        tracing::info!(domains = ?self.cfg.domains, until_ms = validity.until_ms, "ACME certificate in service");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tls::AcmeFileConfig;

    /// What a restart finds: the certificate an earlier run was issued, for `domains`.
    fn stored(dir: &Path, cfg: &AcmeConfig, domains: &[&str]) {
        let key = rcgen::KeyPair::generate().expect("key");
        let names = domains.iter().map(|d| d.to_string()).collect::<Vec<_>>();
        let cert = rcgen::CertificateParams::new(names.clone())
            .expect("params")
            .self_signed(&key)
            .expect("certificate");
        let files = Files::open(dir).expect("acme dir");
        let (chain, key) = (cert.pem(), key.serialize_pem());
        files
            .save_certificate(chain.as_bytes(), key.as_bytes())
            .expect("saved");
        let status = Status {
            directory: cfg.directory.clone(),
            domains: names,
            renewed_ms: Some(crate::ids::now_ms()),
            ..Status::default()
        };
        files.save_status(&status).expect("status");
    }

    #[test]
    fn a_restart_serves_the_stored_certificate_and_orders_only_when_it_is_due() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = AcmeConfig::resolve(AcmeFileConfig {
            domains: vec!["iris.example.com".into()],
            directory: Some("https://127.0.0.1:9/dir".into()),
            ..AcmeFileConfig::default()
        })
        .expect("config");
        stored(dir.path(), &cfg, &["iris.example.com"]);
        let acme = Acme::load(&cfg, dir.path()).expect("loads");
        assert!(acme.answers.serving(), "in service before any order");
        let (validity, same) = acme.held.expect("held");
        assert!(same);
        assert_eq!(
            acme.due_ms(),
            validity.renew_at_ms(cfg.renew_before),
            "no order before the renewal is due"
        );
        assert!(acme.due_ms() > crate::ids::now_ms() + 365 * DAY);

        // Configured for other names: served meanwhile, a new order at once.
        stored(dir.path(), &cfg, &["old.example.com"]);
        let acme = Acme::load(&cfg, dir.path()).expect("loads");
        assert!(acme.answers.serving());
        assert_eq!(acme.due_ms(), 0);
    }

    const DAY: i64 = 86_400_000;

    #[test]
    fn renewal_comes_thirty_days_or_a_third_of_the_lifetime_before_expiry() {
        let month = Duration::from_secs(30 * 86_400);
        let ninety = Validity {
            from_ms: 0,
            until_ms: 90 * DAY,
        };
        assert_eq!(ninety.renew_at_ms(month), 60 * DAY);
        let year = Validity {
            from_ms: 0,
            until_ms: 365 * DAY,
        };
        assert_eq!(year.renew_at_ms(month), 335 * DAY);
        let six_days = Validity {
            from_ms: 0,
            until_ms: 6 * DAY,
        };
        assert_eq!(six_days.renew_at_ms(month), 4 * DAY, "not at once");
        let thirty_seconds = Validity {
            from_ms: 1_000,
            until_ms: 31_000,
        };
        assert_eq!(thirty_seconds.renew_at_ms(month), 21_000);
    }
}
