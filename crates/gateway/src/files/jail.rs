//! The jail: every path of the file browser is resolved inside the agent's working directory by
//! the kernel, with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` from a descriptor of that
//! directory. A `..` or a symlink (absolute or relative, at any component) that would lead out
//! fails in the kernel (`EXDEV`) while it resolves, so there is no window between a check and
//! the open for a rename or a new symlink to slip through. What was opened is then checked once
//! more by its own path as the kernel names it (`/proc/self/fd`): inside the directory, no
//! hidden name on the way (a symlink to `.git` shows nothing of `.git`), not in the gateway's
//! data directory.
//!
//! Files are first opened with `O_PATH`, which opens nothing (a FIFO, socket or device is
//! never opened, so nothing blocks or happens); only a directory or a regular file is opened
//! again to be read, with `O_NONBLOCK`, and must be the same inode as the one checked.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use iris_protocol::ErrorCode;
use rustix::fs::{Mode, OFlags, ResolveFlags, Stat};
use rustix::io::Errno;

use crate::wire::WireError;

/// Longest path a request may name, in bytes.
const MAX_PATH: usize = 4096;

/// A path relative to the agent's working directory, checked: no `..`, not absolute, no NUL,
/// `.` and empty components dropped. `""` is the directory itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelPath(String);

impl RelPath {
    /// Checks a path as a device sent it.
    pub fn parse(raw: &str) -> Result<RelPath, WireError> {
        if raw.len() > MAX_PATH {
            return Err(WireError::bad_request(format!(
                "path is longer than {MAX_PATH} bytes"
            )));
        }
        if raw.contains('\0') {
            return Err(WireError::bad_request("path contains a NUL character"));
        }
        if raw.starts_with('/') {
            return Err(WireError::bad_request(
                "absolute paths are refused: a path is relative to the agent's working directory",
            ));
        }
        let mut parts = Vec::new();
        for part in raw.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    return Err(WireError::bad_request(
                        "\"..\" is refused: a path stays inside the agent's working directory",
                    ))
                }
                p => parts.push(p),
            }
        }
        Ok(RelPath(parts.join("/")))
    }

    /// Checks a path as a device sent it, where an absolute path is also taken when it names
    /// something inside one of `roots` (the agent's working directory, as configured and as the
    /// kernel names it), as the paths of an agent's tool calls do. Touches no file system.
    pub fn within<'a>(
        roots: impl IntoIterator<Item = &'a Path>,
        raw: &str,
    ) -> Result<RelPath, WireError> {
        if !raw.starts_with('/') || raw.len() > MAX_PATH || raw.contains('\0') {
            return RelPath::parse(raw);
        }
        let inside = roots
            .into_iter()
            .filter(|base| base.is_absolute())
            .find_map(|base| Path::new(raw).strip_prefix(base).ok());
        match inside.and_then(Path::to_str) {
            Some(rest) => RelPath::parse(rest),
            None => Err(WireError::bad_request(
                "an absolute path outside the agent's working directory is refused",
            )),
        }
    }

    /// The normalized path (`""` for the directory itself).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Its last component (`""` for the directory itself).
    pub fn name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or("")
    }

    fn for_open(&self) -> &str {
        if self.0.is_empty() {
            "."
        } else {
            &self.0
        }
    }
}

/// Whether a name is hidden unless `[files] show_hidden`: `.git`, and files that commonly hold
/// secrets (`.env*`, private keys and certificates, credential stores).
pub fn is_hidden(name: &[u8]) -> bool {
    const EXACT: &[&str] = &[
        ".git",
        ".env",
        ".ssh",
        ".gnupg",
        ".aws",
        ".azure",
        ".kube",
        ".docker",
        ".netrc",
        ".npmrc",
        ".pypirc",
        ".pgpass",
        ".git-credentials",
        ".htpasswd",
        ".credentials.json",
        "credentials",
        "credentials.json",
        "credentials.toml",
        "credentials.yaml",
        "credentials.yml",
        "auth.json",
        ".vault-token",
        ".boto",
        ".s3cfg",
        ".terraformrc",
        "token",
        "secrets.json",
        "secrets.yaml",
        "secrets.yml",
    ];
    const PREFIX: &[&str] = &[
        ".env.",
        "id_rsa",
        "id_dsa",
        "id_ecdsa",
        "id_ed25519",
        "service-account",
        "service_account",
    ];
    const SUFFIX: &[&str] = &[
        ".pem",
        ".key",
        ".p12",
        ".pfx",
        ".jks",
        ".keystore",
        ".kdbx",
        ".ppk",
        ".asc",
        ".gpg",
        ".p8",
        ".token",
    ];
    let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
    EXACT.contains(&lower.as_str())
        || PREFIX.iter().any(|p| lower.starts_with(p))
        || SUFFIX.iter().any(|s| lower.ends_with(s))
}

