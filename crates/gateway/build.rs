//! Looks at what this machine has for the tests that need more than Rust, and tells the tests
//! through `cfg`s, so that a test that cannot run here is reported as ignored, naming the one
//! thing it lacks, instead of passing without having run. For each suite of [`SUITES`] the first
//! missing piece sets `lacks_<suite>_<piece>`:
//!
//! - `hermes`: a Hermes venv (`venv`: `$IRIS_HERMES_VENV`, else `<workspace>/.venv`, else
//!   `/opt/iris-hermes-venv`; the places `tests/common/hermes.rs` looks), then network
//!   namespaces (`netns`: `unshare`, `ip`), in which Hermes runs against its fake model.
//! - `claude`, `codex`: the agent's ACP adapter (`adapter`: `$IRIS_CLAUDE_ACP` or
//!   `$IRIS_CODEX_ACP`, else `tests/<agent>/adapter` after `npm ci`), then network namespaces.
//! - `browser`: Chromium (`$IRIS_CHROMIUM`, else `/usr/bin/chromium`), Node.js, the `sqlite3`
//!   shell, `espeak-ng`, `ffmpeg` and `pocketsphinx` (the voice notes' speech and recogniser),
//!   and the browser suite's packages (`npm ci` in `web/tests`).
//! - `pebble`: Let's Encrypt's ACME test server `pebble` on `PATH` (Debian's `pebble`).
//! - `proxies`: Debian's `caddy` and `nginx`, for the reverse-proxy recipes.
//! - `setpriv`: util-linux's `setpriv`, with which the confinement tests run the gateway as
//!   `nobody` when they run as root (root passes permission checks an owner's account would not).
//! - `lan`: root and `ip netns`, to join two network namespaces by a veth pair (a LAN of two
//!   machines, for the mDNS announcement).
//!
//! Under CI (`$CI` set) no `lacks_*` is set whatever is installed: CI never ignores a test, and
//! one that lacks what it needs fails, saying what is missing.
//!
//! The answer is kept until something it read changes: the variables above, `PATH`, or a program
//! or package it found. Installing something that was missing is noticed through its variable or
//! its directory (`tests/claude/adapter`, `tests/codex/adapter`, `web/tests`); for a new `<workspace>/.venv` or
//! `/opt/iris-hermes-venv`, set `IRIS_HERMES_VENV` or run `touch crates/gateway/build.rs`.
//!
//! It also builds Iris Web's assets as served: content-hashed names, brotli and gzip, and an
//! `index.html` that names them (`build/web.rs`).

#[path = "build/web.rs"]
mod web;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A PATH that finds `unshare` and `ip` wherever the distribution keeps them (as the tests do).
const SYSTEM_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The suites of tests that need more than Rust, each with what it needs in the order it is
/// checked, and the reason its tests give when that piece is missing (the tests' `ignore`
/// attributes say the same).
const SUITES: &[(&str, &[&str])] = &[
    ("hermes", &["venv", "netns"]),
    ("claude", &["adapter", "netns"]),
    ("codex", &["adapter", "netns"]),
    (
        "browser",
        &[
            "chromium",
            "node",
            "sqlite3",
            "espeak",
            "ffmpeg",
            "pocketsphinx",
            "packages",
        ],
    ),
    ("pebble", &["pebble"]),
    ("proxies", &["caddy", "nginx"]),
    ("lan", &["netns"]),
    ("setpriv", &["setpriv"]),
];

fn main() {
    for (suite, pieces) in SUITES {
        for piece in *pieces {
            println!("cargo::rustc-check-cfg=cfg(lacks_{suite}_{piece})");
        }
    }
    for var in [
        "CI",
        "PATH",
        "IRIS_HERMES_VENV",
        "IRIS_CLAUDE_ACP",
        "IRIS_CODEX_ACP",
        "IRIS_CHROMIUM",
    ] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    println!("cargo::rerun-if-changed=build.rs");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    web::build(&manifest, &out_dir);
    if std::env::var_os("CI").is_some() {
        return;
    }
    let netns = namespaces();
    let found: Vec<(&str, Vec<(&str, bool)>)> = vec![
        (
            "hermes",
            vec![("venv", hermes(&manifest)), ("netns", netns)],
        ),
        (
            "claude",
            vec![("adapter", claude_adapter(&manifest)), ("netns", netns)],
        ),
        (
            "codex",
            vec![("adapter", codex_adapter(&manifest)), ("netns", netns)],
        ),
        ("browser", browser(&manifest)),
        ("pebble", vec![("pebble", on_path("pebble"))]),
        (
            "proxies",
            vec![("caddy", on_path("caddy")), ("nginx", nginx())],
        ),
        ("lan", vec![("netns", lan())]),
        ("setpriv", vec![("setpriv", on_path("setpriv"))]),
    ];
    // One reason per suite: the first piece missing, so that the test names what to install.
    for (suite, pieces) in found {
        if let Some((piece, _)) = pieces.iter().find(|(_, here)| !here) {
            println!("cargo::rustc-cfg=lacks_{suite}_{piece}");
        }
    }
}

