//! The owner's tables on the command line: `devices list`.

use super::devices::DeviceSummary;
use crate::credentials::printable;

/// `devices list`: one row a device, the columns as wide as their widest cell, every cell made
/// printable (names and addresses come from clients).
pub fn devices(list: &[DeviceSummary]) -> String {
    let now = crate::ids::now_ms();
    let rows: Vec<[String; 5]> = list
        .iter()
        .map(|d| {
            let seen = match d.online {
                Some(true) => "online now".to_owned(),
                _ => ago(now - d.last_seen),
            };
            let push = push_column(d, now);
            let addr = d.last_addr.as_deref().map_or("-".to_owned(), printable);
            [
                printable(&d.device_id),
                printable(&d.name),
                seen,
                addr,
                push,
            ]
        })
        .collect();
    let header = ["DEVICE", "NAME", "LAST SEEN", "LAST ADDRESS", "PUSH"];
    let mut widths = header.map(str::len);
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in std::iter::once(header.map(str::to_owned)).chain(rows) {
        let line: Vec<String> = r
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// Each push backend of a device with how its last push ended: "fcm delivered 2 minutes ago,
/// webpush expired 1 day ago" (a backend whose registration a push cost still shows, so the
/// owner learns why it is gone).
fn push_column(d: &DeviceSummary, now: i64) -> String {
    let mut backends: Vec<&str> = d.push.iter().map(String::as_str).collect();
    for p in &d.last_pushes {
        if !backends.contains(&p.backend.as_str()) {
            backends.push(&p.backend);
        }
    }
    if backends.is_empty() {
        return "-".to_owned();
    }
    let parts: Vec<String> = backends
        .iter()
        .map(|b| match d.last_pushes.iter().find(|p| p.backend == *b) {
            Some(p) => {
                let test = if p.test { " (test)" } else { "" };
                format!("{b} {}{test} {}", p.result, ago(now - p.at))
            }
            None => (*b).to_owned(),
        })
        .collect();
    printable(&parts.join(", "))
}

/// "5 minutes ago" for a duration in milliseconds.
pub fn ago(ms: i64) -> String {
    let s = (ms / 1000).max(0);
    let (n, unit) = match s {
        0..=59 => return "just now".to_owned(),
        60..=3599 => (s / 60, "minute"),
        3600..=86_399 => (s / 3600, "hour"),
        _ => (s / 86_400, "day"),
    };
    format!("{n} {unit}{} ago", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_table_prints_no_control_characters_a_client_chose() {
        let d = DeviceSummary {
            device_id: "web_1".into(),
            name: "Phone\u{1b}]0;owned\u{7}\u{1b}[2J\nroot".into(),
            last_seen: 0,
            last_addr: Some("203.0.113.7".into()),
            push: Vec::new(),
            last_pushes: Vec::new(),
            online: Some(true),
        };
        let table = devices(&[d]);
        assert!(
            !table.chars().any(|c| c.is_control() && c != '\n'),
            "{table:?}"
        );
        assert_eq!(table.lines().count(), 2, "{table}");
        assert!(table.contains("Phone]0;owned[2Jroot"), "{table}");
        assert!(table.contains("203.0.113.7"), "{table}");
    }

    #[test]
    fn the_push_column_says_how_each_backends_last_push_ended() {
        let now = 10 * 60_000;
        let outcome =
            |backend: &str, result: &str, at: i64, test: bool| iris_protocol::PushOutcome {
                backend: backend.into(),
                result: result.into(),
                detail: None,
                at,
                test,
            };
        let d = DeviceSummary {
            device_id: "phone".into(),
            name: "Phone".into(),
            last_seen: 0,
            last_addr: None,
            push: vec!["fcm".into(), "ntfy".into()],
            last_pushes: vec![
                outcome("fcm", "delivered", now - 120_000, false),
                outcome("webpush", "expired", now - 5_000, true),
            ],
            online: None,
        };
        assert_eq!(
            push_column(&d, now),
            "fcm delivered 2 minutes ago, ntfy, webpush expired (test) just now"
        );
    }
}
