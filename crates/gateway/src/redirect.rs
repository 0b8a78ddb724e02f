//! The plain HTTP listener beside TLS (`[tls] redirect_listen`, `--http-listen`): every request
//! is answered `308 Permanent Redirect` to the same path on https, WebSocket upgrades are
//! refused (a token must never cross the network in the clear, and a client that followed a
//! redirect would have sent it already), and ACME HTTP-01 challenges are answered.
//!
//! The redirect never takes a host blindly from the request: `Host` must parse as a bare
//! `host[:port]` (no user info, path or other characters a `Location` could be bent with) and be
//! one of the names the gateway answers to at all (`KnownHosts`: an IP address, `localhost`, the
//! host of `public_url`, of `allowed_origins`, of `[tls.acme] domains`, or this machine's
//! name); anything else gets 421 like on the TLS port. So the redirect only ever sends a client
//! to the host it already asked for, never to another site. The port is that of `public_url`
//! when it is `https` on the same host (port forwarding from 443), else the TLS port listened on.

use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::acme::answers::Answers;
use crate::config::Config;
use crate::guard::KnownHosts;

/// What the plain listener answers with.
#[derive(Clone)]
struct Redirect {
    hosts: Arc<KnownHosts>,
    /// The https port for a host: `public_url`'s for its own host, else this one.
    tls_port: u16,
    /// `public_url`'s host and port, when it is https.
    public: Option<(String, Option<u16>)>,
    answers: Option<Arc<Answers>>,
}

/// The routes of the plain listener.
pub fn routes(config: &Config, hosts: Arc<KnownHosts>, answers: Option<Arc<Answers>>) -> Router {
    let public = config
        .public_url
        .as_deref()
        .and_then(|u| url::Url::parse(u).ok())
        .filter(|u| u.scheme() == "https")
        .and_then(|u| Some((u.host_str()?.to_ascii_lowercase(), u.port())));
    let state = Redirect {
        hosts,
        tls_port: config.listen.port(),
        public,
        answers,
    };
    Router::new()
        .route("/.well-known/acme-challenge/{token}", get(challenge))
        .fallback(redirect)
        .with_state(state)
}

/// An HTTP-01 answer: the key authorization of an open challenge, as plain text.
async fn challenge(State(state): State<Redirect>, Path(token): Path<String>) -> Response {
    match state.answers.as_ref().and_then(|a| a.http_answer(&token)) {
        Some(answer) => ([(header::CONTENT_TYPE, "text/plain")], answer).into_response(),
        None => (StatusCode::NOT_FOUND, "no such challenge\n").into_response(),
    }
}

/// Everything else: a redirect to https, or a refusal.
async fn redirect(State(state): State<Redirect>, request: Request) -> Response {
    let headers = request.headers();
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    let Some((name, _)) = host.and_then(authority) else {
        return (StatusCode::BAD_REQUEST, "a Host header is needed\n").into_response();
    };
    if !state.hosts.allows(host) {
        tracing::warn!(host = ?host, "plain request for an unknown host refused");
        let body = "unknown host: add it to public_url or allowed_origins\n";
        return (StatusCode::MISDIRECTED_REQUEST, body).into_response();
    }
    let port = match &state.public {
        Some((public, port))
            if public.trim_matches(['[', ']']) == name.trim_matches(['[', ']']) =>
        {
            port.unwrap_or(443)
        }
        _ => state.tls_port,
    };
    let origin = if port == 443 {
        format!("https://{name}")
    } else {
        format!("https://{name}:{port}")
    };
    if is_websocket(headers) {
        let body = format!(
            "WebSockets only over TLS: connect to {}/ws\n",
            origin.replacen("https", "wss", 1)
        );
        return (StatusCode::FORBIDDEN, body).into_response();
    }
    let path = request.uri().path_and_query().map_or("/", |p| p.as_str());
    // A path is never `//host…` here (hyper keeps the request target as sent, and the origin
    // is written before it), so the Location's host is always `name`.
    let location = format!("{origin}{path}");
    (
        StatusCode::PERMANENT_REDIRECT,
        [(header::LOCATION, location)],
        "use https\n",
    )
        .into_response()
}

/// `host[:port]` split into its lowercase host (IPv6 in brackets) and port; `None` for anything
/// else (user info, a path, spaces, an empty host).
fn authority(host: &str) -> Option<(String, Option<u16>)> {
    let parsed: axum::http::uri::Authority = host.parse().ok()?;
    if parsed.as_str().contains('@') || parsed.host().is_empty() {
        return None;
    }
    let name = parsed.host().to_ascii_lowercase();
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-.:[]".contains(c);
    if !name.chars().all(allowed) {
        return None;
    }
    let port = parsed.port_u16();
    // Whatever the parser let through besides host and port (`x:y`) makes it no authority.
    let rebuilt = port.map_or_else(|| name.clone(), |p| format!("{name}:{p}"));
    rebuilt
        .eq_ignore_ascii_case(host.trim())
        .then_some((name, port))
}

/// Whether the request asks for a WebSocket.
fn is_websocket(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::UPGRADE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| {
            v.split(',')
                .any(|p| p.trim().eq_ignore_ascii_case("websocket"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bare_host_and_port_make_a_location() {
        assert_eq!(
            authority("Iris.example.com"),
            Some(("iris.example.com".into(), None))
        );
        assert_eq!(
            authority("localhost:8080"),
            Some(("localhost".into(), Some(8080)))
        );
        assert_eq!(authority("[::1]:80"), Some(("[::1]".into(), Some(80))));
        for bad in [
            "evil.example@iris.example.com",
            "a b",
            "",
            "iris.example.com/x",
            "x:y",
        ] {
            assert_eq!(authority(bad), None, "{bad:?}");
        }
    }
}
