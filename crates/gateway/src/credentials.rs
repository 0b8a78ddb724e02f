//! Credentials besides the shared token: one-time pairing codes and per-device tokens, and the
//! pairing link (URL and QR code) that carries a code or the token.
//!
//! Both are 32 random bytes in hex behind a short prefix (`ipc_` for a code, `idt_` for a
//! device token). The store keeps only their SHA-256: they are high-entropy random values, so a
//! plain hash is enough (a password hash would only slow down every `hello`), and a copy of the
//! database lets nobody in. A `hello` looks the hash of what it presents up in the store; the
//! lookup is keyed by a hash, so its timing says nothing about any stored secret.
//!
//! Codes are created in the shared SQLite store, by a running gateway (`pair.create`) or by the
//! `iris-gateway pair` command in its own process; the gateway reads them at `hello`, so a code
//! made by either is accepted at once, and a spent code or an issued token survives a restart.
//!
//! Ground floor: imports nothing of the gateway above it.

use std::time::Duration;

use iris_store::{Store, StoreError};
use qrcode::render::{svg, unicode::Dense1x2};
use qrcode::QrCode;
use sha2::{Digest, Sha256};

use crate::config::Config;

/// Prefix of pairing codes.
pub const CODE_PREFIX: &str = "ipc_";
/// Prefix of device tokens.
pub const DEVICE_TOKEN_PREFIX: &str = "idt_";
/// Pairing codes one device may have open (neither spent nor expired) at once. The owner's
/// command line has no cap: a device's codes never keep the owner from pairing.
pub const MAX_OPEN_CODES: u64 = 5;

/// The hash the store keeps of a code or a device token: lowercase hex SHA-256.
pub fn hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// A new random secret with this prefix.
pub fn new_secret(prefix: &str) -> String {
    let bytes: [u8; 32] = rand::random();
    format!("{prefix}{}", hex::encode(bytes))
}

/// A pairing code just created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedCode {
    /// The code itself (shown once; the store has only its hash).
    pub code: String,
    /// When it stops being accepted, unix milliseconds.
    pub expires_at: i64,
}

/// Why no pairing code was made.
#[derive(Debug, thiserror::Error)]
pub enum CodeError {
    /// Too many codes of this device are open; spend or let some expire first.
    #[error("{MAX_OPEN_CODES} pairing codes of this device are already waiting to be used; try again when one was used or expired")]
    TooMany,
    /// The store failed.
    #[error("database: {0}")]
    Store(#[from] StoreError),
}

/// Creates a pairing code valid for `ttl` from now, made by `creator` (a signed-in device, at
/// most [`MAX_OPEN_CODES`] open at once) or by the owner's command line (`None`, no cap). A
/// device's codes are deleted when it is revoked.
pub async fn create_code(
    store: &Store,
    ttl: Duration,
    creator: Option<&str>,
) -> Result<IssuedCode, CodeError> {
    let code = new_secret(CODE_PREFIX);
    let code_hash = hash(&code);
    let now = crate::ids::now_ms();
    let expires_at = now + i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX / 2);
    let creator = creator.map(str::to_owned);
    let created = store
        .write(move |tx| {
            let by = creator.as_deref();
            if by.is_some() && tx.open_pairing_codes(now, by)? >= MAX_OPEN_CODES {
                return Ok(false);
            }
            tx.insert_pairing_code(&code_hash, now, expires_at, by)?;
            Ok(true)
        })
        .await?;
    if !created {
        return Err(CodeError::TooMany);
    }
    Ok(IssuedCode { code, expires_at })
}

/// What spending a pairing code gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redeemed {
    /// The device's new token.
    Token(String),
    /// The code was spent meanwhile, expired or was revoked.
    Gone,
    /// The device id is already paired: a code makes a new device, never takes over one.
    Taken,
}

/// Spends a code for `device_id` and issues that device its token, in one transaction. A code
/// never binds a token to a device id that is already in use (the code stays unspent then).
pub async fn redeem_code(
    store: &Store,
    code_hash: &str,
    device_id: &str,
) -> Result<Redeemed, StoreError> {
    let token = new_secret(DEVICE_TOKEN_PREFIX);
    let token_hash = hash(&token);
    let (code_hash, device) = (code_hash.to_owned(), device_id.to_owned());
    let now = crate::ids::now_ms();
    store
        .write(move |tx| {
            if tx.device_id_taken(&device)? {
                return Ok(Redeemed::Taken);
            }
            if !tx.spend_pairing_code(&code_hash, now, &device)? {
                return Ok(Redeemed::Gone);
            }
            tx.insert_device_token(&token_hash, &device, now)?;
            Ok(Redeemed::Token(token))
        })
        .await
}

