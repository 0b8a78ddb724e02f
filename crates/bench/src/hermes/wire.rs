//! What the `hermes` scenario reads: Hermes' own WebSocket frames (newline-free JSON-RPC 2.0:
//! responses to our requests, and `method: "event"` notifications with a `type`), and the
//! stamped answers of the fake model (every chunk is its write time in unix nanoseconds followed
//! by a space), from which each chunk's time to the screen is taken.

use anyhow::{anyhow, bail, Context};
use serde_json::{json, Value};

/// One frame from Hermes' `/api/ws`.
#[derive(Debug, Clone, PartialEq)]
pub enum HermesFrame {
    /// The answer to request `id`: its `result`, or its error message.
    Response {
        id: u64,
        result: Result<Value, String>,
    },
    /// An event notification: `gateway.ready`, `session.info`, `message.start`,
    /// `message.delta`, `message.complete`, `error`, … with its session and payload text.
    Event {
        kind: String,
        session_id: Option<String>,
        text: Option<String>,
    },
}

impl HermesFrame {
    /// The event's type, or "" for a response.
    pub fn kind(&self) -> &str {
        match self {
            HermesFrame::Event { kind, .. } => kind,
            HermesFrame::Response { .. } => "",
        }
    }
}

/// Parses one text frame of Hermes' WebSocket.
pub fn parse(frame: &str) -> anyhow::Result<HermesFrame> {
    let v: Value =
        serde_json::from_str(frame.trim()).context("Hermes sent a frame that is not JSON")?;
    if v.get("method").and_then(Value::as_str) == Some("event") {
        let params = v.get("params").context("event without params")?;
        let kind = params
            .get("type")
            .and_then(Value::as_str)
            .context("event without a type")?
            .to_owned();
        let payload = params.get("payload");
        let text = payload
            .and_then(|p| p.get("text").or_else(|| p.get("message")))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let session_id = params
            .get("session_id")
            .and_then(Value::as_str)
            .map(str::to_owned);
        return Ok(HermesFrame::Event {
            kind,
            session_id,
            text,
        });
    }
    let id = v
        .get("id")
        .and_then(Value::as_u64)
        .ok_or_else(|| anyhow!("neither an event nor a response: {}", short(frame)))?;
    let result = match (v.get("result"), v.get("error")) {
        (Some(r), None) => Ok(r.clone()),
        (_, Some(e)) => Err(e
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("error without a message")
            .to_owned()),
        (None, None) => bail!("response {id} without result or error"),
    };
    Ok(HermesFrame::Response { id, result })
}

