//! The door guard: the credentials devices present (the shared token, a device token, a
//! pairing code), the throttle of failed `hello`s per address, and each device's send budget.
//!
//! Ground floor: imports nothing of the gateway above it.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use subtle::ConstantTimeEq;

use iris_store::{Store, StoreError};

use crate::config::{Limits, Secret};
use crate::credentials;

/// What a `hello` presented as its `token`, once checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// The shared token: the device is who it says it is.
    Shared,
    /// A device token of this device: the session is that device's, whatever id it claims.
    Device(String),
    /// An unspent, unexpired pairing code (its hash), to be spent by this `hello`.
    Code(String),
}

/// Why a `hello`'s token was refused.
#[derive(Debug)]
pub enum AuthFailure {
    /// Not a credential (anymore): the message tells the device which case it is.
    Refused(&'static str),
    /// The store could not say.
    Store(StoreError),
}

/// Checks credentials and budgets for every connection.
pub struct Guard {
    token: Secret,
    /// Whether the shared token signs devices in (`auth.shared_token`).
    shared_enabled: bool,
    limits: Limits,
    /// Failed `hello`s per address.
    auth_failures: Mutex<HashMap<IpAddr, VecDeque<Instant>>>,
    /// Send budget per credential (see [`Guard::take_send`]).
    send_buckets: Mutex<HashMap<String, TokenBucket>>,
    /// Budget of other state-changing requests per device (see [`Guard::take_request`]).
    request_buckets: Mutex<HashMap<String, TokenBucket>>,
}

impl Guard {
    /// A guard for this token and these limits.
    pub fn new(token: Secret, limits: Limits) -> Guard {
        Guard {
            token,
            shared_enabled: true,
            limits,
            auth_failures: Mutex::default(),
            send_buckets: Mutex::default(),
            request_buckets: Mutex::default(),
        }
    }

    /// Switches the shared token on or off (`auth.shared_token`).
    pub fn shared_token(mut self, enabled: bool) -> Guard {
        self.shared_enabled = enabled;
        self
    }

    /// Checks what a `hello` presented as its `token`: the shared token (compared in constant
    /// time, when it is switched on), else a device token or a pairing code, looked up in the
    /// store by their hash.
    ///
    /// `throttled`: the address failed too often. The shared token, the one secret short enough
    /// to guess, is then not compared at all, so a guess made while throttled is wasted even when
    /// it is right. Device tokens and codes carry 256 random bits and are still looked up.
    pub async fn authenticate(
        &self,
        store: &Store,
        presented: &str,
        now_ms: i64,
        throttled: bool,
    ) -> Result<Credential, AuthFailure> {
        let shared = !throttled && self.token_matches(presented);
        if shared && self.shared_enabled {
            return Ok(Credential::Shared);
        }
        let hash = credentials::hash(presented);
        if let Some(device) = store
            .device_of_token(&hash)
            .await
            .map_err(AuthFailure::Store)?
        {
            return Ok(Credential::Device(device));
        }
        if let Some(code) = store
            .pairing_code(&hash)
            .await
            .map_err(AuthFailure::Store)?
        {
            return match code.spent_at {
                Some(_) => Err(AuthFailure::Refused("pairing code already used")),
                None if code.expires_at <= now_ms => {
                    Err(AuthFailure::Refused("pairing code expired"))
                }
                None => Ok(Credential::Code(hash)),
            };
        }
        if shared {
            return Err(AuthFailure::Refused(
                "the shared token is switched off; pair this device with a pairing code",
            ));
        }
        Err(AuthFailure::Refused("invalid token"))
    }

    /// Whether the shared token signs devices in.
    pub fn shared_enabled(&self) -> bool {
        self.shared_enabled
    }

    /// The token devices authenticate with.
    pub fn token(&self) -> &Secret {
        &self.token
    }

    /// Whether `presented` is the token, compared in constant time.
    pub fn token_matches(&self, presented: &str) -> bool {
        presented
            .as_bytes()
            .ct_eq(self.token.expose().as_bytes())
            .into()
    }

