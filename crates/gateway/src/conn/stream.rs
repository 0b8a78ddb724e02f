//! Append-form `message.update` for a device that asked for it (`hello.caps.append_updates`).
//!
//! The queue holds whole texts (a newer update of a bubble replaces the queued one, so a slow
//! device's appends merge by themselves); this connection remembers, per bubble, the whole text
//! its last written update stood for, and writes only the difference: the UTF-16 length of the
//! common prefix as `offset` and the rest as `text` (`iris_protocol::append_form`). The state is
//! this connection's alone, so a device that reconnects starts again with `offset` 0 and the
//! whole text, and forgetting a bubble early only costs one such whole text: the memory is
//! bounded by [`MAX_BUBBLES`] and a bubble is forgotten when its `message.stop` is written.

use std::sync::Arc;

use iris_protocol::{append_form, utf16_len};

use crate::hub::StreamUpdate;

/// Bubbles remembered per connection; more streaming at once (many lanes) forget the oldest.
pub(crate) const MAX_BUBBLES: usize = 16;

/// What one connection has written of each streaming bubble.
#[derive(Debug, Default)]
pub(crate) struct Appends {
    /// (message id, whole text the device holds, its UTF-16 length); the last written last.
    bubbles: Vec<(String, Arc<str>, usize)>,
}

impl Appends {
    /// The frame to write for `update`, or `None` when the device already holds its text.
    pub(crate) fn encode(&mut self, update: &StreamUpdate) -> Option<String> {
        let next = &update.text;
        let found = self
            .bubbles
            .iter()
            .position(|(id, _, _)| *id == update.message_id);
        let (offset, start) = match found {
            Some(i) => {
                let (_, prev, prev_utf16) = self.bubbles.remove(i);
                if Arc::ptr_eq(&prev, next) || (prev.len() == next.len() && *prev == **next) {
                    self.bubbles
                        .push((update.message_id.clone(), prev, prev_utf16));
                    return None;
                }
                append_form(&prev, prev_utf16, next)
            }
            None => {
                if self.bubbles.len() >= MAX_BUBBLES {
                    self.bubbles.remove(0);
                }
                (0, 0)
            }
        };
        let units = offset as usize + utf16_len(&next[start..]);
        self.bubbles
            .push((update.message_id.clone(), next.clone(), units));
        Some(update.append_json(offset, start))
    }

    /// The bubble is final: its state goes.
    pub(crate) fn forget(&mut self, message_id: &str) {
        self.bubbles.retain(|(id, _, _)| id != message_id);
    }

    /// Whether no bubble is remembered.
    pub(crate) fn is_empty(&self) -> bool {
        self.bubbles.is_empty()
    }
}