/// What a path resolved to: its `O_PATH` descriptor and its status.
pub struct Resolved {
    /// The `O_PATH` descriptor (opens nothing).
    pub fd: OwnedFd,
    /// Its status.
    pub stat: Stat,
}

/// An agent's working directory, opened.
pub struct Jail {
    root: OwnedFd,
    root_real: PathBuf,
    data_real: Option<PathBuf>,
    own: super::own::OwnFiles,
    show_hidden: bool,
}

impl Jail {
    /// Opens `dir` (the agent's working directory). Refused when it lies inside the gateway's
    /// data directory `data_dir`. `own`: the gateway's files, never listed nor opened.
    pub fn open(
        dir: &Path,
        data_dir: &Path,
        own: super::own::OwnFiles,
        show_hidden: bool,
    ) -> Result<Jail, WireError> {
        let root = rustix::fs::open(
            dir,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| {
            tracing::warn!(error = %e, dir = %dir.display(), "an agent's working directory cannot be opened");
            WireError::not_found("the agent's working directory cannot be opened")
        })?;
        let root_real = fd_path(&root)?;
        let data_real = std::fs::canonicalize(data_dir).ok();
        if data_real.as_ref().is_some_and(|d| root_real.starts_with(d)) {
            return Err(WireError::new(
                ErrorCode::Auth,
                "the agent's working directory lies in the gateway's data directory, which is never shown",
            ));
        }
        Ok(Jail {
            root,
            root_real,
            data_real,
            own,
            show_hidden,
        })
    }

    /// Whether this device and inode is one of the gateway's own files.
    pub fn is_own(&self, dev: u64, ino: u64) -> bool {
        self.own.contains(dev, ino)
    }

    /// Whether hidden names are shown.
    pub fn show_hidden(&self) -> bool {
        self.show_hidden
    }

    /// The data directory's device and inode, when it lies inside this directory (a listing
    /// leaves it out).
    pub fn data_dir_id(&self) -> Option<(u64, u64)> {
        let data = self.data_real.as_ref()?;
        if !data.starts_with(&self.root_real) {
            return None;
        }
        let st = rustix::fs::stat(data).ok()?;
        Some((st.st_dev, st.st_ino))
    }

    /// Resolves `path` inside the directory without opening what it names.
    pub fn resolve(&self, path: &RelPath) -> Result<Resolved, WireError> {
        if !self.show_hidden {
            if let Some(part) = path.0.split('/').find(|p| is_hidden(p.as_bytes())) {
                return Err(hidden(part));
            }
        }
        let fd = self.open_beneath(path, OFlags::PATH)?;
        let real = fd_path(&fd)?;
        self.check_real(&real)?;
        let stat = rustix::fs::fstat(&fd).map_err(WireError::internal)?;
        if self.own.contains(stat.st_dev, stat.st_ino) {
            return Err(WireError::new(
                ErrorCode::Auth,
                "this is one of the gateway's own files (its store, keys or configuration), which are never shown",
            ));
        }
        Ok(Resolved { fd, stat })
    }

    /// Opens what `resolved` is for reading (`O_NONBLOCK`: never waits), checking that it is
    /// still the same inode.
    pub fn reopen(
        &self,
        path: &RelPath,
        resolved: &Resolved,
        flags: OFlags,
    ) -> Result<OwnedFd, WireError> {
        let fd = self.open_beneath(
            path,
            flags | OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
        )?;
        let st = rustix::fs::fstat(&fd).map_err(WireError::internal)?;
        if (st.st_dev, st.st_ino) != (resolved.stat.st_dev, resolved.stat.st_ino) {
            return Err(WireError::not_found(
                "the file changed while it was opened; try again",
            ));
        }
        Ok(fd)
    }

