//! A small Rust scanner: tokens of stripped source, `#[cfg(test)]` items, functions, `.unwrap()`
//! calls, and the module paths a file mentions (`use` trees expanded).

use crate::lex::{self, Lines};

/// One token of stripped Rust: an identifier or number, `::`, or a single punctuation byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub text: String,
    pub offset: usize,
}

impl Token {
    fn is(&self, s: &str) -> bool {
        self.text == s
    }

    fn is_ident(&self) -> bool {
        self.text
            .bytes()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_' || c >= 0x80)
    }
}

/// Splits stripped Rust into tokens. Whitespace separates; `::` is one token.
pub fn tokenize(code: &str) -> Vec<Token> {
    let b = code.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if lex::is_ident_byte(c) && c != b'$' {
            let start = i;
            while i < b.len() && lex::is_ident_byte(b[i]) && b[i] != b'$' {
                i += 1;
            }
            tokens.push(Token {
                text: code[start..i].to_string(),
                offset: start,
            });
        } else if c == b':' && b.get(i + 1) == Some(&b':') {
            tokens.push(Token {
                text: "::".to_string(),
                offset: i,
            });
            i += 2;
        } else {
            tokens.push(Token {
                text: (c as char).to_string(),
                offset: i,
            });
            i += 1;
        }
    }
    tokens
}

/// A Rust file made ready for the checks: comments, literals and test-only items blanked.
pub struct RustFile {
    /// The stripped source with every `#[cfg(test)]` item blanked too.
    pub code: String,
    pub tokens: Vec<Token>,
    pub lines: Lines,
    /// Child modules declared `#[cfg(test)] mod name;`: their files are test code.
    pub test_modules: Vec<String>,
    /// The file starts with `#![cfg(test)]`.
    pub test_only: bool,
}

impl RustFile {
    pub fn parse(src: &str) -> RustFile {
        let mut code = lex::strip_rust(src).into_bytes();
        let tokens = tokenize(std::str::from_utf8(&code).unwrap_or_default());
        let mut test_modules = Vec::new();
        let mut test_only = false;
        let mut i = 0;
        while i < tokens.len() {
            let Some((attr_end, inner)) = cfg_test_attribute(&tokens, i) else {
                i += 1;
                continue;
            };
            if inner {
                test_only = true;
                break;
            }
            let (end, module) = item_end(&tokens, &code, attr_end);
            if let Some(name) = module {
                test_modules.push(name);
            }
            let to = tokens.get(end).map_or(code.len(), |t| t.offset + 1);
            lex::blank(&mut code, tokens[i].offset, to);
            i = end + 1;
        }
        let code = String::from_utf8(code).unwrap_or_default();
        let tokens = tokenize(&code);
        RustFile {
            lines: Lines::new(&code),
            code,
            tokens,
            test_modules,
            test_only,
        }
    }

    pub fn line(&self, token: usize) -> usize {
        self.lines.line(self.tokens[token].offset)
    }
}

/// If tokens at `i` are `#[cfg(test)]` (or `#[cfg(all(test, …))]`, or the inner `#![…]` form),
/// returns the index after the closing `]` and whether it is an inner attribute.
fn cfg_test_attribute(t: &[Token], i: usize) -> Option<(usize, bool)> {
    if !t[i].is("#") {
        return None;
    }
    let mut j = i + 1;
    let inner = t.get(j).is_some_and(|x| x.is("!"));
    if inner {
        j += 1;
    }
    let texts: Vec<&str> = t[j..].iter().take(4).map(|x| x.text.as_str()).collect();
    if texts != ["[", "cfg", "(", "test"] && texts != ["[", "cfg", "(", "all"] {
        return None;
    }
    let close = close_index(t, j)?;
    let inside = &t[j + 3..close - 1];
    let test_only = match inside {
        [only] => only.is("test"),
        // `all(…)` with `test` as one of its direct arguments (not inside `not(…)`).
        [all, args @ ..] if all.is("all") => {
            let mut depth = 0usize;
            args.iter().any(|x| {
                match x.text.as_str() {
                    "(" => depth += 1,
                    ")" => depth = depth.saturating_sub(1),
                    _ => {}
                }
                depth == 1 && x.is("test")
            })
        }
        _ => false,
    };
    // An inner `#![cfg(test)]` makes the whole file test code only at the top of the file.
    let top_level = !inner || t[..i].iter().all(|x| !x.is("{"));
    (test_only && top_level).then_some((close + 1, inner))
}

