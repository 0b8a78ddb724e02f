//! TLS served by the gateway itself (`[tls]`, `--tls-cert`/`--tls-key`, `--tls-self-signed`).
//!
//! With certificate files, the chain and key are read at start and read again when either file
//! changes (looked at on a handshake at most every `reload_check`), so a renewal by certbot or
//! another tool is picked up without a restart; a file that does not load keeps the previous
//! certificate in service and says why in the log. Without a domain, `--tls-self-signed` makes a
//! certificate on the first start (`<data_dir>/tls/cert.pem`, its key `key.pem` mode 0600) for
//! `localhost`, this machine's host name and the listen and public addresses, and keeps it; its
//! SHA-256 fingerprint goes into pairing links (`pin=`), so the Iris app can pin it where a
//! browser can only warn. HSTS is sent only with the owner's own certificate: with a
//! self-signed one it would forbid the browser's "proceed anyway".

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest, Sha256};
use tokio_rustls::TlsAcceptor;

use crate::config::tls::{TlsConfig, TlsSource};

/// The self-signed certificate's directory in the data dir.
pub const SELF_SIGNED_DIR: &str = "tls";

/// What the listener and the pairing links need of TLS.
pub struct Tls {
    /// Wraps each accepted socket.
    pub acceptor: TlsAcceptor,
    /// The fingerprint (SHA-256 of the leaf certificate, hex) of a self-signed certificate.
    pub pin: Option<String>,
    /// Whether to send `Strict-Transport-Security`.
    pub hsts: bool,
}

/// Why TLS could not start.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A certificate or key file could not be read or used.
    #[error("{path}: {message}")]
    Load {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The self-signed certificate could not be made or kept.
    #[error("could not make a self-signed certificate in {path}: {message}")]
    SelfSigned {
        /// Its directory.
        path: PathBuf,
        /// Why.
        message: String,
    },
}

/// Loads (or, self-signed, makes) the certificate; `names` are the host names and addresses a
/// self-signed certificate is made for. ACME certificates come from the `acme` module, which builds
/// its [`Tls`] with [`serve_with`].
pub fn load(cfg: &TlsConfig, data_dir: &Path, names: &[String]) -> Result<Tls, TlsError> {
    let (cert, key, self_signed) = match &cfg.source {
        TlsSource::Files { cert, key } => (cert.clone(), key.clone(), false),
        TlsSource::SelfSigned => {
            let (cert, key) = ensure_self_signed(&data_dir.join(SELF_SIGNED_DIR), names)?;
            (cert, key, true)
        }
        TlsSource::Acme(_) => {
            return Err(TlsError::Load {
                path: data_dir.to_owned(),
                message: "ACME certificates are loaded by the ACME service".into(),
            })
        }
    };
    let resolver = Reloading::new(cert, key, cfg.reload_check)?;
    let pin = self_signed.then(|| resolver.fingerprint());
    let mut tls = serve_with(Arc::new(resolver), &[])?;
    tls.pin = pin;
    tls.hsts = cfg.hsts();
    Ok(tls)
}

/// TLS serving the certificates `resolver` picks, offering HTTP/1.1 and the `extra` ALPN
/// protocols (ACME's `acme-tls/1`); HSTS on, no pin (the caller says otherwise).
pub fn serve_with(resolver: Arc<dyn ResolvesServerCert>, extra: &[&[u8]]) -> Result<Tls, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Load {
            path: PathBuf::new(),
            message: e.to_string(),
        })?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    server.alpn_protocols = vec![b"http/1.1".to_vec()];
    server
        .alpn_protocols
        .extend(extra.iter().map(|p| p.to_vec()));
    Ok(Tls {
        acceptor: TlsAcceptor::from(Arc::new(server)),
        pin: None,
        hsts: true,
    })
}

/// A certificate chain (PEM) and its private key (PEM) as rustls serves them.
pub fn certified_key(chain_pem: &[u8], key_pem: &[u8]) -> Result<CertifiedKey, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(chain_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    if chain.is_empty() {
        return Err("no certificate".into());
    }
    let private = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| e.to_string())?;
    let signing =
        rustls::crypto::ring::sign::any_supported_type(&private).map_err(|e| e.to_string())?;
    let certified = CertifiedKey::new(chain, signing);
    certified
        .keys_match()
        .map_err(|e| format!("the key does not belong to the certificate: {e}"))?;
    Ok(certified)
}

/// The SHA-256 fingerprint of a DER certificate, lowercase hex.
pub fn fingerprint(der: &[u8]) -> String {
    hex::encode(Sha256::digest(der))
}

/// The fingerprint of the self-signed certificate in `data_dir`, if one was made.
pub fn self_signed_pin(data_dir: &Path) -> Option<String> {
    let path = data_dir.join(SELF_SIGNED_DIR).join("cert.pem");
    let leaf = CertificateDer::pem_file_iter(path).ok()?.next()?.ok()?;
    Some(fingerprint(&leaf))
}

/// A TLS client configuration that accepts exactly the certificate whose SHA-256 is `pin` (hex),
/// whatever its name or issuer: what the Iris app does with a pairing link's `pin=`, and what
/// `doctor` uses to reach a gateway with a self-signed certificate.
pub fn pinned_client(pin: &str) -> rustls::ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Pinned {
            pin: pin.to_owned(),
            provider,
        }))
        .with_no_client_auth()
}

