//! Iris Web: the browser client, embedded in the binary and served at `/` and `/assets/…`.
//!
//! The client is plain ES modules under `crates/gateway/web/` with no Node build step; the
//! gateway's build script (`build/web.rs`) gives every asset a content-hashed name, compresses it
//! with brotli and gzip, and rewrites `index.html` to name the hashed files (an import map lets
//! the modules keep importing each other by plain names; `modulepreload` hints fetch the first
//! paint's modules at once). So:
//!
//! - `/assets/<name>.<hash>.<ext>` is served `Cache-Control: public, max-age=31536000,
//!   immutable`: a browser keeps it a year and never asks again, and a new build names new files;
//! - `/`, `/index.html`, `/sw.js` and the plain `/assets/<name>` (for anything that names an
//!   asset without its hash) are `no-cache` with a strong `ETag`: revalidated on every load;
//! - every response is the brotli or gzip variant when `Accept-Encoding` allows it (brotli
//!   first), with `Vary: Accept-Encoding`.

use std::sync::OnceLock;

use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use sha2::{Digest, Sha256};

/// One embedded file.
pub struct Asset {
    /// Path below `/assets/` (or `index.html`, `sw.js` at the root).
    pub name: &'static str,
    /// The same with its content hash (`app.0123456789abcdef.js`); for the root files, `name`.
    pub hashed: &'static str,
    /// `Content-Type` it is served with.
    pub content_type: &'static str,
    /// The bytes.
    pub body: &'static [u8],
    /// The bytes compressed with brotli, where that makes them smaller.
    pub br: Option<&'static [u8]>,
    /// The bytes compressed with gzip, where that makes them smaller.
    pub gzip: Option<&'static [u8]>,
}

include!(concat!(env!("OUT_DIR"), "/web_assets.rs"));

/// The client's Content-Security-Policy. No inline script (but the import map, by its hash) or
/// style and no foreign origin: even if agent text ever reached the DOM as markup, it could not
/// run.
fn csp() -> &'static str {
    static CSP: OnceLock<String> = OnceLock::new();
    CSP.get_or_init(|| {
        format!(
            "default-src 'self'; script-src 'self' '{IMPORT_MAP_HASH}'; style-src 'self'; \
             img-src 'self' blob: data:; media-src 'self' blob:; connect-src 'self' ws: wss:; \
             worker-src 'self'; manifest-src 'self'; object-src 'none'; base-uri 'none'; \
             form-action 'none'; frame-ancestors 'none'"
        )
    })
}

/// The Content-Security-Policy of `assets/diagram.html`, the hidden frame in which Mermaid draws
/// diagrams: Mermaid styles the SVG it measures with inline styles, which the page's policy
/// refuses, so the frame allows them, and nothing else the page's policy refuses: scripts only
/// from the gateway and the frame's import map (no other inline script, so agent text cannot run
/// there either), no network, and only the page itself may embed it. The page shows the result
/// as an image, never this frame.
fn diagram_frame_csp() -> &'static str {
    static CSP: OnceLock<String> = OnceLock::new();
    CSP.get_or_init(|| {
        format!(
            "default-src 'none'; script-src 'self' '{DIAGRAM_MAP_HASH}'; \
             style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self'; \
             base-uri 'none'; form-action 'none'; frame-ancestors 'self'"
        )
    })
}

/// The routes of the web client; merge them into the gateway's router.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(index))
        .route("/index.html", get(index))
        .route("/sw.js", get(service_worker))
        .route("/assets/{*path}", get(asset))
}

async fn index(headers: HeaderMap) -> Response {
    serve(&INDEX, &headers, false)
}

async fn service_worker(headers: HeaderMap) -> Response {
    serve(&SERVICE_WORKER, &headers, false)
}

async fn asset(Path(path): Path<String>, headers: HeaderMap) -> Response {
    if let Some(a) = ASSETS.iter().find(|a| a.hashed == path) {
        return serve(a, &headers, true);
    }
    match ASSETS.iter().find(|a| a.name == path) {
        Some(a) => serve(a, &headers, false),
        None => (
            StatusCode::NOT_FOUND,
            [(header::CACHE_CONTROL, "no-store")],
            "not found",
        )
            .into_response(),
    }
}

