//! Newline framing with a hard cap on line length, shared by the stdout and stderr readers.
//!
//! `AsyncBufReadExt::lines` would buffer an arbitrarily long line in memory; an agent that prints
//! a runaway line must not be able to exhaust ours, so lines beyond the cap are cut and the rest
//! of them skipped up to the next newline.

use std::io;
use tokio::io::{AsyncRead, AsyncReadExt};

const CHUNK: usize = 64 * 1024;

/// One framed line, without its terminating newline.
pub(crate) enum Line {
    /// A line within the cap.
    Complete(Vec<u8>),
    /// A line longer than the cap: its first `max` bytes. The remainder is skipped.
    Oversized(Vec<u8>),
}

/// Splits a byte stream into lines of at most `max` bytes.
pub(crate) struct LineReader<R> {
    reader: R,
    max: usize,
    chunk: Box<[u8]>,
    start: usize,
    end: usize,
    line: Vec<u8>,
    /// Skipping the tail of an oversized line until its newline.
    discarding: bool,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    pub(crate) fn new(reader: R, max: usize) -> Self {
        LineReader {
            reader,
            max,
            chunk: vec![0; CHUNK].into_boxed_slice(),
            start: 0,
            end: 0,
            line: Vec::new(),
            discarding: false,
        }
    }

    /// The next line, or `None` at end of stream. A final line without a newline is returned too.
    pub(crate) async fn next_line(&mut self) -> io::Result<Option<Line>> {
        loop {
            if self.start == self.end {
                let n = self.reader.read(&mut self.chunk).await?;
                if n == 0 {
                    let pending = std::mem::take(&mut self.line);
                    let discarding = std::mem::replace(&mut self.discarding, false);
                    return Ok(
                        (!discarding && !pending.is_empty()).then_some(Line::Complete(pending))
                    );
                }
                self.start = 0;
                self.end = n;
            }
            let avail = &self.chunk[self.start..self.end];
            let newline = avail.iter().position(|&b| b == b'\n');
            let take = newline.unwrap_or(avail.len());
            self.start += newline.map_or(take, |i| i + 1);
            if self.discarding {
                if newline.is_some() {
                    self.discarding = false;
                }
                continue;
            }
            let room = self.max - self.line.len();
            if take > room {
                self.line.extend_from_slice(&avail[..room]);
                // Without a newline in this chunk the rest of the line is still to come.
                self.discarding = newline.is_none();
                return Ok(Some(Line::Oversized(std::mem::take(&mut self.line))));
            }
            self.line.extend_from_slice(&avail[..take]);
            if newline.is_some() {
                return Ok(Some(Line::Complete(std::mem::take(&mut self.line))));
            }
        }
    }
}

/// A short, printable preview of raw bytes for log messages.
pub(crate) fn preview(bytes: &[u8], max_chars: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out: String = text.chars().take(max_chars).collect();
    if text.chars().nth(max_chars).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn collect(input: &[u8], max: usize) -> Vec<Result<String, String>> {
        let mut reader = LineReader::new(input, max);
        let mut out = Vec::new();
        while let Some(line) = reader.next_line().await.unwrap() {
            out.push(match line {
                Line::Complete(l) => Ok(String::from_utf8(l).unwrap()),
                Line::Oversized(l) => Err(String::from_utf8(l).unwrap()),
            });
        }
        out
    }

    #[tokio::test]
    async fn splits_lines_and_keeps_a_final_partial_line() {
        let got = collect(b"a\n\nbc\nd", 10).await;
        assert_eq!(
            got,
            vec![
                Ok("a".into()),
                Ok("".into()),
                Ok("bc".into()),
                Ok("d".into())
            ]
        );
    }

    #[tokio::test]
    async fn cuts_oversized_lines_and_resumes_after_them() {
        let got = collect(b"short\n0123456789abcdef\nok\n0123456789xyz", 8).await;
        assert_eq!(
            got,
            vec![
                Ok("short".into()),
                Err("01234567".into()),
                Ok("ok".into()),
                Err("01234567".into())
            ]
        );
    }

    #[tokio::test]
    async fn oversized_line_spanning_many_chunks() {
        let mut input = vec![b'x'; CHUNK * 3 + 17];
        input.extend_from_slice(b"\nnext\n");
        let got = collect(&input, 100).await;
        assert_eq!(got.len(), 2);
        assert!(matches!(&got[0], Err(p) if p.len() == 100));
        assert_eq!(got[1], Ok("next".into()));
    }
}