/// Accepts one certificate, by fingerprint; signatures are still checked.
#[derive(Debug)]
struct Pinned {
    pin: String,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl rustls::client::danger::ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _name: &rustls_pki_types::ServerName<'_>,
        _ocsp: &[u8],
        _now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        // Fingerprints are public: no need for a constant-time comparison.
        if fingerprint(end_entity) == self.pin {
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General("not the pinned certificate".into()))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        let algs = &self.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        let algs = &self.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algs)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The certificate in service and the files it came from.
#[derive(Debug)]
struct Reloading {
    cert: PathBuf,
    key: PathBuf,
    every: Duration,
    state: Mutex<Loaded>,
}

#[derive(Debug)]
struct Loaded {
    key: Arc<CertifiedKey>,
    fingerprint: String,
    stamps: [Option<SystemTime>; 2],
    checked: Instant,
}

impl Reloading {
    fn new(cert: PathBuf, key: PathBuf, every: Duration) -> Result<Reloading, TlsError> {
        let loaded = read(&cert, &key)?;
        Ok(Reloading {
            cert,
            key,
            every,
            state: Mutex::new(loaded),
        })
    }

    fn fingerprint(&self) -> String {
        self.state.lock().expect("tls lock").fingerprint.clone()
    }
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let mut state = self.state.lock().expect("tls lock");
        if state.checked.elapsed() >= self.every {
            state.checked = Instant::now();
            if stamps(&self.cert, &self.key) != state.stamps {
                match read(&self.cert, &self.key) {
                    Ok(fresh) => {
                        tracing::info!(cert = %self.cert.display(), fingerprint = %fresh.fingerprint, "TLS certificate reloaded");
                        *state = fresh;
                    }
                    Err(e) => {
                        // Half-written by a renewal, say: keep serving the old one, try again.
                        tracing::warn!(error = %e, "the changed TLS certificate does not load; the previous one stays in service");
                    }
                }
            }
        }
        Some(state.key.clone())
    }
}

/// The modification times of the two files.
fn stamps(cert: &Path, key: &Path) -> [Option<SystemTime>; 2] {
    [cert, key].map(|p| fs::metadata(p).and_then(|m| m.modified()).ok())
}

/// Reads a PEM chain and its key into a certificate rustls can serve.
fn read(cert: &Path, key: &Path) -> Result<Loaded, TlsError> {
    let stamps = stamps(cert, key);
    let fail = |path: &Path, message: String| TlsError::Load {
        path: path.to_owned(),
        message,
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| fail(cert, e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| fail(cert, e.to_string()))?;
    let Some(leaf) = chain.first() else {
        return Err(fail(cert, "no certificate in the file".into()));
    };
    let fingerprint = fingerprint(leaf);
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| fail(key, e.to_string()))?;
    let signing = rustls::crypto::ring::sign::any_supported_type(&private)
        .map_err(|e| fail(key, e.to_string()))?;
    let certified = CertifiedKey::new(chain, signing);
    certified
        .keys_match()
        .map_err(|e| fail(key, format!("does not belong to the certificate: {e}")))?;
    Ok(Loaded {
        key: Arc::new(certified),
        fingerprint,
        stamps,
        checked: Instant::now(),
    })
}

/// The self-signed certificate and key in `dir`, made now when they are missing.
fn ensure_self_signed(dir: &Path, names: &[String]) -> Result<(PathBuf, PathBuf), TlsError> {
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    if cert.exists() && key.exists() {
        return Ok((cert, key));
    }
    let fail = |message: String| TlsError::SelfSigned {
        path: dir.to_owned(),
        message,
    };
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| fail(e.to_string()))?;
    let made =
        rcgen::generate_simple_self_signed(names.to_vec()).map_err(|e| fail(e.to_string()))?;
    write_new(&key, made.signing_key.serialize_pem().as_bytes(), 0o600).map_err(fail)?;
    write_new(&cert, made.cert.pem().as_bytes(), 0o644).map_err(fail)?;
    tracing::info!(path = %cert.display(), "made a self-signed TLS certificate");
    Ok((cert, key))
}

/// Writes a file through a temporary one renamed into place, with `mode` from the start.
pub fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), String> {
    let tmp = path.with_extension("tmp");
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_signed_certificate_is_made_once_and_its_key_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
        let tls = load(&TlsConfig::self_signed(), dir.path(), &names).expect("made");
        let pin = tls.pin.clone().expect("a pin");
        assert_eq!(pin.len(), 64);
        assert!(!tls.hsts, "no HSTS with a certificate browsers warn about");
        let key = dir.path().join(SELF_SIGNED_DIR).join("key.pem");
        let mode = fs::metadata(&key).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let again = load(&TlsConfig::self_signed(), dir.path(), &names).expect("kept");
        assert_eq!(
            again.pin,
            Some(pin.clone()),
            "the same certificate on the next start"
        );
        assert_eq!(self_signed_pin(dir.path()), Some(pin), "what `pair` reads");
    }

    #[test]
    fn a_key_that_does_not_match_its_certificate_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let a = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let b = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let cert = dir.path().join("cert.pem");
        let key = dir.path().join("key.pem");
        fs::write(&cert, a.cert.pem()).unwrap();
        fs::write(&key, b.signing_key.serialize_pem()).unwrap();
        let err = load(&TlsConfig::files(cert.clone(), key), dir.path(), &[])
            .err()
            .expect("refused");
        assert!(err.to_string().contains("does not belong"), "{err}");
        fs::write(&cert, "not a certificate").unwrap();
        assert!(load(
            &TlsConfig::files(cert, dir.path().join("key.pem")),
            dir.path(),
            &[]
        )
        .is_err());
    }

    use std::os::unix::fs::PermissionsExt;
}
