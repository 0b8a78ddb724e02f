//! The failure message: violations grouped by rule, each rule said in one sentence.

use std::fmt::Write;

use crate::{Rule, Violation, ARCHITECTURE, LAYERED_DIRS};

/// How many detail lines of one violation are shown.
const MAX_DETAILS: usize = 150;

/// A report for a newcomer: what each rule says, where it is broken, what to do.
pub fn render(violations: &[Violation]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "The house rules are broken in {} place{}.\n",
        violations.len(),
        if violations.len() == 1 { "" } else { "s" }
    );
    for rule in Rule::ALL {
        let of_rule: Vec<&Violation> = violations.iter().filter(|v| v.rule == rule).collect();
        if of_rule.is_empty() {
            continue;
        }
        let _ = writeln!(s, "== {} ({}) ==", rule.title(), of_rule.len());
        let _ = writeln!(s, "Rule: {}", rule.statement());
        if matches!(rule, Rule::Layers | Rule::Circles) {
            let _ = writeln!(
                s,
                "The layer tables are in {ARCHITECTURE} at the repository root, one block per directory \
                 (`<!-- tidy:layers {} -->` … `<!-- /tidy:layers -->`), top layer first.",
                LAYERED_DIRS.first().copied().unwrap_or("DIR"),
            );
        }
        for v in of_rule {
            let _ = writeln!(s, "  {v}");
            for d in v.details.iter().take(MAX_DETAILS) {
                let _ = writeln!(s, "      {d}");
            }
            if v.details.len() > MAX_DETAILS {
                let _ = writeln!(s, "      … and {} more", v.details.len() - MAX_DETAILS);
            }
        }
        s.push('\n');
    }
    s.push_str("The checks live in crates/tidy (run them with `cargo test -p iris-tidy`).\n");
    s
}

/// The files and functions near a limit, under a heading; empty when there are none.
pub fn render_near(near: &[String]) -> String {
    let mut s = String::new();
    if near.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "== Near a limit ({}): over {}% of it; split them before they reach it ==",
        near.len(),
        crate::checks::NEAR_LIMIT_PERCENT
    );
    for line in near {
        let _ = writeln!(s, "  {line}");
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_by_rule() {
        let v = |rule, path: &str| Violation {
            rule,
            path: path.to_string(),
            line: 3,
            message: "msg".to_string(),
            hint: "do this".to_string(),
            details: vec!["detail".to_string()],
        };
        let text = render(&[v(Rule::Unwrap, "a.rs"), v(Rule::Layers, "b.rs")]);
        assert!(text.starts_with("The house rules are broken in 2 places."));
        let layers = text.find("== Layers (1) ==").expect("layers section");
        let unwrap = text.find("== No unwrap (1) ==").expect("unwrap section");
        assert!(layers < unwrap);
        assert!(text.contains("  b.rs:3: msg (hint: do this)\n      detail\n"));
        assert!(text.contains("The layer tables are in ARCHITECTURE.md"));
        assert!(!text.contains("== File size"));
    }
}
