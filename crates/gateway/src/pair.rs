//! `iris-gateway pair`: what a device needs to connect, as a terminal QR code and as text.
//!
//! By default `pair` creates a one-time pairing code (see `credentials.rs`) in the gateway's
//! store, where the running gateway (or the next one started on this data dir) reads it at
//! `hello`; `pair --shared` shows the shared token instead. Either travels in the same link:
//! `<public_url>/#token=<code or token>&ws=<WebSocket URL>`. A phone camera opens it in the
//! browser, which signs in at once; the Iris app reads `token` and `ws` from the same fragment.

use std::sync::Arc;

use iris_store::{Store, StoreConfig};

use crate::config::Config;
use crate::credentials::{self, CodeError, IssuedCode, Link};

/// What the link carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Secret {
    /// A one-time pairing code, valid until this time (unix milliseconds).
    Code {
        /// The code.
        code: String,
        /// When it expires.
        expires_at: i64,
    },
    /// The shared token.
    Shared(String),
}

/// The pairing details of a gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pairing {
    /// The URLs.
    pub link: Link,
    /// The code or token in the link.
    pub secret: Secret,
    /// Set when the address only works on this machine.
    pub loopback_only: bool,
}

/// Why `pair` made no code.
#[derive(Debug, thiserror::Error)]
pub enum PairError {
    /// The data dir could not be prepared.
    #[error("data dir {0}")]
    DataDir(String),
    /// The code could not be made.
    #[error(transparent)]
    Code(#[from] CodeError),
}

/// Creates a pairing code in the store of `config.data_dir` (created if the gateway never ran
/// there), valid for `auth.pairing_code_minutes` or `ttl` when given.
pub async fn create_code(
    config: &Config,
    ttl: Option<std::time::Duration>,
) -> Result<IssuedCode, PairError> {
    let dir = &config.data_dir;
    crate::server::prepare_data_dir(dir)
        .map_err(|e| PairError::DataDir(format!("{}: {e}", dir.display())))?;
    let store = Store::open(
        StoreConfig {
            path: dir.join("iris.db"),
            group_commit: false,
            readers: 1,
        },
        Arc::new(|_| {}),
    )
    .map_err(CodeError::from)?;
    let issued =
        credentials::create_code(&store, ttl.unwrap_or(config.auth.pairing_code_ttl), None).await;
    store.close();
    Ok(issued?)
}

impl Pairing {
    /// The pairing details for this configuration and secret.
    pub fn new(config: &Config, secret: Secret) -> Pairing {
        let link = Link::new(
            config,
            match &secret {
                Secret::Code { code, .. } => code,
                Secret::Shared(token) => token,
            },
        );
        let base = config.public_url();
        let host = base
            .split("://")
            .nth(1)
            .unwrap_or("")
            .split('/')
            .next()
            .unwrap_or("");
        let loopback_only = config.public_url.is_none()
            && (host.starts_with("127.")
                || host.starts_with("[::1]")
                || host.starts_with("localhost"));
        Pairing {
            link,
            secret,
            loopback_only,
        }
    }

    /// The whole text `pair` prints; `now_ms` is when, for the code's remaining lifetime.
    pub fn text(&self, now_ms: i64) -> String {
        let mut out = String::new();
        out.push_str("Scan with the Iris app or a phone camera:\n\n");
        out.push_str(&self.link.qr_text());
        out.push_str("\n\nIris app\n");
        out.push_str(&format!("  WebSocket:    {}\n", self.link.ws_url));
        match &self.secret {
            Secret::Code { code, expires_at } => {
                let minutes = ((expires_at - now_ms).max(0) + 59_999) / 60_000;
                out.push_str(&format!("  Pairing code: {code}\n"));
                out.push_str(&format!(
                    "                (one device, once, within {minutes} minute{}; it then gets a token of its own)\n",
                    if minutes == 1 { "" } else { "s" }
                ));
            }
            Secret::Shared(token) => out.push_str(&format!("  Token:        {token}\n")),
        }
        if let Some(pin) = &self.link.pin {
            out.push_str(&format!("  Certificate:  SHA-256 {pin}\n"));
            out.push_str("                (self-signed: the app pins it; compare it if it asks)\n");
        }
        out.push_str("\nWeb client (open in any browser)\n");
        out.push_str(&format!("  {}\n", self.link.web_url));
        if self.link.pin.is_some() {
            out.push_str(
                "  The certificate is self-signed, so a browser warns before it opens the page:\n  \
                 check that the fingerprint it shows is the one above, then proceed. A name with\n  \
                 a real certificate avoids the warning (--tls-cert, or a TLS reverse proxy).\n",
            );
        }
        if self.loopback_only {
            out.push_str(
                "\nThis address only works on this machine. To pair a phone, listen on a LAN address\n\
                 (--listen 0.0.0.0:8765) or put the gateway behind a TLS reverse proxy and set\n\
                 public_url (--public-url https://iris.example.com).\n",
            );
        }
        out.push_str(match self.secret {
            Secret::Code { .. } => {
                "\nWhoever uses the code first is paired: show it only to your own device.\n"
            }
            Secret::Shared(_) => {
                "\nAnyone with the token can use the agent: share it only with your own devices.\n"
            }
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_address_comes_from_listen() {
        let mut config = Config::for_tests(std::path::Path::new("/tmp"), "t");
        config.listen = "127.0.0.1:8765".parse().expect("addr");
        let p = Pairing::new(&config, Secret::Shared("abc".into()));
        assert_eq!(p.link.ws_url, "ws://127.0.0.1:8765/ws");
        assert!(p
            .link
            .web_url
            .starts_with("http://127.0.0.1:8765/#token=abc&ws="));
        assert!(p.loopback_only);
        assert!(p.text(0).contains("Token:        abc"));
    }

    #[test]
    fn a_code_shows_how_long_it_lasts() {
        let config = Config::for_tests(std::path::Path::new("/tmp"), "t");
        let secret = Secret::Code {
            code: "ipc_x".into(),
            expires_at: 600_000,
        };
        let text = Pairing::new(&config, secret).text(0);
        assert!(text.contains("Pairing code: ipc_x"), "{text}");
        assert!(text.contains("within 10 minutes"), "{text}");
        assert!(text.contains("#token=ipc_x&ws="), "{text}");
    }
}
