//! Iris Web: the browser client, embedded in the binary and served at `/` and `/assets/…`.
//!
//! The client is plain ES modules under `crates/gateway/web/` with no build step, so the files
//! are compiled in as they are and `cargo build` alone produces a working client. Every response
//! carries a strong `ETag` (SHA-256 of the bytes) with `Cache-Control: no-cache`: browsers keep
//! a copy but revalidate it, and a new gateway version is picked up on the next load (the file
//! names carry no content hash that would allow long-lived caching).

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
    /// `Content-Type` it is served with.
    pub content_type: &'static str,
    /// The bytes.
    pub body: &'static [u8],
}

macro_rules! asset {
    ($dir:literal, $name:literal, $type:literal) => {
        Asset {
            name: $name,
            content_type: $type,
            body: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/web/", $dir, $name)),
        }
    };
}

/// A vendored library module under `assets/vendor/` (see `web/vendor.mjs`).
macro_rules! vendor {
    ($name:literal) => {
        Asset {
            name: concat!("vendor/", $name),
            content_type: "text/javascript; charset=utf-8",
            body: include_bytes!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/web/assets/vendor/",
                $name
            )),
        }
    };
}

/// The page itself.
pub static INDEX: Asset = asset!("", "index.html", "text/html; charset=utf-8");

/// The service worker, served from the root so that its scope is the whole client.
pub static SERVICE_WORKER: Asset = asset!("", "sw.js", "text/javascript; charset=utf-8");

/// Everything under `/assets/`.
pub static ASSETS: &[Asset] = &[
    asset!("assets/", "activity.js", "text/javascript; charset=utf-8"),
    asset!("assets/", "app.css", "text/css; charset=utf-8"),
    asset!("assets/", "app.js", "text/javascript; charset=utf-8"),
    asset!("assets/", "code.js", "text/javascript; charset=utf-8"),
    asset!("assets/", "composer.js", "text/javascript; charset=utf-8"),
    asset!("assets/", "conn.js", "text/javascript; charset=utf-8"),
    asset!("assets/", "dropzone.js", "text/javascript; charset=utf-8"),
    asset!("assets/", "icons.js", "text/javascript; charset=utf-8"),
    asset!("assets/", "lightbox.js", "text/javascript; charset=utf-8"),
    asset!("assets/", "markdown.js", "text/javascript; charset=utf-8"),
    asset!("assets/", "media.js", "text/javascript; charset=utf-8"),
    asset!("assets/", "menu.js", "text/javascript; charset=utf-8"),
    asset!("assets/", "pairing.js", "text/javascript; charset=utf-8"),
    asset!("assets/", "notify.js", "text/javascript; charset=utf-8"),
    asset!("assets/", "outbox.js", "text/javascript; charset=utf-8"),
    asset!("assets/", "pickers.js", "text/javascript; charset=utf-8"),
    asset!("assets/", "search.js", "text/javascript; charset=utf-8"),
    asset!("assets/", "session.js", "text/javascript; charset=utf-8"),
    asset!("assets/", "sidebar.js", "text/javascript; charset=utf-8"),
    asset!("assets/", "state.js", "text/javascript; charset=utf-8"),
    asset!("assets/", "steps.js", "text/javascript; charset=utf-8"),
    asset!("assets/", "transcript.js", "text/javascript; charset=utf-8"),
    asset!("assets/", "ui.js", "text/javascript; charset=utf-8"),
    asset!("assets/", "util.js", "text/javascript; charset=utf-8"),
    asset!("assets/", "view.js", "text/javascript; charset=utf-8"),
    asset!("assets/", "webpush.js", "text/javascript; charset=utf-8"),
    asset!("assets/", "icon.svg", "image/svg+xml"),
    asset!(
        "assets/",
        "manifest.webmanifest",
        "application/manifest+json"
    ),
    vendor!("markdown-it/markdown-it.min.mjs"),
    vendor!("dompurify/purify.es.mjs"),
    vendor!("highlight/core.min.js"),
    vendor!("highlight/languages/bash.min.js"),
    vendor!("highlight/languages/c.min.js"),
    vendor!("highlight/languages/cpp.min.js"),
    vendor!("highlight/languages/csharp.min.js"),
    vendor!("highlight/languages/css.min.js"),
    vendor!("highlight/languages/diff.min.js"),
    vendor!("highlight/languages/dockerfile.min.js"),
    vendor!("highlight/languages/go.min.js"),
    vendor!("highlight/languages/ini.min.js"),
    vendor!("highlight/languages/java.min.js"),
    vendor!("highlight/languages/javascript.min.js"),
    vendor!("highlight/languages/json.min.js"),
    vendor!("highlight/languages/kotlin.min.js"),
    vendor!("highlight/languages/markdown.min.js"),
    vendor!("highlight/languages/php.min.js"),
    vendor!("highlight/languages/python.min.js"),
    vendor!("highlight/languages/ruby.min.js"),
    vendor!("highlight/languages/rust.min.js"),
    vendor!("highlight/languages/shell.min.js"),
    vendor!("highlight/languages/sql.min.js"),
    vendor!("highlight/languages/swift.min.js"),
    vendor!("highlight/languages/typescript.min.js"),
    vendor!("highlight/languages/xml.min.js"),
    vendor!("highlight/languages/yaml.min.js"),
    vendor!("noble-hashes/sha2.js"),
    vendor!("noble-hashes/_md.js"),
    vendor!("noble-hashes/_u64.js"),
    vendor!("noble-hashes/utils.js"),
    vendor!("lucide/createElement.mjs"),
    vendor!("lucide/defaultAttributes.mjs"),
    vendor!("lucide/icons/check.mjs"),
    vendor!("lucide/icons/copy.mjs"),
    vendor!("lucide/icons/ellipsis.mjs"),
    vendor!("lucide/icons/file-text.mjs"),
    vendor!("lucide/icons/hash.mjs"),
    vendor!("lucide/icons/hourglass.mjs"),
    vendor!("lucide/icons/menu.mjs"),
    vendor!("lucide/icons/paperclip.mjs"),
    vendor!("lucide/icons/search.mjs"),
    vendor!("lucide/icons/spool.mjs"),
    vendor!("lucide/icons/wrench.mjs"),
    vendor!("lucide/icons/x.mjs"),
];

