//! Web Push to browsers (RFC 8030): the gateway's VAPID key pair (RFC 8292), kept in
//! `<data-dir>/vapid.pem`; payloads encrypted for the subscription (RFC 8291, `aes128gcm`); the
//! ES256 JWT that identifies the gateway to the push service; and the push service's answers.
//!
//! A subscription is bound to the public key the browser subscribed with, so the key is made once
//! and kept: a lost or replaced `vapid.pem` makes every browser subscribe again (the web client
//! does so when `hello.ack` offers a different key). The file is never overwritten.

use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use iris_protocol::PushPayload;
use iris_store::WebPushRow;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use p256::elliptic_curve::sec1::ToEncodedPoint;
use p256::pkcs8::{DecodePrivateKey, EncodePrivateKey, LineEnding};
use reqwest::header::{HeaderValue, AUTHORIZATION, CONTENT_ENCODING, CONTENT_TYPE};
use reqwest::Url;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::endpoint::{check_registration, check_sending, is_internal_address};
use super::error::PushError;
use super::outcome::Outcome;
use super::outcome::{classify_response, transport_error, ErrorBody, Rules};
use super::policy::{excerpt, PushContent};
use crate::config::push::WebPushConfig;
use crate::keyfile::{warn_if_readable_by_others, write_private};

/// The key file's name in the data dir.
pub const VAPID_FILE: &str = "vapid.pem";
pub use crate::config::push::DEFAULT_SUBJECT;
/// Lifetime of a VAPID JWT; RFC 8292 allows at most 24 hours.
const JWT_LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// The largest plaintext every push service accepts in one `aes128gcm` record: 4096 bytes of
/// body minus the 86-byte header, the 16-byte tag and the padding delimiter (RFC 8291 §4).
const MAX_PLAINTEXT: usize = 3993;
/// Longest endpoint URL accepted.
const MAX_ENDPOINT: usize = 2048;

/// How a push service's answers are read: 404 and 410 say the subscription is gone (expired, or
/// dropped by the browser), whatever the body says.
pub(crate) const RULES: Rules = Rules {
    service: "push service",
    gone: &[404, 410],
    gone_codes: &[],
    gone_if_named: &[],
    retry: &[],
    retry_every_failure: false,
    read_body: Some(service_error),
};

/// The gateway's VAPID key pair.
pub struct VapidKey {
    signing: EncodingKey,
    public: String,
}

// The private key stays out of logs.
impl fmt::Debug for VapidKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VapidKey")
            .field("public", &self.public)
            .finish_non_exhaustive()
    }
}

