//! The ACME client's HTTP: instant-acme's `HttpClient` over the gateway's reqwest (rustls with
//! the public roots, plus `directory_ca` when the directory is served under a private CA).
//! Every request has a deadline and follows no redirect.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use instant_acme::{BodyWrapper, BytesResponse, HttpClient};

/// How long one request to the directory may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest answer read from the directory (certificate chains are a few KiB).
const MAX_BODY: usize = 1024 * 1024;

/// instant-acme's HTTP through reqwest.
pub struct Client(reqwest::Client);

impl Client {
    /// A client trusting the public roots and, when given, the CA certificates in `ca` (PEM).
    pub fn new(ca: Option<&Path>) -> Result<Client, String> {
        let mut builder = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("iris-gateway/", env!("CARGO_PKG_VERSION")));
        if let Some(path) = ca {
            let pem = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            if certs.is_empty() {
                return Err(format!("{}: no PEM certificate", path.display()));
            }
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        builder.build().map(Client).map_err(|e| e.to_string())
    }
}

impl HttpClient for Client {
    fn request(
        &self,
        req: axum::http::Request<BodyWrapper<Bytes>>,
    ) -> Pin<Box<dyn Future<Output = Result<BytesResponse, instant_acme::Error>> + Send>> {
        let client = self.0.clone();
        Box::pin(async move {
            let (parts, body) = req.into_parts();
            let body = axum::body::to_bytes(axum::body::Body::new(body), MAX_BODY)
                .await
                .map_err(|e| instant_acme::Error::Other(Box::new(e)))?;
            let url = parts.uri.to_string();
            let response = client
                .request(parts.method, url)
                .headers(parts.headers)
                .body(body)
                .send()
                .await
                .map_err(|e| instant_acme::Error::Other(Box::new(e)))?;
            let mut head = axum::http::Response::builder().status(response.status());
            for (name, value) in response.headers() {
                head = head.header(name, value);
            }
            let mut bytes = Vec::new();
            let mut response = response;
            while let Some(chunk) = response
                .chunk()
                .await
                .map_err(|e| instant_acme::Error::Other(Box::new(e)))?
            {
                if bytes.len() + chunk.len() > MAX_BODY {
                    return Err(instant_acme::Error::Str("answer too large"));
                }
                bytes.extend_from_slice(&chunk);
            }
            let (parts, ()) = head.body(())?.into_parts();
            Ok(BytesResponse {
                parts,
                body: Box::new(Bytes::from(bytes)),
            })
        })
    }
}
