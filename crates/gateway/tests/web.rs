//! Iris Web and pairing: the embedded client is served, `pair` prints what a device needs,
//! `devices list|revoke` manage devices, and the browser end-to-end suite (headless Chromium
//! driving the real binary) passes.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::run_cli as run;
use common::tcp::{http_get_with, HttpResponse};
use common::{TestGateway, TOKEN};
use iris_client::{Client, ClientError, ConnectOptions};
use iris_protocol::ErrorCode;

/// A plain HTTP GET, as a browser would send it.
async fn get(gw: &TestGateway, path: &str, extra: &[(&str, &str)]) -> HttpResponse {
    http_get_with(common::tcp::server_addr(&gw.url), path, extra).await
}

fn web_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("web")
}

#[tokio::test]
async fn the_page_and_its_assets_are_served_with_types_and_cache_headers() {
    let gw = TestGateway::start().await;

    let page = get(&gw, "/", &[]).await;
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(page.header("cache-control"), Some("no-cache"));
    assert!(page
        .header("content-security-policy")
        .is_some_and(|c| c.contains("script-src 'self'")));
    let html = String::from_utf8(page.body.clone()).unwrap();
    // The page names its modules by content-hashed URLs (tests/web_assets.rs tests those).
    assert!(
        html.contains(r#"<script type="module" src="assets/app."#),
        "{html}"
    );

    let js = get(&gw, "/assets/app.js", &[]).await;
    assert_eq!(js.status, 200);
    assert_eq!(
        js.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    assert_eq!(js.header("x-content-type-options"), Some("nosniff"));
    let etag = js.header("etag").expect("etag").to_owned();
    let again = get(&gw, "/assets/app.js", &[("If-None-Match", &etag)]).await;
    assert_eq!(
        again.status, 304,
        "a cached copy is revalidated, not downloaded again"
    );
    assert!(again.body.is_empty());

    assert_eq!(get(&gw, "/assets/nothing-here.js", &[]).await.status, 404);
    assert_eq!(get(&gw, "/assets/../Cargo.toml", &[]).await.status, 404);

    // Every file of the client is in the binary, byte for byte (the vendored libraries under
    // `vendor/` are checked by `vendored_libraries_match_the_lockfile`).
    let mut checked = 0;
    for entry in std::fs::read_dir(web_dir().join("assets")).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let served = get(&gw, &format!("/assets/{name}"), &[]).await;
        assert_eq!(
            served.status, 200,
            "{name} is not embedded (build/web.rs serves .js, .css, .svg, .webmanifest)"
        );
        if name == "diagram.html" {
            // Served with the import map of what the frame loads (build/web.rs).
            let text = String::from_utf8(served.body.clone()).unwrap();
            assert!(
                text.contains(r#"<script type="importmap">{"imports":{"./"#)
                    && text.contains(r#"<script type="module" src="diagram-frame."#),
                "{text}"
            );
            checked += 1;
            continue;
        }
        assert_eq!(
            served.body,
            std::fs::read(&path).unwrap(),
            "{name} differs from the file"
        );
        checked += 1;
    }
    assert!(checked >= 8);
    // The diagram frame allows inline styles (Mermaid measures styled text) and still no inline
    // script; only the page may embed it. The page itself allows neither.
    let frame = get(&gw, "/assets/diagram.html", &[]).await;
    let frame_csp = frame.header("content-security-policy").unwrap_or_default();
    assert!(
        frame_csp.contains("script-src 'self' 'sha256-")
            && frame_csp.contains("style-src 'self' 'unsafe-inline'")
            && frame_csp.contains("frame-ancestors 'self'"),
        "{frame_csp}"
    );
    assert_eq!(frame.header("x-frame-options"), Some("SAMEORIGIN"));
    let page_csp = page.header("content-security-policy").unwrap_or_default();
    assert!(
        page_csp.contains("style-src 'self';") && !page_csp.contains("unsafe-inline"),
        "{page_csp}"
    );
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    let sw = get(&gw, "/sw.js", &[]).await;
    assert_eq!(
        (sw.status, sw.header("service-worker-allowed")),
        (200, Some("/"))
    );
    gw.stop().await;
}

#[test]
fn pair_prints_a_qr_code_and_the_urls_for_the_app_and_the_browser() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();

    let (ok, out, err) = run(&[
        "pair",
        "--shared",
        "--data-dir",
        data,
        "--public-url",
        "https://iris.example.com/",
    ]);
    assert!(ok, "{err}");
    let token =
        std::fs::read_to_string(dir.path().join("data/token")).expect("pair created the token");
    assert!(out.contains("███"), "a QR code is drawn:\n{out}");
    assert!(
        out.contains("  WebSocket:    wss://iris.example.com/ws\n"),
        "{out}"
    );
    assert!(out.contains(&format!("  Token:        {token}\n")), "{out}");
    assert!(
        out.contains(&format!(
            "  https://iris.example.com/#token={token}&ws=wss%3A%2F%2Firis.example.com%2Fws\n"
        )),
        "{out}"
    );
    assert!(!out.contains("only works on this machine"));

    // The same token again, and an address derived from --listen when public_url is not set.
    let (ok, out, _) = run(&[
        "pair",
        "--shared",
        "--data-dir",
        data,
        "--listen",
        "127.0.0.1:9999",
    ]);
    assert!(ok);
    assert!(
        out.contains(&format!("http://127.0.0.1:9999/#token={token}&")),
        "{out}"
    );
    assert!(
        out.contains("  WebSocket:    ws://127.0.0.1:9999/ws\n"),
        "{out}"
    );
    assert!(out.contains("only works on this machine"), "{out}");

    let (ok, _, err) = run(&["pair", "--data-dir", data, "--public-url", "ftp://nope"]);
    assert!(!ok);
    assert!(err.contains("public_url"), "{err}");
}

fn options(gw: &TestGateway, device: &str, name: &str) -> ConnectOptions {
    let mut o = ConnectOptions::new(gw.url.clone(), TOKEN, device);
    o.device_name = Some(name.into());
    o.ntfy_topic = Some("iris-test-topic".into());
    o
}

async fn cli(args: Vec<String>) -> (bool, String, String) {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(&args)
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn devices_are_listed_and_a_revoked_device_is_disconnected_at_once_and_refused_after() {
    let gw = TestGateway::start().await;
    let dir = gw.dir.to_str().unwrap().to_owned();
    let (mut phone, _) = Client::connect(options(&gw, "phone-1", "Pixel"))
        .await
        .unwrap();
    let (_tablet, _) = Client::connect(ConnectOptions::new(gw.url.clone(), TOKEN, "tablet-2"))
        .await
        .unwrap();

    let (ok, out, err) = cli(vec![
        "devices".into(),
        "list".into(),
        "--data-dir".into(),
        dir.clone(),
    ])
    .await;
    assert!(ok, "{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("phone-1"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        line.contains("Pixel") && line.contains("online now") && line.contains("ntfy"),
        "{line}"
    );
    assert!(out.lines().next().unwrap().starts_with("DEVICE"), "{out}");

    let (ok, out, err) = cli(vec![
        "devices".into(),
        "revoke".into(),
        "phone-1".into(),
        "--data-dir".into(),
        dir.clone(),
    ])
    .await;
    assert!(ok, "{err}");
    assert_eq!(
        out.trim(),
        "Revoked phone-1; it was connected and has been disconnected."
    );
    let close = phone.closed_timeout(Duration::from_secs(10)).await.unwrap();
    // Told why, so that it does not come back.
    assert_eq!(close, Some((4401, "this device was revoked".into())));

    match Client::connect(options(&gw, "phone-1", "Pixel")).await {
        Err(ClientError::Server {
            code: ErrorCode::Auth,
            message,
        }) => assert_eq!(message, "this device was revoked"),
        other => panic!(
            "a revoked device must be refused, got {:?}",
            other.map(|_| ())
        ),
    }
    let row = gw.shared.store.get_device("phone-1").await.unwrap();
    assert!(row.is_none(), "its row and push registration are gone");

    let (ok, out, _) = cli(vec![
        "devices".into(),
        "list".into(),
        "--data-dir".into(),
        dir.clone(),
    ])
    .await;
    assert!(ok);
    assert!(
        !out.contains("phone-1") && out.contains("tablet-2"),
        "{out}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_device_revoked_while_the_gateway_is_stopped_is_refused_when_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let gw = TestGateway::start_in(dir.path(), |_| {}).await;
    let (laptop, _) = Client::connect(options(&gw, "laptop-3", "Laptop"))
        .await
        .unwrap();
    laptop.close().await.unwrap();
    gw.stop().await;

    let data = dir.path().to_str().unwrap().to_owned();
    let (ok, out, err) = cli(vec![
        "devices".into(),
        "list".into(),
        "--data-dir".into(),
        data.clone(),
    ])
    .await;
    assert!(ok, "{err}");
    assert!(
        out.lines().any(|l| l.starts_with("laptop-3")
            && l.contains("Laptop")
            && (l.contains("ago") || l.contains("just now"))),
        "{out}"
    );
    let (ok, out, err) = cli(vec![
        "devices".into(),
        "revoke".into(),
        "laptop-3".into(),
        "--data-dir".into(),
        data.clone(),
    ])
    .await;
    assert!(ok, "{err}");
    assert!(
        out.starts_with("Revoked laptop-3 (the gateway is not running"),
        "{out}"
    );

    let gw = TestGateway::start_in(dir.path(), |_| {}).await;
    assert!(matches!(
        Client::connect(options(&gw, "laptop-3", "Laptop")).await,
        Err(ClientError::Server {
            code: ErrorCode::Auth,
            ..
        })
    ));
    // Other devices are not affected.
    Client::connect(options(&gw, "laptop-4", "Other"))
        .await
        .expect("another device still connects");
    gw.stop().await;
}

/// Whether a program is on PATH (or an absolute path that exists).
fn have(program: &str) -> bool {
    if program.contains('/') {
        return Path::new(program).exists();
    }
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

/// The browser suite: `node --test` in web/tests. Ignored where node, Chromium, sqlite3, the
/// voice tests' speech programs or the suite's npm packages are missing — except under CI, where
/// that is a failure.
#[test]
#[cfg_attr(
    lacks_browser_chromium,
    ignore = "needs Chromium: apt-get install chromium, or IRIS_CHROMIUM"
)]
#[cfg_attr(
    lacks_browser_node,
    ignore = "needs Node.js: apt-get install nodejs npm"
)]
#[cfg_attr(
    lacks_browser_sqlite3,
    ignore = "needs the sqlite3 shell: apt-get install sqlite3"
)]
#[cfg_attr(
    lacks_browser_espeak,
    ignore = "needs espeak-ng: apt-get install espeak-ng"
)]
#[cfg_attr(lacks_browser_ffmpeg, ignore = "needs ffmpeg: apt-get install ffmpeg")]
#[cfg_attr(
    lacks_browser_pocketsphinx,
    ignore = "needs pocketsphinx: apt-get install pocketsphinx pocketsphinx-en-us"
)]
#[cfg_attr(
    lacks_browser_packages,
    ignore = "needs the browser suite's packages: npm ci in crates/gateway/web/tests"
)]
fn the_web_client_passes_its_browser_suite() {
    let tests = web_dir().join("tests");
    let chromium = std::env::var("IRIS_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let mut missing = Vec::new();
    if !have("node") {
        missing.push("node (apt-get install nodejs npm)".to_owned());
    }
    if !have(&chromium) {
        missing.push(format!("{chromium} (apt-get install chromium)"));
    }
    if !have("sqlite3") {
        // view.test.mjs ages stored messages to test date separators.
        missing.push("sqlite3 (apt-get install sqlite3)".to_owned());
    }
    for (program, package) in [
        ("espeak-ng", "espeak-ng"),
        ("ffmpeg", "ffmpeg"),
        ("pocketsphinx_continuous", "pocketsphinx pocketsphinx-en-us"),
    ] {
        if !have(program) {
            // voice.test.mjs speaks a sentence and recognises it offline.
            missing.push(format!("{program} (apt-get install {package})"));
        }
    }
    if !tests.join("node_modules/playwright-core").is_dir() {
        missing.push(format!("playwright-core (npm ci in {})", tests.display()));
    }
    // Where these are not installed the build script has this test ignored (a cfg `lacks_browser_*`);
    // here they were found at build time, or CI is set: a missing one is a failure.
    assert!(
        missing.is_empty(),
        "the browser suite needs: {} (after installing or removing one, `touch \
         crates/gateway/build.rs` makes the build look again)",
        missing.join(", ")
    );
    let mut child = Command::new("node")
        .args(["--test", "--test-concurrency=1", "--test-reporter=spec"])
        .current_dir(&tests)
        .env("IRIS_GATEWAY_BIN", common::binary::BIN)
        .env("IRIS_CHROMIUM", &chromium)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start node");
    let (stdout, stderr) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap_or_default());
    let err = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let pid = child.id() as libc::pid_t;
    let (done, waited) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait());
    });
    // Bounded: 15 minutes for every file of the suite on a busy two-core machine.
    let status = match waited.recv_timeout(Duration::from_secs(900)) {
        Ok(status) => status.expect("wait for node"),
        Err(_) => {
            // SAFETY: kill(2) on the pid of our own child, which has not been reaped yet.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("the browser suite did not finish in 15 minutes");
        }
    };
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    println!("{out}");
    assert!(status.success(), "the browser suite failed:\n{out}\n{err}");
    assert!(
        out.contains("ℹ fail 0") && !out.contains("ℹ pass 0"),
        "{out}"
    );
}

