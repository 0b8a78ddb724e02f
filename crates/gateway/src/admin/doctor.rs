//! `iris-gateway doctor`: what a person setting the gateway up gets wrong, checked from the
//! gateway's side and through `public_url` (the way a phone comes in), one line per finding with
//! what to do. Failures make the command exit 1, so scripts can use it; warnings do not.
//!
//! Checked: the data dir and its secrets are private; plain HTTP is not served on a network
//! address; devices can reach the address at all (not this machine's loopback only); the certificate the gateway serves loads and is not near expiry (with ACME: its
//! expiry, when it is due for renewal, and the last failed order); `public_url`
//! reaches a gateway (`/healthz`) and a WebSocket upgrade through it succeeds with the web
//! client's `Origin` (a proxy that drops `Upgrade`, a host or origin the gateway refuses); a
//! proxy in front passes the client's address (`X-Forwarded-For`) and `trusted_proxies` names
//! it, so that the failed-hello throttle counts devices and not the proxy; each
//! agent starts and answers ACP `initialize`; no secret lies where an agent can reach it (the
//! configuration file holding the token while nothing confines the agent, a secret file or the
//! data dir inside an agent's working directory); the shared token, still on once devices are paired;
//! push credentials are readable; the transcription service of voice notes answers.

use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use crate::config::tls::TlsSource;
use crate::config::Config;

/// How long one network check or an agent's start may take.
const PATIENCE: Duration = Duration::from_secs(20);
/// A certificate expiring sooner than this is worth a warning.
const RENEW_WITHIN_DAYS: i64 = 14;

/// How a finding weighs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// As it should be.
    Ok,
    /// Works, but the owner should act.
    Warn,
    /// Broken: the command exits 1.
    Fail,
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Its weight.
    pub level: Level,
    /// What was found.
    pub what: String,
    /// What to do about it (for warnings and failures).
    pub fix: Option<String>,
}

impl Finding {
    fn ok(what: impl Into<String>) -> Finding {
        Finding {
            level: Level::Ok,
            what: what.into(),
            fix: None,
        }
    }

    fn warn(what: impl Into<String>, fix: impl Into<String>) -> Finding {
        Finding {
            level: Level::Warn,
            what: what.into(),
            fix: Some(fix.into()),
        }
    }

    fn fail(what: impl Into<String>, fix: impl Into<String>) -> Finding {
        Finding {
            level: Level::Fail,
            what: what.into(),
            fix: Some(fix.into()),
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tag = match self.level {
            Level::Ok => "ok  ",
            Level::Warn => "warn",
            Level::Fail => "FAIL",
        };
        write!(f, "{tag}  {}", self.what)?;
        if let Some(fix) = &self.fix {
            write!(f, ": {fix}")?;
        }
        Ok(())
    }
}

/// `iris-gateway doctor`: runs every check and prints one line per finding; whether none failed.
/// `trust`: a certificate file to trust besides the public roots (a proxy's own, self-signed).
pub fn report(config: &Config, trust: Option<&Path>) -> bool {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let found = rt.block_on(run(config, trust));
    for finding in &found {
        println!("{finding}");
    }
    !found.iter().any(|f| f.level == Level::Fail)
}

/// Runs every check (`trust` as for [`report`]).
pub async fn run(config: &Config, trust: Option<&Path>) -> Vec<Finding> {
    let mut found = private_files(&config.data_dir);
    found.extend(exposure(config));
    found.extend(loopback_only(config));
    found.extend(certificate(config));
    found.extend(reach(config, trust).await);
    found.extend(agents(config).await);
    found.extend(credentials(config).await);
    found.extend(transcription(config).await);
    found
}

/// The data dir and the secrets in it: nobody but the owner may read them.
fn private_files(dir: &Path) -> Vec<Finding> {
    let Ok(meta) = std::fs::metadata(dir) else {
        return vec![Finding::warn(
            format!("data dir {} does not exist yet", dir.display()),
            "it is made (mode 0700) by the first `iris-gateway serve`",
        )];
    };
    let mut found = Vec::new();
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        found.push(Finding::fail(
            format!(
                "data dir {} is open to other users (mode {mode:04o})",
                dir.display()
            ),
            format!("chmod 700 {}", dir.display()),
        ));
    } else {
        found.push(Finding::ok(format!(
            "data dir {} is private",
            dir.display()
        )));
    }
    let secrets = [
        "token",
        "admin.key",
        "vapid.pem",
        "iris.db",
        "tls/key.pem",
        "acme/key.pem",
        "acme/account.json",
    ];
    for name in secrets {
        let path = dir.join(name);
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            found.push(Finding::fail(
                format!(
                    "{} is readable by other users (mode {mode:04o})",
                    path.display()
                ),
                format!("chmod 600 {}", path.display()),
            ));
        }
    }
    found
}