/// The index of the token closing the bracket opened at `open` (`(`, `[` or `{`).
fn close_index(t: &[Token], open: usize) -> Option<usize> {
    let (o, c) = match t.get(open)?.text.as_str() {
        "(" => ("(", ")"),
        "[" => ("[", "]"),
        "{" => ("{", "}"),
        _ => return None,
    };
    let mut depth = 0usize;
    for (k, tok) in t.iter().enumerate().skip(open) {
        if tok.is(o) {
            depth += 1;
        } else if tok.is(c) {
            depth -= 1;
            if depth == 0 {
                return Some(k);
            }
        }
    }
    None
}

/// The last token of the item starting at `start` (after one attribute): further attributes
/// are skipped, then the item ends at its closing brace or at a `;` outside brackets. Also
/// returns the name if the item is a module declaration without a body (`mod name;`).
fn item_end(t: &[Token], code: &[u8], mut start: usize) -> (usize, Option<String>) {
    while t.get(start).is_some_and(|x| x.is("#")) {
        let open = start + 1 + usize::from(t.get(start + 1).is_some_and(|x| x.is("!")));
        match close_index(t, open) {
            Some(close) => start = close + 1,
            None => return (t.len(), None),
        }
    }
    let mut depth = 0usize;
    let mut k = start;
    while k < t.len() {
        match t[k].text.as_str() {
            "(" | "[" => depth += 1,
            ")" | "]" => depth = depth.saturating_sub(1),
            "{" if depth == 0 => {
                let close = lex::matching(code, t[k].offset);
                let end = close.and_then(|c| t.iter().position(|x| x.offset == c));
                return (end.unwrap_or(t.len()), None);
            }
            ";" if depth == 0 => {
                let module = (k >= 2 && t[k - 2].is("mod")).then(|| t[k - 1].text.clone());
                return (k, module);
            }
            _ => {}
        }
        k += 1;
    }
    (t.len(), None)
}

/// A function with a body: its name, the line of `fn` and its length in lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FnSpan {
    pub name: String,
    pub line: usize,
    pub lines: usize,
}

/// Every `fn` with a body, from the line of `fn` to the line of its closing brace.
pub fn functions(file: &RustFile) -> Vec<FnSpan> {
    let t = &file.tokens;
    let code = file.code.as_bytes();
    let mut out = Vec::new();
    for i in 0..t.len() {
        if !t[i].is("fn") || !t.get(i + 1).is_some_and(Token::is_ident) {
            continue;
        }
        let mut depth = 0usize;
        for tok in &t[i + 2..] {
            match tok.text.as_str() {
                "(" | "[" => depth += 1,
                ")" | "]" => depth = depth.saturating_sub(1),
                ";" if depth == 0 => break,
                "{" if depth == 0 => {
                    if let Some(close) = lex::matching(code, tok.offset) {
                        let line = file.line(i);
                        out.push(FnSpan {
                            name: t[i + 1].text.clone(),
                            line,
                            lines: file.lines.line(close) - line + 1,
                        });
                    }
                    break;
                }
                _ => {}
            }
        }
    }
    out
}

/// Lines with a `.unwrap()` call.
pub fn unwraps(file: &RustFile) -> Vec<usize> {
    let t = &file.tokens;
    (1..t.len().saturating_sub(2))
        .filter(|&i| t[i - 1].is(".") && t[i].is("unwrap") && t[i + 1].is("(") && t[i + 2].is(")"))
        .map(|i| file.line(i))
        .collect()
}

/// A path a file mentions, as written (after expanding `use` groups).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawPath {
    pub line: usize,
    /// Segments as written: `["super", "lane", "LaneCmd"]`, `["crate", "hub", "*"]`.
    pub segments: Vec<String>,
    /// Names of the inline modules (`mod x { … }`) the path sits in, outermost first.
    pub scope: Vec<String>,
    /// From a `use` item; then `alias` is the name it brings into scope, if any.
    pub from_use: bool,
    pub alias: Option<String>,
    /// A macro invocation (`crate::name!`).
    pub is_macro: bool,
}