/// A short, stable name of a pairing code for `pair list` and `pair revoke`: the first 12 hex
/// digits of its hash (the code itself is never stored).
pub fn code_id(code_hash: &str) -> &str {
    code_hash.get(..12).unwrap_or(code_hash)
}

/// A pairing link: what a device needs to connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// WebSocket URL for the Iris app.
    pub ws_url: String,
    /// The web client's URL with the secret and the WebSocket URL in its fragment
    /// (`<public_url>/#token=<secret>&ws=<ws url>`), also the QR code's content. The fragment
    /// never leaves the browser: it is not sent to the server nor in a `Referer`.
    pub web_url: String,
    /// The SHA-256 fingerprint (hex) of the gateway's self-signed certificate, which the app
    /// pins; the web URL's fragment carries it too (`&pin=`).
    pub pin: Option<String>,
}

impl Link {
    /// The link for this configuration carrying `secret` (a pairing code or the shared token).
    pub fn new(config: &Config, secret: &str) -> Link {
        let base = config.public_url();
        let ws_url = config.public_ws_url();
        let mut web_url = format!(
            "{base}/#token={}&ws={}",
            fragment_encode(secret),
            fragment_encode(&ws_url)
        );
        let self_signed = config
            .tls
            .as_ref()
            .is_some_and(|t| t.source == crate::config::tls::TlsSource::SelfSigned);
        // A command run beside the gateway reads the certificate the gateway made.
        let pin = config
            .tls_pin
            .clone()
            .or_else(|| self_signed.then(|| crate::tls::self_signed_pin(&config.data_dir))?);
        if let Some(pin) = &pin {
            web_url.push_str(&format!("&pin={pin}"));
        }
        Link {
            ws_url,
            web_url,
            pin,
        }
    }

    /// The QR code of the web URL drawn with Unicode half blocks, light on dark (as a terminal
    /// with a dark background shows it; scanners read both polarities).
    pub fn qr_text(&self) -> String {
        match QrCode::new(self.web_url.as_bytes()) {
            Ok(code) => code
                .render::<Dense1x2>()
                .dark_color(Dense1x2::Light)
                .light_color(Dense1x2::Dark)
                .quiet_zone(true)
                .build(),
            Err(e) => format!("(no QR code: {e})"),
        }
    }

    /// The QR code of the web URL as an SVG document, dark on white.
    pub fn qr_svg(&self) -> Option<String> {
        let code = QrCode::new(self.web_url.as_bytes()).ok()?;
        Some(
            code.render::<svg::Color<'_>>()
                .min_dimensions(200, 200)
                .quiet_zone(true)
                .build(),
        )
    }
}

/// Percent-encodes everything but RFC 3986 unreserved characters, for a fragment parameter.
fn fragment_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `text` with control characters (terminal escapes, newlines, bidi overrides aside) removed:
/// what the command line prints of strings a client chose, such as a device's name.
pub fn printable(text: &str) -> String {
    crate::text::without_format(text)
        .chars()
        .filter(|c| !c.is_control() && !is_bidi_control(*c))
        .collect()
}

fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_follow_public_url_and_encode_the_secret() {
        let mut config = Config::for_tests(std::path::Path::new("/tmp"), "tok en&=x");
        config.public_url = Some("https://iris.example.com/chat".into());
        let link = Link::new(&config, "tok en&=x");
        assert_eq!(link.ws_url, "wss://iris.example.com/chat/ws");
        assert_eq!(link.web_url, "https://iris.example.com/chat/#token=tok%20en%26%3Dx&ws=wss%3A%2F%2Firis.example.com%2Fchat%2Fws");
        assert!(link.qr_text().contains('█'));
        assert!(link.qr_svg().is_some_and(|s| s.contains("<svg")));
    }

    #[test]
    fn secrets_are_random_and_hashed() {
        let a = new_secret(CODE_PREFIX);
        assert!(a.starts_with("ipc_") && a.len() == 4 + 64);
        assert_ne!(a, new_secret(CODE_PREFIX));
        assert_eq!(hash(&a), hash(&a));
        assert_eq!(hash(&a).len(), 64);
        assert!(!hash(&a).contains(&a[4..]));
    }

    #[test]
    fn printable_strips_terminal_escapes_and_line_breaks() {
        let name = "Pho\u{1b}[2Jne\r\nfake line\u{7}\u{202E}gpj";
        assert_eq!(printable(name), "Pho[2Jnefake linegpj");
        assert_eq!(printable("Ünïcode 📱"), "Ünïcode 📱");
    }
}