/// Plain HTTP on an address other machines reach carries tokens and messages in the clear.
fn exposure(config: &Config) -> Option<Finding> {
    let https = config
        .public_url
        .as_deref()
        .is_some_and(|u| u.starts_with("https://"));
    if config.tls.is_some() || https || config.listen.ip().is_loopback() {
        return None;
    }
    Some(Finding::warn(
        format!("plain HTTP on {}, a network address", config.listen),
        "tokens and messages cross the network unencrypted; serve TLS (--tls-self-signed on a \
         LAN, --tls-cert/--tls-key) or put a TLS reverse proxy in front and set public_url",
    ))
}

/// Devices come to an address only this machine has: the gateway works, but no phone reaches
/// it.
fn loopback_only(config: &Config) -> Option<Finding> {
    let base = config.public_url();
    let host = url::Url::parse(&base).ok()?.host()?.to_owned();
    let loopback = match host {
        url::Host::Domain(name) => name == "localhost" || name.ends_with(".localhost"),
        url::Host::Ipv4(ip) => ip.is_loopback(),
        url::Host::Ipv6(ip) => ip.is_loopback(),
    };
    loopback.then(|| {
        Finding::warn(
            format!("{base} is on this machine only: no phone or other computer can reach it"),
            "to pair a phone, listen on the LAN (--listen 0.0.0.0:8765, with --tls-self-signed) \
             or put a TLS reverse proxy in front and set public_url; see the README's \
             \"Away from home\"",
        )
    })
}

/// The certificate of `[tls]`: it loads, and it is not about to expire.
fn certificate(config: &Config) -> Option<Finding> {
    let cert = match &config.tls.as_ref()?.source {
        TlsSource::Acme(acme) => return Some(acme_state(config, acme)),
        TlsSource::Files { cert, .. } => cert.clone(),
        TlsSource::SelfSigned => config
            .data_dir
            .join(crate::tls::SELF_SIGNED_DIR)
            .join("cert.pem"),
    };
    use rustls_pki_types::pem::PemObject;
    let leaf = rustls_pki_types::CertificateDer::pem_file_iter(&cert)
        .ok()
        .and_then(|mut certs| certs.next())
        .and_then(Result::ok);
    let Some(leaf) = leaf else {
        return Some(match config.tls.as_ref()?.source {
            TlsSource::SelfSigned => Finding::warn(
                format!("no self-signed certificate in {} yet", cert.display()),
                "it is made by the first `iris-gateway serve --tls-self-signed`",
            ),
            _ => Finding::fail(
                format!("{} holds no PEM certificate", cert.display()),
                "point tls.cert at the full chain (e.g. fullchain.pem)",
            ),
        });
    };
    let Ok((_, parsed)) = x509_parser::parse_x509_certificate(&leaf) else {
        return Some(Finding::fail(
            format!("{} is not a certificate that can be read", cert.display()),
            "replace it with the PEM chain your certificate authority issued",
        ));
    };
    let until = parsed.validity().not_after;
    let days = (until.timestamp() - crate::ids::now_ms() / 1000) / 86_400;
    Some(if days < 0 {
        Finding::fail(
            format!("the certificate {} expired on {until}", cert.display()),
            "renew it; the gateway picks up the new files by itself",
        )
    } else if days < RENEW_WITHIN_DAYS {
        Finding::warn(
            format!(
                "the certificate {} expires in {days} days ({until})",
                cert.display()
            ),
            "renew it now; the gateway picks up the new files by itself",
        )
    } else {
        Finding::ok(format!("certificate valid for {days} more days ({until})"))
    })
}

