//! Markdown made harmless for the export: a reader (an editor's preview, a static site, a
//! Markdown viewer in a browser) must not run or fetch anything a message carries. Read by
//! pulldown-cmark, the text keeps its formatting, but
//! - raw HTML (blocks and inline tags, comments) is escaped and shows as text;
//! - a link to a `javascript:`, `vbscript:`, `data:` or `file:` address keeps its text only,
//!   followed by `(link removed)`;
//! - an image from a remote address (any scheme, or `//host`) becomes a plain link to it (an
//!   image of a scheme above, only its description), so opening the export fetches nothing;
//!   relative images (files next to the export) stay.

use std::ops::Range;

use pulldown_cmark::{Event, Parser, Tag, TagEnd};

/// Schemes a link in the export may not keep.
const UNSAFE_SCHEMES: [&str; 4] = ["javascript:", "vbscript:", "data:", "file:"];

/// `text` (Markdown) made harmless: see the module docs.
pub fn harmless(text: &str) -> String {
    let mut edits: Vec<(Range<usize>, String)> = Vec::new();
    // The link or image being replaced, with the text of its description so far.
    let mut open: Option<(Range<usize>, String, Option<String>, usize)> = None;
    for (event, range) in Parser::new(text).into_offset_iter() {
        if let Some((_, label, _, depth)) = open.as_mut() {
            match &event {
                Event::Start(Tag::Link { .. } | Tag::Image { .. }) => *depth += 1,
                Event::End(TagEnd::Link | TagEnd::Image) if *depth > 0 => *depth -= 1,
                Event::End(TagEnd::Link | TagEnd::Image) => {
                    if let Some((whole, label, link, _)) = open.take() {
                        edits.push((whole, replacement(&label, link.as_deref())));
                    }
                }
                Event::Text(t) | Event::Code(t) => label.push_str(t),
                _ => {}
            }
            continue;
        }
        match event {
            Event::Html(_) | Event::InlineHtml(_) => {
                edits.push((range.clone(), escape_html(&text[range])))
            }
            Event::Start(Tag::Link { dest_url, .. }) if is_unsafe(&dest_url) => {
                open = Some((range, String::new(), None, 0));
            }
            Event::Start(Tag::Image { dest_url, .. }) if is_remote(&dest_url) => {
                let link = (!is_unsafe(&dest_url)).then(|| dest_url.to_string());
                open = Some((range, String::new(), link, 0));
            }
            _ => {}
        }
    }
    let mut out = String::with_capacity(text.len() + 32);
    let mut at = 0;
    for (range, with) in edits {
        if range.start < at {
            continue;
        }
        out.push_str(&text[at..range.start]);
        out.push_str(&with);
        at = range.end;
    }
    out.push_str(&text[at..]);
    out
}

/// What a removed link or image leaves: its description as text, and the address of an image
/// as a link, `<…>`-quoted (a link to a remote image is a plain link, never a fetch).
fn replacement(label: &str, link: Option<&str>) -> String {
    let label = escape_markdown(label.trim());
    match link {
        Some(url) => {
            let url: String = url
                .chars()
                .filter(|c| !matches!(c, '<' | '>' | '\n'))
                .collect();
            let shown = if label.is_empty() {
                "image".to_owned()
            } else {
                label
            };
            format!("[{shown}](<{url}>)")
        }
        None if label.is_empty() => "(link removed)".to_owned(),
        None => format!("{label} (link removed)"),
    }
}

/// Whether a link's address uses a scheme the export drops (read as browsers read it: letter
/// case, spaces and control characters aside).
fn is_unsafe(url: &str) -> bool {
    let squeezed: String = url
        .chars()
        .filter(|c| !c.is_whitespace() && !c.is_control())
        .take(16)
        .collect::<String>()
        .to_ascii_lowercase();
    UNSAFE_SCHEMES.iter().any(|s| squeezed.starts_with(s))
}

/// Whether an image's address is fetched from elsewhere: it has a scheme, or is `//host/…`.
fn is_remote(url: &str) -> bool {
    let url = url.trim();
    if url.starts_with("//") || url.starts_with("\\\\") {
        return true;
    }
    match url.find(':') {
        Some(i) => {
            let scheme = &url[..i];
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        }
        None => false,
    }
}

/// HTML as text: `<` and `>` escaped, `&` too so that an escape in the source stays visible.
fn escape_html(html: &str) -> String {
    html.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Text that Markdown shows as it is.
fn escape_markdown(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\`*_[]()<>!#|~&".contains(c) {
            out.push('\\');
        }
        out.push(if c.is_control() { ' ' } else { c });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_html_shows_as_text_and_code_stays() {
        assert_eq!(
            harmless("Hi <img src=x onerror=alert(1)> there"),
            "Hi &lt;img src=x onerror=alert(1)&gt; there"
        );
        assert_eq!(
            harmless("<script>\nalert(1)\n</script>\n\nok"),
            "&lt;script&gt;\nalert(1)\n&lt;/script&gt;\n\nok"
        );
        let code = "`<b>` and\n\n```html\n<script>x</script>\n```\n";
        assert_eq!(harmless(code), code);
        assert_eq!(harmless("a <!-- hidden --> b"), "a &lt;!-- hidden --&gt; b");
    }

    #[test]
    fn script_links_keep_their_text_only() {
        assert_eq!(
            harmless("see [the *docs*](javascript:alert(1)) now"),
            "see the docs (link removed) now"
        );
        assert_eq!(harmless("[x]( JaVaScRiPt:alert(1))"), "x (link removed)");
        assert_eq!(
            harmless("<javascript:alert(1)>"),
            "javascript:alert\\(1\\) (link removed)"
        );
        assert_eq!(
            harmless("[ref][r]\n\n[r]: vbscript:msgbox"),
            "ref (link removed)\n\n[r]: vbscript:msgbox"
        );
        assert_eq!(
            harmless("[d](data:text/html;base64,PHNjcmlwdD4=)"),
            "d (link removed)"
        );
        let fine = "[site](https://example.com/a) and [rel](notes.md) and <https://example.com>";
        assert_eq!(harmless(fine), fine);
    }

    #[test]
    fn remote_images_become_links_and_local_ones_stay() {
        assert_eq!(
            harmless("![a cat](https://tracker.example/p.gif?id=1) hi"),
            "[a cat](<https://tracker.example/p.gif?id=1>) hi"
        );
        assert_eq!(
            harmless("![](//cdn.example/x.png)"),
            "[image](<//cdn.example/x.png>)"
        );
        assert_eq!(harmless("![x](javascript:alert(1))"), "x (link removed)");
        assert_eq!(
            harmless("[![badge](https://b.example/s.svg)](https://example.com)"),
            "[[badge](<https://b.example/s.svg>)](https://example.com)"
        );
        let local = "![chart](media/chart.png)";
        assert_eq!(harmless(local), local);
    }
}
