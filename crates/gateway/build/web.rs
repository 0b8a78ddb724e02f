//! Iris Web's assets as the gateway serves them, made at `cargo build` time (no Node needed):
//!
//! - every file under `web/assets/` that the page may load gets a content-hashed name
//!   (`app.js` → `app.<16 hex>.js`), so it can be cached for a year and never revalidated;
//! - each is compressed twice, brotli and gzip (level 9), kept only when smaller; brotli at
//!   quality 11, but 9 for the large libraries loaded on demand ([`QUICK_BROTLI`]);
//! - `index.html` is rewritten to name the hashed files, with an import map (the modules keep
//!   importing each other by plain relative names, which the map turns into hashed URLs) and a
//!   `<link rel="modulepreload">` for every module the first paint needs: those `app.js` reaches
//!   through static imports (dynamic `import()` loads the rest when wanted);
//! - the Content-Security-Policy allows the inline import map by its SHA-256 and nothing else;
//! - `web/bundle/app.js`, the first paint's modules in one (made by `web/bundle/bundle.mjs`
//!   with esbuild, and kept in the repository), is served as `assets/app.bundle.js` and named by
//!   the page instead of `app.js`, while the sources hash on its first line matches the scripts
//!   under `web/assets/` ([`sources_hash`]); otherwise the page loads the modules one by one and
//!   the build warns;
//! - `assets/diagram.html`, the frame Mermaid draws in, gets an import map of its own, of the
//!   modules only it loads (Mermaid's, left out of the page's map) and DOMPurify; its hash is
//!   `DIAGRAM_MAP_HASH`, for the frame's policy.
//!
//! The output is `$OUT_DIR/web_assets.rs` (included by `src/web.rs`) and the bytes beside it.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use sha2::{Digest, Sha256};

/// One file under `web/assets/`, as served.
struct Built {
    /// Path below `assets/`: `vendor/highlight/core.min.js`.
    name: String,
    /// The same with its content hash: `vendor/highlight/core.min.0123456789abcdef.js`.
    hashed: String,
    content_type: &'static str,
    body: Vec<u8>,
}

/// The content type of a file the page may load, by extension; `None` for what is never served
/// (licence texts, the vendoring record).
fn content_type(name: &str) -> Option<&'static str> {
    let ext = name.rsplit_once('.').map(|(_, e)| e)?;
    Some(match ext {
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "svg" => "image/svg+xml",
        "html" => "text/html; charset=utf-8",
        "webmanifest" => "application/manifest+json",
        _ => return None,
    })
}

/// `dir/name.ext` → `dir/name.<hash>.ext` (the last extension keeps its place, so the type
/// stays visible in the URL).
fn hashed_name(name: &str, body: &[u8]) -> String {
    let hash = &hex::encode(Sha256::digest(body))[..16];
    match name.rsplit_once('.') {
        Some((stem, ext)) => format!("{stem}.{hash}.{ext}"),
        None => format!("{name}.{hash}"),
    }
}

/// Every servable file under `dir`, recursively, with its path below `root`.
fn collect(root: &Path, dir: &Path, out: &mut Vec<Built>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("web/assets is readable")
        .map(|e| e.expect("web/assets entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect(root, &path, out);
            continue;
        }
        let name = path
            .strip_prefix(root)
            .expect("below web/assets")
            .to_string_lossy()
            .replace('\\', "/");
        let Some(content_type) = content_type(&name) else {
            continue;
        };
        let body = std::fs::read(&path).expect("asset is readable");
        out.push(Built {
            hashed: hashed_name(&name, &body),
            name,
            content_type,
            body,
        });
    }
}