/// Where the ACME certificate stands: its expiry and renewal, and the last failed order.
fn acme_state(config: &Config, acme: &crate::config::tls::AcmeConfig) -> Finding {
    let names = acme.domains.join(", ");
    let status = crate::acme::store::status_in(&config.data_dir).unwrap_or_default();
    let held = std::fs::read(
        config
            .data_dir
            .join(crate::acme::store::DIR)
            .join("cert.pem"),
    )
    .ok()
    .and_then(|pem| crate::acme::Validity::of_pem(&pem));
    let now = crate::ids::now_ms();
    let when = |ms: i64| {
        chrono::DateTime::from_timestamp_millis(ms)
            .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
            .unwrap_or_default()
    };
    let fix = "the names must lead to this machine, on port 443 (tls-alpn-01) or 80 (http-01, \
               redirect_listen); the gateway tries again by itself (see its log)";
    let failed = status.last_error.as_ref().map(|e| {
        format!(
            "the last ACME order for {names} failed at {}: {e}",
            when(status.last_error_ms.unwrap_or(now))
        )
    });
    match (held, failed) {
        (None, None) => Finding::warn(
            format!("no ACME certificate for {names} yet"),
            "`iris-gateway serve` orders it at start",
        ),
        (None, Some(failed)) => Finding::fail(failed, fix),
        (Some(v), _) if v.until_ms < now => Finding::fail(
            format!(
                "the ACME certificate for {names} expired at {}",
                when(v.until_ms)
            ),
            fix,
        ),
        (Some(v), Some(failed)) => Finding::warn(
            format!(
                "{failed}; the certificate in service is valid until {}",
                when(v.until_ms)
            ),
            fix,
        ),
        (Some(v), None) => {
            let renewed = status
                .renewed_ms
                .map(|ms| format!(", renewed {}", when(ms)))
                .unwrap_or_default();
            Finding::ok(format!(
                "ACME certificate for {names} valid until {}{renewed}; renewal due {}",
                when(v.until_ms),
                when(v.renew_at_ms(acme.renew_before))
            ))
        }
    }
}

