//! The gateway's own files, known by device and inode: whatever name reaches one (a hard link in
//! an agent's directory, the configuration file kept there) the file browser neither lists nor
//! opens it. They are the files of the data dir (its store, keys, token, certificates; not the
//! media store, whose files devices pull by right) and the secret files the configuration names.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Directories of the data dir whose files are not secrets of the gateway's.
const NOT_OWN: &[&str] = &["media", "attached"];

/// How deep the data dir is walked (its files lie at most two levels down).
const DEPTH: usize = 3;

/// Device and inode of each of the gateway's own files.
#[derive(Debug, Default, Clone)]
pub struct OwnFiles(HashSet<(u64, u64)>);

impl OwnFiles {
    /// The own files under the data dir `data_dir` and the files `secrets`, as they are now.
    pub fn find(data_dir: &Path, secrets: &[std::path::PathBuf]) -> OwnFiles {
        let mut ids = HashSet::new();
        walk(data_dir, DEPTH, &mut ids);
        for file in secrets {
            if let Ok(meta) = std::fs::metadata(file) {
                ids.insert((meta.dev(), meta.ino()));
            }
        }
        OwnFiles(ids)
    }

    /// Whether this device and inode is one of the gateway's files.
    pub fn contains(&self, dev: u64, ino: u64) -> bool {
        self.0.contains(&(dev, ino))
    }
}

fn walk(dir: &Path, depth: usize, ids: &mut HashSet<(u64, u64)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        if meta.is_dir() {
            let skip = depth == DEPTH && NOT_OWN.iter().any(|n| entry.file_name() == *n);
            if depth > 1 && !skip {
                walk(&entry.path(), depth - 1, ids);
            }
        } else if meta.is_file() {
            ids.insert((meta.dev(), meta.ino()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hard_link_is_known_as_the_file_it_links() {
        let tmp = tempfile::tempdir().expect("tmp");
        let data = tmp.path().join("data");
        std::fs::create_dir_all(data.join("media/ab")).expect("dirs");
        std::fs::write(data.join("iris.db"), "db").expect("db");
        std::fs::write(data.join("media/ab/upload"), "u").expect("media");
        std::fs::write(tmp.path().join("iris.toml"), "token").expect("config");
        std::fs::hard_link(data.join("iris.db"), tmp.path().join("loot")).expect("link");
        let own = OwnFiles::find(&data, &[tmp.path().join("iris.toml")]);
        let id = |p: &Path| {
            let m = std::fs::metadata(p).expect("meta");
            (m.dev(), m.ino())
        };
        let (dev, ino) = id(&tmp.path().join("loot"));
        assert!(own.contains(dev, ino));
        let (dev, ino) = id(&tmp.path().join("iris.toml"));
        assert!(own.contains(dev, ino));
        let (dev, ino) = id(&data.join("media/ab/upload"));
        assert!(!own.contains(dev, ino));
    }
}
