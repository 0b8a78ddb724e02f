//! `iris-gateway relay`: the relay the owner runs on a small server, so that devices away from
//! home reach the gateway. It is iroh's own relay server (the `iroh-relay` crate's server API),
//! configured here: where it listens, its TLS certificate, and which endpoints it serves.
//!
//! The relay passes QUIC packets between endpoints it knows by their public keys. It sees who
//! talks to whom, when and how much; the frames, tokens and media inside are encrypted end to
//! end between the device and the gateway (TLS 1.3 with the endpoints' keys), so it never sees
//! them.

use std::collections::HashSet;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use iroh::EndpointId;
use iroh_relay::server::{
    Access, AccessControl, CertConfig, ClientRequest, RelayConfig, Server, ServerConfig, TlsConfig,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// How the relay is run.
#[derive(Debug, Clone)]
pub struct RelayOptions {
    /// Where it listens: HTTPS with `tls`, plain HTTP without (only for a relay on loopback, in
    /// tests and development: without TLS the endpoints' keys travel unprotected to it).
    pub listen: SocketAddr,
    /// The certificate chain and its key (PEM files), e.g. from the relay host's ACME client.
    pub tls: Option<RelayTls>,
    /// The endpoints it serves; empty: every endpoint.
    pub allow: Vec<EndpointId>,
}

/// TLS of the relay.
#[derive(Debug, Clone)]
pub struct RelayTls {
    /// The certificate chain (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
    /// Where plain HTTP is served (iroh's relay answers captive-portal probes there).
    pub http_listen: SocketAddr,
}

/// Why the relay cannot start.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// The certificate or key cannot be read.
    #[error("tls: {0}")]
    Tls(String),
    /// The server cannot start (an address in use, say).
    #[error("cannot start the relay: {0}")]
    Spawn(String),
}

/// Admits only the listed endpoints (all when the list is empty). A relay open to every
/// endpoint serves strangers' traffic too; listing the gateway's id and its devices' ids keeps
/// it to the owner's.
#[derive(Debug)]
struct Allowed(HashSet<EndpointId>);

impl AccessControl for Allowed {
    fn on_connect(&self, request: &ClientRequest) -> impl Future<Output = Access> + Send {
        let id = request.endpoint_id();
        let allowed = self.0.is_empty() || self.0.contains(&id);
        if !allowed {
            tracing::info!(endpoint_id = %id.fmt_short(), "relay refused an endpoint not allowed");
        }
        std::future::ready(if allowed {
            Access::Allow
        } else {
            Access::Deny {
                reason: Some("not allowed on this relay".into()),
            }
        })
    }
}

/// A running relay.
pub struct Relay {
    server: Server,
    url: String,
}

impl Relay {
    /// Starts the relay.
    pub async fn start(options: RelayOptions) -> Result<Relay, RelayError> {
        let (mut relay, scheme) = match &options.tls {
            None => (RelayConfig::new(options.listen), "http"),
            Some(tls) => {
                let server_config = server_tls(tls)?;
                let mut relay = RelayConfig::new(tls.http_listen);
                relay.tls = Some(TlsConfig::new(
                    options.listen,
                    CertConfig::Manual { server_config },
                ));
                (relay, "https")
            }
        };
        relay.access = Arc::new(Allowed(options.allow.iter().copied().collect()));
        let mut config = ServerConfig::default();
        config.relay = Some(relay);
        let server = Server::spawn(config)
            .await
            .map_err(|e| RelayError::Spawn(e.to_string()))?;
        let addr = match scheme {
            "https" => server.https_addr(),
            _ => server.http_addr(),
        }
        .ok_or_else(|| RelayError::Spawn("the relay bound no address".into()))?;
        Ok(Relay {
            server,
            url: format!("{scheme}://{addr}"),
        })
    }

    /// The relay's URL by the address it bound (for `[reach] relays` on the same machine; a
    /// gateway elsewhere names it by its domain).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Runs until `shutdown` completes or the server stops, then shuts it down.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) -> Result<(), RelayError> {
        tokio::select! {
            _ = shutdown => {}
            ended = self.server.join() => {
                return match ended {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) => Err(RelayError::Spawn(e.to_string())),
                    Err(e) => Err(RelayError::Spawn(e.to_string())),
                };
            }
        }
        self.server
            .shutdown()
            .await
            .map_err(|e| RelayError::Spawn(e.to_string()))
    }
}

/// The rustls configuration of the relay's HTTPS, from PEM files (ring, as the gateway's).
fn server_tls(tls: &RelayTls) -> Result<rustls::ServerConfig, RelayError> {
    let read = |path: &PathBuf| {
        std::fs::read(path).map_err(|e| RelayError::Tls(format!("{}: {e}", path.display())))
    };
    let (chain_pem, key_pem) = (read(&tls.cert)?, read(&tls.key)?);
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&chain_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| RelayError::Tls(format!("{}: {e}", tls.cert.display())))?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| RelayError::Tls(format!("{}: {e}", tls.key.display())))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| RelayError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| RelayError::Tls(e.to_string()))
}