/// `public_url` reaches this gateway, and a WebSocket upgrade through it is let in.
async fn reach(config: &Config, trust: Option<&Path>) -> Vec<Finding> {
    let base = config.public_url();
    let client = match http_client(config, trust) {
        Ok(client) => client,
        Err(e) => {
            return vec![Finding::fail(
                format!("no HTTP client: {e}"),
                "--trust-cert names a PEM certificate file",
            )]
        }
    };
    let health = format!("{base}/healthz");
    let forwarded = match client.get(&health).send().await {
        Ok(r) if r.status().is_success() => r
            .json::<serde_json::Value>()
            .await
            .ok()
            .and_then(|v| v["forwarded"].as_str().map(str::to_owned)),
        Ok(r) => {
            return vec![Finding::fail(
                format!("{health} answered {}", r.status()),
                "public_url must lead to this gateway (a proxy passing every path to it)",
            )]
        }
        Err(e) => {
            return vec![Finding::fail(
                format!("cannot reach {health}: {}", crate::text::error_chain(&e)),
                "is the gateway running (`iris-gateway serve`), and does public_url name an \
                 address this machine reaches the way a phone does?",
            )]
        }
    };
    let mut found = vec![Finding::ok(format!("{base} reaches the gateway"))];
    found.extend(forwarding(config, forwarded.as_deref()));
    let origin = url::Url::parse(&base)
        .map(|u| u.origin().ascii_serialization())
        .unwrap_or_default();
    let key: [u8; 16] = rand::random();
    let upgrade = client
        .get(config.public_ws_url().replacen("ws", "http", 1))
        .header("connection", "Upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header(
            "sec-websocket-key",
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, key),
        )
        .header("origin", &origin)
        .send()
        .await;
    found.push(match upgrade {
        Ok(r) if r.status() == reqwest::StatusCode::SWITCHING_PROTOCOLS => Finding::ok(format!(
            "a WebSocket upgrade through {} from {origin} is let in",
            config.public_ws_url()
        )),
        Ok(r) if r.status() == reqwest::StatusCode::FORBIDDEN => Finding::fail(
            format!("the gateway refuses WebSockets from the origin {origin}"),
            "set public_url to the address browsers use, or add the origin to allowed_origins",
        ),
        Ok(r) if r.status() == reqwest::StatusCode::MISDIRECTED_REQUEST => Finding::fail(
            "the gateway does not know the host name the request came with (421)",
            "set public_url to that name, or make the proxy pass the Host header",
        ),
        Ok(r) => Finding::fail(
            format!(
                "a WebSocket upgrade through {} was answered {}",
                config.public_ws_url(),
                r.status()
            ),
            "the proxy must pass `Upgrade` and `Connection` on /ws (docs/deployment.md)",
        ),
        Err(e) => Finding::fail(
            format!(
                "the WebSocket upgrade failed: {}",
                crate::text::error_chain(&e)
            ),
            "the proxy must pass `Upgrade` and `Connection` on /ws (docs/deployment.md)",
        ),
    });
    found
}

/// Whether a proxy in front passes the client's address as `trusted_proxies` expects, from how
/// `/healthz` saw the request (`forwarded`: `trusted`, `untrusted` or `none`).
fn forwarding(config: &Config, forwarded: Option<&str>) -> Option<Finding> {
    // Without a public_url devices come straight to the listening address.
    let direct = config.public_url.is_none()
        || url::Url::parse(&config.public_url()).is_ok_and(|u| {
            let ip = u
                .host_str()
                .and_then(|h| h.trim_matches(['[', ']']).parse().ok());
            ip == Some(config.listen.ip())
                && u.port_or_known_default() == Some(config.listen.port())
        });
    let names = !config.trusted_proxies.is_empty();
    match forwarded? {
        "trusted" => Some(Finding::ok(
            "the proxy passes the client's address (X-Forwarded-For) and trusted_proxies names it",
        )),
        "untrusted" => Some(Finding::fail(
            "a proxy sends X-Forwarded-For, but its address is not in trusted_proxies: every \
             device looks like the proxy to the failed-hello throttle",
            "add the proxy's address to trusted_proxies (docs/deployment.md)",
        )),
        _ if direct => None,
        _ if names => Some(Finding::fail(
            "the proxy does not pass X-Forwarded-For: every device looks like the proxy to the \
             failed-hello throttle",
            "nginx: `proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;` in each \
             location (Caddy passes it by itself)",
        )),
        _ => Some(Finding::warn(
            "no proxy names the client's address (X-Forwarded-For)",
            "behind a proxy, make it pass X-Forwarded-For and set trusted_proxies to its \
             address; through a port forward there is nothing to do",
        )),
    }
}

/// An HTTP client that trusts what a device would: the public roots, or the self-signed
/// certificate's fingerprint; or exactly the certificate in `trust` (a proxy's own).
fn http_client(config: &Config, trust: Option<&Path>) -> Result<reqwest::Client, String> {
    let builder = reqwest::Client::builder()
        .timeout(PATIENCE)
        .redirect(reqwest::redirect::Policy::none());
    let self_signed = config
        .tls
        .as_ref()
        .is_some_and(|t| t.source == TlsSource::SelfSigned);
    let trusted = match trust {
        Some(file) => {
            use rustls::pki_types::pem::PemObject;
            let cert = rustls::pki_types::CertificateDer::from_pem_file(file)
                .map_err(|e| format!("no certificate in {}: {e}", file.display()))?;
            Some(crate::tls::fingerprint(&cert))
        }
        None => None,
    };
    match trusted.or_else(|| {
        self_signed
            .then(|| crate::tls::self_signed_pin(&config.data_dir))
            .flatten()
    }) {
        Some(pin) => builder
            .use_preconfigured_tls(crate::tls::pinned_client(&pin))
            .build()
            .map_err(|e| e.to_string()),
        None => builder.build().map_err(|e| e.to_string()),
    }
}