/// A JSON-RPC request to Hermes.
pub fn request(id: u64, method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

fn short(text: &str) -> &str {
    let mut end = text.len().min(200);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The chunks of a stamped answer, for the fake model's script: `n` times `{now_ns} `.
pub fn stamped_chunks(n: usize) -> Vec<String> {
    vec!["{now_ns} ".to_owned(); n]
}

/// The stamps in a text: every word of at least 16 digits (a unix time in nanoseconds).
pub fn stamps(text: &str) -> impl Iterator<Item = u64> + '_ {
    text.split_whitespace()
        .filter(|w| w.len() >= 16 && w.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|w| w.parse().ok())
}

/// One answer as a screen shows it: the text so far, and for every chunk the time from its
/// stamp to the frame that first put it on screen. A stamp is counted only once it is followed
/// by its space (a word cut by a frame boundary is not yet whole).
#[derive(Debug, Default)]
pub struct Screen {
    text: String,
    counted: usize,
    /// Nanoseconds from each chunk's write to its first appearance, in order.
    pub latencies: Vec<u64>,
    /// Chunks that first appeared in the frame that ends the answer.
    pub in_final: usize,
}

impl Screen {
    /// The whole text so far (the gateway's full-text `message.update`).
    pub fn set(&mut self, text: &str, now: u64) {
        text.clone_into(&mut self.text);
        self.count(now, false);
    }

    /// More text (Hermes' `message.delta`).
    pub fn append(&mut self, delta: &str, now: u64) {
        self.text.push_str(delta);
        self.count(now, false);
    }

    /// The answer's final text (`message.stop` / `message.complete`); every stamp in it counts,
    /// and it must hold `expected` of them.
    pub fn finish(&mut self, text: &str, now: u64, expected: usize) -> anyhow::Result<()> {
        text.clone_into(&mut self.text);
        self.text.push(' ');
        self.count(now, true);
        if self.counted != expected {
            bail!(
                "the answer's final text holds {} of its {expected} chunks",
                self.counted
            );
        }
        Ok(())
    }

    /// Whether any chunk has been shown.
    pub fn has_text(&self) -> bool {
        !self.text.trim().is_empty()
    }

    fn count(&mut self, now: u64, last: bool) {
        // Only words followed by whitespace are whole.
        let whole = self
            .text
            .rfind(char::is_whitespace)
            .map_or("", |end| &self.text[..end]);
        let all: Vec<u64> = stamps(whole).collect();
        for stamp in all.iter().skip(self.counted) {
            self.latencies.push(now.saturating_sub(*stamp));
            if last {
                self.in_final += 1;
            }
        }
        self.counted = self.counted.max(all.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_and_responses_of_hermes_parse() {
        let delta = r#"{"jsonrpc": "2.0", "method": "event", "params": {"type": "message.delta", "session_id": "00b49dab", "payload": {"text": "a "}}}"#;
        assert_eq!(
            parse(delta).unwrap(),
            HermesFrame::Event {
                kind: "message.delta".into(),
                session_id: Some("00b49dab".into()),
                text: Some("a ".into()),
            }
        );
        let start = r#"{"jsonrpc": "2.0", "method": "event", "params": {"type": "message.start", "session_id": "s"}}"#;
        assert_eq!(parse(start).unwrap().kind(), "message.start");
        let error = r#"{"jsonrpc":"2.0","method":"event","params":{"type":"error","session_id":"s","payload":{"message":"agent initialization failed"}}}"#;
        match parse(error).unwrap() {
            HermesFrame::Event { kind, text, .. } => {
                assert_eq!(kind, "error");
                assert_eq!(text.as_deref(), Some("agent initialization failed"));
            }
            other => panic!("{other:?}"),
        }
        let created = r#"{"jsonrpc": "2.0", "id": 1, "result": {"session_id": "00b49dab", "info": {"lazy": true}}}"#;
        match parse(created).unwrap() {
            HermesFrame::Response {
                id: 1,
                result: Ok(r),
            } => {
                assert_eq!(r["session_id"], "00b49dab")
            }
            other => panic!("{other:?}"),
        }
        let refused = r#"{"jsonrpc":"2.0","id":7,"error":{"code":4009,"message":"session busy"}}"#;
        assert_eq!(
            parse(refused).unwrap(),
            HermesFrame::Response {
                id: 7,
                result: Err("session busy".into())
            }
        );
        assert!(parse("not json").is_err());
        assert!(parse(r#"{"jsonrpc":"2.0","id":3}"#).is_err());
        assert!(parse(r#"{"jsonrpc":"2.0"}"#).is_err());
    }

    #[test]
    fn requests_are_json_rpc() {
        let r: Value = serde_json::from_str(&request(
            4,
            "prompt.submit",
            json!({"session_id": "s", "text": "hi"}),
        ))
        .unwrap();
        assert_eq!(r["jsonrpc"], "2.0");
        assert_eq!(r["id"], 4);
        assert_eq!(r["method"], "prompt.submit");
        assert_eq!(r["params"]["text"], "hi");
    }

    const T0: u64 = 1_764_000_000_000_000_000;

    #[test]
    fn deltas_count_each_chunk_once_when_whole() {
        let mut screen = Screen::default();
        screen.append(&format!("{} {}", T0, T0 + 10), T0 + 100);
        // The second stamp is not followed by its space yet: it may still grow.
        assert_eq!(screen.latencies, vec![100]);
        screen.append(" ", T0 + 200);
        assert_eq!(screen.latencies, vec![100, 190]);
        screen
            .finish(&format!("{} {}", T0, T0 + 10), T0 + 300, 2)
            .unwrap();
        assert_eq!(screen.in_final, 0);
    }

    #[test]
    fn full_texts_and_the_final_frame_count_what_is_new() {
        let mut screen = Screen::default();
        assert!(!screen.has_text());
        screen.set(&format!("{T0} "), T0 + 5);
        screen.set(&format!("{T0} {} ", T0 + 1), T0 + 7);
        assert!(screen.has_text());
        screen
            .finish(&format!("{T0} {} {}", T0 + 1, T0 + 2), T0 + 9, 3)
            .unwrap();
        assert_eq!(screen.latencies, vec![5, 6, 7]);
        assert_eq!(screen.in_final, 1);
        // A final text that lost a chunk is an error, not a figure.
        let mut short = Screen::default();
        assert!(short.finish(&format!("{T0} "), T0, 2).is_err());
    }

    #[test]
    fn stamps_are_long_digit_words() {
        let text = format!("OK: 12 {T0} x{T0} {}", T0 + 1);
        assert_eq!(stamps(&text).collect::<Vec<_>>(), vec![T0, T0 + 1]);
        assert_eq!(stamped_chunks(2), vec!["{now_ns} ", "{now_ns} "]);
    }
}
