//! `files.list`: the first entries of a directory in order, read in one pass that holds only
//! those (a heap of at most the listing cap), however many the directory has.

use std::collections::BinaryHeap;
use std::ffi::CStr;
use std::os::fd::OwnedFd;

use iris_protocol::FileEntry;
use rustix::fs::{AtFlags, FileType, OFlags, Stat};

use super::jail::{is_hidden, Jail, RelPath};
use super::names::{escape_bytes, mtime_ms};
use crate::wire::WireError;

/// A directory's first entries and its counts.
pub struct Listing {
    /// The entries, directories first, then by name.
    pub entries: Vec<FileEntry>,
    /// Entries not hidden.
    pub total: u64,
    /// Entries hidden.
    pub hidden: u64,
}

/// Lists `path` inside the jail: at most `max` entries.
pub fn list(jail: &Jail, path: &RelPath, max: usize) -> Result<Listing, WireError> {
    let resolved = jail.resolve(path)?;
    if FileType::from_raw_mode(resolved.stat.st_mode) != FileType::Directory {
        return Err(WireError::bad_request(
            "not a directory; files.read opens a file",
        ));
    }
    let fd = jail.reopen(path, &resolved, OFlags::DIRECTORY)?;
    let data_dir = jail.data_dir_id();
    let here = resolved.stat.st_dev;
    let dir = rustix::fs::Dir::read_from(&fd).map_err(WireError::internal)?;
    // A max-heap by (not a directory, name): popping the largest keeps the first `max`.
    let mut first: BinaryHeap<(bool, Vec<u8>)> = BinaryHeap::with_capacity(max + 1);
    let (mut total, mut hidden) = (0u64, 0u64);
    for entry in dir {
        let entry = entry.map_err(WireError::internal)?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let is_data_dir = data_dir == Some((here, entry.ino()));
        if is_data_dir || jail.is_own(here, entry.ino()) || (!jail.show_hidden() && is_hidden(name))
        {
            hidden += 1;
            continue;
        }
        total += 1;
        let is_dir = match entry.file_type() {
            FileType::Unknown => stat_of(&fd, entry.file_name())
                .is_some_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory),
            t => t == FileType::Directory,
        };
        first.push((!is_dir, name.to_vec()));
        if first.len() > max {
            first.pop();
        }
    }
    let entries = first
        .into_sorted_vec()
        .into_iter()
        .map(|(_, name)| entry_of(&fd, name))
        .collect();
    Ok(Listing {
        entries,
        total,
        hidden,
    })
}

fn stat_of(dir: &OwnedFd, name: &CStr) -> Option<Stat> {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()
}

fn entry_of(dir: &OwnedFd, name: Vec<u8>) -> FileEntry {
    let st = std::ffi::CString::new(name.clone())
        .ok()
        .and_then(|c| stat_of(dir, &c));
    let kind = match st.map(|s| FileType::from_raw_mode(s.st_mode)) {
        Some(FileType::Directory) => "dir",
        Some(FileType::RegularFile) => "file",
        Some(FileType::Symlink) => "symlink",
        _ => "other",
    };
    let (label, exact) = escape_bytes(&name);
    let differs = exact.as_ref() != Some(&label);
    FileEntry {
        name: exact.unwrap_or_else(|| label.clone()),
        label: differs.then_some(label),
        kind: kind.into(),
        size: st.map(|s| s.st_size.max(0) as u64).unwrap_or(0),
        mtime: st.map(|s| mtime_ms(&s)).unwrap_or(0),
    }
}
