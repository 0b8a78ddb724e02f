//! Small text helpers shared by several rooms: titles of chats and threads, and shortening text
//! for previews.
//!
//! Ground floor: imports nothing of the gateway.

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
    fn titles_lose_control_characters_and_tails_keep_the_end() {
        assert_eq!(clean_title(" a\u{7}b "), Some("ab".into()));
        assert_eq!(clean_title("\u{1b}\n"), None);
        assert_eq!(tail("abcdef", 4), "…def");
        assert_eq!(tail("abc", 4), "abc");
    }
}
