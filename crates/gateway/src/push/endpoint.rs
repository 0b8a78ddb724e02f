//! Where Web Push may go. A subscription's endpoint comes from a device, so the gateway would
//! `POST` wherever a device points it: the endpoint must be an `https` URL of a public address.
//! Addresses that are private, loopback, link-local, shared (CGNAT), multicast, reserved or
//! unspecified are refused when the subscription is registered (an IP literal, or `localhost`),
//! and again when a push is sent: the Web Push client resolves host names only through
//! [`PublicOnly`], which drops every such address, so a name that later resolves to an internal
//! address (DNS rebinding) is never connected to. `[push.webpush] allow_private_endpoints` lifts
//! both checks (and allows plain `http` to such addresses), for a push service on the LAN and for
//! tests.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::Url;

/// Whether an address is reachable on the public internet (not internal to a host, a LAN or a
/// provider, and not a multicast, documentation or reserved address).
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public_v4(v4),
            None => is_public_v6(v6),
        },
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    let shared = a == 100 && (64..128).contains(&b); // 100.64.0.0/10, carrier-grade NAT
    let reserved = a >= 240 || a == 0; // 240.0.0.0/4 and "this network"
    let benchmarking = a == 198 && (b == 18 || b == 19); // 198.18.0.0/15
    let protocol = a == 192 && b == 0 && ip.octets()[2] == 0; // 192.0.0.0/24
    !(ip.is_private()
        || ip.is_loopback()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || shared
        || reserved
        || benchmarking
        || protocol)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    let documentation = first == 0x2001 && ip.segments()[1] == 0x0db8;
    let nat64 = first == 0x0064 && ip.segments()[1] == 0xff9b; // 64:ff9b::/96 embeds IPv4
                                                               // 2002::/16 (6to4) and 2001::/32 (Teredo) reach an IPv4 address through a relay, which may
                                                               // be an internal one; no push service lives there.
    let six_to_four = first == 0x2002;
    let teredo = first == 0x2001 && ip.segments()[1] == 0;
    let site_local = first & 0xffc0 == 0xfec0; // fec0::/10, deprecated, internal
    let discard = first == 0x0100 && ip.segments()[1..4] == [0, 0, 0]; // 100::/64
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || ip.is_unique_local()
        || ip.is_unicast_link_local()
        || documentation
        || nat64
        || six_to_four
        || teredo
        || site_local
        || discard
        || ip.to_ipv4().is_some_and(|v4| !is_public_v4(v4)))
}

/// The address an endpoint URL names literally, if it names one.
fn literal(url: &Url) -> Option<IpAddr> {
    match url.host()? {
        url::Host::Ipv4(ip) => Some(IpAddr::V4(ip)),
        url::Host::Ipv6(ip) => Some(IpAddr::V6(ip)),
        url::Host::Domain(_) => None,
    }
}

/// Whether a host name is this machine by definition (RFC 6761).
fn is_localhost(url: &Url) -> bool {
    let Some(url::Host::Domain(name)) = url.host() else {
        return false;
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost" || name.ends_with(".localhost")
}

/// Checks an endpoint when a device registers it: `https`, and not internal by its literal
/// address or by being `localhost`. `allow_private` accepts internal addresses, and plain `http`
/// to them.
pub fn check_registration(url: &Url, allow_private: bool) -> Result<(), String> {
    check_sending(url, allow_private)?;
    if is_localhost(url) && !allow_private {
        return Err(
            "endpoint must be a public address, not localhost (private, loopback and link-local addresses are refused)"
                .to_owned(),
        );
    }
    Ok(())
}

/// Checks an endpoint before a push is sent to it: the scheme and a literal address. Host names
/// are checked as they are resolved, by [`PublicOnly`], so that what is checked is what is
/// connected to.
pub fn check_sending(url: &Url, allow_private: bool) -> Result<(), String> {
    if url.host_str().is_none_or(str::is_empty) {
        return Err("endpoint has no host".to_owned());
    }
    let internal = literal(url).is_some_and(|ip| !is_public(ip));
    match url.scheme() {
        "https" => {}
        "http" if allow_private && (internal || is_localhost(url)) => {}
        _ => return Err("endpoint must be an https URL".to_owned()),
    }
    if internal && !allow_private {
        return Err(
            "endpoint must be a public address (private, loopback and link-local addresses are refused)"
                .to_owned(),
        );
    }
    Ok(())
}

/// Why a push endpoint's name was not connected to.
#[derive(Debug, thiserror::Error)]
#[error("the push endpoint's host resolves only to internal addresses")]
pub struct InternalAddress;

/// A resolver that keeps only public addresses: a host name that resolves to internal addresses
/// alone fails with [`InternalAddress`].
#[derive(Debug, Default)]
pub struct PublicOnly;

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> = found.into_iter().filter(|a| is_public(a.ip())).collect();
            if public.is_empty() {
                return Err(Box::new(InternalAddress) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(public.into_iter()) as Addrs)
        })
    }
}

/// Whether an error (anywhere in its chain of sources) is [`InternalAddress`].
pub fn is_internal_address(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if e.is::<InternalAddress>() {
            return true;
        }
        next = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).expect("url")
    }

    #[test]
    fn internal_addresses_are_not_public() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:10.0.0.1",
            "::ffff:127.0.0.1",
            "64:ff9b::a00:1",
            "2001:db8::1",
            "2002:7f00:1::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "fec0::1",
            "100::1",
        ] {
            assert!(!is_public(ip.parse().expect(ip)), "{ip}");
        }
        for ip in ["8.8.8.8", "142.250.74.110", "2a00:1450:4001:82b::200a"] {
            assert!(is_public(ip.parse().expect(ip)), "{ip}");
        }
    }

    #[test]
    fn registration_wants_https_to_a_public_address() {
        assert!(check_registration(&url("https://fcm.googleapis.com/fcm/send/x"), false).is_ok());
        for bad in [
            "http://push.example.com/x",
            "https://127.0.0.1/x",
            "https://[::1]:8443/x",
            "https://192.168.0.10/x",
            "https://169.254.169.254/latest",
            "https://[fe80::1]/x",
            "https://localhost/x",
            "https://push.localhost./x",
            "https://[::ffff:10.0.0.1]/x",
        ] {
            assert!(check_registration(&url(bad), false).is_err(), "{bad}");
        }
        // The switch: internal addresses, and plain http to them, for a LAN or a test.
        assert!(check_registration(&url("http://127.0.0.1:9/x"), true).is_ok());
        assert!(check_registration(&url("https://localhost/x"), true).is_ok());
        assert!(check_registration(&url("http://push.example.com/x"), true).is_err());
    }

    #[tokio::test]
    async fn names_resolving_to_internal_addresses_are_refused() {
        let name: Name = "localhost".parse().expect("name");
        match PublicOnly.resolve(name).await {
            Err(e) => assert!(is_internal_address(e.as_ref()), "{e}"),
            Ok(addrs) => panic!("resolved to {:?}", addrs.collect::<Vec<_>>()),
        }
    }
}
