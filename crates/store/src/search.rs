//! Full-text search: turning user input into a safe FTS5 query, and the substring
//! fallback for scripts the unicode61 tokenizer cannot split into words.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use rusqlite::types::Value;
use rusqlite::{params_from_iter, Connection};

use crate::queries::limit_i64;
use crate::{SearchHit, StoreError};

/// Characters of context kept on each side of a match in fallback snippets.
const SNIPPET_CONTEXT_CHARS: usize = 24;

/// Tokens of context FTS5 `snippet()` returns around matches.
const SNIPPET_TOKENS: i32 = 16;

/// Most different words, prefixes and phrases one query may have (repeats count once).
pub const MAX_TERMS: usize = 16;

/// SQLite virtual machine steps between two looks at the clock while a search runs.
const PROGRESS_STEPS: i32 = 1000;

/// One unit of the user's query.
#[derive(Debug, PartialEq, Eq)]
enum Piece {
    /// A bare word; matched as a quoted term.
    Term(String),
    /// A word that ended with `*`; matched as a prefix.
    Prefix(String),
    /// Text inside double quotes, optionally followed by `*`.
    Phrase { text: String, prefix: bool },
}

impl Piece {
    fn text(&self) -> &str {
        match self {
            Piece::Term(t) | Piece::Prefix(t) => t,
            Piece::Phrase { text, .. } => text,
        }
    }
}

/// How a query is executed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Nothing searchable in the input.
    Empty,
    /// An FTS5 MATCH expression built only from quoted strings.
    Fts(String),
    /// ASCII-lowercased needles that must all occur in the text.
    Substring(Vec<String>),
    /// More than [`MAX_TERMS`] different terms.
    TooManyTerms(usize),
}

/// Drops repeated terms, keeping the first of each, and caps their number.
fn distinct(terms: Vec<String>, make: impl FnOnce(Vec<String>) -> Plan) -> Plan {
    let mut seen = HashSet::new();
    let terms: Vec<String> = terms
        .into_iter()
        .filter(|t| seen.insert(t.clone()))
        .collect();
    match terms.len() {
        0 => Plan::Empty,
        n if n > MAX_TERMS => Plan::TooManyTerms(n),
        _ => make(terms),
    }
}

/// Splits the input into words, quoted phrases and prefixes. An unterminated quote
/// runs to the end of the input so that stray quotes cannot escape into syntax.
fn parse(query: &str) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut chars = query.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '"' {
            chars.next();
            let mut text = String::new();
            for ch in chars.by_ref() {
                if ch == '"' {
                    break;
                }
                text.push(ch);
            }
            let mut prefix = false;
            while chars.peek() == Some(&'*') {
                chars.next();
                prefix = true;
            }
            pieces.push(Piece::Phrase { text, prefix });
        } else {
            let mut word = String::new();
            while let Some(&ch) = chars.peek() {
                if ch.is_whitespace() || ch == '"' {
                    break;
                }
                word.push(ch);
                chars.next();
            }
            if word.ends_with('*') {
                pieces.push(Piece::Prefix(word.trim_end_matches('*').to_string()));
            } else {
                pieces.push(Piece::Term(word));
            }
        }
    }
    pieces
}

/// Han, Hiragana, Katakana and Hangul: scripts written without spaces between words.
pub(crate) fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x309F      // Hiragana
        | 0x30A0..=0x30FF    // Katakana
        | 0x31F0..=0x31FF    // Katakana phonetic extensions
        | 0xFF66..=0xFF9F    // Halfwidth Katakana
        | 0x3400..=0x4DBF    // CJK extension A
        | 0x4E00..=0x9FFF    // CJK unified ideographs
        | 0xF900..=0xFAFF    // CJK compatibility ideographs
        | 0x20000..=0x3134F  // CJK extensions B..G
        | 0x1100..=0x11FF    // Hangul Jamo
        | 0x3130..=0x318F    // Hangul compatibility Jamo
        | 0xA960..=0xA97F    // Hangul Jamo extended A
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0xD7B0..=0xD7FF    // Hangul Jamo extended B
    )
}

/// Pictographs, which unicode61 treats as separators and therefore never indexes.
fn is_emoji(c: char) -> bool {
    matches!(c as u32,
        0x1F000..=0x1FAFF    // mahjong, cards, enclosed, pictographs, emoticons, transport, symbols
        | 0x2600..=0x27BF    // miscellaneous symbols and dingbats
        | 0x2B00..=0x2BFF    // arrows and stars such as ⭐
    )
}

fn needs_substring(c: char) -> bool {
    is_cjk(c) || is_emoji(c)
}

