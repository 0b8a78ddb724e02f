//! JavaScript functions and their length, found by brace matching on stripped source, and the
//! static imports of a module.
//!
//! Not a parser: it recognizes `function` declarations and expressions (also `function*`),
//! arrow functions with a block body (`(a) => {`, `a => {`), and methods (`name(…) {`, also
//! `async`, `get`, `set`, `static`, `#private`). That covers the way the web client is written.

use std::collections::BTreeMap;

use crate::lex::{self, is_ident_byte, Lines};

/// A function: its name (or what it is assigned to, or `<anonymous>`), the line where it
/// starts and its length in lines up to the closing brace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsFn {
    pub name: String,
    pub line: usize,
    pub lines: usize,
}

/// Words that take `(…) {` but are not methods.
const NOT_METHODS: &[&str] = &[
    "if",
    "for",
    "while",
    "switch",
    "catch",
    "with",
    "function",
    "return",
    "typeof",
    "await",
    "new",
    "delete",
    "void",
    "in",
    "of",
    "instanceof",
    "yield",
    "else",
    "do",
    "case",
];

/// Every function with a block body in `src`.
pub fn functions(src: &str) -> Vec<JsFn> {
    let code = lex::strip_js(src);
    let b = code.as_bytes();
    let lines = Lines::new(&code);
    // Keyed by the offset of the body's `{`, so a body is counted once: (name, start offset).
    let mut found: BTreeMap<usize, (String, usize)> = BTreeMap::new();
    let mut i = 0;
    while i < b.len() {
        if !is_ident_byte(b[i]) || (i > 0 && is_ident_byte(b[i - 1])) {
            if b[i] == b'=' && b.get(i + 1) == Some(&b'>') {
                if let Some((open, head)) = arrow(b, i) {
                    let name = assigned_name(b, head).unwrap_or_else(|| "<arrow>".to_string());
                    found.entry(open).or_insert((name, head));
                }
            }
            i += 1;
            continue;
        }
        let end = word_end(b, i);
        let word = &code[i..end];
        if word == "function" {
            if let Some((open, name)) = function_keyword(b, end) {
                let name = name
                    .or_else(|| assigned_name(b, i))
                    .unwrap_or_else(|| "<anonymous>".to_string());
                found.entry(open).or_insert((name, i));
            }
        } else if !NOT_METHODS.contains(&word) && !word.as_bytes()[0].is_ascii_digit() {
            let paren = skip_ws(b, end);
            if b.get(paren) == Some(&b'(') && !after_dot(b, i) {
                if let Some(open) = body_after_params(b, paren) {
                    found.entry(open).or_insert((word.to_string(), i));
                }
            }
        }
        i = end;
    }
    found
        .into_iter()
        .filter_map(|(open, (name, start))| {
            let close = lex::matching(b, open)?;
            let line = lines.line(start);
            Some(JsFn {
                name,
                line,
                lines: lines.line(close) - line + 1,
            })
        })
        .collect()
}

/// After the word `function` (at `end`): optional `*`, optional name, parameters, `{`.
fn function_keyword(b: &[u8], end: usize) -> Option<(usize, Option<String>)> {
    let mut k = skip_ws(b, end);
    if b.get(k) == Some(&b'*') {
        k = skip_ws(b, k + 1);
    }
    let mut name = None;
    if b.get(k).is_some_and(|&c| is_ident_byte(c)) {
        let e = word_end(b, k);
        name = Some(String::from_utf8_lossy(&b[k..e]).into_owned());
        k = skip_ws(b, e);
    }
    if b.get(k) != Some(&b'(') {
        return None;
    }
    Some((body_after_params(b, k)?, name))
}

/// Given the `(` of a parameter list: the offset of the `{` that follows its `)`, if any.
fn body_after_params(b: &[u8], paren: usize) -> Option<usize> {
    let close = lex::matching(b, paren)?;
    let open = skip_ws(b, close + 1);
    (b.get(open) == Some(&b'{')).then_some(open)
}

/// At `=>` (offset of `=`): if a block body follows, its `{` and where the parameters start.
fn arrow(b: &[u8], at: usize) -> Option<(usize, usize)> {
    let open = skip_ws(b, at + 2);
    if b.get(open) != Some(&b'{') {
        return None;
    }
    let last = back_ws(b, at)?;
    let head = if b[last] == b')' {
        matching_back(b, last)?
    } else if is_ident_byte(b[last]) {
        word_start(b, last)
    } else {
        return None;
    };
    // Include a leading `async`.
    let head = match back_ws(b, head) {
        Some(p) if is_ident_byte(b[p]) && &b[word_start(b, p)..=p] == b"async" => word_start(b, p),
        _ => head,
    };
    Some((open, head))
}

/// The name a function expression starting at `head` is given: `name = …`, `name: …`.
fn assigned_name(b: &[u8], head: usize) -> Option<String> {
    let mut p = back_ws(b, head)?;
    if b[p] != b'=' && b[p] != b':' {
        return None;
    }
    if b[p] == b'=' && p > 0 && matches!(b[p - 1], b'=' | b'!' | b'<' | b'>') {
        return None;
    }
    p = back_ws(b, p)?;
    if !is_ident_byte(b[p]) {
        return None;
    }
    let s = word_start(b, p);
    Some(String::from_utf8_lossy(&b[s..=p]).into_owned())
}