    /// Whether this address has failed `hello` too often in the last minute.
    pub fn auth_blocked(&self, addr: IpAddr) -> bool {
        let mut map = self.auth_failures.lock().expect("auth lock");
        let Some(times) = map.get_mut(&throttle_key(addr)) else {
            return false;
        };
        let window = Instant::now() - Duration::from_secs(60);
        while times.front().is_some_and(|t| *t < window) {
            times.pop_front();
        }
        times.len() >= self.limits.auth_failures_per_minute as usize
    }

    /// Records a failed `hello` from this address.
    pub fn record_auth_failure(&self, addr: IpAddr) {
        let mut map = self.auth_failures.lock().expect("auth lock");
        if map.len() > 10_000 {
            // Bound the table: old entries of other addresses go first.
            let window = Instant::now() - Duration::from_secs(60);
            map.retain(|_, times| times.back().is_some_and(|t| *t >= window));
        }
        map.entry(throttle_key(addr))
            .or_default()
            .push_back(Instant::now());
    }

    /// Takes one send from the budget of the connection's credential; false when it is
    /// exhausted. `device_id` is the session's device, which follows from the credential: a
    /// device token's own device (whatever id the `hello` claimed), or the id a shared-token
    /// or pairing-code `hello` chose. So a device holding its own token cannot reset its budget
    /// by claiming another id.
    pub fn take_send(&self, device_id: &str) -> bool {
        let per_minute = self.limits.sends_per_minute;
        let mut map = self.send_buckets.lock().expect("bucket lock");
        map.entry(device_id.to_owned())
            .or_insert_with(|| TokenBucket::new(per_minute))
            .take()
    }
}

/// The key the failed-`hello` throttle and the per-address connection cap count an address
/// under: an IPv4 address itself, an IPv6 address by its /64 (one subscriber's network holds
/// 2^64 addresses, free to rotate).
pub fn throttle_key(addr: IpAddr) -> IpAddr {
    match addr.to_canonical() {
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(std::net::Ipv6Addr::from(bits))
        }
        v4 => v4,
    }
}

impl Guard {
    /// Takes one request that changes something (every durable request but `message.send`,
    /// which has its own budget) from the device's budget; false when it is exhausted.
    pub fn take_request(&self, device_id: &str) -> bool {
        let per_minute = self.limits.requests_per_minute;
        let mut map = self.request_buckets.lock().expect("bucket lock");
        if map.len() > 10_000 {
            // Full buckets hold nothing worth keeping.
            map.retain(|_, bucket| !bucket.is_full());
        }
        map.entry(device_id.to_owned())
            .or_insert_with(|| TokenBucket::new(per_minute))
            .take()
    }
}

/// A token bucket: `capacity` sends at once, refilled at `per_minute`.
#[derive(Debug)]
pub struct TokenBucket {
    tokens: f64,
    capacity: f64,
    per_sec: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket allowing `per_minute` sends a minute, in bursts of up to a quarter of that.
    pub fn new(per_minute: u32) -> Self {
        let capacity = f64::from(per_minute.max(4)) / 4.0;
        TokenBucket {
            tokens: capacity,
            capacity,
            per_sec: f64::from(per_minute) / 60.0,
            last: Instant::now(),
        }
    }

    /// Whether the bucket has refilled completely.
    pub fn is_full(&self) -> bool {
        let refilled = self.tokens + self.last.elapsed().as_secs_f64() * self.per_sec;
        refilled >= self.capacity
    }