/// A piece is worth searching only if the tokenizer would find a token in it:
/// FTS5 treats an empty quoted string as a phrase that matches nothing, which would
/// silently turn the whole AND query into "no hits".
fn has_token(text: &str) -> bool {
    text.chars().any(char::is_alphanumeric)
}

fn quote(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\""))
}

/// Decides how to run `query`. Every user-provided string ends up inside double quotes,
/// so FTS5 operators (`OR`, `NOT`, `NEAR(`, `-`, `:`, `^`, parentheses) are plain text.
pub(crate) fn plan(query: &str) -> Plan {
    let pieces = parse(query);
    if query.chars().any(needs_substring) {
        let needles: Vec<String> = pieces
            .iter()
            .map(|p| match p {
                Piece::Phrase { text, .. } => text.trim().to_string(),
                _ => p
                    .text()
                    .trim_matches(|c: char| c.is_ascii_punctuation())
                    .to_string(),
            })
            .filter(|t| t.chars().any(|c| c.is_alphanumeric() || needs_substring(c)))
            .map(|t| t.to_ascii_lowercase())
            .collect();
        return distinct(needles, Plan::Substring);
    }
    let parts: Vec<String> = pieces
        .iter()
        .filter(|p| has_token(p.text()))
        .map(|p| match p {
            Piece::Term(t) => quote(t),
            Piece::Prefix(t) => format!("{}*", quote(t)),
            Piece::Phrase {
                text,
                prefix: false,
            } => quote(text),
            Piece::Phrase { text, prefix: true } => format!("{}*", quote(text)),
        })
        .collect();
    distinct(parts, |parts| Plan::Fts(parts.join(" AND ")))
}

/// Runs [`search`] until `deadline` at the latest, or until `cancel` is set: SQLite's progress
/// handler stops the query then, and the answer is [`StoreError::Interrupted`].
pub(crate) fn search_bounded(
    conn: &Connection,
    query: &str,
    scope: Option<(&str, Option<&str>)>,
    limit: usize,
    deadline: Instant,
    cancel: Arc<AtomicBool>,
) -> Result<Vec<SearchHit>, StoreError> {
    conn.progress_handler(
        PROGRESS_STEPS,
        Some(move || Instant::now() >= deadline || cancel.load(Ordering::Relaxed)),
    );
    let result = search(conn, query, scope, limit);
    // The connection serves other reads next.
    conn.progress_handler(0, None::<fn() -> bool>);
    result.map_err(|e| match e {
        StoreError::Sqlite(rusqlite::Error::SqliteFailure(f, _))
            if f.code == rusqlite::ErrorCode::OperationInterrupted =>
        {
            StoreError::Interrupted
        }
        other => other,
    })
}

/// Runs a search on `conn`; see [`crate::Store::search`] for the contract.
pub(crate) fn search(
    conn: &Connection,
    query: &str,
    scope: Option<(&str, Option<&str>)>,
    limit: usize,
) -> Result<Vec<SearchHit>, StoreError> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    match plan(query) {
        Plan::Empty => Ok(Vec::new()),
        Plan::TooManyTerms(n) => Err(StoreError::Invalid(format!(
            "{n} different words; a search may have at most {MAX_TERMS}"
        ))),
        Plan::Fts(expr) => fts_search(conn, &expr, scope, limit),
        Plan::Substring(needles) => substring_search(conn, &needles, scope, limit),
    }
}