fn after_dot(b: &[u8], i: usize) -> bool {
    back_ws(b, i).is_some_and(|p| b[p] == b'.')
}

fn matching_back(b: &[u8], close: usize) -> Option<usize> {
    let mut depth = 0usize;
    for k in (0..=close).rev() {
        match b[k] {
            b')' => depth += 1,
            b'(' => {
                depth -= 1;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
}

fn word_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && is_ident_byte(b[i]) {
        i += 1;
    }
    i
}

fn word_start(b: &[u8], mut i: usize) -> usize {
    while i > 0 && is_ident_byte(b[i - 1]) {
        i -= 1;
    }
    i
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// The last non-whitespace offset before `i`.
fn back_ws(b: &[u8], i: usize) -> Option<usize> {
    (0..i).rev().find(|&k| !b[k].is_ascii_whitespace())
}

/// The static imports of a module (`import … from './x.js'`, `import './x.js'`, `export … from
/// './x.js'`), each with its line, as written. Found per line: an import's `from` may be on a
/// later line (`} from './x.js';`). `import()` expressions are not imports here: what is loaded
/// later cannot hold a module up while it loads.
pub fn imports(src: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut open = false;
    for (i, line) in src.lines().enumerate() {
        let t = line.trim_start();
        let starts =
            t.starts_with("import ") || t.starts_with("import{") || t.starts_with("export ");
        if !(starts || open) {
            continue;
        }
        let spec = quoted_after(t, "from ").or_else(|| quoted_after(t, "import "));
        match spec {
            Some(spec) => {
                out.push((i + 1, spec));
                open = false;
            }
            // `import {` … continues until its `from`; an `export` without `from` declares.
            None => {
                open = (starts && t.starts_with("import") && !t.contains('('))
                    || (open && !t.ends_with(';'))
            }
        }
    }
    out
}

/// The string literal right after `word` in `line`.
fn quoted_after(line: &str, word: &str) -> Option<String> {
    let at = line.find(word)? + word.len();
    let rest = line[at..].trim_start();
    let quote = rest.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let body = &rest[1..];
    Some(body[..body.find(quote)?].to_string())
}

/// The module a relative import names, as a path relative to the same root as `from` (`None`
/// for a bare or absolute specifier, or one that leaves the root).
pub fn resolve(from: &str, spec: &str) -> Option<String> {
    if !spec.starts_with("./") && !spec.starts_with("../") {
        return None;
    }
    let mut parts: Vec<&str> = from.split('/').collect();
    parts.pop();
    for part in spec.split('/') {
        match part {
            "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(src: &str) -> Vec<(String, usize, usize)> {
        functions(src)
            .into_iter()
            .map(|f| (f.name, f.line, f.lines))
            .collect()
    }

    #[test]
    fn declarations_expressions_arrows_methods() {
        let src = r#"function top(a, b = {x: 1}) {
  if (a) { return '}'; }
}
const handler = async (ev) => {
  const s = `${ev.type} }`;
};
export const short = x => x + 1;
class Box {
  constructor() {
    this.on('x', function () { });
  }
  async load(url) {
    for (const k of [1]) { }
  }
  get size() { return 1; }
}
const obj = { method(a) {
  return a;
}, arrow: () => {
} };
items.forEach(function* gen() {
});
"#;
        assert_eq!(
            summary(src),
            [
                ("top".to_string(), 1, 3),
                ("handler".to_string(), 4, 3),
                ("constructor".to_string(), 9, 3),
                ("<anonymous>".to_string(), 10, 1),
                ("load".to_string(), 12, 3),
                ("size".to_string(), 15, 1),
                ("method".to_string(), 17, 3),
                ("arrow".to_string(), 19, 2),
                ("gen".to_string(), 21, 2),
            ]
        );
    }

    #[test]
    fn calls_and_control_flow_are_not_functions() {
        let src = "if (a) {\n}\nwhile (b) { }\nfoo(bar);\nx.then(y => y);\ntry { } catch (e) { }\n";
        assert!(summary(src).is_empty(), "{:?}", summary(src));
    }

    #[test]
    fn regex_with_braces_does_not_break_matching() {
        let src = "function f(s) {\n  return s.replace(/[{}]/g, '');\n}\nfunction g() {\n}\n";
        assert_eq!(
            summary(src),
            [("f".to_string(), 1, 3), ("g".to_string(), 4, 2)]
        );
    }

    #[test]
    fn static_imports_and_where_they_lead() {
        let src = "// import x from './comment.js' is not code at the start\nimport { a } from './a.js';\nimport {\n  b,\n  c,\n} from \"../lib/b.js\";\nimport './side.js';\nexport { d } from './d.js';\nexport function e() {}\nconst f = await import('./later.js');\n";
        assert_eq!(
            imports(src),
            [
                (2, "./a.js".to_string()),
                (6, "../lib/b.js".to_string()),
                (7, "./side.js".to_string()),
                (8, "./d.js".to_string()),
            ]
        );
        assert_eq!(
            resolve("views/x.js", "../lib/b.js").as_deref(),
            Some("lib/b.js")
        );
        assert_eq!(resolve("x.js", "./a.js").as_deref(), Some("a.js"));
        assert_eq!(resolve("x.js", "../out.js"), None);
        assert_eq!(resolve("x.js", "vendor-name"), None);
    }
}
