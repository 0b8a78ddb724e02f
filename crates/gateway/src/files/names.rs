//! Names and times as the file browser shows them.

/// A name as shown: control characters as escapes (`\n`, `\u{1b}`).
pub fn escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\\' if name.chars().any(char::is_control) => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// A name's label (escaped, bytes that are not UTF-8 as `\xNN`) and, when it is UTF-8, the
/// exact name.
pub fn escape_bytes(name: &[u8]) -> (String, Option<String>) {
    match std::str::from_utf8(name) {
        Ok(s) => (escape(s), Some(s.to_owned())),
        Err(_) => {
            let mut out = String::new();
            for chunk in name.utf8_chunks() {
                out.push_str(&escape(chunk.valid()));
                for b in chunk.invalid() {
                    out.push_str(&format!("\\x{b:02x}"));
                }
            }
            (out, None)
        }
    }
}

/// A status's modification time in unix milliseconds.
pub fn mtime_ms(st: &rustix::fs::Stat) -> i64 {
    st.st_mtime.saturating_mul(1000) + st.st_mtime_nsec as i64 / 1_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_shown_escaped() {
        assert_eq!(escape("plain.txt"), "plain.txt");
        assert_eq!(escape("a\nb\u{1b}[31m"), "a\\nb\\u{1b}[31m");
        assert_eq!(escape_bytes(b"x\xffy"), ("x\\xffy".into(), None));
    }
}