/// The relative module specifiers a module imports statically (`import … from './x.js'`,
/// `import './x.js'`, `export … from './x.js'`), minified or not. `import('./x.js')` is dynamic
/// and not counted: what it loads is not needed for the first paint.
fn static_imports(source: &str) -> Vec<String> {
    let bytes = source.as_bytes();
    let mut found = Vec::new();
    for keyword in ["from", "import"] {
        let mut at = 0;
        while let Some(i) = source[at..].find(keyword) {
            let start = at + i;
            at = start + keyword.len();
            let before = start.checked_sub(1).map(|b| bytes[b]);
            if before
                .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b == b'.')
            {
                continue;
            }
            let rest = source[at..].trim_start();
            let Some(quote) = rest.chars().next().filter(|c| *c == '\'' || *c == '"') else {
                continue;
            };
            let Some(end) = rest[1..].find(quote) else {
                continue;
            };
            let spec = &rest[1..1 + end];
            if spec.starts_with("./") || spec.starts_with("../") {
                found.push(spec.to_owned());
            }
        }
    }
    found
}

/// `base` (a file's path below `assets/`) joined with a relative specifier.
fn resolve(base: &str, spec: &str) -> String {
    let mut parts: Vec<&str> = base.split('/').collect();
    parts.pop();
    for piece in spec.split('/') {
        match piece {
            "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    parts.join("/")
}

/// The modules `entry` reaches through static imports, `entry` first, each once.
fn first_paint_modules(assets: &[Built], entry: &str) -> Vec<String> {
    let by_name: BTreeMap<&str, &Built> = assets.iter().map(|a| (a.name.as_str(), a)).collect();
    let mut seen = BTreeSet::new();
    let mut order = Vec::new();
    let mut stack = vec![entry.to_owned()];
    while let Some(name) = stack.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let asset = by_name
            .get(name.as_str())
            .unwrap_or_else(|| panic!("web/assets/{name} is imported but missing"));
        for spec in static_imports(&String::from_utf8_lossy(&asset.body)) {
            stack.push(resolve(&name, &spec));
        }
        order.push(name);
    }
    order
}

/// The modules only the diagram frame loads (`assets/diagram.html`): Mermaid and the frame's
/// script. They are left out of the page's import map, and the frame has a map of its own.
fn frame_only(name: &str) -> bool {
    name.starts_with("vendor/mermaid/") || name == "diagram-frame.js"
}

/// An import map of the JavaScript modules `include` keeps, keys and values under `prefix`.
fn import_map(assets: &[Built], prefix: &str, include: impl Fn(&str) -> bool) -> String {
    let entries: Vec<String> = assets
        .iter()
        .filter(|a| a.content_type.starts_with("text/javascript") && include(&a.name))
        .map(|a| format!("\"{prefix}{}\":\"{prefix}{}\"", a.name, a.hashed))
        .collect();
    format!("{{\"imports\":{{{}}}}}", entries.join(","))
}

/// `assets/diagram.html` (the frame Mermaid draws in) with an import map of what it loads, so
/// that Mermaid's modules are fetched by their hashed names and cached like the page's; and the
/// map's hash for the frame's Content-Security-Policy.
fn diagram_frame(source: &str, assets: &[Built]) -> (String, String) {
    let map = import_map(assets, "./", |name| {
        frame_only(name) || name.starts_with("vendor/dompurify/")
    });
    let hash = STANDARD.encode(Sha256::digest(map.as_bytes()));
    let script = "<script type=\"module\" src=\"diagram-frame.js\">";
    let frame = assets
        .iter()
        .find(|a| a.name == "diagram-frame.js")
        .expect("web/assets/diagram-frame.js");
    assert!(
        source.contains(script),
        "assets/diagram.html loads {script}"
    );
    let html = source.replace(
        script,
        &format!(
            "<script type=\"importmap\">{map}</script>\n  <script type=\"module\" src=\"{}\">",
            frame.hashed
        ),
    );
    (html, hash)
}

/// SHA-256 over each script under `web/assets/` in bytewise order of its path: the path, a NUL,
/// its bytes, a NUL (as `web/bundle/bundle.mjs` computes it).
fn sources_hash(assets: &[Built]) -> String {
    let mut scripts: Vec<&Built> = assets
        .iter()
        .filter(|a| a.name.ends_with(".js") || a.name.ends_with(".mjs"))
        .collect();
    scripts.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    let mut hash = Sha256::new();
    for a in scripts {
        hash.update(a.name.as_bytes());
        hash.update([0]);
        hash.update(&a.body);
        hash.update([0]);
    }
    hex::encode(hash.finalize())
}

/// The name the page's bundle is served under.
const BUNDLE: &str = "app.bundle.js";

/// `web/bundle/app.js` as an asset, when it was made from the scripts in `assets`; a warning
/// from the build otherwise.
fn bundle(web: &Path, assets: &[Built]) -> Option<Built> {
    let path = web.join("bundle/app.js");
    println!("cargo::rerun-if-changed={}", path.display());
    let stale = |why: &str| {
        println!(
            "cargo::warning=Iris Web loads its modules one by one: web/bundle/app.js {why}; run `npm ci && node bundle.mjs` in crates/gateway/web/bundle"
        );
        None
    };
    let Ok(body) = std::fs::read(&path) else {
        return stale("is missing");
    };
    let first = body.split(|b| *b == b'\n').next().unwrap_or_default();
    let wanted = format!("from sources sha256 {};", sources_hash(assets));
    if !String::from_utf8_lossy(first).contains(&wanted) {
        return stale("was made from other sources");
    }
    Some(Built {
        name: BUNDLE.to_owned(),
        hashed: hashed_name(BUNDLE, &body),
        content_type: "text/javascript; charset=utf-8",
        body,
    })
}

/// `index.html` naming the hashed files, with the import map and preload hints; and the hash of
/// the import map for the CSP. `entry` is the module the page runs: `app.js`, or the bundle.
fn index_html(source: &str, assets: &[Built], entry: &str) -> (String, String) {
    let mut html = source.replace("\"assets/app.js\"", &format!("\"assets/{entry}\""));
    for a in assets {
        html = html.replace(
            &format!("\"assets/{}\"", a.name),
            &format!("\"assets/{}\"", a.hashed),
        );
    }
    let map = import_map(assets, "./assets/", |name| !frame_only(name));
    let csp_hash = STANDARD.encode(Sha256::digest(map.as_bytes()));
    let hashed: BTreeMap<&str, &str> = assets
        .iter()
        .map(|a| (a.name.as_str(), a.hashed.as_str()))
        .collect();
    let mut head = format!("<script type=\"importmap\">{map}</script>\n");
    for name in first_paint_modules(assets, entry) {
        head.push_str(&format!(
            "  <link rel=\"modulepreload\" href=\"assets/{}\">\n",
            hashed[name.as_str()]
        ));
    }
    // The import map must come before the first module script or preload; the stylesheet and
    // the theme script, which the first paint waits for, come before both, so that the browser
    // asks for them first and not behind some fifty module preloads.
    let marker = "<script type=\"module\"";
    let at = html
        .find(marker)
        .expect("index.html loads its module script in <head>");
    html.insert_str(at, &format!("{head}  "));
    (html, csp_hash)
}

/// Files compressed with brotli quality 9 instead of 11: the large libraries that a page loads
/// only when a message needs them, KaTeX (0.6 MB) and Mermaid (3.5 MB). At 11 they would make
/// every run of this script some 20 s slower on two cores (measured: 26.5 s instead of 6 s; 4.6 s
/// without them) for files about 8 % smaller (Mermaid: 860 KB at 11, 933 KB at 9; KaTeX: 119 KB
/// and 132 KB).
const QUICK_BROTLI: &[&str] = &["assets/vendor/katex/", "assets/vendor/mermaid/"];

fn brotli(file: &str, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let quick = QUICK_BROTLI.iter().any(|p| file.starts_with(p));
    let params = brotli::enc::BrotliEncoderParams {
        quality: if quick { 9 } else { 11 },
        lgwin: 22,
        ..Default::default()
    };
    brotli::BrotliCompress(&mut &body[..], &mut out, &params).expect("brotli in memory");
    out
}

fn gzip(body: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(body).expect("gzip in memory");
    enc.finish().expect("gzip in memory")
}

/// Writes `body` and its smaller compressed forms to `out/<file>{,.br,.gz}`; the Rust
/// expressions for the three (`None` where compression does not pay).
fn emit(out: &Path, file: &str, body: &[u8]) -> [String; 3] {
    let path = out.join(file);
    std::fs::create_dir_all(path.parent().expect("a file has a parent")).expect("OUT_DIR");
    std::fs::write(&path, body).expect("write asset");
    let identity = format!("include_bytes!({:?})", path.display().to_string());
    let mut variants = [identity, "None".to_owned(), "None".to_owned()];
    for (i, (ext, bytes)) in [("br", brotli(file, body)), ("gz", gzip(body))]
        .into_iter()
        .enumerate()
    {
        if bytes.len() < body.len() {
            let p = out.join(format!("{file}.{ext}"));
            std::fs::write(&p, &bytes).expect("write compressed asset");
            variants[i + 1] = format!("Some(include_bytes!({:?}))", p.display().to_string());
        }
    }
    variants
}

/// Builds everything and writes `$OUT_DIR/web_assets.rs`.
pub fn build(manifest: &Path, out_dir: &Path) {
    let web = manifest.join("web");
    for watched in ["index.html", "sw.js", "assets"] {
        println!("cargo::rerun-if-changed={}", web.join(watched).display());
    }
    let mut assets = Vec::new();
    collect(&web.join("assets"), &web.join("assets"), &mut assets);
    let entry = match bundle(&web, &assets) {
        Some(b) => {
            assets.push(b);
            BUNDLE
        }
        None => "app.js",
    };
    let source = std::fs::read_to_string(web.join("index.html")).expect("web/index.html");
    let (index, csp_hash) = index_html(&source, &assets, entry);
    let frame_source = assets
        .iter()
        .find(|a| a.name == "diagram.html")
        .map(|a| String::from_utf8_lossy(&a.body).into_owned())
        .expect("web/assets/diagram.html");
    let (frame, frame_hash) = diagram_frame(&frame_source, &assets);
    if let Some(a) = assets.iter_mut().find(|a| a.name == "diagram.html") {
        a.body = frame.into_bytes();
    }
    let out = out_dir.join("web");

    let mut rs = String::from("// Generated by build/web.rs from crates/gateway/web.\n\n");
    rs.push_str(&format!(
        "/// SHA-256 of the page's inline import map, for its Content-Security-Policy.\n\
         pub const IMPORT_MAP_HASH: &str = \"sha256-{csp_hash}\";\n\n\
         /// SHA-256 of the diagram frame's inline import map, for its Content-Security-Policy.\n\
         pub const DIAGRAM_MAP_HASH: &str = \"sha256-{frame_hash}\";\n\n"
    ));
    let page = emit(&out, "index.html", index.as_bytes());
    rs.push_str(&format!(
        "/// The page, naming the hashed assets.\npub static INDEX: Asset = Asset {{ name: \"index.html\", hashed: \"index.html\", content_type: \"text/html; charset=utf-8\", body: {}, br: {}, gzip: {} }};\n\n",
        page[0], page[1], page[2]
    ));
    let sw = std::fs::read(web.join("sw.js")).expect("web/sw.js");
    let worker = emit(&out, "sw.js", &sw);
    rs.push_str(&format!(
        "/// The service worker, served from the root so that its scope is the whole client.\npub static SERVICE_WORKER: Asset = Asset {{ name: \"sw.js\", hashed: \"sw.js\", content_type: \"text/javascript; charset=utf-8\", body: {}, br: {}, gzip: {} }};\n\n",
        worker[0], worker[1], worker[2]
    ));
    rs.push_str("/// Everything under `/assets/`.\npub static ASSETS: &[Asset] = &[\n");
    for a in &assets {
        let v = emit(&out, &format!("assets/{}", a.name), &a.body);
        rs.push_str(&format!(
            "    Asset {{ name: {:?}, hashed: {:?}, content_type: {:?}, body: {}, br: {}, gzip: {} }},\n",
            a.name, a.hashed, a.content_type, v[0], v[1], v[2]
        ));
    }
    rs.push_str("];\n");
    std::fs::write(out_dir.join("web_assets.rs"), rs).expect("write web_assets.rs");
}