/// The vendored libraries under `web/assets/vendor/` are the versions `web/package-lock.json`
/// pins, byte for byte as `web/vendor.mjs` copied them, and every script among them is served.
#[test]
fn vendored_libraries_match_the_lockfile() {
    use sha2::{Digest, Sha256};
    let web = web_dir();
    let read_json = |p: PathBuf| -> serde_json::Value {
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    };
    let lock = read_json(web.join("package-lock.json"));
    let pkg = read_json(web.join("package.json"));
    let vendor = web.join("assets/vendor");
    let manifest = read_json(vendor.join("manifest.json"));
    let files = manifest["files"].as_array().expect("manifest files");

    let mut listed = std::collections::BTreeSet::new();
    for f in files {
        let path = f["path"].as_str().expect("path");
        let name = f["package"].as_str().expect("package");
        let locked = &lock["packages"][format!("node_modules/{name}")]["version"];
        assert_eq!(
            &f["version"], locked,
            "{path}: vendored from {name} {}, the lockfile pins {locked}; run `npm ci && node vendor.mjs` in crates/gateway/web",
            f["version"]
        );
        assert_eq!(
            pkg["dependencies"][name], *locked,
            "package.json pins {name} exactly at the locked version"
        );
        let bytes = std::fs::read(vendor.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(
            hex::encode(Sha256::digest(&bytes)),
            f["sha256"].as_str().expect("sha256"),
            "{path} was changed after it was vendored; run `node vendor.mjs` in crates/gateway/web"
        );
        listed.insert(path.to_owned());
    }

    // Every file in the folder is in the manifest, every package has its licence with it, and
    // every script is embedded in the binary.
    let mut on_disk = std::collections::BTreeSet::new();
    let mut stack = vec![vendor.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read vendor dir") {
            let p = entry.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name() != Some("manifest.json".as_ref()) {
                let rel = p.strip_prefix(&vendor).expect("below vendor");
                on_disk.insert(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    assert_eq!(
        on_disk, listed,
        "the vendor folder holds exactly the manifest's files"
    );
    let deps = pkg["dependencies"].as_object().expect("dependencies");
    for name in deps.keys() {
        assert!(
            files.iter().any(|f| f["package"] == name.as_str()
                && f["path"].as_str().is_some_and(|p| p.ends_with("LICENSE"))),
            "{name} is vendored with its licence"
        );
    }
    for path in listed
        .iter()
        .filter(|p| p.ends_with(".js") || p.ends_with(".mjs"))
    {
        let name = format!("vendor/{path}");
        assert!(
            iris_gateway::web::ASSETS.iter().any(|a| a.name == name),
            "{name} is served"
        );
    }
}
