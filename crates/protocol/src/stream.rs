//! Append-form `message.update` (an Iris extension): both halves of one rule.
//!
//! A connection whose `hello` said `caps.append_updates: true` gets every `message.update` as
//! `{message_id, offset, text}`: keep the first `offset` UTF-16 code units of the text this
//! connection last had for the bubble (nothing before its first update of that bubble, whose
//! `offset` is therefore 0) and append `text`. The gateway derives that form from the whole text
//! it would otherwise send with [`append_form`]; a device rebuilds the whole text with
//! [`StreamText::apply`], which takes both forms.
//!
//! Offsets count UTF-16 code units, the length of a string in JavaScript, Java/Kotlin and
//! Swift's `NSString`, so that those clients cut with their own `slice`/`substring`; an offset
//! never falls inside a character. Applying the same update twice gives the same text.

use std::fmt;

use crate::MessageUpdate;

/// The UTF-16 length of a string (JavaScript's `String.length`).
pub fn utf16_len(s: &str) -> usize {
    // One unit per character, two for characters of four UTF-8 bytes: count the bytes that
    // start a character, and once more those that start a four-byte one.
    s.bytes()
        .map(|b| usize::from(b & 0xC0 != 0x80) + usize::from(b >= 0xF0))
        .sum()
}

/// The append form of `next` for a device that holds `prev` (of `prev_utf16` UTF-16 units):
/// `(offset, start)`, where `offset` is the UTF-16 length of the longest common prefix that ends
/// on a character boundary and `next[start..]` is the text to send after it.
pub fn append_form(prev: &str, prev_utf16: usize, next: &str) -> (u64, usize) {
    let mut p = common_prefix(prev.as_bytes(), next.as_bytes());
    while !(prev.is_char_boundary(p) && next.is_char_boundary(p)) {
        p -= 1;
    }
    // Usually the new text only grows (`p` is all of `prev`); otherwise the cut is near the end.
    let offset = prev_utf16 - utf16_len(&prev[p..]);
    (offset as u64, p)
}

/// How many leading bytes two byte strings share.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    if a[..n] == b[..n] {
        return n;
    }
    const BLOCK: usize = 64;
    let mut i = 0;
    while i + BLOCK <= n && a[i..i + BLOCK] == b[i..i + BLOCK] {
        i += BLOCK;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

/// An update whose `offset` lies beyond the text held (the device missed an update), or inside a
/// character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadOffset {
    /// The update's offset, in UTF-16 units.
    pub offset: u64,
    /// The UTF-16 length of the text held.
    pub held: usize,
}

impl fmt::Display for BadOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "message.update offset {} does not fit the {} UTF-16 units held",
            self.offset, self.held
        )
    }
}

impl std::error::Error for BadOffset {}

/// One bubble's text as a device rebuilds it from `message.update` frames of either form.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamText {
    text: String,
    utf16: usize,
}

impl StreamText {
    /// An empty text (a bubble before its first update).
    pub fn new() -> StreamText {
        StreamText::default()
    }

    /// The text so far.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Its length in UTF-16 units (what `offset` counts).
    pub fn utf16_len(&self) -> usize {
        self.utf16
    }

    /// Applies one update: without `offset` its text replaces everything, with it the first
    /// `offset` units stay and its text follows them. On an error the text is unchanged.
    pub fn apply(&mut self, update: &MessageUpdate) -> Result<(), BadOffset> {
        match update.offset {
            None => {
                self.text.clear();
                self.utf16 = 0;
                self.push(&update.text);
                Ok(())
            }
            Some(offset) => self.splice(offset, &update.text),
        }
    }

    /// Keeps the first `offset` UTF-16 units and appends `text`.
    pub fn splice(&mut self, offset: u64, text: &str) -> Result<(), BadOffset> {
        let bad = BadOffset {
            offset,
            held: self.utf16,
        };
        let offset = usize::try_from(offset).map_err(|_| bad)?;
        let at = self.byte_index(offset).ok_or(bad)?;
        self.text.truncate(at);
        self.utf16 = offset;
        self.push(text);
        Ok(())
    }

    fn push(&mut self, text: &str) {
        self.text.push_str(text);
        self.utf16 += utf16_len(text);
    }

    /// The byte index of a UTF-16 offset, walking back from the end (cuts are near the end).
    fn byte_index(&self, offset: usize) -> Option<usize> {
        if offset == 0 {
            return Some(0);
        }
        let (mut units, mut at) = (self.utf16, self.text.len());
        let mut chars = self.text.char_indices().rev();
        while units > offset {
            let (i, c) = chars.next()?;
            units -= c.len_utf16();
            at = i;
        }
        (units == offset).then_some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn update(offset: Option<u64>, text: &str) -> MessageUpdate {
        MessageUpdate {
            message_id: "m_1".into(),
            text: text.into(),
            offset,
        }
    }

    #[test]
    fn offsets_count_utf16_units() {
        assert_eq!(utf16_len("aé€😀"), 1 + 1 + 1 + 2);
        let mut t = StreamText::new();
        t.apply(&update(Some(0), "a😀")).unwrap();
        assert_eq!(t.utf16_len(), 3);
        assert_eq!(
            t.apply(&update(Some(2), "x")),
            Err(BadOffset { offset: 2, held: 3 }),
            "inside the surrogate pair"
        );
        assert_eq!(
            t.apply(&update(Some(4), "x")),
            Err(BadOffset { offset: 4, held: 3 }),
            "beyond the end: an update was missed"
        );
        assert_eq!(t.as_str(), "a😀", "a refused update changes nothing");
        t.apply(&update(Some(3), "b")).unwrap();
        t.apply(&update(Some(1), "c")).unwrap();
        assert_eq!(t.as_str(), "ac");
        t.apply(&update(None, "whole")).unwrap();
        assert_eq!((t.as_str(), t.utf16_len()), ("whole", 5));
    }

    #[test]
    fn the_form_keeps_the_common_prefix_on_a_character_boundary() {
        // "é" is C3 A9 and "Ã" is C3 83: one common byte, no common character.
        assert_eq!(append_form("é", 1, "Ã"), (0, 0));
        assert_eq!(append_form("ab", 2, "abc"), (2, 2));
        assert_eq!(append_form("ab😀x", 5, "ab😀y"), (4, 6));
        assert_eq!(append_form("abc", 3, ""), (0, 0));
        assert_eq!(append_form("", 0, "abc"), (0, 0));
    }

    proptest! {
        /// Whatever the texts, applying the append form of each to the one before rebuilds it,
        /// and so does applying an update twice.
        #[test]
        fn the_append_form_rebuilds_every_text(
            texts in prop::collection::vec("(a|b|é|€|😀|\n){0,12}", 1..12),
        ) {
            let mut held = StreamText::new();
            for next in &texts {
                let (offset, start) = append_form(held.as_str(), held.utf16_len(), next);
                let u = update(Some(offset), &next[start..]);
                held.apply(&u).unwrap();
                prop_assert_eq!(held.as_str(), next.as_str());
                prop_assert_eq!(held.utf16_len(), utf16_len(next));
                prop_assert_eq!(held.utf16_len(), next.encode_utf16().count());
                held.apply(&u).unwrap();
                prop_assert_eq!(held.as_str(), next.as_str());
            }
        }
    }
}