/// What a file mentions: paths, and the inline modules it declares (as scopes).
#[derive(Debug, Default)]
pub struct Scan {
    pub paths: Vec<RawPath>,
    pub inline_modules: Vec<Vec<String>>,
}

/// Collects every multi-segment path (`a::b`) and every `use` tree of the file.
pub fn scan(file: &RustFile) -> Scan {
    let t = &file.tokens;
    let mut out = Scan::default();
    // Open inline modules: name and the brace depth of their body.
    let mut scope: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < t.len() {
        let tok = &t[i];
        if tok.is("{") {
            depth += 1;
        } else if tok.is("}") {
            if scope.last().is_some_and(|(_, d)| *d == depth) {
                scope.pop();
            }
            depth = depth.saturating_sub(1);
        } else if tok.is("mod") && t.get(i + 2).is_some_and(|x| x.is("{")) {
            let mut names: Vec<String> = scope.iter().map(|(n, _)| n.clone()).collect();
            names.push(t[i + 1].text.clone());
            out.inline_modules.push(names);
            scope.push((t[i + 1].text.clone(), depth + 1));
        } else if tok.is("use") && (i == 0 || !t[i - 1].is("::")) {
            let end = (i..t.len()).find(|&k| t[k].is(";")).unwrap_or(t.len());
            let names: Vec<String> = scope.iter().map(|(n, _)| n.clone()).collect();
            for (segments, alias) in expand_use(&t[i + 1..end]) {
                out.paths.push(RawPath {
                    line: file.line(i),
                    segments,
                    scope: names.clone(),
                    from_use: true,
                    alias,
                    is_macro: false,
                });
            }
            i = end;
        } else if tok.is_ident()
            && t.get(i + 1).is_some_and(|x| x.is("::"))
            && (i == 0 || !t[i - 1].is("::"))
        {
            let mut segments = vec![tok.text.clone()];
            let mut k = i + 1;
            while t.get(k).is_some_and(|x| x.is("::")) && t.get(k + 1).is_some_and(Token::is_ident)
            {
                segments.push(t[k + 1].text.clone());
                k += 2;
            }
            out.paths.push(RawPath {
                line: file.line(i),
                segments,
                scope: scope.iter().map(|(n, _)| n.clone()).collect(),
                from_use: false,
                alias: None,
                is_macro: t.get(k).is_some_and(|x| x.is("!")),
            });
            i = k;
            continue;
        }
        i += 1;
    }
    out
}

/// Expands the tree of one `use` item (the tokens between `use` and `;`) into full paths, each
/// with its `as` alias: `a::{b, c::{self, d as e}}` gives `a::b`, `a::c`, `a::c::d` (as `e`).
pub fn expand_use(tokens: &[Token]) -> Vec<(Vec<String>, Option<String>)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let before = i;
        use_tree(tokens, &mut i, Vec::new(), &mut out);
        if i == before {
            i += 1;
        }
    }
    out
}

