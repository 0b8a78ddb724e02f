//! Small text helpers shared by several rooms: titles of chats and threads, shortening text
//! for previews, and counts said in words.
//!
//! Ground floor: imports nothing of the gateway.

/// `n` with the noun in its number: "1 device", "3 devices".
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The instant title of an auto-thread (or of a scheduled job): the first non-empty line, at
/// most 48 characters, cut at a word boundary.
pub fn instant_title(text: &str) -> String {
    const MAX: usize = 48;
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("New thread");
    if line.chars().count() <= MAX {
        return line.to_owned();
    }
    let cut: String = line.chars().take(MAX).collect();
    match cut.rfind(char::is_whitespace) {
        Some(i) if i > 0 => cut[..i].trim_end().to_owned(),
        _ => cut,
    }
}

/// The placeholder name of a chat created without one, until its first message names it.
pub const NEW_CHAT: &str = "New chat";
/// The placeholder name of a thread created without one.
pub const NEW_THREAD: &str = "New thread";

/// Markdown as the plain text a reader sees: markers, link targets and HTML tags dropped, every
/// run of whitespace one space, trimmed.
pub fn plain_text(markdown: &str) -> String {
    use pulldown_cmark::{Event, Parser, TagEnd};
    let mut out = String::with_capacity(markdown.len());
    for event in Parser::new(markdown) {
        match event {
            Event::Text(t) | Event::Code(t) | Event::InlineMath(t) | Event::DisplayMath(t) => {
                out.push_str(&t)
            }
            Event::SoftBreak | Event::HardBreak | Event::Rule => out.push(' '),
            Event::End(TagEnd::Paragraph | TagEnd::Heading(_) | TagEnd::Item)
            | Event::End(TagEnd::CodeBlock | TagEnd::BlockQuote(_)) => out.push(' '),
            _ => {}
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` cut to at most `max` characters at a word boundary (or inside a word longer than
/// that), with `…` when it was cut.
fn cut_at_word(text: &str, max: usize) -> String {
    let Some((end, _)) = text.char_indices().nth(max) else {
        return text.to_owned();
    };
    // Leave room for the ellipsis.
    let (room, _) = text.char_indices().nth(max - 1).unwrap_or((end, ' '));
    let cut = &text[..room];
    let at_word = match text[room..].starts_with(char::is_whitespace) {
        true => cut,
        false => cut.rfind(char::is_whitespace).map_or(cut, |i| &cut[..i]),
    };
    let kept = if at_word.trim().is_empty() {
        cut
    } else {
        at_word
    };
    format!("{}…", kept.trim_end())
}

/// The title of a chat named from its first message: the first line with visible text, as
/// plain text (Markdown markers dropped), at most 40 characters cut at a word boundary with
/// `…`; `None` when no line has visible text.
pub fn chat_title(text: &str) -> Option<String> {
    const MAX: usize = 40;
    text.lines()
        .filter_map(|line| clean_title(&plain_text(line)))
        .next()
        .map(|line| cut_at_word(&line, MAX))
}

/// The directory's one-line preview of a message: its plain text, whitespace collapsed, at most
/// 120 characters with `…`; `None` when it has no visible text.
pub fn preview(text: &str) -> Option<String> {
    const MAX: usize = 120;
    let plain: String = without_format(&plain_text(text))
        .chars()
        .filter(|c| !c.is_control())
        .collect();
    let plain = plain.trim();
    match plain.chars().count() {
        0 => None,
        n if n <= MAX => Some(plain.to_owned()),
        _ => Some(head(plain, MAX - 1)),
    }
}

/// Whether `c` is an invisible format character (Unicode category Cf: zero-width spaces and
/// joiners, bidirectional overrides and isolates, the soft hyphen, tags, …): in a name it can
/// make two names look alike ("Default" and "Default\u{200B}") or show one backwards
/// ("Bank\u{202E}txt.exe" shown as "Bankexe.txt").
pub fn is_format(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{0600}'..='\u{0605}' | '\u{061C}' | '\u{06DD}' | '\u{070F}' | '\u{08E2}'
        | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}' | '\u{110BD}' | '\u{110CD}'
        | '\u{13430}'..='\u{1343F}' | '\u{1BCA0}'..='\u{1BCA3}' | '\u{1D173}'..='\u{1D17A}'
        | '\u{E0001}' | '\u{E0020}'..='\u{E007F}')
}

/// `text` without format characters ([`is_format`]), except a zero-width joiner between two
/// characters that are not letters or digits (it joins emoji such as 👩‍💻).
pub fn without_format(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    for (i, &c) in chars.iter().enumerate() {
        let joins_emoji = c == '\u{200D}'
            && i > 0
            && !chars[i - 1].is_alphanumeric()
            && chars.get(i + 1).is_some_and(|n| !n.is_alphanumeric());
        if !is_format(c) || joins_emoji {
            out.push(c);
        }
    }
    out
}

/// A title given by the user or the agent: control and format characters removed, at most 100
/// characters; `None` when nothing visible is left.
pub fn clean_title(title: &str) -> Option<String> {
    let t: String = without_format(title)
        .trim()
        .chars()
        .filter(|c| !c.is_control())
        .take(100)
        .collect();
    Some(t).filter(|t| !t.trim().is_empty())
}

/// One line an agent chose for a device to show (a tool's title, an approval's title, a choice's
/// label): cleaned like a name. Format characters ([`is_format`]: zero-width, bidi overrides)
/// are removed, every control character is removed (so an ESC sequence loses its ESC and shows
/// as the harmless text after it), a line break or tab becomes a space, and the result is
/// trimmed. HTML stays text: devices show these strings as text, never as markup (Iris Web
/// sets them with `textContent`, `web/assets/util.js`'s `h`).
pub fn agent_line(text: &str) -> String {
    let out: String = without_format(text)
        .chars()
        .filter_map(|c| match c {
            '\n' | '\r' | '\t' => Some(' '),
            c if c.is_control() => None,
            c => Some(c),
        })
        .collect();
    out.trim().to_owned()
}

/// Several lines an agent chose for a device to show (a question put to the user): as
/// [`agent_line`], but line breaks and tabs are kept.
pub fn agent_lines(text: &str) -> String {
    let out: String = without_format(text)
        .chars()
        .filter(|&c| matches!(c, '\n' | '\t') || !c.is_control())
        .collect();
    out.trim().to_owned()
}

/// A file's path or text as an agent sent it (a diff and its path), with every character that
/// would not show, or would change how the rest shows, written out as `<U+XXXX>`: control
/// characters (ESC sequences, a carriage return not before a line break, other C0 and C1
/// characters) and format characters (bidi overrides, zero-width characters; a zero-width
/// joiner between emoji stays). Everything else stays as it is, so the reader sees the text's
/// real content, including the hidden characters a "Trojan Source" edit relies on. With
/// `lines`, line breaks and tabs are kept (a diff); without, they are written out too (a path,
/// which must not break a diff's header line).
pub fn reveal_hidden(text: &str, lines: bool) -> String {
    let kept = without_format(text);
    let chars: Vec<char> = text.chars().collect();
    if kept.len() == text.len() && !chars.iter().any(|c| c.is_control()) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for (i, &c) in chars.iter().enumerate() {
        let plain = match c {
            '\n' | '\t' => lines,
            '\r' => lines && chars.get(i + 1) == Some(&'\n'),
            '\u{200D}' => {
                // A joiner between two emoji (not letters or digits) joins them.
                i > 0
                    && !chars[i - 1].is_alphanumeric()
                    && chars.get(i + 1).is_some_and(|n| !n.is_alphanumeric())
            }
            c => !c.is_control() && !is_format(c),
        };
        if plain {
            out.push(c);
        } else {
            out.push_str(&format!("<U+{:04X}>", c as u32));
        }
    }
    out
}

/// The first `max` characters of a text, with a trailing `…` when it was cut.
pub fn head(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// The longest start of `text` of at most `max` bytes that ends on a character boundary.
pub fn prefix_bytes(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The last `max` characters of a text, with a leading `…` when it was cut.
pub fn tail(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return text.to_owned();
    }
    let skip = count - max;
    format!("…{}", text.chars().skip(skip + 1).collect::<String>())
}

/// An error with its causes, which say what actually went wrong ("connection refused" is in the
/// source of a reqwest error).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instant_titles_take_the_first_line_cut_at_a_word() {
        assert_eq!(instant_title("\n  Plan the trip  \nmore"), "Plan the trip");
        assert_eq!(instant_title("   "), "New thread");
        let long = "word ".repeat(20);
        let t = instant_title(&long);
        assert!(t.chars().count() <= 48 && !t.ends_with(' '), "{t:?}");
    }

    #[test]
    fn chat_titles_take_the_first_visible_line_as_plain_text() {
        assert_eq!(
            chat_title("## Plan the **trip**\nmore").as_deref(),
            Some("Plan the trip")
        );
        assert_eq!(
            chat_title("```rust\nfn main() {}\n```").as_deref(),
            Some("fn main() {}")
        );
        assert_eq!(
            chat_title("- see [the docs](https://example.invalid)").as_deref(),
            Some("see the docs")
        );
        assert_eq!(chat_title(" \n\u{200B}\n"), None);
        let t = chat_title("Could you please compare these three travel options for me").unwrap();
        assert_eq!(t, "Could you please compare these three…");
        assert!(t.chars().count() <= 40, "{t:?}");
        let long = "x".repeat(60);
        assert_eq!(chat_title(&long).unwrap().chars().count(), 40);
        assert_eq!(
            chat_title("é".repeat(41).as_str()).unwrap(),
            format!("{}…", "é".repeat(39))
        );
    }

    #[test]
    fn previews_are_one_plain_line_of_at_most_120_characters() {
        assert_eq!(
            preview("**Hi**\n\n  there\t`x`").as_deref(),
            Some("Hi there x")
        );
        assert_eq!(preview("  \n "), None);
        let p = preview(&"ü".repeat(300)).unwrap();
        assert_eq!(p.chars().count(), 120);
        assert!(p.ends_with('…'));
        assert_eq!(preview(&"a".repeat(120)).unwrap().chars().count(), 120);
    }

    #[test]
    fn titles_lose_control_characters_and_tails_keep_the_end() {
        assert_eq!(clean_title(" a\u{7}b "), Some("ab".into()));
        assert_eq!(clean_title("\u{1b}\n"), None);
        assert_eq!(tail("abcdef", 4), "…def");
        assert_eq!(tail("abc", 4), "abc");
    }

    #[test]
    fn agent_lines_are_cleaned_like_names() {
        let title =
            "\u{1b}[31mterminal\u{202E}: rm\u{200B} -rf\n/ <img src=x onerror=alert(1)>\u{7}";
        assert_eq!(
            agent_line(title),
            "[31mterminal: rm -rf / <img src=x onerror=alert(1)>"
        );
        assert_eq!(agent_line(" \u{2066}\u{1b}\u{9b} "), "");
        assert_eq!(agent_line("Ünïcode 👩\u{200D}💻"), "Ünïcode 👩\u{200D}💻");
        assert_eq!(
            agent_lines("Which one?\n\t- a\u{202E}\r\n\u{1b}]0;x\u{7}b"),
            "Which one?\n\t- a\n]0;xb"
        );
    }

    #[test]
    fn hidden_characters_in_code_are_written_out() {
        let diff = "+let a = 1;\r\n+ok\u{1b}[2J\tx\n+/*\u{202E} } \u{2066}if*/\r+zw\u{200B}j 👩\u{200D}💻\n";
        assert_eq!(
            reveal_hidden(diff, true),
            "+let a = 1;\r\n+ok<U+001B>[2J\tx\n+/*<U+202E> } <U+2066>if*/<U+000D>+zw<U+200B>j 👩\u{200D}💻\n"
        );
        assert_eq!(
            reveal_hidden("/w/a\nb\u{85}\u{202E}txt.exe", false),
            "/w/a<U+000A>b<U+0085><U+202E>txt.exe"
        );
        let plain = "fn main() { println!(\"<b>hi</b>\"); }\n";
        assert_eq!(reveal_hidden(plain, true), plain);
    }
}
