//! What the gateway shows the certificate authority and its clients: the certificate in service
//! (swapped in place by a renewal, so the next handshake gets it without a restart), and the
//! answers to open challenges — a TLS-ALPN-01 certificate per domain, handed only to a
//! handshake that asks for ALPN `acme-tls/1` (RFC 8737), and HTTP-01 key authorizations per
//! token, for `/.well-known/acme-challenge/` on the plain listener.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// The ALPN protocol of TLS-ALPN-01.
pub const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

/// The certificate in service and the open challenges.
#[derive(Debug, Default)]
pub struct Answers {
    current: RwLock<Option<Arc<CertifiedKey>>>,
    alpn: Mutex<HashMap<String, Arc<CertifiedKey>>>,
    http: Mutex<HashMap<String, String>>,
}

impl Answers {
    /// Puts `key` in service.
    pub fn install(&self, key: CertifiedKey) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(key));
    }

    /// Whether a certificate is in service.
    pub fn serving(&self) -> bool {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// Answers TLS-ALPN-01 for `domain` with a certificate carrying `digest` (the SHA-256 of the
    /// key authorization) in its critical `acmeIdentifier` extension.
    pub fn open_alpn(&self, domain: &str, digest: &[u8]) -> Result<(), String> {
        let key = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
        let mut params =
            rcgen::CertificateParams::new(vec![domain.to_owned()]).map_err(|e| e.to_string())?;
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .custom_extensions
            .push(rcgen::CustomExtension::new_acme_identifier(digest));
        let cert = params.self_signed(&key).map_err(|e| e.to_string())?;
        // Not through `tls::certified_key`: its check reads the certificate with webpki, which
        // refuses the critical `acmeIdentifier` extension this certificate exists for.
        let der = rustls_pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
        let signing =
            rustls::crypto::ring::sign::any_supported_type(&der).map_err(|e| e.to_string())?;
        let key = CertifiedKey::new(vec![cert.der().clone()], signing);
        self.alpn
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(domain.to_owned(), Arc::new(key));
        Ok(())
    }

    /// Answers HTTP-01 `token` with `key_authorization`.
    pub fn open_http(&self, token: &str, key_authorization: &str) {
        self.http
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(token.to_owned(), key_authorization.to_owned());
    }

    /// The key authorization of an open HTTP-01 `token`.
    pub fn http_answer(&self, token: &str) -> Option<String> {
        self.http
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(token)
            .cloned()
    }

    /// Forgets every open challenge (the order is over, either way).
    pub fn close_challenges(&self) {
        self.alpn.lock().unwrap_or_else(|e| e.into_inner()).clear();
        self.http.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

/// Picks what a handshake gets: the challenge certificate for `acme-tls/1`, else the
/// certificate in service (none before the first one is issued: the handshake fails).
#[derive(Debug)]
pub struct Resolver(pub Arc<Answers>);

impl ResolvesServerCert for Resolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let challenge = hello
            .alpn()
            .is_some_and(|mut protocols| protocols.any(|p| p == ACME_TLS_ALPN));
        if challenge {
            let name = hello.server_name()?.to_ascii_lowercase();
            let alpn = self.0.alpn.lock().unwrap_or_else(|e| e.into_inner());
            return alpn.get(&name).cloned();
        }
        self.0
            .current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}