fn use_tree(
    t: &[Token],
    i: &mut usize,
    mut path: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    if t.get(*i).is_some_and(|x| x.is("::")) {
        *i += 1;
    }
    while let Some(tok) = t.get(*i) {
        if tok.is("{") {
            *i += 1;
            while t.get(*i).is_some_and(|x| !x.is("}")) {
                let before = *i;
                use_tree(t, i, path.clone(), out);
                if t.get(*i).is_some_and(|x| x.is(",")) || *i == before {
                    *i += 1;
                }
            }
            *i += 1;
            return;
        }
        if tok.is("*") {
            *i += 1;
            path.push("*".to_string());
            out.push((path, None));
            return;
        }
        if !tok.is_ident() {
            return;
        }
        *i += 1;
        if t.get(*i).is_some_and(|x| x.is("::")) {
            path.push(tok.text.clone());
            *i += 1;
            continue;
        }
        // `self` in a group (`a::{self, b}`) stands for the group's own path.
        if !tok.is("self") || path.is_empty() {
            path.push(tok.text.clone());
        }
        let mut alias = None;
        if t.get(*i).is_some_and(|x| x.is("as")) {
            alias = t.get(*i + 1).map(|x| x.text.clone());
            *i += 2;
        }
        out.push((path, alias));
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(code: &str) -> Vec<String> {
        tokenize(code).into_iter().map(|t| t.text).collect()
    }

    #[test]
    fn tokens() {
        assert_eq!(
            texts("use a::{b,c};"),
            ["use", "a", "::", "{", "b", ",", "c", "}", ";"]
        );
        assert_eq!(texts("$crate::x"), ["$", "crate", "::", "x"]);
    }

    #[test]
    fn use_groups_expand() {
        let toks = tokenize("crate::{a::{self, b as c, d::*}, e, super::f}");
        let got = expand_use(&toks);
        let paths: Vec<String> = got.iter().map(|(p, _)| p.join("::")).collect();
        assert_eq!(
            paths,
            [
                "crate::a",
                "crate::a::b",
                "crate::a::d::*",
                "crate::e",
                "crate::super::f"
            ]
        );
        assert_eq!(got[1].1.as_deref(), Some("c"));
        let leading = expand_use(&tokenize("::std::{io, fmt}"));
        assert_eq!(leading.len(), 2);
        assert_eq!(leading[0].0, ["std", "io"]);
    }

    #[test]
    fn cfg_test_items_are_blanked() {
        let src = "fn keep() { x.unwrap() }\n#[cfg(test)]\n#[allow(dead_code)]\nmod tests {\n fn gone() { y.unwrap() }\n}\n#[cfg(all(test, unix))] fn also_gone() {}\n#[cfg(test)] mod extra;\n#[cfg(not(test))] fn stays() {}\n";
        let file = RustFile::parse(src);
        let names: Vec<String> = functions(&file).into_iter().map(|f| f.name).collect();
        assert_eq!(names, ["keep", "stays"]);
        assert_eq!(unwraps(&file), [1]);
        assert_eq!(file.test_modules, ["extra"]);
        assert!(!file.test_only);
        assert!(RustFile::parse("#![cfg(test)]\nfn a() {}").test_only);
        assert!(!RustFile::parse("mod m { #![cfg(test)] }").test_only);
        let not_test = RustFile::parse("#[cfg(all(unix, not(test)))]\nfn kept() {}");
        assert_eq!(functions(&not_test).len(), 1);
    }

    #[test]
    fn function_lengths() {
        let src = "fn one() {}\n\nimpl X {\n    pub fn two<T: Fn() -> u8>(\n        a: [u8; 2],\n    ) -> Result<(), E>\n    where T: Send {\n        let s = \"}\";\n    }\n}\ntrait T { fn decl(&self); }\ntype F = fn(u8) -> u8;\n";
        let file = RustFile::parse(src);
        let got = functions(&file);
        assert_eq!(
            got,
            [
                FnSpan {
                    name: "one".into(),
                    line: 1,
                    lines: 1
                },
                FnSpan {
                    name: "two".into(),
                    line: 4,
                    lines: 6
                },
            ]
        );
    }

    #[test]
    fn unwrap_calls() {
        let src = "a.unwrap();\nb.unwrap_or(1);\nlet s = \".unwrap()\"; // .unwrap()\nc\n  .unwrap ( );\n";
        assert_eq!(unwraps(&RustFile::parse(src)), [1, 5]);
    }

    #[test]
    fn paths_and_scopes() {
        let src = "use crate::a::{b, c};\nfn f() { crate::d::e(); super::g::H::new(); x.y; ::std::mem::drop(1); m::n!(); }\nmod inner {\n    use super::k;\n}\nfn after() { self::z::w(); }\n";
        let scan = scan(&RustFile::parse(src));
        let got: Vec<(usize, String, Vec<String>, bool)> = scan
            .paths
            .iter()
            .map(|p| (p.line, p.segments.join("::"), p.scope.clone(), p.is_macro))
            .collect();
        let inner = vec!["inner".to_string()];
        assert_eq!(
            got,
            [
                (1, "crate::a::b".into(), vec![], false),
                (1, "crate::a::c".into(), vec![], false),
                (2, "crate::d::e".into(), vec![], false),
                (2, "super::g::H::new".into(), vec![], false),
                (2, "m::n".into(), vec![], true),
                (4, "super::k".into(), inner.clone(), false),
                (6, "self::z::w".into(), vec![], false),
            ]
        );
        assert_eq!(scan.inline_modules, [inner]);
    }
}
