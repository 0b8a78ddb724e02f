//! Iris Web's assets as a browser gets them from the real gateway: content-hashed URLs cached as
//! immutable, brotli or gzip by `Accept-Encoding` (the same bytes once decompressed), an unknown
//! or old hash refused, and the page itself always revalidated, naming the hashed files through
//! its import map (allowed by the Content-Security-Policy), and starting the one bundle of its
//! first paint (`web/bundle`), made from these sources.

mod common;

use std::io::Read;

use common::tcp::{http_get_with, HttpResponse};
use common::TestGateway;

/// A plain HTTP GET with the given extra headers; assets always come with a known length.
async fn get(gw: &TestGateway, path: &str, extra: &[(&str, &str)]) -> HttpResponse {
    let response = http_get_with(common::tcp::server_addr(&gw.url), path, extra).await;
    assert!(!response.chunked, "assets have a known length");
    response
}

const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// The hashed URL the page names for `name` (its import map or a link), as `/assets/…`.
fn hashed_url(html: &str, name: &str) -> String {
    let (stem, ext) = name.rsplit_once('.').expect("an extension");
    let start = format!("\"./assets/{stem}.");
    let mut at = 0;
    while let Some(i) = html[at..].find(&start) {
        let from = at + i + start.len();
        let candidate = &html[from..];
        let hash: String = candidate
            .chars()
            .take_while(char::is_ascii_hexdigit)
            .collect();
        if hash.len() == 16 && candidate[16..].starts_with(&format!(".{ext}\"")) {
            return format!("/assets/{stem}.{hash}.{ext}");
        }
        at = from;
    }
    panic!("the page names no hashed {name}: {html}");
}

#[tokio::test]
async fn hashed_assets_are_immutable_and_precompressed_and_the_page_is_revalidated() {
    let gw = TestGateway::start().await;

    let page = get(&gw, "/", &[]).await;
    assert_eq!(page.status, 200);
    assert_eq!(page.header("cache-control"), Some("no-cache"));
    let html = String::from_utf8(page.body.clone()).expect("utf-8 page");
    let app = hashed_url(&html, "app.js");
    let bundle = hashed_url(&html, "app.bundle.js");
    assert!(
        html.contains(&format!(
            r#"<script type="module" src="{}"></script>"#,
            &bundle[1..]
        )),
        "the page starts the bundle of its first paint, which is served only while it was made \
         from these sources (run `npm ci && node bundle.mjs` in crates/gateway/web/bundle): {html}"
    );
    assert_eq!(
        html.matches(r#"<link rel="modulepreload""#).count(),
        1,
        "the bundle is the one module of the first paint: {html}"
    );
    assert!(html.contains(&format!(
        r#"<link rel="modulepreload" href="{}">"#,
        &bundle[1..]
    )));
    let served = get(&gw, &bundle, &[]).await;
    assert_eq!(served.header("cache-control"), Some(IMMUTABLE));
    let made = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/web/bundle/app.js"))
        .expect("web/bundle/app.js");
    assert_eq!(served.body, made);
    assert!(
        !html.contains("modulepreload\" href=\"assets/vendor/highlight/languages"),
        "highlight languages are not preloaded"
    );
    // The import map is inline: the CSP allows exactly it, by its hash, and no other script.
    let map_start = html
        .find(r#"<script type="importmap">"#)
        .expect("an import map")
        + 25;
    let map_end = map_start + html[map_start..].find("</script>").expect("map end");
    let digest = sha2::Digest::finalize(<sha2::Sha256 as sha2::Digest>::new_with_prefix(
        &html[map_start..map_end],
    ));
    let csp = page.header("content-security-policy").expect("a CSP");
    let expected = format!("'sha256-{}'", base64_std(&digest));
    assert!(
        csp.contains(&format!("script-src 'self' {expected};")),
        "{csp} allows the import map {expected}"
    );

    // Identity, brotli and gzip of the hashed app.js: all immutable, all the same bytes.
    let plain = get(&gw, &app, &[]).await;
    assert_eq!(plain.status, 200);
    assert_eq!(plain.header("cache-control"), Some(IMMUTABLE));
    assert_eq!(plain.header("vary"), Some("Accept-Encoding"));
    assert_eq!(plain.header("content-encoding"), None);
    assert_eq!(
        plain.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    let source =
        std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/web/assets/app.js")).expect("app.js");
    assert_eq!(plain.body, source, "identity is the file as written");

    let br = get(&gw, &app, &[("Accept-Encoding", "gzip, deflate, br, zstd")]).await;
    assert_eq!(br.status, 200);
    assert_eq!(br.header("content-encoding"), Some("br"));
    assert_eq!(br.header("cache-control"), Some(IMMUTABLE));
    assert!(br.body.len() < plain.body.len() / 2, "brotli pays");
    let mut unbr = Vec::new();
    brotli::Decompressor::new(&br.body[..], 4096)
        .read_to_end(&mut unbr)
        .expect("valid brotli");
    assert_eq!(unbr, source);

    let gz = get(&gw, &app, &[("Accept-Encoding", "gzip, deflate")]).await;
    assert_eq!(gz.header("content-encoding"), Some("gzip"));
    assert_eq!(gz.header("vary"), Some("Accept-Encoding"));
    let mut ungz = Vec::new();
    flate2::read::GzDecoder::new(&gz.body[..])
        .read_to_end(&mut ungz)
        .expect("valid gzip");
    assert_eq!(ungz, source);

    let refused = get(&gw, &app, &[("Accept-Encoding", "br;q=0, gzip;q=0")]).await;
    assert_eq!(refused.header("content-encoding"), None, "q=0 refuses");
    assert_eq!(refused.body, source);

    // The page itself compresses too, and stays revalidated.
    let page_br = get(&gw, "/", &[("Accept-Encoding", "br")]).await;
    assert_eq!(page_br.header("content-encoding"), Some("br"));
    assert_eq!(page_br.header("cache-control"), Some("no-cache"));

    // An old or made-up hash is not found (nothing is guessed or served stale).
    let old = app.replace(&app[app.len() - 19..app.len() - 3], "0123456789abcdef");
    assert_ne!(old, app);
    assert_eq!(get(&gw, &old, &[]).await.status, 404);
    assert_eq!(get(&gw, "/assets/app.zzzz.js", &[]).await.status, 404);
    // The plain name is still there, revalidated, for anything that names it without a hash.
    let named = get(&gw, "/assets/app.js", &[]).await;
    assert_eq!(named.status, 200);
    assert_eq!(named.header("cache-control"), Some("no-cache"));
    gw.stop().await;
}

fn base64_std(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
