//! The gateway's endpoint key: made once, kept private in the data dir, so that the endpoint id
//! devices dial stays the same across restarts, upgrades and restores from a backup.

use std::path::{Path, PathBuf};

use iroh::SecretKey;

use crate::config::reach::ENDPOINT_KEY_FILE;
use crate::keyfile::{warn_if_readable_by_others, write_private};

/// Why the key cannot be had.
#[derive(Debug, thiserror::Error)]
#[error("endpoint key {path}: {message}")]
pub struct KeyError {
    /// The key file.
    pub path: PathBuf,
    /// What is wrong.
    pub message: String,
}

/// Reads `<dir>/endpoint.key` (64 hex digits), or makes a key and stores it there (mode 0600)
/// when the file does not exist. Returns the key and whether it was made now.
pub fn load_or_create(dir: &Path) -> Result<(SecretKey, bool), KeyError> {
    let path = dir.join(ENDPOINT_KEY_FILE);
    let fail = |message: String| KeyError {
        path: path.clone(),
        message,
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            warn_if_readable_by_others(&path, "the endpoint key");
            return parse(&text).map(|key| (key, false)).map_err(fail);
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(fail(e.to_string())),
    }
    let key = SecretKey::generate();
    // Written to a private temporary file, then linked into place: a crash never leaves half a
    // key, and of two gateways starting at once on one data dir the first key wins.
    let tmp = dir.join(format!(".{ENDPOINT_KEY_FILE}.{}", std::process::id()));
    let text = format!("{}\n", hex::encode(key.to_bytes()));
    write_private(&tmp, text.as_bytes()).map_err(|e| fail(e.to_string()))?;
    let linked = std::fs::hard_link(&tmp, &path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok((key, true)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let text = std::fs::read_to_string(&path).map_err(|e| fail(e.to_string()))?;
            parse(&text).map(|key| (key, false)).map_err(fail)
        }
        Err(e) => Err(fail(e.to_string())),
    }
}

/// Reads the key without making one: `None` when the data dir has none yet.
pub fn read(dir: &Path) -> Result<Option<SecretKey>, KeyError> {
    let path = dir.join(ENDPOINT_KEY_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => parse(&text)
            .map(Some)
            .map_err(|message| KeyError { path, message }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(KeyError {
            path,
            message: e.to_string(),
        }),
    }
}

fn parse(text: &str) -> Result<SecretKey, String> {
    let bytes = hex::decode(text.trim()).map_err(|_| "not 64 hex digits".to_owned())?;
    let bytes: [u8; 32] = bytes
        .try_into()
        .map_err(|_| "not 64 hex digits".to_owned())?;
    Ok(SecretKey::from_bytes(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_key_is_made_once_private_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read(dir.path()).unwrap().is_none());
        let (made, new) = load_or_create(dir.path()).unwrap();
        assert!(new);
        let mode = std::fs::metadata(dir.path().join(ENDPOINT_KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let (again, new) = load_or_create(dir.path()).unwrap();
        assert!(!new);
        assert_eq!(again.public(), made.public());
        assert_eq!(read(dir.path()).unwrap().unwrap().public(), made.public());
        std::fs::write(dir.path().join(ENDPOINT_KEY_FILE), "zz").unwrap();
        assert!(load_or_create(dir.path()).is_err());
    }
}
