//! The gateway on the LAN: an mDNS/DNS-SD announcement of `_iris._tcp.local.`, so that the Iris
//! app can list the gateways nearby, and `iris-gateway discover`, which lists them the same way.
//!
//! A gateway is announced when it listens beyond loopback and `mdns` is not switched off: on
//! every interface for an unspecified address (`0.0.0.0`: IPv4 only, `[::]`: both), else on the
//! interface of the address it listens on. The TXT record holds what a client needs to choose a
//! gateway and connect, never a secret: `id` (the gateway's id, kept in the store, so an app knows
//! a gateway it paired with under a new address), `v` (the protocol version), `tls` (`1` when it
//! serves TLS) and `path` (`/ws`). Finding a gateway grants nothing: a device still needs a
//! pairing code. Goodbye packets withdraw the announcement at shutdown.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr, SocketAddrV6, TcpStream};
use std::time::{Duration, Instant};

use iris_store::{Store, StoreError};
use mdns_sd::{IfKind, ScopedIp, ServiceDaemon, ServiceEvent, ServiceInfo};

use crate::config::Config;

/// The DNS-SD service type.
pub const SERVICE: &str = "_iris._tcp.local.";
/// The `meta` key of the gateway's id.
const ID_KEY: &str = "gateway_id";

/// The gateway's id: made on the first start and kept in the store (a backup carries it).
pub async fn gateway_id(store: &Store) -> Result<String, StoreError> {
    if let Some(id) = store.get_meta(ID_KEY).await? {
        return Ok(id);
    }
    let id = crate::ids::new_id("gw_");
    store
        .write(move |tx| match tx.get_meta(ID_KEY)? {
            Some(kept) => Ok(kept),
            None => tx.set_meta(ID_KEY, &id).map(|_| id),
        })
        .await
}

/// A live announcement; [`Announcement::stop`] withdraws it.
pub struct Announcement {
    daemon: ServiceDaemon,
    fullname: String,
}

impl Announcement {
    /// Announces the gateway as `config` has it (after binding: `listen` names the real port);
    /// `None` when it is not to be announced or the network refuses (logged).
    pub fn start(config: &Config, id: &str) -> Option<Announcement> {
        let ip = config.listen.ip();
        if !config.mdns || ip.is_loopback() {
            return None;
        }
        match announce(config, id) {
            Ok(announcement) => {
                tracing::info!(
                    name = %announcement.fullname.trim_end_matches(SERVICE).trim_end_matches('.'),
                    id,
                    service = SERVICE,
                    "announced on the LAN over mDNS"
                );
                Some(announcement)
            }
            Err(e) => {
                tracing::warn!(error = %e, "the gateway could not be announced on the LAN (mDNS); devices can still be paired with a link. Set `mdns = false` to stop trying");
                None
            }
        }
    }

    /// Withdraws the announcement (goodbye packets, at most a second) and stops the daemon.
    pub async fn stop(self) {
        if let Ok(done) = self.daemon.unregister(&self.fullname) {
            let _ = tokio::time::timeout(Duration::from_secs(1), done.recv_async()).await;
        }
        let _ = self.daemon.shutdown();
    }
}

fn announce(config: &Config, id: &str) -> Result<Announcement, mdns_sd::Error> {
    let daemon = ServiceDaemon::new()?;
    daemon.disable_interface(vec![IfKind::LoopbackV4, IfKind::LoopbackV6])?;
    let ip = config.listen.ip();
    // The short id keeps two gateways on one machine apart, and the host name away from the
    // machine's own `.local` name that another responder may answer for.
    let short: String = id.trim_start_matches("gw_").chars().take(6).collect();
    let instance = match crate::config::host_name() {
        Some(host) => format!("Iris on {} ({short})", printable_label(&host)),
        None => format!("Iris ({short})"),
    };
    let host = format!("iris-{short}.local.");
    let tls = if config.tls.is_some() { "1" } else { "0" };
    let txt = [("id", id), ("v", "1"), ("tls", tls), ("path", "/ws")];
    let port = config.listen.port();
    let mut info = match ip.is_unspecified() {
        true => ServiceInfo::new(SERVICE, &instance, &host, "", port, &txt[..])?.enable_addr_auto(),
        false => ServiceInfo::new(SERVICE, &instance, &host, ip, port, &txt[..])?,
    };
    info.set_interfaces(match ip {
        IpAddr::V4(v4) if v4.is_unspecified() => vec![IfKind::IPv4],
        ip if ip.is_unspecified() => vec![IfKind::All],
        ip => vec![IfKind::Addr(ip)],
    });
    let fullname = info.get_fullname().to_owned();
    daemon.register(info)?;
    Ok(Announcement { daemon, fullname })
}

/// A host name as a DNS-SD instance label: printable, at most 40 characters.
fn printable_label(name: &str) -> String {
    let name: String = name.chars().filter(|c| !c.is_control()).take(40).collect();
    name.split('.').next().unwrap_or_default().to_owned()
}