impl VapidKey {
    /// Reads `<dir>/vapid.pem`, or makes a new key pair and stores it there (mode 0600) when the
    /// file does not exist. Returns the key and whether it was made now.
    pub fn load_or_create(dir: &Path) -> Result<(VapidKey, bool), PushError> {
        let path = dir.join(VAPID_FILE);
        let fail = |message: String| PushError::VapidKey {
            path: path.clone(),
            message,
        };
        match std::fs::read_to_string(&path) {
            Ok(pem) => {
                warn_if_readable_by_others(&path, "the VAPID private key");
                return Ok((VapidKey::from_pem(&pem).map_err(fail)?, false));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(fail(e.to_string())),
        }
        let secret = new_secret().map_err(fail)?;
        let pem = secret
            .to_pkcs8_pem(LineEnding::LF)
            .map_err(|e| fail(e.to_string()))?;
        // Written to a private temporary file, then linked into place: a crash never leaves half
        // a key, and of two gateways starting at once on one data dir the first key wins.
        let tmp = dir.join(format!(".{VAPID_FILE}.{}", std::process::id()));
        write_private(&tmp, pem.as_bytes()).map_err(|e| fail(e.to_string()))?;
        let linked = std::fs::hard_link(&tmp, &path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => Ok((VapidKey::from_secret(&secret).map_err(fail)?, true)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let pem = std::fs::read_to_string(&path).map_err(|e| fail(e.to_string()))?;
                Ok((VapidKey::from_pem(&pem).map_err(fail)?, false))
            }
            Err(e) => Err(fail(e.to_string())),
        }
    }

    /// A key from PEM text: PKCS#8 (`PRIVATE KEY`, as written here) or SEC1 (`EC PRIVATE KEY`,
    /// as `openssl ecparam -genkey` writes it).
    pub fn from_pem(pem: &str) -> Result<VapidKey, String> {
        let secret = p256::SecretKey::from_pkcs8_pem(pem)
            .or_else(|_| p256::SecretKey::from_sec1_pem(pem))
            .map_err(|_| "not a P-256 private key in PEM form".to_owned())?;
        VapidKey::from_secret(&secret)
    }

    fn from_secret(secret: &p256::SecretKey) -> Result<VapidKey, String> {
        let der = secret.to_pkcs8_der().map_err(|e| e.to_string())?;
        let public = URL_SAFE_NO_PAD.encode(secret.public_key().to_encoded_point(false).as_bytes());
        Ok(VapidKey {
            signing: EncodingKey::from_ec_der(der.as_bytes()),
            public,
        })
    }

    /// The public key as browsers take it for `applicationServerKey`: the uncompressed point,
    /// base64url without padding.
    pub fn public_key(&self) -> &str {
        &self.public
    }

    /// The `Authorization` value for a push resource of `audience` (its origin):
    /// `vapid t=<ES256 JWT>, k=<public key>`.
    fn authorization(
        &self,
        audience: &str,
        subject: &str,
    ) -> Result<String, jsonwebtoken::errors::Error> {
        #[derive(Serialize)]
        struct Claims<'a> {
            aud: &'a str,
            exp: u64,
            sub: &'a str,
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let claims = Claims {
            aud: audience,
            exp: now + JWT_LIFETIME.as_secs(),
            sub: subject,
        };
        let token = jsonwebtoken::encode(&Header::new(Algorithm::ES256), &claims, &self.signing)?;
        Ok(format!("vapid t={token}, k={}", self.public))
    }
}

/// A random P-256 private key from the operating system's generator.
fn new_secret() -> Result<p256::SecretKey, String> {
    use rand::TryRngCore;
    loop {
        let mut bytes = p256::elliptic_curve::zeroize::Zeroizing::new([0u8; 32]);
        rand::rngs::OsRng
            .try_fill_bytes(bytes.as_mut())
            .map_err(|e| e.to_string())?;
        // Fails only for the (astronomically rare) values that are not a valid scalar.
        if let Ok(secret) = p256::SecretKey::from_slice(bytes.as_ref()) {
            return Ok(secret);
        }
    }
}

/// Checks a subscription a device sent. `Ok(None)` asks to remove the stored one (empty
/// endpoint); the error says what is wrong, without echoing the values. The endpoint must be
/// `https` to a public address unless `allow_private` (see [`super::endpoint`]).
pub fn parse_subscription(
    sub: &iris_protocol::WebPushSubscription,
    allow_private: bool,
) -> Result<Option<WebPushRow>, String> {
    let endpoint = sub.endpoint.trim();
    if endpoint.is_empty() {
        return Ok(None);
    }
    if endpoint.len() > MAX_ENDPOINT {
        return Err(format!("endpoint longer than {MAX_ENDPOINT} bytes"));
    }
    let url = Url::parse(endpoint).map_err(|_| "endpoint is not a URL".to_owned())?;
    check_registration(&url, allow_private)?;
    origin(&url)?;
    decode_public(&sub.p256dh)?;
    decode_auth(&sub.auth)?;
    Ok(Some(WebPushRow {
        endpoint: endpoint.to_owned(),
        p256dh: sub.p256dh.trim().to_owned(),
        auth: sub.auth.trim().to_owned(),
    }))
}

/// The origin of a push resource, the JWT's `aud`.
fn origin(url: &Url) -> Result<String, String> {
    if url.host_str().is_none_or(str::is_empty) {
        return Err("endpoint has no host".to_owned());
    }
    Ok(url.origin().ascii_serialization())
}

/// Base64url as browsers write it; padding and the standard alphabet are tolerated.
fn base64url(text: &str) -> Option<Vec<u8>> {
    let clean: String = text
        .trim()
        .trim_end_matches('=')
        .chars()
        .map(|c| {
            if c == '+' {
                '-'
            } else if c == '/' {
                '_'
            } else {
                c
            }
        })
        .collect();
    URL_SAFE_NO_PAD.decode(clean).ok()
}

fn decode_public(p256dh: &str) -> Result<p256::PublicKey, String> {
    base64url(p256dh)
        .and_then(|bytes| p256::PublicKey::from_sec1_bytes(&bytes).ok())
        .ok_or_else(|| "p256dh is not a base64url P-256 public key".to_owned())
}

fn decode_auth(auth: &str) -> Result<web_push_native::Auth, String> {
    match base64url(auth) {
        Some(bytes) if bytes.len() == 16 => Ok(web_push_native::Auth::clone_from_slice(&bytes)),
        _ => Err("auth is not a base64url 16-byte secret".to_owned()),
    }
}

/// The Web Push backend: the VAPID key, the contact, and how long a push service keeps a push
/// for a browser that is offline.
pub struct WebPush {
    http: reqwest::Client,
    key: VapidKey,
    subject: String,
    ttl: Duration,
    allow_private: bool,
    /// Whether the owner was told that Safari needs a real contact (said once, and only when a
    /// push is actually going to Apple).
    told_contact: AtomicBool,
}

impl fmt::Debug for WebPush {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebPush")
            .field("key", &self.key)
            .field("subject", &self.subject)
            .finish_non_exhaustive()
    }
}

