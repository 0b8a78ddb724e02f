//! `files.read` and `files.pull`: a regular file's kind from its first bytes, a bounded piece of
//! its text, or the open file for a pull. Nothing but a regular file is ever opened.

use std::fs::File;
use std::os::unix::fs::FileExt;

use iris_protocol::{ErrorCode, FileContent};
use rustix::fs::{FileType, OFlags};

use super::jail::{Jail, RelPath, Resolved};
use super::names::mtime_ms;
use crate::media::{mime_from_name, recognize};
use crate::wire::WireError;

/// Bytes read to tell a file's kind.
const HEAD: usize = 8192;

/// A regular file, opened for reading, with its kind.
pub struct Opened {
    /// The file.
    pub file: File,
    /// Its size.
    pub size: u64,
    /// `text`, `image` or `file`.
    pub kind: &'static str,
    /// Its MIME type.
    pub mime: String,
    /// When it last changed, unix milliseconds.
    pub mtime: i64,
}

/// Opens `path` if it is a regular file, and tells its kind.
pub fn open(jail: &Jail, path: &RelPath) -> Result<Opened, WireError> {
    let resolved: Resolved = jail.resolve(path)?;
    match FileType::from_raw_mode(resolved.stat.st_mode) {
        FileType::RegularFile => {}
        FileType::Directory => {
            return Err(WireError::bad_request(
                "this is a directory; files.list lists it",
            ))
        }
        _ => {
            return Err(WireError::new(
                ErrorCode::Unsupported,
                "not a regular file (a FIFO, socket or device is never opened)",
            ))
        }
    }
    let file = File::from(jail.reopen(path, &resolved, OFlags::empty())?);
    let st = rustix::fs::fstat(&file).map_err(WireError::internal)?;
    let mut head = vec![0; HEAD];
    let n = read_full(&file, 0, &mut head)?;
    head.truncate(n);
    let (kind, mime) = classify(path.name(), &head);
    Ok(Opened {
        file,
        size: st.st_size.max(0) as u64,
        kind,
        mime,
        mtime: mtime_ms(&st),
    })
}

/// A file's kind and MIME type from its name and first bytes: `image` only for a raster image
/// its bytes prove, `text` for UTF-8 without NUL, else `file`.
fn classify(name: &str, head: &[u8]) -> (&'static str, String) {
    let declared = mime_from_name(name);
    let (kind, mime) = recognize(declared, head);
    if kind == "image" || infer::get(head).is_some() {
        let kind = if kind == "image" { "image" } else { "file" };
        return (kind, mime);
    }
    let utf8 = match std::str::from_utf8(head) {
        Ok(_) => true,
        // Cut inside a character at the end of the head.
        Err(e) => e.error_len().is_none() && head.len() == HEAD,
    };
    if utf8 && !head.contains(&0) {
        let mime = match declared {
            m if m.starts_with("text/") || m == "application/json" => m,
            _ => "text/plain",
        };
        return ("text", mime.into());
    }
    ("file", mime)
}

/// `files.read`: the file's kind, and for text at most `max` bytes from `offset`, ending at a
/// whole character.
pub fn read(
    jail: &Jail,
    agent: &str,
    path: &RelPath,
    offset: u64,
    max: usize,
) -> Result<FileContent, WireError> {
    let opened = open(jail, path)?;
    let mut content = FileContent {
        agent: agent.into(),
        path: path.as_str().into(),
        size: opened.size,
        mtime: opened.mtime,
        kind: opened.kind.into(),
        mime: opened.mime.clone(),
        ..Default::default()
    };
    if opened.kind != "text" {
        return Ok(content);
    }
    let want = opened.size.saturating_sub(offset).min(max as u64) as usize;
    let mut buf = vec![0; want];
    let n = read_full(&opened.file, offset, &mut buf)?;
    buf.truncate(n);
    let (text, used) = match std::str::from_utf8(&buf) {
        Ok(s) => (s.to_owned(), n),
        Err(e) if e.error_len().is_none() && offset + (n as u64) < opened.size => {
            let cut = e.valid_up_to();
            (String::from_utf8_lossy(&buf[..cut]).into_owned(), cut)
        }
        Err(_) => (String::from_utf8_lossy(&buf).into_owned(), n),
    };
    let end = offset + used as u64;
    content.offset = offset;
    content.text = Some(text);
    content.next_offset = (end < opened.size).then_some(end);
    Ok(content)
}

/// Reads into `buf` from `offset` until it is full or the file ends.
fn read_full(file: &File, offset: u64, buf: &mut [u8]) -> Result<usize, WireError> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read_at(&mut buf[filled..], offset + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(WireError::internal(e)),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::classify;

    #[test]
    fn kinds_come_from_the_bytes() {
        assert_eq!(classify("a.rs", b"fn main() {}\n").0, "text");
        assert_eq!(classify("notes.md", b"# Title").1, "text/markdown");
        assert_eq!(classify("empty", b"").0, "text");
        assert_eq!(classify("zeros.txt", &[0u8; 64]).0, "file");
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
        assert_eq!(classify("pic.txt", png), ("image", "image/png".into()));
        assert_eq!(classify("x.png", b"<svg onload=alert(1)>").0, "text");
        assert_eq!(classify("a.zip", b"PK\x03\x04rest").0, "file");
    }
}
