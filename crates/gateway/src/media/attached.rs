//! What each agent may read of the media store: the files attached to its own prompts. A
//! confined agent reads nothing of the data dir but `<data_dir>/attached/<agent>/`, and a prompt's
//! attachment is hard-linked there (copied where a link cannot be made) under its content's hash
//! before the prompt names it. A link goes when its content leaves the store.

use std::fs::DirBuilder;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The directory under the data dir that holds each agent's attachments.
pub const ATTACHED_DIR: &str = "attached";

/// The directory of an agent's attachments: `<data_dir>/attached/<agent>` (a name that is not
/// plainly a file name is replaced by its hash).
pub fn agent_dir(data_dir: &Path, agent: &str) -> PathBuf {
    let plain = !agent.is_empty()
        && agent.len() <= 64
        && agent
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    let name = match plain {
        true => agent.to_owned(),
        false => format!("h-{}", &hex::encode(Sha256::digest(agent.as_bytes()))[..16]),
    };
    data_dir.join(ATTACHED_DIR).join(name)
}

/// Creates an agent's directory (0700), before the agent starts: its confinement names it.
pub fn create_agent_dir(dir: &Path) -> std::io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Makes the stored file `blob` (named by its hash) readable in the agent's directory `dir`;
/// returns its path there.
pub fn attach(blob: &Path, dir: &Path) -> std::io::Result<PathBuf> {
    let name = blob
        .file_name()
        .ok_or_else(|| std::io::Error::other("blob path without a name"))?;
    let dest = dir.join(name);
    create_agent_dir(dir)?;
    match std::fs::hard_link(blob, &dest) {
        Ok(()) => Ok(dest),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(dest),
        Err(_) => {
            // Another file system, or links refused: a private copy, placed whole.
            let part = dir.join(format!(".{}.part", name.to_string_lossy()));
            std::fs::copy(blob, &part)?;
            std::fs::rename(&part, &dest)?;
            Ok(dest)
        }
    }
}

/// Whether a name is a lowercase hex SHA-256, as the store names its files.
fn is_sha256(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Removes every agent's link to content no longer kept: names not in `keep` (when given), or
/// the name `only` (when given). Returns how many were removed.
pub fn forget(root: &Path, keep: Option<&dyn Fn(&str) -> bool>, only: Option<&str>) -> usize {
    let Ok(agents) = std::fs::read_dir(root) else {
        return 0;
    };
    let mut removed = 0;
    for agent in agents.flatten() {
        let Ok(files) = std::fs::read_dir(agent.path()) else {
            continue;
        };
        for file in files.flatten() {
            let name = file.file_name();
            let name = name.to_str().unwrap_or("");
            let gone = match (only, keep) {
                (Some(only), _) => name == only,
                (None, Some(keep)) => !is_sha256(name) || !keep(name),
                (None, None) => false,
            };
            if gone && std::fs::remove_file(file.path()).is_ok() {
                removed += 1;
            }
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_names_become_plain_directory_names() {
        let data = Path::new("/d");
        assert_eq!(agent_dir(data, "hermes"), Path::new("/d/attached/hermes"));
        let odd = agent_dir(data, "../x");
        assert!(
            odd.to_string_lossy().starts_with("/d/attached/h-"),
            "{odd:?}"
        );
        assert_eq!(odd.components().count(), 4);
    }
}
