//! The file browser (an Iris extension): a read-only look at an agent's working directory.
//! `files.list` lists a directory, `files.read` reads a file's kind and, for text, a bounded
//! piece of it, and `files.pull` streams a file's bytes like `media.pull` (a `files.pull` header,
//! binary frames, then `media.pull.end`).
//!
//! Paths are relative to the agent's working directory, `/`-separated; `""` is the directory
//! itself. Each request names the agent by `agent`, or else by the envelope's lane (its
//! channel's agent).

use serde::{Deserialize, Serialize};

/// `files.list`: one directory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilesList {
    /// The agent whose directory to look at; absent: the agent of the envelope's lane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The directory, relative to the agent's working directory; `""` for that directory.
    #[serde(default)]
    pub path: String,
}

/// `files.read`: a file's kind, and for text a piece of it from `offset`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilesRead {
    /// As in [`FilesList`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The file, relative to the agent's working directory.
    pub path: String,
    /// Where the text starts, in bytes (default 0).
    #[serde(default)]
    pub offset: u64,
}

/// `files.pull`: a file's bytes, streamed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilesPull {
    /// As in [`FilesList`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The file, relative to the agent's working directory.
    pub path: String,
}

/// `files.list` (the answer): the first entries of a directory in order, directories first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilesListing {
    /// The agent.
    pub agent: String,
    /// The directory, as asked (normalized: no `.` or empty components).
    pub path: String,
    /// Its entries, directories first, then by name (bytewise); at most the listing cap.
    #[serde(default)]
    pub entries: Vec<FileEntry>,
    /// Whether the directory has more entries than are listed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// How many entries the directory has, hidden ones left out.
    #[serde(default)]
    pub total: u64,
    /// How many entries are hidden (`.git`, secret files), not listed nor counted in `total`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hidden: u64,
}

/// One entry of a directory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Its name, exactly (control characters included, JSON-escaped); to be sent back in a path.
    pub name: String,
    /// The name to show when it differs from `name`: control characters written as escapes
    /// (`\n`, `\u{1b}`), bytes that are not UTF-8 as `\xNN`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// `dir`, `file`, `symlink` or `other` (a FIFO, socket or device: never opened).
    pub kind: String,
    /// Its size in bytes (of the link itself for a symlink).
    #[serde(default)]
    pub size: u64,
    /// When it last changed, unix milliseconds.
    #[serde(default)]
    pub mtime: i64,
}

/// `files.read` (the answer).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileContent {
    /// The agent.
    pub agent: String,
    /// The file, as asked (normalized).
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
    /// When it last changed, unix milliseconds.
    #[serde(default)]
    pub mtime: i64,
    /// `text`, `image` (a raster image its bytes prove), or `file`; from its first bytes.
    pub kind: String,
    /// Its MIME type: from its bytes where they say, else from its name.
    pub mime: String,
    /// For `text`: where `text` starts, in bytes.
    #[serde(default)]
    pub offset: u64,
    /// For `text`: the file from `offset`, at most the read cap, ending at a whole character.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// For `text`: where the rest begins, when there is more after `text`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<u64>,
}

/// `files.pull` (the header before the bytes).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilesPullHeader {
    /// The agent.
    pub agent: String,
    /// The file, as asked (normalized).
    pub path: String,
    /// Its name (the last component of `path`).
    pub name: String,
    /// `image` or `file`, as in [`FileContent`] (text is a `file` here).
    pub kind: String,
    /// Its MIME type.
    pub mime: String,
    /// How many bytes follow.
    pub size: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use crate::{decode, encode, ClientFrame, ErrorCode, Header, ServerFrame};

    #[test]
    fn file_frames_round_trip() {
        let list = decode::<ClientFrame>(
            r#"{"v":1,"type":"files.list","id":1,"chat_id":"default","payload":{}}"#,
        )
        .expect("decode");
        let ClientFrame::FilesList(l) = &list.body else {
            panic!("{list:?}")
        };
        assert_eq!((l.agent.as_deref(), l.path.as_str()), (None, ""));
        let read = decode::<ClientFrame>(
            r#"{"v":1,"type":"files.read","id":2,"payload":{"agent":"demo","path":"src/a\nb.rs","offset":7}}"#,
        )
        .expect("decode");
        let ClientFrame::FilesRead(r) = &read.body else {
            panic!("{read:?}")
        };
        assert_eq!((r.path.as_str(), r.offset), ("src/a\nb.rs", 7));
        let missing = decode::<ClientFrame>(r#"{"v":1,"type":"files.pull","id":3,"payload":{}}"#)
            .expect_err("no path");
        assert_eq!(missing.code, ErrorCode::BadRequest);
        let listing = super::FilesListing {
            agent: "demo".into(),
            path: "src".into(),
            entries: vec![super::FileEntry {
                name: "a\u{1b}b".into(),
                label: Some("a\\u{1b}b".into()),
                kind: "file".into(),
                size: 3,
                mtime: 5,
            }],
            truncated: true,
            total: 100_000,
            hidden: 0,
        };
        let text = encode(&Header::default(), &ServerFrame::FilesList(listing.clone()));
        assert!(text.contains(r#""type":"files.list""#), "{text}");
        assert!(!text.contains("hidden"), "{text}");
        let back = decode::<ServerFrame>(&text).expect("decode");
        assert_eq!(back.body, ServerFrame::FilesList(listing));
        let content = super::FileContent {
            agent: "demo".into(),
            path: "a.txt".into(),
            size: 10,
            kind: "text".into(),
            mime: "text/plain".into(),
            text: Some("hello".into()),
            next_offset: Some(5),
            ..Default::default()
        };
        let text = encode(&Header::default(), &ServerFrame::FilesRead(content.clone()));
        let back = decode::<ServerFrame>(&text).expect("decode");
        assert_eq!(back.body, ServerFrame::FilesRead(content));
        let pull = super::FilesPullHeader {
            agent: "demo".into(),
            path: "p.png".into(),
            name: "p.png".into(),
            kind: "image".into(),
            mime: "image/png".into(),
            size: 9,
        };
        let text = encode(&Header::default(), &ServerFrame::FilesPull(pull.clone()));
        assert!(text.contains(r#""type":"files.pull""#), "{text}");
        let back = decode::<ServerFrame>(&text).expect("decode");
        assert_eq!(back.body, ServerFrame::FilesPull(pull));
    }
}
