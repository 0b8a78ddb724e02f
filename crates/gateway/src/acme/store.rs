//! What ACME keeps in `<data_dir>/acme/` (the directory 0700, every file 0600): the account
//! (`account.json`: its URL and private key, for the directory it was made at), the certificate
//! chain and its key (`cert.pem`, `key.pem`), and `status.json` — which names and directory the
//! certificate is for, when it was renewed, and the last renewal error — that `doctor` reads.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// ACME's directory in the data dir.
pub const DIR: &str = "acme";

/// The account for one directory.
#[derive(Serialize, Deserialize)]
pub struct StoredAccount {
    /// The directory URL the account was made at.
    pub directory: String,
    /// instant-acme's credentials (account URL and PKCS#8 key).
    pub credentials: instant_acme::AccountCredentials,
}

/// Where the certificate stands, for `doctor` and the next start.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// The directory the stored certificate came from.
    pub directory: String,
    /// The names it is for.
    pub domains: Vec<String>,
    /// When it was issued (ms since the epoch).
    pub renewed_ms: Option<i64>,
    /// When it stops being valid (ms since the epoch).
    pub not_after_ms: Option<i64>,
    /// The last attempt that failed, and why (cleared by a success).
    pub last_error: Option<String>,
    /// When that attempt was made (ms since the epoch).
    pub last_error_ms: Option<i64>,
}

/// The files of `<data_dir>/acme/`.
#[derive(Debug, Clone)]
pub struct Files {
    dir: PathBuf,
}

impl Files {
    /// The files under `data_dir`; the directory is made (0700) when missing.
    pub fn open(data_dir: &Path) -> std::io::Result<Files> {
        let dir = data_dir.join(DIR);
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)?;
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))?;
        Ok(Files { dir })
    }

    /// The certificate chain's path.
    pub fn cert(&self) -> PathBuf {
        self.dir.join("cert.pem")
    }

    fn key(&self) -> PathBuf {
        self.dir.join("key.pem")
    }

    /// The account made at `directory`, if one is kept.
    pub fn account(&self, directory: &str) -> Option<instant_acme::AccountCredentials> {
        let text = fs::read(self.dir.join("account.json")).ok()?;
        let stored: StoredAccount = serde_json::from_slice(&text).ok()?;
        (stored.directory == directory).then_some(stored.credentials)
    }

    /// Keeps the account.
    pub fn save_account(&self, account: &StoredAccount) -> Result<(), String> {
        let text = serde_json::to_vec(account).map_err(|e| e.to_string())?;
        crate::tls::write_new(&self.dir.join("account.json"), &text, 0o600)
    }

    /// The stored certificate chain and key (PEM), if both are there.
    pub fn certificate(&self) -> Option<(Vec<u8>, Vec<u8>)> {
        Some((fs::read(self.cert()).ok()?, fs::read(self.key()).ok()?))
    }

    /// Keeps a new certificate: the key first, so a chain on disk always has its key.
    pub fn save_certificate(&self, chain: &[u8], key: &[u8]) -> Result<(), String> {
        crate::tls::write_new(&self.key().with_extension("next"), key, 0o600)?;
        crate::tls::write_new(&self.cert().with_extension("next"), chain, 0o600)?;
        fs::rename(self.key().with_extension("next"), self.key()).map_err(|e| e.to_string())?;
        fs::rename(self.cert().with_extension("next"), self.cert()).map_err(|e| e.to_string())
    }

    /// The status kept by the last run.
    pub fn status(&self) -> Status {
        read_status(&self.dir)
    }

    /// Keeps `status`.
    pub fn save_status(&self, status: &Status) -> Result<(), String> {
        let text = serde_json::to_vec_pretty(status).map_err(|e| e.to_string())?;
        crate::tls::write_new(&self.dir.join("status.json"), &text, 0o600)
    }
}

/// The status in `<data_dir>/acme/` without making anything (for `doctor`).
pub fn status_in(data_dir: &Path) -> Option<Status> {
    let dir = data_dir.join(DIR);
    dir.join("status.json").exists().then(|| read_status(&dir))
}

fn read_status(dir: &Path) -> Status {
    fs::read(dir.join("status.json"))
        .ok()
        .and_then(|t| serde_json::from_slice(&t).ok())
        .unwrap_or_default()
}