fn fts_search(
    conn: &Connection,
    expr: &str,
    scope: Option<(&str, Option<&str>)>,
    limit: usize,
) -> Result<Vec<SearchHit>, StoreError> {
    let scope_sql = if scope.is_some() {
        "AND m.chat_id = ?3 AND m.thread_id IS ?4"
    } else {
        ""
    };
    let sql = format!(
        "SELECT m.message_id, m.chat_id, m.thread_id, m.role, \
                snippet(messages_fts, -1, '[', ']', '…', {SNIPPET_TOKENS}), m.ts \
         FROM messages_fts JOIN messages m ON m.seq = messages_fts.rowid \
         WHERE messages_fts MATCH ?1 {scope_sql} \
         ORDER BY bm25(messages_fts), m.seq DESC LIMIT ?2"
    );
    let mut params: Vec<Value> = vec![
        Value::Text(expr.to_string()),
        Value::Integer(limit_i64(limit)),
    ];
    if let Some((chat, thread)) = scope {
        params.push(Value::Text(chat.to_string()));
        params.push(thread.map_or(Value::Null, |t| Value::Text(t.to_string())));
    }
    let mut stmt = conn.prepare_cached(&sql)?;
    let hits = stmt
        .query_map(params_from_iter(params), |r| {
            Ok(SearchHit {
                message_id: r.get(0)?,
                chat_id: r.get(1)?,
                thread_id: r.get(2)?,
                role: r.get(3)?,
                snippet: r.get(4)?,
                ts: r.get(5)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(hits)
}

fn substring_search(
    conn: &Connection,
    needles: &[String],
    scope: Option<(&str, Option<&str>)>,
    limit: usize,
) -> Result<Vec<SearchHit>, StoreError> {
    // SQLite's built-in lower() folds ASCII only, exactly like to_ascii_lowercase on
    // the needles, so both sides agree and byte offsets stay valid for the snippet.
    let mut sql = String::from(
        "SELECT message_id, chat_id, thread_id, role, text, ts, transcript FROM messages WHERE 1",
    );
    let mut params: Vec<Value> = Vec::new();
    // A voice note's transcript is searched with its text.
    for needle in needles {
        params.push(Value::Text(needle.clone()));
        let n = params.len();
        sql.push_str(&format!(
            " AND (instr(lower(text), ?{n}) > 0 OR instr(lower(coalesce(transcript, '')), ?{n}) > 0)"
        ));
    }
    if let Some((chat, thread)) = scope {
        params.push(Value::Text(chat.to_string()));
        sql.push_str(&format!(" AND chat_id = ?{}", params.len()));
        params.push(thread.map_or(Value::Null, |t| Value::Text(t.to_string())));
        sql.push_str(&format!(" AND thread_id IS ?{}", params.len()));
    }
    params.push(Value::Integer(limit_i64(limit)));
    sql.push_str(&format!(" ORDER BY seq DESC LIMIT ?{}", params.len()));
    let mut stmt = conn.prepare(&sql)?;
    let hits = stmt
        .query_map(params_from_iter(params), |r| {
            let mut text: String = r.get(4)?;
            let transcript: Option<String> = r.get(6)?;
            if let Some(t) = transcript {
                if !text.to_ascii_lowercase().contains(&needles[0]) {
                    text = t;
                }
            }
            Ok(SearchHit {
                message_id: r.get(0)?,
                chat_id: r.get(1)?,
                thread_id: r.get(2)?,
                role: r.get(3)?,
                snippet: substring_snippet(&text, &needles[0]),
                ts: r.get(5)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(hits)
}

/// Builds a snippet around the first occurrence of `needle_lower` (already ASCII
/// lowercased), marking it like FTS5 `snippet()` does. All cuts fall on char boundaries.
pub(crate) fn substring_snippet(text: &str, needle_lower: &str) -> String {
    let lowered = text.to_ascii_lowercase();
    let Some(start) = lowered.find(needle_lower) else {
        return head(text, SNIPPET_CONTEXT_CHARS * 2);
    };
    let end = start + needle_lower.len();
    // ASCII lowercasing keeps every byte offset, so the offsets found in `lowered`
    // are char boundaries of `text` as well.
    let (before, rest) = text.split_at(start);
    let (matched, after) = rest.split_at(end - start);

    let mut out = String::new();
    let cut = before
        .char_indices()
        .rev()
        .nth(SNIPPET_CONTEXT_CHARS - 1)
        .map(|(i, _)| i)
        .unwrap_or(0);
    if cut > 0 {
        out.push('…');
    }
    out.push_str(&before[cut..]);
    out.push('[');
    out.push_str(matched);
    out.push(']');
    out.push_str(&head(after, SNIPPET_CONTEXT_CHARS));
    out
}

/// The first `n` chars of `s`, with `…` appended when something was cut.
fn head(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_words_are_quoted_and_anded() {
        assert_eq!(
            plan("hello world"),
            Plan::Fts("\"hello\" AND \"world\"".into())
        );
    }

    #[test]
    fn phrases_and_prefixes() {
        assert_eq!(
            plan("\"two words\" pre*"),
            Plan::Fts("\"two words\" AND \"pre\"*".into())
        );
        assert_eq!(plan("\"two wo\"*"), Plan::Fts("\"two wo\"*".into()));
    }

    #[test]
    fn syntax_is_neutralised() {
        assert_eq!(
            plan("a OR b"),
            Plan::Fts("\"a\" AND \"OR\" AND \"b\"".into())
        );
        assert_eq!(plan("NEAR("), Plan::Fts("\"NEAR(\"".into()));
        assert_eq!(plan("-x"), Plan::Fts("\"-x\"".into()));
        assert_eq!(
            plan("a\" OR 1=1; --"),
            Plan::Fts("\"a\" AND \" OR 1=1; --\"".into())
        );
        assert_eq!(plan("col:x^"), Plan::Fts("\"col:x^\"".into()));
    }

    #[test]
    fn repeated_terms_count_once_and_their_number_is_capped() {
        let repeated = "e* ".repeat(341);
        assert_eq!(plan(&repeated), Plan::Fts("\"e\"*".into()));
        assert_eq!(
            plan("a b a \"x y\" b \"x y\""),
            Plan::Fts("\"a\" AND \"b\" AND \"x y\"".into())
        );
        let sixteen: Vec<String> = (0..16).map(|n| format!("w{n}")).collect();
        assert!(matches!(plan(&sixteen.join(" ")), Plan::Fts(_)));
        let seventeen = format!("{} w16", sixteen.join(" "));
        assert_eq!(plan(&seventeen), Plan::TooManyTerms(17));
        let needles: Vec<String> = (0..17).map(|n| format!("天{n}")).collect();
        assert_eq!(plan(&needles.join(" ")), Plan::TooManyTerms(17));
        assert_eq!(plan("天 天 天"), Plan::Substring(vec!["天".into()]));
    }

    /// A connection with just enough of the `messages` table for a substring search.
    fn messages_table(rows: u32) -> Connection {
        let conn = Connection::open_in_memory().expect("memory db");
        conn.execute_batch(&format!(
            "CREATE TABLE messages (seq INTEGER PRIMARY KEY, message_id TEXT, chat_id TEXT, \
             thread_id TEXT, role TEXT, text TEXT, ts INTEGER, transcript TEXT); \
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows}) \
             INSERT INTO messages SELECT i, 'm' || i, 'default', NULL, 'user', 'party 🎉 ' || i, i, \
             NULL FROM n;"
        ))
        .expect("schema");
        conn
    }

    #[test]
    fn a_cancelled_search_stops_and_the_connection_serves_the_next_one() {
        let conn = messages_table(5000);
        let later = Instant::now() + std::time::Duration::from_secs(60);
        let cancelled = Arc::new(AtomicBool::new(true));
        // A needle no row holds: the search reads every row.
        let result = search_bounded(&conn, "🎉 nowhere", None, 10, later, cancelled);
        assert!(matches!(result, Err(StoreError::Interrupted)), "{result:?}");
        let running = Arc::new(AtomicBool::new(false));
        let hits = search_bounded(&conn, "🎉", None, 10, later, running).expect("search");
        assert_eq!(hits.len(), 10);
        let past = Instant::now();
        let result = search_bounded(&conn, "🎉 nowhere", None, 10, past, Arc::default());
        assert!(matches!(result, Err(StoreError::Interrupted)), "{result:?}");
        // No handler is left behind on the connection.
        assert_eq!(search(&conn, "🎉", None, 10).expect("search").len(), 10);
    }

    #[test]
    fn a_voice_note_is_found_by_its_transcript() {
        let conn = messages_table(3);
        conn.execute(
            "INSERT INTO messages VALUES (9, 'm9', 'default', NULL, 'user', '', 9, '東京の天気は晴れ')",
            [],
        )
        .expect("a voice note");
        let hits = search(&conn, "天気", None, 10).expect("search");
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].message_id, "m9");
        assert!(hits[0].snippet.contains("[天気]"), "{}", hits[0].snippet);
    }

    #[test]
    fn nothing_searchable_is_empty() {
        for q in ["", "   ", "\"", "*", "\"\"", "-", "--; ()", "\"*\"*"] {
            assert_eq!(plan(q), Plan::Empty, "query {q:?}");
        }
    }

    #[test]
    fn cjk_and_emoji_use_substrings() {
        assert_eq!(plan("天気"), Plan::Substring(vec!["天気".into()]));
        assert_eq!(
            plan("Tokyo 天気"),
            Plan::Substring(vec!["tokyo".into(), "天気".into()])
        );
        assert_eq!(plan("🎉"), Plan::Substring(vec!["🎉".into()]));
        assert_eq!(plan("한국어"), Plan::Substring(vec!["한국어".into()]));
    }

    #[test]
    fn snippet_marks_match_on_char_boundaries() {
        assert_eq!(
            substring_snippet("今日は良い天気です", "天気"),
            "今日は良い[天気]です"
        );
        let long = "あ".repeat(40) + "天気" + &"い".repeat(40);
        let s = substring_snippet(&long, "天気");
        assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
        assert!(s.contains("[天気]"));
        assert_eq!(s.chars().count(), 1 + 24 + 4 + 24 + 1);
        assert_eq!(
            substring_snippet("Party 🎉 TIME", "time"),
            "Party 🎉 [TIME]"
        );
    }
}