/// Each agent starts and answers `initialize`.
async fn agents(config: &Config) -> Vec<Finding> {
    let mut found = Vec::new();
    let cwd = crate::config::workspace::agent_cwd(config);
    if config.agent_cwd.is_none() {
        // As `serve` would at its start: the agents start in it.
        if let Err(e) = crate::config::workspace::create_workspace(&cwd) {
            found.push(Finding::fail(
                format!("cannot create the agents' workspace {}: {e}", cwd.display()),
                "set [agent] cwd to a directory the gateway's user may write",
            ));
        }
    }
    let roster = match crate::agent::roster(config, &cwd) {
        Ok(roster) => {
            let reachable = super::secrets::reachable(config, &roster, &cwd);
            found.extend(reachable.into_iter().map(|r| Finding::warn(r.what, r.fix)));
            roster
        }
        Err(e) => {
            return vec![Finding::fail(
                format!("agent: {e}"),
                "fix [agent] or --agent",
            )]
        }
    };
    if roster.agents.is_empty() {
        found.push(Finding::warn(
            "no agent: messages are kept, nobody answers",
            "set [agent] command (e.g. \"hermes acp\") or --agent",
        ));
        return found;
    }
    for agent in &roster.agents {
        let spec = crate::agent::without_gateway_env(&agent.spec);
        let started = async {
            let (client, _events) =
                iris_acp::AgentClient::spawn(&spec).map_err(|e| e.to_string())?;
            client.initialize().await.map_err(|e| e.to_string())
        };
        found.push(match tokio::time::timeout(PATIENCE, started).await {
            Ok(Ok(init)) => {
                let info = init
                    .agent_info
                    .map(|i| format!(" ({} {})", i.name, i.version))
                    .unwrap_or_default();
                Finding::ok(format!("agent {} starts and speaks ACP{info}", agent.name))
            }
            Ok(Err(e)) => Finding::fail(
                format!(
                    "agent {} ({}) does not start: {e}",
                    agent.name, spec.program
                ),
                "check its command line, that it is installed, and run it by hand",
            ),
            Err(_) => Finding::fail(
                format!(
                    "agent {} did not answer `initialize` within {} s",
                    agent.name,
                    PATIENCE.as_secs()
                ),
                "is it an ACP agent (for Hermes: `hermes acp`)?",
            ),
        });
    }
    found
}

/// Voice notes: the transcription service answers a moment of silence (a 16 kHz WAV) the way
/// it will answer a note.
async fn transcription(config: &Config) -> Option<Finding> {
    let url = config.voice.transcribe_url.clone()?;
    let transcriber = crate::media::voice::Transcriber::new(config.voice.clone());
    Some(
        match transcriber
            .heard(crate::media::voice::Recording::of_bytes(
                silent_wav(),
                "doctor.wav",
                "audio/wav",
            ))
            .await
        {
            Ok(_) => Finding::ok(format!(
                "voice notes: the transcription service at {url} answered a test recording"
            )),
            Err(e) => Finding::fail(
                format!("voice notes: {e} ({url})"),
                "check [voice] transcribe_url (the full URL, ending in /v1/audio/transcriptions), \
             key and model, and that the service runs",
            ),
        },
    )
}

