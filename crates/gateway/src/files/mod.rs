//! The file browser: a read-only look at each agent's working directory (`files.list`,
//! `files.read`, `files.pull`).
//!
//! - [`jail`]: paths resolved by the kernel beneath the directory (`openat2`), hidden names,
//!   the data directory kept out, nothing but directories and regular files opened.
//! - [`listing`]: a directory's first entries, in one pass that holds only those.
//! - [`read`]: a file's kind, a bounded piece of its text, the open file for a pull.
//! - [`names`]: names with control characters shown escaped, times in milliseconds.
//!
//! Every request runs on a blocking thread, at most [`MAX_BUSY`] at once.
//!
//! Layer: services. Imports the media service (kinds and MIME types) and the ground floor.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use iris_protocol::{ErrorCode, FileContent, FilesListing, FilesPullHeader};
use tokio::sync::Semaphore;

use crate::config::files::FilesConfig;
use crate::config::Config;
use crate::wire::WireError;

pub mod jail;
pub mod listing;
pub mod names;
pub mod own;
pub mod read;

use jail::{Jail, RelPath};

/// File requests running at once on blocking threads; more wait.
pub const MAX_BUSY: usize = 4;

/// One agent's directory, as the file browser knows it.
#[derive(Debug, Clone)]
struct Root {
    dir: PathBuf,
    /// The directory as the kernel names it (symlinks resolved), read once at the start: an
    /// absolute path a tool call names may start with either.
    canonical: Option<PathBuf>,
    enabled: bool,
}

/// The file browser of every agent.
#[derive(Debug)]
pub struct Files {
    roots: HashMap<String, Root>,
    default: String,
    config: FilesConfig,
    data_dir: PathBuf,
    /// The secret files outside the data dir the configuration names.
    secrets: Vec<PathBuf>,
    busy: Semaphore,
}

/// A file opened for `files.pull`: the header frame and the file.
pub struct PullFile {
    /// The header before the bytes.
    pub header: FilesPullHeader,
    /// The file.
    pub file: std::fs::File,
}

impl Files {
    /// The file browser of `agents` (name, working directory, whether it runs at all), the
    /// default agent's name, with the `[files]` settings; the data directory is never shown.
    pub fn new(
        config: &Config,
        agents: impl IntoIterator<Item = (String, PathBuf, bool)>,
        default: String,
    ) -> Arc<Files> {
        let data_dir = config.data_dir.clone();
        let config_full = config;
        let mut files = config.files.clone();
        files.max_pull_bytes = files.max_pull_bytes.or(Some(config.media.max_upload_bytes));
        let config = &files;
        let roots = agents
            .into_iter()
            .map(|(name, dir, runs)| {
                let enabled = runs && config.enabled_for(&name);
                let canonical = std::fs::canonicalize(&dir).ok();
                let root = Root {
                    dir,
                    canonical,
                    enabled,
                };
                (name, root)
            })
            .collect();
        Arc::new(Files {
            roots,
            default,
            config: config.clone(),
            data_dir,
            secrets: config_full.secret_files(),
            busy: Semaphore::new(MAX_BUSY),
        })
    }

    /// The agent of chats that chose none.
    pub fn default_agent(&self) -> &str {
        &self.default
    }

    /// `files.list`.
    pub async fn list(&self, agent: &str, path: &str) -> Result<FilesListing, WireError> {
        let path = self.rel(agent, path)?;
        let max = self.config.max_entries;
        let name = agent.to_owned();
        self.run(agent, move |jail| {
            let found = listing::list(&jail, &path, max)?;
            Ok(FilesListing {
                agent: name,
                path: path.as_str().into(),
                truncated: found.total > found.entries.len() as u64,
                entries: found.entries,
                total: found.total,
                hidden: found.hidden,
            })
        })
        .await
    }

    /// `files.read`.
    pub async fn read(
        &self,
        agent: &str,
        path: &str,
        offset: u64,
    ) -> Result<FileContent, WireError> {
        let path = self.rel(agent, path)?;
        let max = self.config.max_read_bytes;
        let name = agent.to_owned();
        self.run(agent, move |jail| {
            read::read(&jail, &name, &path, offset, max)
        })
        .await
    }

    /// `files.pull`: the file opened, refused above `[files] max_pull_bytes`.
    pub async fn open_for_pull(&self, agent: &str, path: &str) -> Result<PullFile, WireError> {
        let path = self.rel(agent, path)?;
        let max = self.config.max_pull_bytes.unwrap_or(u64::MAX);
        let name = agent.to_owned();
        self.run(agent, move |jail| {
            let opened = read::open(&jail, &path)?;
            if opened.size > max {
                return Err(WireError::new(
                    ErrorCode::MediaTooLarge,
                    format!(
                        "the file has {} bytes; files.pull streams at most {max} ([files] max_pull_bytes)",
                        opened.size
                    ),
                ));
            }
            let kind = if opened.kind == "image" { "image" } else { "file" };
            Ok(PullFile {
                header: FilesPullHeader {
                    agent: name,
                    path: path.as_str().into(),
                    name: path.name().into(),
                    kind: kind.into(),
                    mime: opened.mime,
                    size: opened.size,
                },
                file: opened.file,
            })
        })
        .await
    }

    /// `raw` checked as a path in the agent's directory (an absolute one inside it taken too).
    fn rel(&self, agent: &str, raw: &str) -> Result<RelPath, WireError> {
        match self.roots.get(agent) {
            Some(root) => {
                let bases = [Some(root.dir.as_path()), root.canonical.as_deref()];
                RelPath::within(bases.into_iter().flatten(), raw)
            }
            None => RelPath::parse(raw),
        }
    }

    /// Runs `work` in the agent's jail on a blocking thread.
    async fn run<T: Send + 'static>(
        &self,
        agent: &str,
        work: impl FnOnce(Jail) -> Result<T, WireError> + Send + 'static,
    ) -> Result<T, WireError> {
        let root = self
            .roots
            .get(agent)
            .ok_or_else(|| WireError::not_found(format!("no agent named {agent:?}")))?;
        if !root.enabled {
            return Err(WireError::new(
                ErrorCode::Auth,
                format!("the file browser is off for agent {agent:?} ([agents.{agent}] files)"),
            ));
        }
        let _permit = self
            .busy
            .acquire()
            .await
            .map_err(|_| WireError::internal("file browser closed"))?;
        let (dir, data_dir) = (root.dir.clone(), self.data_dir.clone());
        let secrets = self.secrets.clone();
        let show_hidden = self.config.show_hidden;
        tokio::task::spawn_blocking(move || {
            // Found again for each request: the data dir's files come and go (a new key, the
            // store's journal).
            let own = own::OwnFiles::find(&data_dir, &secrets);
            work(Jail::open(&dir, &data_dir, own, show_hidden)?)
        })
        .await
        .map_err(WireError::internal)?
    }
}
