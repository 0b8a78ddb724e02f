//! `iris-gateway pair`: what a device needs to connect, as a terminal QR code and as text.
//!
//! The QR code holds one URL, the web client's with the token in its fragment:
//! `<public_url>/#token=<token>&ws=<WebSocket URL>`. A phone camera opens it in the browser,
//! which signs in at once (the fragment never leaves the browser: it is not sent to the server
//! nor in a `Referer`). The Iris app reads `token` and `ws` from the same fragment.

use qrcode::render::unicode::Dense1x2;
use qrcode::QrCode;

use crate::config::Config;

/// The pairing details of a gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pairing {
    /// WebSocket URL for the Iris app.
    pub ws_url: String,
    /// The web client's URL with the token in its fragment (also the QR code's content).
    pub web_url: String,
    /// The token.
    pub token: String,
    /// Set when the address only works on this machine.
    pub loopback_only: bool,
}

impl Pairing {
    /// The pairing details for this configuration and token.
    pub fn new(config: &Config, token: &str) -> Pairing {
        let base = config.public_url();
        let ws_url = config.public_ws_url();
        let web_url = format!(
            "{base}/#token={}&ws={}",
            fragment_encode(token),
            fragment_encode(&ws_url)
        );
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
            ws_url,
            web_url,
            token: token.to_owned(),
            loopback_only,
        }
    }

    /// The QR code of [`Pairing::web_url`] drawn with Unicode half blocks, light on dark (as a
    /// terminal with a dark background shows it; scanners read both polarities).
    pub fn qr(&self) -> String {
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

    /// The whole text `pair` prints.
    pub fn text(&self) -> String {
        let mut out = String::new();
        out.push_str("Scan with the Iris app or a phone camera:\n\n");
        out.push_str(&self.qr());
        out.push_str("\n\nIris app\n");
        out.push_str(&format!("  WebSocket: {}\n", self.ws_url));
        out.push_str(&format!("  Token:     {}\n", self.token));
        out.push_str("\nWeb client (open in any browser)\n");
        out.push_str(&format!("  {}\n", self.web_url));
        if self.loopback_only {
            out.push_str(
                "\nThis address only works on this machine. To pair a phone, listen on a LAN address\n\
                 (--listen 0.0.0.0:8765) or put the gateway behind a TLS reverse proxy and set\n\
                 public_url (--public-url https://iris.example.com).\n",
            );
        }
        out.push_str(
            "\nAnyone with the token can use the agent: share it only with your own devices.\n",
        );
        out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_follow_public_url_and_encode_the_token() {
        let mut config = Config::for_tests(std::path::Path::new("/tmp"), "tok en&=x");
        config.public_url = Some("https://iris.example.com/chat".into());
        let p = Pairing::new(&config, "tok en&=x");
        assert_eq!(p.ws_url, "wss://iris.example.com/chat/ws");
        assert_eq!(p.web_url, "https://iris.example.com/chat/#token=tok%20en%26%3Dx&ws=wss%3A%2F%2Firis.example.com%2Fchat%2Fws");
        assert!(!p.loopback_only);
        assert!(p.qr().contains('█'));
    }

    #[test]
    fn default_address_comes_from_listen() {
        let mut config = Config::for_tests(std::path::Path::new("/tmp"), "t");
        config.listen = "127.0.0.1:8765".parse().unwrap();
        let p = Pairing::new(&config, "abc");
        assert_eq!(p.ws_url, "ws://127.0.0.1:8765/ws");
        assert!(p
            .web_url
            .starts_with("http://127.0.0.1:8765/#token=abc&ws="));
        assert!(p.loopback_only);
    }
}
