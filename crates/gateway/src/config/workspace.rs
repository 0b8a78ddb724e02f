//! The agent's default working directory: a workspace of its own, not the home directory (where
//! the gateway's configuration, SSH keys and other tools' credentials live, which the file
//! browser would otherwise show devices).

use std::path::{Path, PathBuf};

/// The directory name of the default workspace.
pub const WORKSPACE_NAME: &str = "iris-workspace";

/// `~/iris-workspace`, else `iris-workspace` next to the data dir.
pub fn default_workspace(data_dir: &Path) -> PathBuf {
    match super::home_dir() {
        Some(home) => home.join(WORKSPACE_NAME),
        None => data_dir
            .parent()
            .unwrap_or(Path::new("."))
            .join(WORKSPACE_NAME),
    }
}

/// Creates the default workspace (0700) when it does not exist yet; one that exists is left as
/// it is.
pub fn create_workspace(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// The working directory of agents without one of their own: `[agent] cwd`, else the default
/// workspace.
pub fn agent_cwd(config: &super::Config) -> PathBuf {
    config
        .agent_cwd
        .clone()
        .unwrap_or_else(|| default_workspace(&config.data_dir))
}
