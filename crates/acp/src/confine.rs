//! Confining an agent process with Landlock, so that a prompt-injected agent cannot reach the
//! gateway's credentials: the data dir (store, token, Web Push key, admin socket), the
//! configuration file and every secret file it names are neither readable nor writable (only the
//! media files attached to the agent's own prompts can be read), signals to
//! processes outside the sandbox (the gateway) and abstract Unix sockets are refused, and — by
//! Landlock's rule for `ptrace` — the gateway's memory and `/proc/<pid>/environ` are out of reach.
//! Everything else keeps the access the user has, so the agent's own work (its cwd, its tools)
//! is untouched.
//!
//! Landlock only grants access: to hide a directory or a file, every other entry along the path
//! from `/` to it is granted full access, each on its own. The directories on that path
//! themselves get nothing, so no new file can be made directly in them, nor can the hidden entry
//! be renamed or replaced (a data dir under `/var/lib/iris-gateway` has `/`, `/var` and `/var/lib`
//! above it); links among those entries are skipped, never followed (one could point into a
//! hidden place). Several hidden places share the walk: an entry on the way to any of them is
//! walked into, never granted.
//!
//! The ruleset is built in the gateway before the agent is forked; the child only calls
//! `prctl(PR_SET_NO_NEW_PRIVS)` and `landlock_restrict_self` between fork and exec (nothing
//! there allocates). `PR_SET_NO_NEW_PRIVS` also means set-user-ID programs (`sudo`) do not gain
//! privileges inside the agent.

use std::collections::BTreeSet;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use landlock::{
    Access, AccessFs, PathBeneath, Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope,
    ABI,
};

/// The Landlock version the rules are written for (the kernel may be newer; older kernels get
/// what they support, and no confinement without Landlock at all).
const ABI_USED: ABI = ABI::V6;

/// What an agent may not reach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Confinement {
    /// Directories and files the agent may neither read nor write (the gateway's data dir, its
    /// configuration file, the secret files that names). Those that do not exist are left out.
    pub hidden: Vec<PathBuf>,
    /// Places inside them the agent may read (the media attached to its prompts).
    pub readable: Vec<PathBuf>,
}

/// The Landlock ABI version of the running kernel; `None` when it has no Landlock (or it is
/// switched off at boot).
pub fn landlock_abi() -> Option<i32> {
    // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) only returns
    // the version; it reads no memory.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    };
    i32::try_from(version).ok().filter(|v| *v > 0)
}

/// A ruleset ready to be applied in a child.
#[derive(Debug)]
pub(crate) struct Prepared {
    fd: OwnedFd,
}

impl Prepared {
    /// The ruleset's descriptor, for [`restrict_self`] in the child.
    pub(crate) fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Builds the ruleset of a confinement; `Ok(None)` when the kernel has no Landlock.
pub(crate) fn prepare(confinement: &Confinement) -> std::io::Result<Option<Prepared>> {
    if landlock_abi().is_none() {
        return Ok(None);
    }
    let all = AccessFs::from_all(ABI_USED);
    let read = AccessFs::from_read(ABI_USED);
    let mut ruleset = Ruleset::default()
        .handle_access(all)
        .and_then(|r| r.scope(Scope::Signal | Scope::AbstractUnixSocket))
        .and_then(Ruleset::create)
        .map_err(std::io::Error::other)?;
    let hidden = hidden_set(&confinement.hidden);
    let mut on_the_way: BTreeSet<PathBuf> = BTreeSet::new();
    for place in &hidden {
        on_the_way.extend(place.ancestors().skip(1).map(Path::to_path_buf));
    }
    for dir in &on_the_way {
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            if hidden.contains(&path) || on_the_way.contains(&path) {
                continue;
            }
            // A link is skipped: it may point into a hidden place. Where it points to is
            // reached through its target's own entry.
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
                continue;
            }
            ruleset = allow(ruleset, &path, all)?;
        }
    }
    for path in &confinement.readable {
        if path.exists() {
            ruleset = allow(ruleset, path, read)?;
        }
    }
    let fd: Option<OwnedFd> = ruleset.into();
    Ok(fd.map(|fd| Prepared { fd }))
}

/// The hidden places as real paths, without those that do not exist or lie inside another (a
/// secret file in the data dir is hidden with it).
fn hidden_set(places: &[PathBuf]) -> BTreeSet<PathBuf> {
    let real: BTreeSet<PathBuf> = places
        .iter()
        .filter_map(|p| p.canonicalize().ok())
        .collect();
    real.iter()
        .filter(|p| !p.ancestors().skip(1).any(|a| real.contains(a)))
        .cloned()
        .collect()
}

/// Grants `access` beneath `path`, opened without following a link. An entry that cannot be
/// opened (gone meanwhile, not permitted) is left out: it stays out of reach.
fn allow(
    ruleset: RulesetCreated,
    path: &Path,
    access: landlock::BitFlags<AccessFs>,
) -> std::io::Result<RulesetCreated> {
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return Ok(ruleset);
    };
    // SAFETY: the path is NUL-terminated; O_PATH needs no mode argument.
    let fd = unsafe {
        libc::open(
            c_path.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Ok(ruleset);
    }
    // SAFETY: a new descriptor we own alone.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    ruleset
        .add_rule(PathBeneath::new(fd, access))
        .map_err(std::io::Error::other)
}

/// Applies a prepared ruleset to the calling process. Runs in the child between fork and exec:
/// two system calls, no allocation.
pub(crate) fn restrict_self(ruleset: RawFd) -> std::io::Result<()> {
    // SAFETY: plain system calls on integers.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_inside_another_are_hidden_with_it() {
        let tmp = std::env::temp_dir().join(format!("iris-confine-{}", std::process::id()));
        let data = tmp.join("data");
        std::fs::create_dir_all(&data).expect("dir");
        std::fs::write(data.join("token"), "x").expect("file");
        std::fs::write(tmp.join("iris.toml"), "x").expect("file");
        let set = hidden_set(&[
            data.join("token"),
            data.clone(),
            tmp.join("iris.toml"),
            tmp.join("missing"),
        ]);
        let real = tmp.canonicalize().expect("real");
        assert_eq!(
            set.into_iter().collect::<Vec<_>>(),
            vec![real.join("data"), real.join("iris.toml")]
        );
        std::fs::remove_dir_all(&tmp).expect("cleanup");
    }
}