    /// Takes one token; false when the bucket is empty.
    pub fn take(&mut self) -> bool {
        let now = Instant::now();
        self.tokens = (self.tokens + now.duration_since(self.last).as_secs_f64() * self.per_sec)
            .min(self.capacity);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The address a request comes from, as the failed-`hello` throttle counts it: the peer, or —
/// when the peer is a trusted reverse proxy — the client it names in `X-Forwarded-For`. The list
/// is read from the right (each proxy appends the address it saw); the first entry that is not a
/// trusted proxy is the client. Entries further left could be made up by the client and are never
/// used.
pub fn client_ip(peer: IpAddr, forwarded_for: Option<&str>, trusted: &[IpAddr]) -> IpAddr {
    let is_trusted = |ip: &IpAddr| is_trusted_proxy(*ip, trusted);
    if !is_trusted(&peer) {
        return peer;
    }
    let Some(list) = forwarded_for else {
        return peer;
    };
    let mut client = peer;
    for entry in list.rsplit(',') {
        match entry.trim().parse::<IpAddr>() {
            Ok(ip) => {
                client = ip.to_canonical();
                if !is_trusted(&client) {
                    return client;
                }
            }
            // Garbage in the list: the last address read is the best one known.
            Err(_) => return client,
        }
    }
    client
}

/// Whether a request comes from the gateway's own machine: its peer is a loopback address and no
/// proxy forwarded it (a reverse proxy on the same machine names the client in `X-Forwarded-For`,
/// `Forwarded` or `X-Real-IP`, and the strangers behind it are not the owner). The failed-`hello`
/// throttle never withholds the shared token from such a request: everyone there (the owner, the
/// agent the gateway runs) shares the address, so counting could only lock the owner out.
/// Guessing the token from there is as hard as its length makes it (at least 16 characters: 64
/// bits even in hex; a generated one is 192 random bits; a confined agent cannot read the token
/// file). Once a device is paired, the shared token signs in only from here.
pub fn is_local(client: IpAddr, headers: &axum::http::HeaderMap) -> bool {
    let forwarded = ["x-forwarded-for", "forwarded", "x-real-ip"]
        .iter()
        .any(|h| headers.contains_key(*h));
    client.to_canonical().is_loopback() && !forwarded
}

/// Whether `ip` is one of the `trusted_proxies` (an IPv4-mapped IPv6 address as its IPv4).
pub fn is_trusted_proxy(ip: IpAddr, trusted: &[IpAddr]) -> bool {
    trusted.contains(&ip.to_canonical())
}

/// [`origin_allowed`] for a request's `Origin` and `Host` headers under `config`.
pub fn request_origin_allowed(
    headers: &axum::http::HeaderMap,
    config: &crate::config::Config,
) -> bool {
    use axum::http::header;
    let header = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    origin_allowed(
        header(header::ORIGIN),
        header(header::HOST),
        config.public_url.as_deref(),
        &config.allowed_origins,
    )
}

/// Whether a browser page of `origin` may open `/ws`. No `Origin` (native apps and command-line
/// clients send none) passes; so do the gateway's own origin (the request's `Host`), the origin
/// of the configured `public_url`, and the configured allow-list. Anything else — another site's
/// page, `null` — is refused.
pub fn origin_allowed(
    origin: Option<&str>,
    host: Option<&str>,
    public_url: Option<&str>,
    allowed: &[String],
) -> bool {
    let Some(origin) = origin else {
        return true;
    };
    let origin = origin.trim().trim_end_matches('/').to_ascii_lowercase();
    let Some((_, origin_host)) = origin.split_once("://") else {
        return false;
    };
    if host.is_some_and(|h| h.trim().eq_ignore_ascii_case(origin_host)) {
        return true;
    }
    if let Some(url) = public_url {
        let url = url.to_ascii_lowercase();
        let base = match url.split_once("://") {
            Some((scheme, rest)) => format!("{scheme}://{}", rest.split('/').next().unwrap_or("")),
            None => url,
        };
        if base == origin {
            return true;
        }
    }
    allowed.contains(&origin)
}

/// The names a request's `Host` may carry: the host of `public_url`, those of
/// `allowed_origins`, `localhost` and this machine's host name (with and without `.local`).
/// Any IP address passes too: a name an attacker controls can be rebound to the gateway's
/// address (DNS rebinding), an address cannot.
#[derive(Debug, Clone, Default)]
pub struct KnownHosts {
    names: Vec<String>,
}

impl KnownHosts {
    /// The names this configuration answers to.
    pub fn new(
        public_url: Option<&str>,
        allowed_origins: &[String],
        host_name: Option<&str>,
    ) -> Self {
        let mut names = vec!["localhost".to_owned()];
        let urls = public_url
            .into_iter()
            .chain(allowed_origins.iter().map(String::as_str));
        for url in urls {
            let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
            let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
            if let Some(name) = host_name_of(authority) {
                names.push(name);
            }
        }
        if let Some(name) = host_name.map(|n| n.trim().to_ascii_lowercase()) {
            if !name.is_empty() {
                names.push(format!("{name}.local"));
                names.push(name);
            }
        }
        KnownHosts { names }
    }

    /// Whether a request with this `Host` may be served. No `Host` (HTTP/1.0 tools; browsers
    /// always send one) passes.
    pub fn allows(&self, host: Option<&str>) -> bool {
        let Some(host) = host else {
            return true;
        };
        let host = host.trim();
        if host.starts_with('[') {
            // An IPv6 literal, `[addr]` or `[addr]:port`.
            return host
                .get(1..)
                .and_then(|h| h.split_once(']'))
                .is_some_and(|(addr, _)| addr.parse::<std::net::Ipv6Addr>().is_ok());
        }
        match host_name_of(host) {
            Some(name) if name.parse::<std::net::Ipv4Addr>().is_ok() => true,
            Some(name) => self.names.contains(&name),
            None => false,
        }
    }
}

/// The lowercase name of `host[:port]` without a trailing dot; `None` when it is malformed.
fn host_name_of(authority: &str) -> Option<String> {
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let name = match authority.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        Some(_) => return None,
        None => authority,
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_trusted_proxy_names_the_client() {
        let proxy: IpAddr = "10.0.0.1".parse().expect("ip");
        let client: IpAddr = "203.0.113.9".parse().expect("ip");
        let xff = Some("198.51.100.1, 203.0.113.9");
        assert_eq!(client_ip(proxy, xff, &[]), proxy, "untrusted peer");
        assert_eq!(
            client_ip(proxy, xff, &[proxy]),
            client,
            "rightmost untrusted"
        );
        assert_eq!(client_ip(proxy, None, &[proxy]), proxy, "no header");
        assert_eq!(client_ip(proxy, Some("junk"), &[proxy]), proxy, "garbage");
        let chain = Some("203.0.113.9, 10.0.0.1");
        assert_eq!(client_ip(proxy, chain, &[proxy]), client, "two proxies");
    }

    #[test]
    fn origins_of_other_sites_are_refused() {
        let host = Some("gw.local:8765");
        let public = Some("https://iris.example.com/prefix");
        let allowed = vec!["https://app.example.net".to_owned()];
        let ok = |o: Option<&str>| origin_allowed(o, host, public, &allowed);
        assert!(ok(None), "native app");
        assert!(ok(Some("http://gw.local:8765")), "same origin");
        assert!(ok(Some("https://IRIS.example.com")), "public_url");
        assert!(ok(Some("https://app.example.net")), "allow-list");
        assert!(!ok(Some("https://evil.example")), "other site");
        assert!(!ok(Some("null")), "opaque origin");
        assert!(!ok(Some("http://gw.local:8766")), "other port");
        assert!(
            !ok(Some("https://iris.example.com.evil.example")),
            "lookalike"
        );
    }

    #[test]
    fn only_known_names_and_addresses_pass_as_host() {
        let allowed = vec!["https://app.example.net".to_owned()];
        let hosts = KnownHosts::new(Some("https://iris.example.com/chat"), &allowed, Some("box"));
        for ok in [
            None,
            Some("127.0.0.1:8765"),
            Some("192.168.1.20:8765"),
            Some("[::1]:8765"),
            Some("localhost:8765"),
            Some("IRIS.example.com"),
            Some("iris.example.com.:443"),
            Some("app.example.net"),
            Some("box:8765"),
            Some("box.local:8765"),
        ] {
            assert!(hosts.allows(ok), "{ok:?}");
        }
        for bad in [
            "rebind.evil.example:8765",
            "iris.example.com.evil.example",
            "127.0.0.1.evil.example",
            "[::1",
            "localhost:80x",
            "",
        ] {
            assert!(!hosts.allows(Some(bad)), "{bad:?}");
        }
    }
}