/// Reruns the build script when `path` changes, or when it disappears. Only paths that exist may
/// be watched: cargo reruns a build script on every build while a watched path is missing.
fn watch(path: &Path) {
    if path.exists() {
        println!("cargo::rerun-if-changed={}", path.display());
    }
}

/// Whether `path` exists, watching it if it does, else watching `parent` (a small directory in
/// which installing it shows), if that exists.
fn look(path: &Path, parent: Option<&Path>) -> bool {
    if path.exists() {
        watch(path);
        return true;
    }
    if let Some(dir) = parent {
        watch(dir);
    }
    false
}

fn hermes(manifest: &Path) -> bool {
    let has = |venv: &Path| {
        let (hermes, python) = (venv.join("bin/hermes"), venv.join("bin/python3"));
        look(&python, None) && look(&hermes, None)
    };
    if let Some(venv) = std::env::var_os("IRIS_HERMES_VENV").filter(|v| !v.is_empty()) {
        // An explicit setting that points nowhere is a mistake: the tests run and say so.
        has(Path::new(&venv));
        return true;
    }
    has(&manifest.join("../../.venv")) || has(Path::new("/opt/iris-hermes-venv"))
}

fn claude_adapter(manifest: &Path) -> bool {
    npm_adapter(manifest, "IRIS_CLAUDE_ACP", "claude", "claude-agent-acp")
}

fn codex_adapter(manifest: &Path) -> bool {
    npm_adapter(manifest, "IRIS_CODEX_ACP", "codex", "codex-acp")
}

/// An ACP adapter installed with npm: in the directory `$var` names, else in `tests/<dir>/adapter`.
fn npm_adapter(manifest: &Path, var: &str, dir: &str, program: &str) -> bool {
    let bin = format!("node_modules/.bin/{program}");
    if let Some(explicit) = std::env::var_os(var).filter(|v| !v.is_empty()) {
        // As for Hermes: a wrong explicit setting fails the tests, with its reason.
        look(&Path::new(&explicit).join(&bin), None);
        return true;
    }
    let adapter = manifest.join("tests").join(dir).join("adapter");
    look(&adapter.join(&bin), Some(&adapter))
}

fn browser(manifest: &Path) -> Vec<(&'static str, bool)> {
    let chromium = std::env::var_os("IRIS_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    let suite = manifest.join("web/tests");
    let packages = look(
        &suite.join("node_modules/playwright-core/package.json"),
        Some(&suite),
    );
    vec![
        ("chromium", look(&chromium, None)),
        ("node", on_path("node")),
        ("sqlite3", on_path("sqlite3")),
        // voice.test.mjs: a spoken sentence, and a real offline recogniser for it.
        ("espeak", on_path("espeak-ng")),
        ("ffmpeg", on_path("ffmpeg")),
        ("pocketsphinx", on_path("pocketsphinx_continuous")),
        ("packages", packages),
    ]
}

/// Whether nginx is installed (Debian keeps it in /usr/sbin, which a user's PATH may lack).
fn nginx() -> bool {
    look(Path::new("/usr/sbin/nginx"), None) || on_path("nginx")
}

/// Whether a program is on PATH (watching the file found).
fn on_path(program: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .is_some_and(|p| look(&p, None))
}

/// Whether named network namespaces can be made here (`ip netns`, as root).
fn lan() -> bool {
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    root && Command::new("ip")
        .args(["netns", "list"])
        .env("PATH", SYSTEM_PATH)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether a new network namespace with its loopback up can be made here (`unshare -n`, or
/// unprivileged `unshare -r -n`, then `ip link set lo up`), as the agents' launchers do.
fn namespaces() -> bool {
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    let mut args = vec!["-n", "sh", "-c", "ip link set lo up"];
    if !root {
        args.insert(0, "-r");
    }
    let path = format!(
        "{SYSTEM_PATH}:{}",
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("unshare")
        .args(&args)
        .env("PATH", path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