    fn open_beneath(&self, path: &RelPath, flags: OFlags) -> Result<OwnedFd, WireError> {
        let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        let mut tries = 0;
        loop {
            let opened = rustix::fs::openat2(
                self.root.as_fd(),
                path.for_open(),
                flags | OFlags::CLOEXEC,
                Mode::empty(),
                resolve,
            );
            match opened {
                Ok(fd) => return Ok(fd),
                // A rename elsewhere raced the resolution: the kernel asks to try again.
                Err(Errno::AGAIN) if tries < 8 => tries += 1,
                Err(e) => return Err(open_error(e)),
            }
        }
    }

    fn check_real(&self, real: &Path) -> Result<(), WireError> {
        let Ok(inside) = real.strip_prefix(&self.root_real) else {
            return Err(outside());
        };
        if self.data_real.as_ref().is_some_and(|d| real.starts_with(d)) {
            return Err(WireError::new(
                ErrorCode::Auth,
                "the gateway's data directory is never shown",
            ));
        }
        if !self.show_hidden {
            use std::os::unix::ffi::OsStrExt;
            if let Some(part) = inside
                .iter()
                .find(|p| is_hidden(p.as_bytes()))
                .map(|p| p.to_string_lossy().into_owned())
            {
                return Err(hidden(&part));
            }
        }
        Ok(())
    }
}

fn hidden(part: &str) -> WireError {
    WireError::new(
        ErrorCode::Auth,
        format!(
            "{:?} is hidden (.git and secret files are not shown unless [files] show_hidden)",
            super::names::escape(part)
        ),
    )
}

fn outside() -> WireError {
    WireError::new(
        ErrorCode::Auth,
        "the path leads outside the agent's working directory (a symlink out of it is not followed)",
    )
}

fn open_error(e: Errno) -> WireError {
    match e {
        Errno::XDEV => outside(),
        Errno::NOENT | Errno::NOTDIR => WireError::not_found("no such file or directory"),
        Errno::LOOP => WireError::bad_request("too many symlinks on the way"),
        Errno::ACCESS | Errno::PERM => {
            WireError::new(ErrorCode::Auth, "the gateway may not read this")
        }
        Errno::NAMETOOLONG => WireError::bad_request("a name on the way is too long"),
        Errno::NOSYS => WireError::new(
            ErrorCode::Unsupported,
            "the file browser needs openat2 (Linux 5.6 or later)",
        ),
        e => WireError::internal(e),
    }
}

/// The path the kernel gives an open descriptor.
fn fd_path(fd: &OwnedFd) -> Result<PathBuf, WireError> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).map_err(WireError::internal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_relative_and_inside() {
        assert_eq!(RelPath::parse("").unwrap().as_str(), "");
        assert_eq!(RelPath::parse("./a//b/.").unwrap().as_str(), "a/b");
        assert_eq!(RelPath::parse("a/b.txt").unwrap().name(), "b.txt");
        for bad in ["/etc/passwd", "..", "a/../../b", "a/..", "a\0b"] {
            let e = RelPath::parse(bad).unwrap_err();
            assert_eq!(e.code, ErrorCode::BadRequest, "{bad}");
        }
        assert!(RelPath::parse("a\nb").is_ok());
    }

    #[test]
    fn secrets_are_hidden() {
        for name in [
            ".git",
            ".env",
            ".env.local",
            "id_rsa",
            "id_ed25519.pub",
            "server.PEM",
            "tls.key",
            ".ssh",
            ".credentials.json",
            "auth.json",
            ".netrc",
            "credentials",
            "service-account.json",
            "id_ecdsa_sk",
        ] {
            assert!(is_hidden(name.as_bytes()), "{name}");
        }
        for name in [
            "main.rs",
            ".gitignore",
            "environment.md",
            "keys.txt",
            "README",
            "tokenizer.rs",
            "auth.rs",
        ] {
            assert!(!is_hidden(name.as_bytes()), "{name}");
        }
    }
}