/// The `message_id` of an encoded `message.stop` (the first field of its payload).
pub(crate) fn stop_message_id(json: &str) -> Option<&str> {
    const KEY: &str = "\"payload\":{\"message_id\":\"";
    let rest = &json[json.find(KEY)? + KEY.len()..];
    Some(&rest[..rest.find('"')?])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::{Ending, Out, TurnConfig, TurnMapper};
    use crate::hub::{ConnQueue, Outgoing};
    use iris_acp::SessionUpdate;
    use iris_protocol::{
        decode, encode, DurableFrame, EphemeralFrame, Header, Role, ServerFrame, StreamText,
    };
    use proptest::prelude::*;
    use serde_json::json;
    use std::time::{Duration, Instant};

    #[test]
    fn a_stop_names_its_bubble() {
        let stop = encode(
            &Header::lane("default", None),
            &ServerFrame::from(DurableFrame::MessageStop(iris_protocol::MessageStop {
                message_id: "m_7".into(),
                final_text: "x".into(),
                ..Default::default()
            })),
        );
        assert_eq!(stop_message_id(&stop), Some("m_7"));
        assert_eq!(stop_message_id("{}"), None);
    }

    #[test]
    fn only_what_the_device_lacks_is_written() {
        let header = Header::lane("default", None);
        let up = |id: &str, text: &str| StreamUpdate::new(header.clone(), id.into(), text.into());
        let body = |json: Option<String>| match decode::<ServerFrame>(&json.unwrap()).unwrap().body
        {
            ServerFrame::MessageUpdate(u) => (u.offset, u.text),
            other => panic!("{other:?}"),
        };
        let mut a = Appends::default();
        assert_eq!(body(a.encode(&up("m_1", "Hel"))), (Some(0), "Hel".into()));
        assert_eq!(body(a.encode(&up("m_1", "Hello"))), (Some(3), "lo".into()));
        assert_eq!(a.encode(&up("m_1", "Hello")), None, "nothing new");
        assert_eq!(body(a.encode(&up("m_2", "x"))), (Some(0), "x".into()));
        assert_eq!(body(a.encode(&up("m_1", "He!"))), (Some(2), "!".into()));
        a.forget("m_1");
        assert_eq!(
            body(a.encode(&up("m_1", "He!?"))),
            (Some(0), "He!?".into()),
            "a forgotten bubble starts again from 0"
        );
        for i in 0..MAX_BUBBLES {
            a.encode(&up(&format!("n_{i}"), "y"));
        }
        assert_eq!(body(a.encode(&up("m_2", "xz"))), (Some(0), "xz".into()));
    }

    /// What the agent does in the property test.
    #[derive(Debug, Clone)]
    enum Step {
        /// A text chunk, after this many milliseconds.
        Chunk(String, u64),
        /// A tool call: the text so far becomes commentary and the bubble is cleared.
        Tool,
        /// One device's socket takes what is queued for it.
        Read(usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            8 => ("(a|b| |é|😀|\n|MEDIA:/x\n){1,3}", 0u64..30).prop_map(|(t, ms)| Step::Chunk(t, ms)),
            1 => Just(Step::Tool),
            3 => (0usize..4).prop_map(Step::Read),
        ]
    }

    fn chunk(text: &str) -> SessionUpdate {
        serde_json::from_value(json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})).unwrap()
    }

    fn tool(n: usize) -> SessionUpdate {
        serde_json::from_value(json!({"sessionUpdate": "tool_call", "toolCallId": format!("t{n}"), "title": "terminal: ls", "kind": "execute", "status": "completed"})).unwrap()
    }

    /// One device: its queue, its connection's append state (none: full texts), and the text it
    /// rebuilds from what the connection writes.
    struct Device {
        queue: Arc<ConnQueue>,
        appends: Option<Appends>,
        text: StreamText,
        stop: Option<String>,
    }

    impl Device {
        fn new(append: bool) -> Device {
            Device {
                queue: ConnQueue::new(1, "d".into(), 10_000, Arc::default()),
                appends: append.then(Appends::default),
                text: StreamText::new(),
                stop: None,
            }
        }

        /// Writes what is queued as the connection does, and reads it as a device does.
        fn read(&mut self) {
            for item in self.queue.drain().items {
                let json = match item {
                    Outgoing::Update(u) => match &mut self.appends {
                        Some(a) => match a.encode(&u) {
                            Some(json) => json,
                            None => continue,
                        },
                        None => u.full_json().to_string(),
                    },
                    Outgoing::Ephemeral(json) => json.to_string(),
                    Outgoing::Durable(c) => c.json.to_string(),
                };
                match decode::<ServerFrame>(&json).unwrap().body {
                    ServerFrame::MessageUpdate(u) => {
                        assert_eq!(u.offset.is_some(), self.appends.is_some());
                        self.text.apply(&u).expect("no gap, no overlap");
                    }
                    ServerFrame::MessageStop(s) => self.stop = Some(s.final_text),
                    _ => {}
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

        /// For any chunks, pauses, tool calls and reading pace, a device rebuilds the final text
        /// from the updates it was written, in both forms; the last update it gets is the final
        /// text (updates are flushed before `message.stop`).
        #[test]
        fn every_device_rebuilds_the_final_text(
            steps in prop::collection::vec(step(), 1..60),
            interval_ms in 0u64..40,
        ) {
            let mut mapper = TurnMapper::new(TurnConfig {
                message_id: "m_1".into(),
                role: Role::Assistant,
                model: None,
                agent: None,
                cwd: "~".into(),
                workdir: std::path::PathBuf::new(),
                show_reasoning: false,
                update_interval: Duration::from_millis(interval_ms),
            rewind: false,
            });
            let mut devices = [Device::new(true), Device::new(false), Device::new(true), Device::new(false)];
            let header = Header::lane("default", None);
            let mut now = Instant::now();
            let mut cursor = 0;
            let mut tools = 0;
            let mut publish = |outs: Vec<Out>, devices: &mut [Device]| {
                for out in outs {
                    let item = match out {
                        Out::Ephemeral(EphemeralFrame::MessageUpdate(u), key) => (
                            Some(Arc::<str>::from(key)),
                            Outgoing::Update(Arc::new(StreamUpdate::new(header.clone(), u.message_id, u.text.into()))),
                        ),
                        Out::Ephemeral(..) => continue,
                        Out::Durable(f) | Out::Final(f, _) => {
                            cursor += 1;
                            let committed = iris_store::Committed {
                                cursor,
                                frame_type: Arc::from(f.frame_type()),
                                json: Arc::from(encode(&header, &ServerFrame::from(f))),
                                meta: Default::default(),
                            };
                            (None, Outgoing::Durable(Arc::new(committed)))
                        }
                    };
                    for d in devices.iter() {
                        match &item {
                            (key, Outgoing::Update(_)) => d.queue.push_live(key.clone(), item.1.clone()),
                            (_, Outgoing::Durable(c)) => d.queue.push_durable(c.clone()),
                            _ => unreachable!(),
                        }
                    }
                }
            };
            for s in steps {
                match s {
                    Step::Chunk(text, ms) => {
                        now += Duration::from_millis(ms);
                        // The lane's timer: an update that fell due during the pause went out.
                        if let Some(due) = mapper.next_flush().filter(|due| *due <= now) {
                            publish(mapper.flush_due(due).into_iter().collect(), &mut devices);
                        }
                        let outs = mapper.on_update(&chunk(&text), now);
                        publish(outs, &mut devices);
                    }
                    Step::Tool => {
                        tools += 1;
                        let outs = mapper.on_update(&tool(tools), now);
                        publish(outs, &mut devices);
                    }
                    Step::Read(d) => devices[d].read(),
                }
            }
            let outs = mapper.finish(&Ending::default(), now);
            publish(outs, &mut devices);
            for d in devices.iter_mut() {
                d.read();
                if let Some(stop) = &d.stop {
                    prop_assert_eq!(d.text.as_str(), stop.as_str());
                }
            }
        }
    }
}