impl WebPush {
    /// Loads (or makes) the VAPID key in the data dir.
    pub(crate) fn load(
        cfg: &WebPushConfig,
        data_dir: &Path,
        http: reqwest::Client,
    ) -> Result<WebPush, PushError> {
        let (key, created) = VapidKey::load_or_create(data_dir)?;
        if created {
            tracing::info!(path = %data_dir.join(VAPID_FILE).display(), "generated the Web Push (VAPID) key pair");
        }
        Ok(WebPush {
            http,
            key,
            subject: cfg.subject.clone(),
            ttl: cfg.ttl,
            allow_private: cfg.allow_private_endpoints,
            told_contact: AtomicBool::new(false),
        })
    }

    /// The public key offered to browsers in `hello.ack`.
    pub fn public_key(&self) -> &str {
        self.key.public_key()
    }

    /// Sends one push to one subscription.
    pub(crate) async fn send(&self, sub: &WebPushRow, push: &PushContent) -> Outcome {
        // Checked when it was registered; a row that no longer parses can never be delivered to.
        let Ok(url) = Url::parse(&sub.endpoint) else {
            return Outcome::Unregistered;
        };
        if let Err(reason) = check_sending(&url, self.allow_private) {
            tracing::warn!(%reason, "dropping a Web Push subscription that may not be sent to");
            return Outcome::Unregistered;
        }
        if refuses_contact(&url, &self.subject) && !self.told_contact.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(
                subject = %self.subject,
                "a Safari device subscribed to Web Push, and Apple refuses this contact: set [push.webpush] subject to a mailto: or https: address"
            );
        }
        let (Ok(audience), Ok(public), Ok(auth)) = (
            origin(&url),
            decode_public(&sub.p256dh),
            decode_auth(&sub.auth),
        ) else {
            return Outcome::Unregistered;
        };
        let body = match web_push_native::encrypt(payload(push), &public, &auth) {
            Ok(body) => body,
            Err(e) => return Outcome::Rejected(format!("cannot encrypt the push: {e}")),
        };
        let authorization = match self.key.authorization(&audience, &self.subject) {
            Ok(a) => a,
            Err(e) => return Outcome::Rejected(format!("cannot sign the VAPID token: {e}")),
        };
        let Ok(mut authorization) = HeaderValue::from_str(&authorization) else {
            return Outcome::Rejected("the VAPID token is not a header value".into());
        };
        authorization.set_sensitive(true);
        let request = self
            .http
            .post(url)
            .header(AUTHORIZATION, authorization)
            .header(CONTENT_ENCODING, "aes128gcm")
            .header(CONTENT_TYPE, "application/octet-stream")
            .header("ttl", self.ttl.as_secs().to_string())
            .header(
                "urgency",
                if push.kind.needs_action() {
                    "high"
                } else {
                    "normal"
                },
            )
            .header("topic", topic(&push.collapse_key))
            .body(body);
        match request.send().await {
            Ok(response) => classify_response(response, &RULES).await,
            Err(e) if is_internal_address(&e) => {
                tracing::warn!(
                    "dropping a Web Push subscription whose host resolves to internal addresses"
                );
                Outcome::Unregistered
            }
            // The endpoint URL is a capability: errors are logged without it.
            Err(e) => transport_error(&RULES, e),
        }
    }
}

/// Whether the push service behind `url` refuses the VAPID contact `subject`: Apple's answers
/// a `localhost` contact with 403 BadJwtToken; the others accept it.
fn refuses_contact(url: &Url, subject: &str) -> bool {
    let apple = url
        .host_str()
        .is_some_and(|h| h == "push.apple.com" || h.ends_with(".push.apple.com"));
    apple && subject.to_ascii_lowercase().contains("localhost")
}

/// The decrypted payload the service worker reads: [`PushContent::payload`] as JSON, its text cut
/// when it would not fit.
fn payload(push: &PushContent) -> Vec<u8> {
    let mut value = push.payload();
    let mut bytes = json_bytes(&value);
    if bytes.len() > MAX_PLAINTEXT {
        // Only the text can be long (a chat name in the title, a notification's own title).
        value.title = excerpt(&push.title, 80);
        value.body = excerpt(&push.body, 160);
        bytes = json_bytes(&value);
        if bytes.len() > MAX_PLAINTEXT {
            value.title = "Iris".into();
            value.body = String::new();
            bytes = json_bytes(&value);
        }
    }
    bytes
}

/// A payload as JSON bytes (a struct of strings and numbers always serializes).
fn json_bytes(payload: &PushPayload) -> Vec<u8> {
    serde_json::to_vec(payload).unwrap_or_default()
}