/// The client's Content-Security-Policy. No inline script or style and no foreign origin:
/// even if agent text ever reached the DOM as markup, it could not run.
const CSP: &str =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; \
                   media-src 'self' blob:; connect-src 'self' ws: wss:; worker-src 'self'; \
                   manifest-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; \
                   frame-ancestors 'none'";

/// The routes of the web client; merge them into the gateway's router.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(index))
        .route("/index.html", get(index))
        .route("/sw.js", get(service_worker))
        .route("/assets/{*path}", get(asset))
}

async fn index(headers: HeaderMap) -> Response {
    serve(&INDEX, &headers)
}

async fn service_worker(headers: HeaderMap) -> Response {
    serve(&SERVICE_WORKER, &headers)
}

async fn asset(Path(path): Path<String>, headers: HeaderMap) -> Response {
    match ASSETS.iter().find(|a| a.name == path) {
        Some(a) => serve(a, &headers),
        None => (
            StatusCode::NOT_FOUND,
            [(header::CACHE_CONTROL, "no-store")],
            "not found",
        )
            .into_response(),
    }
}

/// The strong ETag of an embedded file, computed once per file.
fn etag(asset: &Asset) -> &'static str {
    static TAGS: OnceLock<Vec<(&'static str, String)>> = OnceLock::new();
    let tags = TAGS.get_or_init(|| {
        std::iter::once(&INDEX)
            .chain(std::iter::once(&SERVICE_WORKER))
            .chain(ASSETS.iter())
            .map(|a| {
                (
                    a.name,
                    format!("\"{}\"", &hex::encode(Sha256::digest(a.body))[..32]),
                )
            })
            .collect()
    });
    tags.iter()
        .find(|(n, _)| *n == asset.name)
        .map(|(_, t)| t.as_str())
        .unwrap_or("\"0\"")
}

fn serve(asset: &Asset, headers: &HeaderMap) -> Response {
    let tag = etag(asset);
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == tag || t.trim() == "*"));
    let mut response = if matches {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut r = asset.body.into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(asset.content_type),
        );
        r
    };
    let h = response.headers_mut();
    h.insert(header::ETAG, HeaderValue::from_static(tag));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if asset.content_type.starts_with("text/html") {
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        );
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
            assert!(etag(a).len() > 8);
        }
        let mut names: Vec<_> = all.iter().map(|a| a.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), all.len());
    }
}
