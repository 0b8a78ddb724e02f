//! The pickers open now, as the hub sees their frames committed: what `hello.ack.open_pickers`
//! lists, so that a device whose cursor is already past a picker's frame (a reloaded page, a
//! phone that was told by push) still offers it. A picker frame opens an entry; its
//! `picker.closed`, or the deletion of its lane, ends it. It lives in memory, as the lanes'
//! pending pickers do: after a restart nothing is open (approvals and questions left open are
//! closed `cancelled` at the start).

use std::collections::{BTreeMap, HashMap};

use iris_protocol::splice_cursor;
use iris_store::Committed;
use serde_json::Value;

/// Most pickers listed at once; beyond it the oldest is forgotten (a lane shows at most 8
/// approvals and questions, so this is reached only with hundreds of lanes waiting).
pub const MAX_OPEN_PICKERS: usize = 256;

/// The frame types that open a picker.
const OPENING: [&str; 5] = [
    "picker.approval",
    "picker.clarify",
    "picker.model",
    "picker.choice",
    "picker.confirm",
];

/// The open pickers, by the cursor of their frame.
#[derive(Default)]
pub struct OpenPickers {
    /// Cursor → the frame as `sync` replays it (with its cursor).
    frames: BTreeMap<u64, Value>,
    /// Picker id → cursor.
    ids: HashMap<String, u64>,
}

impl OpenPickers {
    /// Notes a committed frame: a picker opens, closes, or its lane is deleted.
    pub fn note(&mut self, frame: &Committed) {
        let kind = &*frame.frame_type;
        if OPENING.contains(&kind) {
            let Ok(value) =
                serde_json::from_str::<Value>(&splice_cursor(&frame.json, frame.cursor))
            else {
                return;
            };
            let Some(id) = picker_id(&value) else {
                return;
            };
            self.ids.insert(id, frame.cursor);
            self.frames.insert(frame.cursor, value);
            while self.frames.len() > MAX_OPEN_PICKERS {
                if let Some((_, oldest)) = self.frames.pop_first() {
                    if let Some(id) = picker_id(&oldest) {
                        self.ids.remove(&id);
                    }
                }
            }
        } else if kind == "picker.closed" {
            let id = serde_json::from_str::<Value>(&frame.json)
                .ok()
                .and_then(|v| picker_id(&v));
            if let Some(cursor) = id.and_then(|id| self.ids.remove(&id)) {
                self.frames.remove(&cursor);
            }
        } else if kind == "channel.deleted" {
            let Ok(value) = serde_json::from_str::<Value>(&frame.json) else {
                return;
            };
            let p = &value["payload"];
            let mut gone: Vec<&str> = p["thread_ids"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            gone.extend(p["chat_id"].as_str());
            let in_gone = |v: &Value| {
                ["chat_id", "thread_id"]
                    .iter()
                    .any(|k| v[*k].as_str().is_some_and(|id| gone.contains(&id)))
            };
            let ids = &mut self.ids;
            self.frames.retain(|_, v| {
                let keep = !in_gone(v);
                if !keep {
                    if let Some(id) = picker_id(v) {
                        ids.remove(&id);
                    }
                }
                keep
            });
        }
    }

    /// The frame at `cursor`, if it opened a picker still open.
    pub fn at(&self, cursor: u64) -> Option<&Value> {
        self.frames.get(&cursor)
    }

    /// Whether the picker `picker_id` is open.
    pub fn is_open(&self, picker_id: &str) -> bool {
        self.ids.contains_key(picker_id)
    }

    /// The open pickers' frames, oldest first.
    pub fn frames(&self) -> Vec<Value> {
        self.frames.values().cloned().collect()
    }
}

fn picker_id(frame: &Value) -> Option<String> {
    frame["payload"]["picker_id"].as_str().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use iris_protocol::{encode, FrameBody, Header, PickerApproval, PickerClosed, ServerFrame};
    use iris_store::FrameMeta;

    fn committed(cursor: u64, header: &Header, frame: ServerFrame) -> Committed {
        Committed {
            cursor,
            frame_type: frame.frame_type().into(),
            json: encode(header, &frame).into(),
            meta: FrameMeta::default(),
        }
    }

    fn approval(id: &str) -> ServerFrame {
        ServerFrame::PickerApproval(PickerApproval {
            picker_id: id.into(),
            title: format!("run {id}?"),
            ..Default::default()
        })
    }

    fn ids(open: &OpenPickers) -> Vec<String> {
        open.frames().iter().filter_map(picker_id).collect()
    }

    #[test]
    fn a_picker_is_listed_from_its_frame_to_its_close_with_its_cursor() {
        let lane = Header::lane("c1", None);
        let mut open = OpenPickers::default();
        open.note(&committed(7, &lane, approval("p1")));
        open.note(&committed(9, &lane, approval("p2")));
        assert_eq!(ids(&open), ["p1", "p2"]);
        assert_eq!(open.frames()[0]["cursor"], 7);
        assert_eq!(open.frames()[0]["chat_id"], "c1");
        let closed = ServerFrame::PickerClosed(PickerClosed {
            picker_id: "p1".into(),
            outcome: iris_protocol::PickerOutcome::Answered,
            ..Default::default()
        });
        open.note(&committed(10, &lane, closed));
        assert_eq!(ids(&open), ["p2"]);
    }

    #[test]
    fn deleting_a_channel_forgets_its_pickers_and_its_threads() {
        let mut open = OpenPickers::default();
        open.note(&committed(1, &Header::lane("c1", None), approval("a")));
        let thread = Header::lane("c1", Some("t1".into()));
        open.note(&committed(2, &thread, approval("b")));
        open.note(&committed(3, &Header::lane("c2", None), approval("c")));
        let deleted = ServerFrame::ChannelDeleted(iris_protocol::ChannelDeleted {
            chat_id: "c1".into(),
            thread_ids: vec!["t1".into()],
        });
        open.note(&committed(4, &Header::default(), deleted));
        assert_eq!(ids(&open), ["c"]);
    }

    #[test]
    fn the_list_is_bounded_and_forgets_the_oldest() {
        let lane = Header::lane("c1", None);
        let mut open = OpenPickers::default();
        for i in 0..MAX_OPEN_PICKERS as u64 + 3 {
            open.note(&committed(i + 1, &lane, approval(&format!("p{i}"))));
        }
        let listed = ids(&open);
        assert_eq!(listed.len(), MAX_OPEN_PICKERS);
        assert_eq!(listed[0], "p3");
        assert_eq!(open.ids.len(), MAX_OPEN_PICKERS);
    }
}