/// Half a second of silence as a 16 kHz, 16-bit mono WAV file.
fn silent_wav() -> Vec<u8> {
    let data = 16_000u32; // bytes: 8000 samples of 2 bytes
    let mut wav = Vec::with_capacity(44 + data as usize);
    wav.extend_from_slice(b"RIFF");
    wav.extend_from_slice(&(36 + data).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    wav.extend_from_slice(&16u32.to_le_bytes());
    wav.extend_from_slice(&1u16.to_le_bytes()); // PCM
    wav.extend_from_slice(&1u16.to_le_bytes()); // mono
    wav.extend_from_slice(&16_000u32.to_le_bytes());
    wav.extend_from_slice(&32_000u32.to_le_bytes()); // bytes per second
    wav.extend_from_slice(&2u16.to_le_bytes()); // block align
    wav.extend_from_slice(&16u16.to_le_bytes()); // bits per sample
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&data.to_le_bytes());
    wav.resize(44 + data as usize, 0);
    wav
}

/// The shared token while devices are paired, and push credentials.
async fn credentials(config: &Config) -> Vec<Finding> {
    let mut found = Vec::new();
    let devices = super::devices::list(&config.data_dir)
        .await
        .unwrap_or_default();
    if config.auth.shared_token && !devices.is_empty() {
        found.push(Finding::warn(
            format!(
                "the shared token still signs in anyone holding it ({} paired)",
                crate::text::count(devices.len(), "device", "devices")
            ),
            "once every device is paired with its own code (`devices list`), set \
             [auth] shared_token = false",
        ));
    }
    if let Some(fcm) = &config.push.fcm {
        found.push(match std::fs::read_to_string(&fcm.service_account) {
            Ok(text) if serde_json::from_str::<serde_json::Value>(&text).is_ok() => {
                Finding::ok("the FCM service account is readable")
            }
            Ok(_) => Finding::fail(
                format!("{} is not JSON", fcm.service_account.display()),
                "download the service account key again from the Firebase console",
            ),
            Err(e) => Finding::fail(
                format!("cannot read {}: {e}", fcm.service_account.display()),
                "fix push.fcm.service_account",
            ),
        });
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_dir_open_to_others_fails_and_says_how_to_fix_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.path().join("token"), "t").unwrap();
        std::fs::set_permissions(
            dir.path().join("token"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        let found = private_files(dir.path());
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found.iter().all(|f| f.level == Level::Fail));
        assert!(found[0].to_string().contains("chmod 700"), "{}", found[0]);
        assert!(found[1].to_string().contains("chmod 600"), "{}", found[1]);
    }

    #[test]
    fn plain_http_on_a_network_address_is_a_warning() {
        let mut config = Config::for_tests(Path::new("/tmp"), "token-0123456789abcdef");
        assert_eq!(exposure(&config), None, "loopback");
        config.listen = "0.0.0.0:8765".parse().unwrap();
        assert_eq!(exposure(&config).map(|f| f.level), Some(Level::Warn));
        config.tls = Some(crate::config::tls::TlsConfig::self_signed());
        assert_eq!(exposure(&config), None);
    }

    #[test]
    fn a_proxy_that_does_not_name_the_client_is_found_out() {
        let mut config = Config::for_tests(Path::new("/tmp"), "token-0123456789abcdef");
        config.listen = "127.0.0.1:8765".parse().unwrap();
        let level = |c: &Config, seen: &str| forwarding(c, Some(seen)).map(|f| f.level);
        // Straight to the gateway: no proxy, nothing to say.
        assert_eq!(level(&config, "none"), None);
        config.public_url = Some("https://iris.localhost".into());
        // Through something that names no client: a port forward, or a proxy left unset.
        assert_eq!(level(&config, "none"), Some(Level::Warn));
        config.trusted_proxies = vec!["127.0.0.1".parse().unwrap()];
        assert_eq!(
            level(&config, "none"),
            Some(Level::Fail),
            "a trusted proxy passes nothing"
        );
        assert_eq!(level(&config, "trusted"), Some(Level::Ok));
        assert_eq!(level(&config, "untrusted"), Some(Level::Fail));
        assert_eq!(
            forwarding(&config, None),
            None,
            "an older gateway says nothing"
        );
    }
}
