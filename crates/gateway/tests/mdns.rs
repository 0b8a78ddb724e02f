//! The gateway found on a LAN: two network namespaces joined by a veth pair stand for the home
//! server and the phone beside it (IPv6 link-local addresses only, as the kernel makes them:
//! nothing leaves this machine). A gateway serving in one is announced over mDNS
//! (`_iris._tcp`); `iris-gateway discover` in the other lists it with its id and a URL that
//! connects; a gateway with `mdns = false` is not listed, and the announcement holds no secret.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_iris-gateway");
const SYSTEM_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .env("PATH", SYSTEM_PATH)
        .output()
        .expect("ip runs (iproute2)");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Two namespaces and the cable between them, removed when dropped.
struct Lan {
    server: String,
    phone: String,
}

impl Lan {
    fn new() -> Lan {
        let pid = std::process::id();
        let lan = Lan {
            server: format!("iris-server-{pid}"),
            phone: format!("iris-phone-{pid}"),
        };
        let (a, b) = (format!("ia{pid}"), format!("ib{pid}"));
        for ns in [&lan.server, &lan.phone] {
            ip(&["netns", "add", ns]);
        }
        ip(&["link", "add", &a, "type", "veth", "peer", "name", &b]);
        for (ns, dev) in [(&lan.server, &a), (&lan.phone, &b)] {
            ip(&["link", "set", dev, "netns", ns]);
            // Addresses usable at once (no duplicate address detection on a two-port cable).
            let dad = format!("echo 0 > /proc/sys/net/ipv6/conf/{dev}/accept_dad");
            let set = lan.run(ns, "sh", &["-c", &dad]);
            assert!(set.status.success(), "{set:?}");
            ip(&["-n", ns, "link", "set", "lo", "up"]);
            ip(&["-n", ns, "link", "set", dev, "up"]);
        }
        lan
    }

    fn command(&self, ns: &str, program: &str, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, program])
            .args(args)
            .env("PATH", SYSTEM_PATH)
            .stdin(Stdio::null());
        c
    }

    fn run(&self, ns: &str, program: &str, args: &[&str]) -> Output {
        self.command(ns, program, args)
            .output()
            .expect("ip netns exec")
    }
}

impl Drop for Lan {
    fn drop(&mut self) {
        for ns in [&self.server, &self.phone] {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .env("PATH", SYSTEM_PATH)
                .status();
        }
    }
}

/// A gateway process serving in a namespace; its output lines arrive on `lines`.
struct Served {
    child: Child,
    lines: Receiver<String>,
}

impl Served {
    fn start(lan: &Lan, dir: &Path, listen: &str, config: &str) -> Served {
        std::fs::write(dir.join("iris.toml"), config).expect("config");
        let (data, file) = (dir.to_string_lossy(), dir.join("iris.toml"));
        let mut child = lan
            .command(
                &lan.server,
                BIN,
                &["serve", "--listen", listen, "--data-dir", &data],
            )
            .args(["--config", &file.to_string_lossy(), "--agent", "none"])
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("gateway starts");
        let (tx, lines) = channel();
        let out: Box<dyn Read + Send> = Box::new(child.stdout.take().expect("stdout"));
        let err: Box<dyn Read + Send> = Box::new(child.stderr.take().expect("stderr"));
        for pipe in [out, err] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    let _ = tx.send(line);
                }
            });
        }
        Served { child, lines }
    }

    /// The first output line containing `needle` (within 30 s).
    fn wait_for(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut seen = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(line) => seen.push(line),
                Err(_) => break,
            }
        }
        panic!(
            "no {needle:?} from the gateway; it said:\n{}",
            seen.join("\n")
        );
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
#[cfg_attr(lacks_lan_netns, ignore = "needs root and `ip netns` (iproute2)")]
fn a_phone_on_the_lan_finds_the_gateway_and_reaches_it_at_the_announced_address() {
    let lan = Lan::new();
    let (quiet_dir, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // Switched off: serving, not announced.
    let quiet = Served::start(&lan, quiet_dir.path(), "[::]:8766", "mdns = false\n");
    quiet.wait_for("is running");
    let announced = Served::start(&lan, dir.path(), "[::]:8765", "");
    let line = announced.wait_for("announced on the LAN");
    let id = line
        .split("id=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no id in {line:?}"))
        .to_owned();
    assert!(id.starts_with("gw_"), "{line}");

    let found = lan.run(&lan.phone, BIN, &["discover", "--wait", "6"]);
    let stdout = String::from_utf8_lossy(&found.stdout).into_owned();
    assert!(
        found.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&found.stderr)
    );
    let listed: Vec<&str> = stdout.lines().filter(|l| l.contains("id=")).collect();
    assert_eq!(listed.len(), 1, "only the announced gateway: {stdout}");
    let entry = listed[0];
    assert!(entry.starts_with("Iris on "), "{entry}");
    assert!(entry.contains(&format!("id={id}")), "{entry}");
    assert!(entry.contains("no TLS  ws://[fe80::"), "{entry}");
    assert!(entry.contains("]:8765/ws"), "{entry}");
    assert!(entry.ends_with("answers from here"), "{entry}");
    let token = std::fs::read_to_string(dir.path().join("token")).expect("token");
    assert!(!stdout.contains(token.trim()), "{stdout}");

    // The same id after a restart: the app knows the gateway it paired with.
    drop(announced);
    let again = Served::start(&lan, dir.path(), "[::]:8765", "");
    let line = again.wait_for("announced on the LAN");
    assert!(line.contains(&format!("id=\"{id}\"")), "{line}");
}