/// The `Topic` of a lane's pushes (RFC 8030 §5.4): a push service keeps only the newest undelivered
/// push of a topic. A hash of the collapse key: 32 base64url characters, and no chat id shown to
/// the push service.
pub fn topic(collapse_key: &str) -> String {
    URL_SAFE_NO_PAD.encode(&Sha256::digest(collapse_key.as_bytes())[..24])
}

/// A short reason from a push service's error body (Apple's `reason`, Mozilla's `message`), for
/// the log.
fn service_error(body: &Value) -> ErrorBody {
    let reason = ["reason", "message", "error"]
        .iter()
        .find_map(|k| body.get(*k).and_then(Value::as_str));
    ErrorBody {
        code: reason.map(|text| excerpt(text, 120)).unwrap_or_default(),
        names_registration: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(endpoint: &str, p256dh: &str, auth: &str) -> iris_protocol::WebPushSubscription {
        iris_protocol::WebPushSubscription {
            endpoint: endpoint.into(),
            p256dh: p256dh.into(),
            auth: auth.into(),
        }
    }

    #[test]
    fn the_key_is_made_once_private_and_read_back() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let (made, created) = VapidKey::load_or_create(dir.path()).expect("made");
        assert!(created);
        let meta = std::fs::metadata(dir.path().join(VAPID_FILE)).expect("file");
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        let (read, created) = VapidKey::load_or_create(dir.path()).expect("read");
        assert!(!created);
        assert_eq!(read.public_key(), made.public_key());
        let point = URL_SAFE_NO_PAD
            .decode(made.public_key())
            .expect("base64url");
        assert_eq!(
            (point.len(), point[0]),
            (65, 4),
            "an uncompressed P-256 point"
        );
        assert_eq!(
            std::fs::read_dir(dir.path()).expect("dir").count(),
            1,
            "no temporary file left"
        );

        std::fs::write(dir.path().join(VAPID_FILE), "not a key").expect("write");
        let err = VapidKey::load_or_create(dir.path()).expect_err("a broken key is not replaced");
        assert!(err.to_string().contains("vapid.pem"), "{err}");
    }

    #[test]
    fn subscriptions_are_checked_before_they_are_stored() {
        let secret = new_secret().expect("key");
        let p256dh = URL_SAFE_NO_PAD.encode(secret.public_key().to_encoded_point(false).as_bytes());
        let auth = URL_SAFE_NO_PAD.encode([7u8; 16]);
        let ok = parse_subscription(&sub("https://push.example.com/x", &p256dh, &auth), false)
            .expect("valid");
        assert_eq!(
            ok.map(|r| r.endpoint).as_deref(),
            Some("https://push.example.com/x")
        );
        assert_eq!(
            parse_subscription(&sub("", "", ""), false),
            Ok(None),
            "an empty endpoint removes"
        );
        assert!(parse_subscription(
            &sub("http://127.0.0.1:9/x", &p256dh, &format!("{auth}==")),
            true
        )
        .is_ok());
        for (bad, what) in [
            (sub("http://push.example.com/x", &p256dh, &auth), "https"),
            (sub("https://push.example.com/x", "BAAA", &auth), "p256dh"),
            (sub("https://push.example.com/x", &p256dh, "AAAA"), "auth"),
            (sub("push.example.com", &p256dh, &auth), "URL"),
        ] {
            let err = parse_subscription(&bad, false).expect_err(what);
            assert!(err.contains(what), "{err}");
        }
    }

    #[test]
    fn the_audience_is_the_origin_with_its_port() {
        let url = Url::parse("https://push.example.com:8443/wpush/v2/abc?x=1").expect("url");
        assert_eq!(origin(&url).as_deref(), Ok("https://push.example.com:8443"));
        let url = Url::parse("https://fcm.googleapis.com/fcm/send/abc").expect("url");
        assert_eq!(origin(&url).as_deref(), Ok("https://fcm.googleapis.com"));
    }

    #[test]
    fn only_apple_is_said_to_refuse_a_localhost_contact() {
        let apple = Url::parse("https://web.push.apple.com/QGxyz").unwrap();
        let mozilla = Url::parse("https://updates.push.services.mozilla.com/wpush/v2/x").unwrap();
        let lookalike = Url::parse("https://push.apple.com.example/x").unwrap();
        assert!(refuses_contact(&apple, "mailto:admin@localhost"));
        assert!(!refuses_contact(&apple, "mailto:owner@example.org"));
        assert!(!refuses_contact(&mozilla, "mailto:admin@localhost"));
        assert!(!refuses_contact(&lookalike, "mailto:admin@localhost"));
    }

    #[test]
    fn topics_are_short_url_safe_and_per_lane() {
        let t = topic("iris-default");
        assert_eq!(t.len(), 32);
        assert!(t
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
        assert_ne!(t, topic("iris-other"));
    }
}
