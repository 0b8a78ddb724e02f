//! The gateway's own process, hardened against its children: not readable by them through
//! `/proc` or `ptrace` (`PR_SET_DUMPABLE` 0), and the shared token not left in its environment
//! once read. What is in force is reported by [`Protection`], in `serve`'s banner and `/status`.
//!
//! Ground floor: imports nothing of the gateway above it.

use std::ffi::CStr;
use std::sync::OnceLock;

static IN_FORCE: OnceLock<Protection> = OnceLock::new();

/// Records what protects this gateway (once, at start).
pub fn record(protection: Protection) {
    let _ = IN_FORCE.set(protection);
}

/// What protects this gateway, as recorded at start.
pub fn in_force() -> Protection {
    IN_FORCE.get().cloned().unwrap_or_default()
}

/// What protects the gateway's secrets from the agent it runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Protection {
    /// The gateway's process is not dumpable: a process of the same user (the agent) cannot read
    /// its memory or `/proc/<pid>/environ`, nor attach to it.
    pub not_dumpable: bool,
    /// The agent's file-system confinement (Landlock ABI version), when the kernel has it.
    pub landlock_abi: Option<i32>,
    /// Confinement is switched off in the configuration (`[agent] confine = false`).
    pub confine_off: bool,
}

impl Protection {
    /// One line for `serve`'s banner and `/status`.
    pub fn describe(&self) -> String {
        let agent = match (self.confine_off, self.landlock_abi) {
            (true, _) => "agent not confined (switched off: [agent] confine = false)".to_owned(),
            (false, Some(abi)) => format!(
                "agent confined by Landlock (ABI {abi}): no access to the data dir, no signals or ptrace to the gateway"
            ),
            (false, None) => {
                "agent NOT confined: this kernel has no Landlock; see docs/deployment.md (systemd sandbox)".to_owned()
            }
        };
        let process = if self.not_dumpable {
            "gateway memory not readable by its children"
        } else {
            "gateway memory readable by its children (PR_SET_DUMPABLE failed)"
        };
        format!("{agent}; {process}")
    }
}

/// Makes this process not dumpable: `/proc/<pid>/{environ,mem,maps,…}` then belong to root and
/// `ptrace` by another process of the same user is refused. True when it took effect.
pub fn not_dumpable() -> bool {
    // SAFETY: prctl with PR_SET_DUMPABLE takes an integer argument and touches no memory of ours.
    let rc = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    rc == 0
}

/// Removes `name` from the environment, first overwriting its value where the kernel placed it
/// at `exec`: `/proc/<pid>/environ` reads that memory, so only removing the variable would leave
/// the value there for anyone allowed to read the file.
///
/// Call it before any other thread exists (at the start of `main`): the environment is not
/// synchronized.
pub fn scrub_env(name: &str) {
    let prefix = format!("{name}=");
    // SAFETY: single-threaded by contract. `environ` is a NULL-terminated array of pointers to
    // NUL-terminated strings; each string is only overwritten within its own length, keeping
    // its terminating NUL.
    unsafe {
        let mut entry = environ;
        while !entry.is_null() && !(*entry).is_null() {
            let text = CStr::from_ptr(*entry);
            let bytes = text.to_bytes();
            if bytes.starts_with(prefix.as_bytes()) {
                let value = (*entry).add(prefix.len());
                std::ptr::write_bytes(value, 0, bytes.len() - prefix.len());
            }
            entry = entry.add(1);
        }
        std::env::remove_var(name);
    }
}

extern "C" {
    static mut environ: *mut *mut libc::c_char;
}
