//! Blanking of comments and literals.
//!
//! Every scanner in this crate works on a copy of the source in which comments and the insides
//! of string, char and regex literals are replaced by spaces. Newlines are kept and no byte
//! moves, so an offset in the copy is the same offset in the original file and line numbers
//! stay true. Literal delimiters (the quotes) are kept, so `"{"` becomes `" "` and can no longer
//! confuse brace matching.

/// Returns `src` with Rust comments (line, block, nested block, doc) and the contents of string,
/// raw string, byte string, C string, char and byte literals replaced by spaces.
pub fn strip_rust(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && at(b, i + 1) == b'/' {
            let end = line_end(b, i);
            blank(&mut out, i, end);
            i = end;
        } else if c == b'/' && at(b, i + 1) == b'*' {
            let end = rust_block_comment_end(b, i);
            blank(&mut out, i, end);
            i = end;
        } else if c == b'"' {
            i = escaped_literal(b, &mut out, i, b'"', true);
        } else if c == b'\'' {
            i = char_or_lifetime(b, &mut out, i);
        } else if is_ident_byte(c) {
            i = ident_or_prefixed_literal(b, &mut out, i);
        } else {
            i += 1;
        }
    }
    into_string(out, src)
}

/// Returns `src` with JavaScript comments and the contents of string, template and regex
/// literals replaced by spaces. Code inside `${…}` of a template literal stays code.
pub fn strip_js(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = b.to_vec();
    // One entry per open `${` of a template literal: the brace depth inside that expression.
    let mut templates: Vec<usize> = Vec::new();
    let mut depth = 0usize;
    let mut prev = Prev::Start;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && at(b, i + 1) == b'/' {
            let end = line_end(b, i);
            blank(&mut out, i, end);
            i = end;
        } else if c == b'/' && at(b, i + 1) == b'*' {
            let end = find(b, i + 2, b"*/").map_or(b.len(), |e| e + 2);
            blank(&mut out, i, end);
            i = end;
        } else if c == b'/' && prev.allows_regex() {
            i = js_regex(b, &mut out, i);
            prev = Prev::Value;
        } else if c == b'"' || c == b'\'' {
            i = escaped_literal(b, &mut out, i, c, false);
            prev = Prev::Value;
        } else if c == b'`' || (c == b'}' && depth == 0 && !templates.is_empty()) {
            if c == b'}' {
                // The end of a `${…}` expression: the template literal goes on.
                depth = templates.pop().unwrap_or(0);
            }
            i = js_template(b, &mut out, i + 1);
            if b[..i].ends_with(b"${") {
                templates.push(depth);
                depth = 0;
                prev = Prev::Punct(b'{');
            } else {
                prev = Prev::Value;
            }
        } else if is_ident_byte(c) {
            let end = ident_end(b, i);
            prev = Prev::word(&b[i..end]);
            i = end;
        } else {
            if c == b'{' {
                depth += 1;
            } else if c == b'}' {
                depth = depth.saturating_sub(1);
            }
            if !c.is_ascii_whitespace() {
                prev = Prev::Punct(c);
            }
            i += 1;
        }
    }
    into_string(out, src)
}

/// What came before a `/` in JavaScript, to tell a regex literal from a division.
#[derive(Clone, Copy)]
enum Prev {
    Start,
    Punct(u8),
    /// A keyword after which an expression starts (`return /x/`).
    Keyword,
    /// An identifier, number or literal: a `/` after it divides.
    Value,
}

impl Prev {
    fn word(w: &[u8]) -> Prev {
        const BEFORE_EXPR: &[&[u8]] = &[
            b"return",
            b"typeof",
            b"case",
            b"do",
            b"else",
            b"in",
            b"of",
            b"new",
            b"delete",
            b"void",
            b"throw",
            b"instanceof",
            b"yield",
            b"await",
        ];
        if BEFORE_EXPR.contains(&w) {
            Prev::Keyword
        } else {
            Prev::Value
        }
    }

