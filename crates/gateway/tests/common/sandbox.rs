//! What the tests that run a real agent share: a loopback-only network namespace per agent
//! process, failing with the reason when something they need is missing (where it is not
//! installed, `build.rs` has them ignored instead), and shell quoting for the launchers. Standalone (std, libc), included by `hermes.rs`, `claude.rs` and `codex.rs`.
#![allow(dead_code)]

use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// A PATH that finds `unshare` and `ip` wherever the distribution keeps them.
pub const SYSTEM_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Whether CI runs the tests (`$CI` set).
pub fn under_ci() -> bool {
    std::env::var_os("CI").is_some()
}

/// A test cannot run here although the build script found what it needs (or CI is set, where
/// nothing is ignored): it fails with the reason. After installing or removing something, `touch
/// crates/gateway/build.rs` makes the build look again.
pub fn unavailable(why: &str) -> ! {
    if under_ci() {
        panic!("{why} (CI is set: these tests must run, not be ignored)");
    }
    panic!("{why} (the build found it: run `touch crates/gateway/build.rs` to look again)");
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Whether `unshare -n` (or, unprivileged, `unshare -r -n`) and `ip` work here; probed once.
pub fn namespace_support() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            let mut args = vec!["-n"];
            if !is_root() {
                args.insert(0, "-r");
            }
            args.extend(["sh", "-c", "ip link set lo up"]);
            let path = format!(
                "{SYSTEM_PATH}:{}",
                std::env::var("PATH").unwrap_or_default()
            );
            let out = Command::new("unshare")
                .args(&args)
                .env("PATH", path)
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("unshare: {e}"))?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "`unshare {}` failed ({}): {}",
                    args.join(" "),
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            }
        })
        .clone()
}

/// A word quoted for `sh`.
pub fn shell_quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@".contains(c))
    {
        return word.to_owned();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The launcher lines that wait (up to 10 s) for a fake model server started in the background
/// just before (`$!`) to create its ready file, and end the launcher with 98 if it exits or
/// stays silent, naming `what` on stderr.
pub fn wait_until_ready(ready: &str, what: &str) -> String {
    let what = what.replace(['"', '$', '`', '\\'], "");
    format!(
        r#"fake=$!
i=0
while [ ! -e {ready} ]; do
    if ! kill -0 "$fake" 2>/dev/null; then
        echo "{what} exited at start" >&2
        exit 98
    fi
    i=$((i + 1))
    if [ "$i" -gt 400 ]; then
        echo "{what} did not listen within 10 s" >&2
        exit 98
    fi
    sleep 0.025
done"#
    )
}