/// How a response body is encoded.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Encoding {
    Brotli,
    Gzip,
    Identity,
}

/// The best encoding `accept` (an `Accept-Encoding` value) allows that `asset` has: brotli, else
/// gzip, else the bytes as they are. A coding listed with `q=0` is refused; `*` stands for any.
fn negotiate(asset: &Asset, accept: &str) -> Encoding {
    let allows = |name: &str| {
        let mut star = false;
        for item in accept.split(',') {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            if coding.eq_ignore_ascii_case(name) {
                return !refused;
            }
            if coding == "*" {
                star = !refused;
            }
        }
        star
    };
    if asset.br.is_some() && allows("br") {
        Encoding::Brotli
    } else if asset.gzip.is_some() && allows("gzip") {
        Encoding::Gzip
    } else {
        Encoding::Identity
    }
}

/// The strong ETag of an embedded file, computed once per file (each encoding a variant of it).
fn etag(asset: &Asset, encoding: Encoding) -> &'static str {
    type Tags = Vec<(&'static str, [String; 3])>;
    static TAGS: OnceLock<Tags> = OnceLock::new();
    let tags = TAGS.get_or_init(|| {
        std::iter::once(&INDEX)
            .chain(std::iter::once(&SERVICE_WORKER))
            .chain(ASSETS.iter())
            .map(|a| {
                let hash = &hex::encode(Sha256::digest(a.body))[..32];
                (
                    a.name,
                    [
                        format!("\"{hash}-br\""),
                        format!("\"{hash}-gz\""),
                        format!("\"{hash}\""),
                    ],
                )
            })
            .collect()
    });
    tags.iter()
        .find(|(n, _)| *n == asset.name)
        .map(|(_, t)| t[encoding as usize].as_str())
        .unwrap_or("\"0\"")
}

fn serve(asset: &Asset, headers: &HeaderMap, immutable: bool) -> Response {
    let accept = headers
        .get(header::ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let encoding = negotiate(asset, accept);
    let tag = etag(asset, encoding);
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == tag || t.trim() == "*"));
    let mut response = if matches {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let (body, coding) = match encoding {
            Encoding::Brotli => (asset.br.unwrap_or(asset.body), Some("br")),
            Encoding::Gzip => (asset.gzip.unwrap_or(asset.body), Some("gzip")),
            Encoding::Identity => (asset.body, None),
        };
        let mut r = body.into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(asset.content_type),
        );
        if let Some(coding) = coding {
            r.headers_mut()
                .insert(header::CONTENT_ENCODING, HeaderValue::from_static(coding));
        }
        r
    };
    let h = response.headers_mut();
    h.insert(header::ETAG, HeaderValue::from_static(tag));
    h.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static(if immutable {
            "public, max-age=31536000, immutable"
        } else {
            "no-cache"
        }),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if asset.name == "diagram.html" {
        if let Ok(csp) = HeaderValue::from_str(diagram_frame_csp()) {
            h.insert(header::CONTENT_SECURITY_POLICY, csp);
        }
        h.insert(
            header::X_FRAME_OPTIONS,
            HeaderValue::from_static("SAMEORIGIN"),
        );
    } else if asset.content_type.starts_with("text/html") {
        if let Ok(csp) = HeaderValue::from_str(csp()) {
            h.insert(header::CONTENT_SECURITY_POLICY, csp);
        }
        h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    }
    if asset.name == SERVICE_WORKER.name {
        h.insert("service-worker-allowed", HeaderValue::from_static("/"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_embedded_file_has_a_distinct_name_and_tag() {
        let all: Vec<&Asset> = std::iter::once(&INDEX)
            .chain(std::iter::once(&SERVICE_WORKER))
            .chain(ASSETS.iter())
            .collect();
        for a in &all {
            assert!(!a.body.is_empty(), "{} is empty", a.name);
            assert!(etag(a, Encoding::Identity).len() > 8);
        }
        let mut names: Vec<_> = all.iter().map(|a| a.name).collect();
        names.extend(ASSETS.iter().map(|a| a.hashed));
        names.sort();
        names.dedup();
        assert_eq!(
            names.len(),
            all.len() + ASSETS.len(),
            "plain and hashed names all distinct"
        );
    }
}