    fn allows_regex(self) -> bool {
        match self {
            Prev::Start | Prev::Keyword => true,
            Prev::Punct(c) => !matches!(c, b')' | b']'),
            Prev::Value => false,
        }
    }
}

/// Blanks a template literal body starting after the opening backtick. Returns the offset after
/// the closing backtick, or after a `${` (the caller then scans the expression as code).
fn js_template(b: &[u8], out: &mut [u8], mut i: usize) -> usize {
    while i < b.len() {
        match b[i] {
            b'\\' => {
                blank(out, i, (i + 2).min(b.len()));
                i += 2;
            }
            b'`' => return i + 1,
            b'$' if at(b, i + 1) == b'{' => return i + 2,
            _ => {
                blank(out, i, i + 1);
                i += 1;
            }
        }
    }
    b.len()
}

/// Blanks a regex literal starting at the `/`. A regex never spans lines: if no closing `/` is
/// found on the line, the `/` was a division after all and nothing is blanked.
fn js_regex(b: &[u8], out: &mut [u8], start: usize) -> usize {
    let mut i = start + 1;
    let mut class = false;
    while i < b.len() && b[i] != b'\n' {
        match b[i] {
            b'\\' => i += 1,
            b'[' => class = true,
            b']' => class = false,
            b'/' if !class => {
                blank(out, start + 1, i);
                return i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    start + 1
}

/// Blanks a quoted literal with backslash escapes whose opening quote is at `start`. Returns
/// the offset after the closing quote. A Rust string may span lines (`multiline`); an
/// unterminated JavaScript string stops at the end of its line.
fn escaped_literal(b: &[u8], out: &mut [u8], start: usize, quote: u8, multiline: bool) -> usize {
    let mut i = start + 1;
    while i < b.len() {
        if b[i] == b'\\' {
            i += 2;
        } else if b[i] == quote {
            blank(out, start + 1, i);
            return i + 1;
        } else if b[i] == b'\n' && !multiline {
            break;
        } else {
            i += 1;
        }
    }
    let end = i.min(b.len());
    blank(out, start + 1, end);
    end
}

/// At a `'` in Rust: a char literal (`'a'`, `'\n'`, `'\u{1F600}'`, `'é'`) is blanked; a lifetime
/// or label (`'a`, `'static`, `'outer:`) is left alone.
fn char_or_lifetime(b: &[u8], out: &mut [u8], start: usize) -> usize {
    let next = at(b, start + 1);
    if next == b'\\' {
        let mut i = start + 3;
        while i < b.len() && b[i] != b'\'' && b[i] != b'\n' {
            i += 1;
        }
        if at(b, i) == b'\'' {
            blank(out, start + 1, i);
            return i + 1;
        }
        return start + 1;
    }
    let len = utf8_len(next);
    if next != 0 && next != b'\n' && at(b, start + 1 + len) == b'\'' {
        blank(out, start + 1, start + 1 + len);
        return start + 2 + len;
    }
    start + 1
}

/// At the first byte of a Rust identifier: skips it, or handles a literal prefix (`r"…"`,
/// `r#"…"#`, `b"…"`, `br#"…"#`, `c"…"`, `b'x'`). A raw identifier (`r#type`) is not a string.
fn ident_or_prefixed_literal(b: &[u8], out: &mut [u8], start: usize) -> usize {
    let end = ident_end(b, start);
    let word = &b[start..end];
    let next = at(b, end);
    if matches!(word, b"r" | b"br" | b"cr") && (next == b'"' || next == b'#') {
        let mut hashes = 0;
        while at(b, end + hashes) == b'#' {
            hashes += 1;
        }
        if at(b, end + hashes) == b'"' {
            return raw_string(b, out, end + hashes, hashes);
        }
    } else if matches!(word, b"b" | b"c") && next == b'"' {
        return escaped_literal(b, out, end, b'"', true);
    } else if word == b"b" && next == b'\'' {
        let after = char_or_lifetime(b, out, end);
        return after.max(end + 1);
    }
    end
}

/// Blanks a raw string whose opening quote is at `quote`, closed by `"` and `hashes` hashes.
fn raw_string(b: &[u8], out: &mut [u8], quote: usize, hashes: usize) -> usize {
    let mut i = quote + 1;
    while i < b.len() {
        if b[i] == b'"' && (1..=hashes).all(|k| at(b, i + k) == b'#') {
            blank(out, quote + 1, i);
            return i + 1 + hashes;
        }
        i += 1;
    }
    blank(out, quote + 1, b.len());
    b.len()
}

/// The end of a Rust block comment starting at `start`; block comments nest.
fn rust_block_comment_end(b: &[u8], start: usize) -> usize {
    let mut depth = 0usize;
    let mut i = start;
    while i < b.len() {
        if b[i] == b'/' && at(b, i + 1) == b'*' {
            depth += 1;
            i += 2;
        } else if b[i] == b'*' && at(b, i + 1) == b'/' {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    b.len()
}

/// Whether a byte can be part of an identifier (ASCII alphanumeric, `_`, `$` for JavaScript, or
/// any byte of a non-ASCII character).
pub fn is_ident_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80
}

fn ident_end(b: &[u8], start: usize) -> usize {
    let mut i = start;
    while i < b.len() && is_ident_byte(b[i]) {
        i += 1;
    }
    i
}

fn line_end(b: &[u8], start: usize) -> usize {
    find(b, start, b"\n").unwrap_or(b.len())
}

fn find(b: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    if from >= b.len() {
        return None;
    }
    b[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

fn at(b: &[u8], i: usize) -> u8 {
    b.get(i).copied().unwrap_or(0)
}

fn utf8_len(first: u8) -> usize {
    match first {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

/// Replaces `out[from..to]` by spaces, keeping newlines.
pub fn blank(out: &mut [u8], from: usize, to: usize) {
    let to = to.min(out.len());
    for byte in out.iter_mut().take(to).skip(from) {
        if *byte != b'\n' {
            *byte = b' ';
        }
    }
}

/// Whole characters are blanked, so the bytes stay UTF-8; the fallback only guards against a
/// malformed literal cut in the middle of a character.
fn into_string(out: Vec<u8>, src: &str) -> String {
    match String::from_utf8(out) {
        Ok(s) => s,
        Err(e) => {
            let lossy = String::from_utf8_lossy(e.as_bytes()).into_owned();
            if lossy.len() == src.len() {
                lossy
            } else {
                // Keep offsets: replace every non-ASCII byte by a space.
                e.as_bytes()
                    .iter()
                    .map(|&c| if c < 0x80 { c as char } else { ' ' })
                    .collect()
            }
        }
    }
}

/// Offsets of the first byte of every line, for turning offsets into 1-based line numbers.
pub struct Lines {
    starts: Vec<usize>,
}

impl Lines {
    pub fn new(text: &str) -> Lines {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Lines { starts }
    }

    /// The 1-based line of a byte offset.
    pub fn line(&self, offset: usize) -> usize {
        match self.starts.binary_search(&offset) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }
}

/// The number of lines of a text, as an editor shows them (a final newline ends the last line).
pub fn line_count(text: &str) -> usize {
    let n = text.matches('\n').count();
    if text.is_empty() || text.ends_with('\n') {
        n
    } else {
        n + 1
    }
}

/// Given the offset of an opening `{`, `(` or `[` in stripped text, the offset of its match.
pub fn matching(code: &[u8], open: usize) -> Option<usize> {
    let (o, c) = match code.get(open)? {
        b'{' => (b'{', b'}'),
        b'(' => (b'(', b')'),
        b'[' => (b'[', b']'),
        _ => return None,
    };
    let mut depth = 0usize;
    for (i, &byte) in code.iter().enumerate().skip(open) {
        if byte == o {
            depth += 1;
        } else if byte == c {
            depth -= 1;
            if depth == 0 {
                return Some(i);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same_shape(a: &str, b: &str) {
        assert_eq!(a.len(), b.len());
        assert_eq!(a.matches('\n').count(), b.matches('\n').count());
    }

    #[test]
    fn rust_comments_are_blanked_and_lines_kept() {
        let src = "a // x.unwrap()\n/* one /* two */ still */ b\n/// doc {\n//! inner }\nc";
        let out = strip_rust(src);
        same_shape(src, &out);
        assert_eq!(out.split_whitespace().collect::<Vec<_>>(), ["a", "b", "c"]);
    }

    #[test]
    fn rust_strings_keep_quotes_only() {
        let src = r###"let s = "a \" { b"; let r = r#"x "} y"#; let t = br##"q"#"##;"###;
        let out = strip_rust(src);
        same_shape(src, &out);
        assert!(!out.contains('{') && !out.contains('}') && !out.contains('q'));
        assert!(out.ends_with("br##\"   \"##;"), "{out}");
        let bytes = strip_rust(r#"let b = b"{\"}"; let c = c"}";"#);
        assert!(!bytes.contains('{') && !bytes.contains('}'));
    }

    #[test]
    fn raw_identifiers_are_not_strings() {
        let out = strip_rust("let r#type = 1; let x = \"a\";");
        assert_eq!(out, "let r#type = 1; let x = \" \";");
    }

    #[test]
    fn chars_versus_lifetimes() {
        let src = "fn f<'a>(x: &'a str) -> char { 'outer: loop { break 'outer; } '{' }";
        let out = strip_rust(src);
        assert!(out.contains("<'a>") && out.contains("&'a str") && out.contains("'outer;"));
        assert!(out.ends_with("' ' }"));
        let escaped = strip_rust(r"let q = '\''; let u = '\u{1F600}'; let b = b'}'; x");
        assert_eq!(escaped.matches('}').count(), 0);
        assert!(escaped.ends_with("; x"));
        let quote = strip_rust("let q = '\"'; let s = \"{\"; x");
        assert_eq!(quote, "let q = ' '; let s = \" \"; x");
        let wide = strip_rust("let e = 'é'; let s = \"ünï\"; 'a");
        same_shape("let e = 'é'; let s = \"ünï\"; 'a", &wide);
        assert!(wide.ends_with("'a"));
    }

    #[test]
    fn multi_line_strings() {
        let src = "let s = \"line {\n still }\";\nfn f() {}";
        let out = strip_rust(src);
        same_shape(src, &out);
        assert!(out.ends_with("\";\nfn f() {}"));
    }

    #[test]
    fn js_strings_comments_templates() {
        let src =
            "const a = '}'; // {\nconst b = `x ${ f({y: 1}) } \\` }`; /* { */ const c = \"{\";";
        let out = strip_js(src);
        same_shape(src, &out);
        let opens = out.matches('{').count();
        let closes = out.matches('}').count();
        assert_eq!(opens, closes, "{out}");
        assert!(out.contains("f({y: 1})"));
        let nested = strip_js("`a ${ `b ${ c } }` } d` + x");
        assert!(
            nested.contains(" c ") && nested.ends_with("` + x"),
            "{nested}"
        );
    }

    #[test]
    fn js_regex_versus_division() {
        let out =
            strip_js("const r = /[}{]\\//g; const d = a / b / c; if (x) { return /{/.test(s) }");
        assert_eq!(out.matches('{').count(), 1, "{out}");
        assert_eq!(out.matches('}').count(), 1, "{out}");
        assert!(out.contains("a / b / c"));
    }

    #[test]
    fn line_numbers() {
        let lines = Lines::new("a\nbc\n\nd");
        assert_eq!(lines.line(0), 1);
        assert_eq!(lines.line(2), 2);
        assert_eq!(lines.line(3), 2);
        assert_eq!(lines.line(5), 3);
        assert_eq!(lines.line(6), 4);
        assert_eq!(line_count("a\nb\n"), 2);
        assert_eq!(line_count("a\nb"), 2);
        assert_eq!(line_count(""), 0);
    }

    #[test]
    fn brace_matching() {
        let code = b"f(a, (b)) { x { } }";
        assert_eq!(matching(code, 1), Some(8));
        assert_eq!(matching(code, 10), Some(18));
    }
}