/// A gateway found on the LAN.
#[derive(Debug, Clone)]
pub struct Found {
    /// Its instance name, e.g. `Iris on homeserver (1a2b3c)`.
    pub name: String,
    /// Its id (`gw_…`).
    pub id: String,
    /// Whether it serves TLS.
    pub tls: bool,
    /// The port devices connect to.
    pub port: u16,
    /// Its addresses (IPv6 link-local ones with their interface, `fe80::1%eth0`).
    pub addresses: Vec<String>,
    /// Whether it accepted a TCP connection from here at one of them (within 2 s).
    pub answers: bool,
}

impl Found {
    /// The WebSocket URL of its first address.
    pub fn ws_url(&self) -> Option<String> {
        let scheme = if self.tls { "wss" } else { "ws" };
        let addr = self.addresses.first()?;
        let host = match addr.contains(':') {
            true => format!("[{}]", addr.replace('%', "%25")),
            false => addr.clone(),
        };
        Some(format!("{scheme}://{host}:{}/ws", self.port))
    }
}

/// Looks for gateways for `wait`, calling `each` once for every gateway as it is found.
pub fn discover(wait: Duration, mut each: impl FnMut(&Found)) -> Result<usize, mdns_sd::Error> {
    let daemon = ServiceDaemon::new()?;
    let events = daemon.browse(SERVICE)?;
    let deadline = Instant::now() + wait;
    let mut seen = HashSet::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        let Ok(event) = events.recv_timeout(left) else {
            break;
        };
        let ServiceEvent::ServiceResolved(service) = event else {
            continue;
        };
        let Some(id) = service.get_property_val_str("id") else {
            continue;
        };
        if !seen.insert(service.fullname.clone()) {
            continue;
        }
        let mut scoped: Vec<&ScopedIp> = service.addresses.iter().collect();
        // IPv4 first: the address a phone most likely reaches.
        scoped.sort_by_key(|a| (a.to_ip_addr().is_ipv6(), a.to_string()));
        let answers = scoped
            .iter()
            .any(|a| connects(socket_addr(a, service.port)));
        each(&Found {
            name: unescape(
                service
                    .fullname
                    .trim_end_matches(SERVICE)
                    .trim_end_matches('.'),
            ),
            id: crate::credentials::printable(id),
            tls: service.get_property_val_str("tls") == Some("1"),
            port: service.port,
            addresses: scoped.iter().map(|a| a.to_string()).collect(),
            answers,
        });
    }
    let _ = daemon.shutdown();
    Ok(seen.len())
}

/// Where to connect to `ip` (a link-local IPv6 address through the interface it was found on).
fn socket_addr(ip: &ScopedIp, port: u16) -> SocketAddr {
    match ip {
        ScopedIp::V6(v6) => SocketAddrV6::new(*v6.addr(), port, 0, v6.scope_id().index).into(),
        other => SocketAddr::new(other.to_ip_addr(), port),
    }
}

fn connects(addr: SocketAddr) -> bool {
    TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_ok()
}

/// An instance name as DNS escapes it (`\032` for a space, `\.` for a dot), made readable.
fn unescape(name: &str) -> String {
    let mut out = String::new();
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let digits: String = std::iter::from_fn(|| chars.next_if(char::is_ascii_digit))
            .take(3)
            .collect();
        match digits.parse::<u8>() {
            Ok(byte) if digits.len() == 3 => out.push(char::from(byte)),
            _ => {
                out.push_str(&digits);
                if digits.is_empty() {
                    out.extend(chars.next());
                }
            }
        }
    }
    crate::credentials::printable(&out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_instance_names_read_as_they_were_written() {
        assert_eq!(
            unescape(r"Iris\032on\032box\032(1a2b3c)"),
            "Iris on box (1a2b3c)"
        );
        assert_eq!(unescape(r"a\.b\\c"), r"a.b\c");
        assert_eq!(unescape("plain"), "plain");
    }

    #[test]
    fn a_link_local_address_keeps_its_interface_in_the_url() {
        let found = Found {
            name: "Iris".into(),
            id: "gw_1".into(),
            tls: true,
            port: 8765,
            addresses: vec!["fe80::1%veth0".into()],
            answers: true,
        };
        assert_eq!(
            found.ws_url().as_deref(),
            Some("wss://[fe80::1%25veth0]:8765/ws")
        );
    }

    #[test]
    fn a_gateway_on_loopback_or_switched_off_is_not_announced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = Config::for_tests(dir.path(), "test-token-0123456789");
        assert!(Announcement::start(&config, "gw_1").is_none(), "loopback");
        config.listen = "[::]:0".parse().expect("address");
        config.mdns = false;
        assert!(
            Announcement::start(&config, "gw_1").is_none(),
            "switched off"
        );
    }
}
