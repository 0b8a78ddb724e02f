//! [`Store`]: opening, the write queue, the reader pool and the async read API.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle, ThreadId};

use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::queries;
use crate::schema::{self, open_read_connection, open_write_connection};
use crate::search;
use crate::writer::{panic_message, TypedJob, Writer, WriterMsg};
use crate::{
    ChannelRow, CommitHook, DeviceRow, HistoryPage, LaneUsage, SearchHit, StoreConfig, StoreError,
    StoredMessage, WriteTx,
};

type ReadJob = Box<dyn FnOnce(&mut Connection) + Send>;

/// How a write job is committed (see [`Store::write`], [`Store::write_lazy`],
/// [`Store::write_light`]).
#[derive(Clone, Copy)]
enum Kind {
    Job,
    Lazy,
    Light,
}

/// Handle to the durable store. Cloning is cheap; all clones share one writer thread
/// and one reader pool. The threads stop when [`Store::close`] is called or the last
/// clone is dropped.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    writer_tx: Sender<WriterMsg>,
    /// `None` tells one reader thread to exit.
    reader_tx: Sender<Option<ReadJob>>,
    reader_count: usize,
    threads: Mutex<Vec<JoinHandle<()>>>,
    closed: AtomicBool,
    /// Raised by the writer after each commit that changed the channel directory.
    channels_gen: Arc<AtomicU64>,
    /// The directory as last read, with the generation it was read at.
    channels: Mutex<Option<(u64, Arc<Vec<ChannelRow>>)>>,
}

impl Store {
    /// Opens (creating if needed) the database at `cfg.path`, applies migrations and
    /// starts the writer and reader threads. The parent directory must exist.
    /// `on_commit` runs on the writer thread; see [`CommitHook`].
    pub fn open(cfg: StoreConfig, on_commit: CommitHook) -> Result<Store, StoreError> {
        check_parent(&cfg.path)?;
        let mut conn = open_write_connection(&cfg.path)?;
        schema::migrate(&mut conn)?;
        schema::finish_restore(&mut conn)?;

        let reader_count = cfg.readers.clamp(1, 16);
        let mut readers = Vec::with_capacity(reader_count);
        for _ in 0..reader_count {
            readers.push(open_read_connection(&cfg.path)?);
        }

        let (writer_tx, writer_rx) = mpsc::channel();
        let (reader_tx, reader_rx) = mpsc::channel::<Option<ReadJob>>();
        let reader_rx = Arc::new(Mutex::new(reader_rx));
        let mut threads = Vec::with_capacity(reader_count + 1);

        let channels_gen = Arc::new(AtomicU64::new(0));
        let writer = Writer {
            conn,
            rx: writer_rx,
            hook: on_commit,
            group_commit: cfg.group_commit,
            channels_gen: channels_gen.clone(),
            commit_delay: crate::writer::commit_delay_from_env(),
        };
        threads.push(
            thread::Builder::new()
                .name("iris-store-writer".into())
                .spawn(move || writer.run())?,
        );
        for (i, conn) in readers.into_iter().enumerate() {
            let rx = Arc::clone(&reader_rx);
            let spawned = thread::Builder::new()
                .name(format!("iris-store-reader-{i}"))
                .spawn(move || reader_loop(conn, rx));
            match spawned {
                Ok(handle) => threads.push(handle),
                Err(e) => {
                    // Stop the threads already running before reporting the failure.
                    let _ = writer_tx.send(WriterMsg::Shutdown);
                    for _ in 0..i {
                        let _ = reader_tx.send(None);
                    }
                    for t in threads {
                        let _ = t.join();
                    }
                    return Err(e.into());
                }
            }
        }

        Ok(Store {
            inner: Arc::new(Inner {
                path: cfg.path,
                writer_tx,
                reader_tx,
                reader_count,
                threads: Mutex::new(threads),
                closed: AtomicBool::new(false),
                channels_gen,
                channels: Mutex::new(None),
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Queues a write job and waits until it is committed (or failed).
    ///
    /// When this returns `Ok`, the job's changes are durable and every frame it
    /// appended has already been passed to the commit hook. When it returns `Err`,
    /// nothing the job did was kept and none of its frames were published. If the
    /// future is dropped early the job still runs.
    pub async fn write<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        F: FnOnce(&mut WriteTx<'_>) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        self.write_queued(f).await
    }

    /// Queues a write job now and returns its answer as a future, as [`Store::write`] does;
    /// jobs run in the order they were queued, so a caller can queue one, go on without
    /// waiting for its commit, and know that what it queues later is committed after it.
    pub fn write_queued<T, F>(
        &self,
        f: F,
    ) -> impl std::future::Future<Output = Result<T, StoreError>> + Send + 'static
    where
        F: FnOnce(&mut WriteTx<'_>) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        self.queue_job(f, Kind::Job)
    }

    /// A write that needs no commit of its own (bookkeeping that may lag, such as delivery
    /// watermarks): it is committed together with the next batch of other writes, or alone
    /// about 200 ms after it was queued when nothing else is written. It may be committed after
    /// writes queued later; otherwise it is [`Store::write`].
    pub fn write_lazy<T, F>(
        &self,
        f: F,
    ) -> impl std::future::Future<Output = Result<T, StoreError>> + Send + 'static
    where
        F: FnOnce(&mut WriteTx<'_>) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        self.queue_job(f, Kind::Lazy)
    }

    /// A write committed before it is answered (its frames published first), like
    /// [`Store::write`], whose commit need not wait for the disk: when only such writes are
    /// queued they commit with `synchronous=NORMAL`, which survives a killed process (WAL) but
    /// not a power cut; any later ordinary commit makes them durable too. For what must be
    /// stored before it is shown but may be lost with the machine (streaming text).
    pub fn write_light<T, F>(
        &self,
        f: F,
    ) -> impl std::future::Future<Output = Result<T, StoreError>> + Send + 'static
    where
        F: FnOnce(&mut WriteTx<'_>) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        self.queue_job(f, Kind::Light)
    }

    fn queue_job<T, F>(
        &self,
        f: F,
        kind: Kind,
    ) -> impl std::future::Future<Output = Result<T, StoreError>> + Send + 'static
    where
        F: FnOnce(&mut WriteTx<'_>) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let queued = if self.inner.closed.load(Ordering::Acquire) {
            Err(StoreError::Closed)
        } else {
            let job = Box::new(TypedJob::new(f, tx));
            let msg = match kind {
                Kind::Job => WriterMsg::Job(job),
                Kind::Lazy => WriterMsg::Lazy(job),
                Kind::Light => WriterMsg::Light(job),
            };
            self.inner
                .writer_tx
                .send(msg)
                .map_err(|_| StoreError::Closed)
        };
        async move {
            queued?;
            // A dropped reply sender means the writer exited with the job still queued.
            rx.await.map_err(|_| StoreError::Closed)?
        }
    }

    /// Runs `f` on a read-only connection of the pool. Each connection sees only
    /// committed data; wrap several queries in a transaction for one snapshot.
    pub(crate) async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(StoreError::Closed);
        }
        let (tx, rx) = oneshot::channel();
        let job: ReadJob = Box::new(move |conn| {
            let result = catch_unwind(AssertUnwindSafe(|| f(conn))).unwrap_or_else(|payload| {
                Err(StoreError::Internal(format!(
                    "read job panicked: {}",
                    panic_message(&*payload)
                )))
            });
            let _ = tx.send(result);
        });
        self.inner
            .reader_tx
            .send(Some(job))
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Stops the store: queued write jobs still run and are answered, later calls get
    /// [`StoreError::Closed`]. Blocks until the threads have exited (unless called from
    /// one of them, e.g. inside the commit hook).
    pub fn close(&self) {
        self.inner.shutdown();
    }

    /// The highest cursor ever assigned (0 when none). Deleting rows never lowers it.
    pub async fn outbox_head(&self) -> Result<u64, StoreError> {
        self.read(|c| queries::outbox_head(c)).await
    }

    /// The highest cursor removed by retention pruning (0 when nothing was pruned).
    /// A client whose cursor is below the floor has missed frames.
    pub async fn outbox_floor(&self) -> Result<u64, StoreError> {
        self.read(|c| queries::outbox_floor(c)).await
    }

    /// Up to `limit` frames with a cursor above `after`, in cursor order. Rows removed
    /// by message or channel deletes simply do not appear.
    pub async fn replay(
        &self,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, Arc<str>)>, StoreError> {
        self.read(move |c| queries::replay(c, after, limit, usize::MAX))
            .await
    }

    /// Like [`Store::replay`], and the page ends once it holds `max_bytes` of frames (it holds
    /// at least one): what a reader keeps in memory at once is bounded by size, not only rows.
    pub async fn replay_bytes(
        &self,
        after: u64,
        limit: usize,
        max_bytes: usize,
    ) -> Result<Vec<(u64, Arc<str>)>, StoreError> {
        self.read(move |c| queries::replay(c, after, limit, max_bytes))
            .await
    }

    /// Retention pruning as a write job; see [`WriteTx::prune_outbox`].
    pub async fn prune_outbox(&self, older_than_ms: i64) -> Result<usize, StoreError> {
        self.write(move |tx| tx.prune_outbox(older_than_ms)).await
    }

    /// The message with this id, if it exists.
    pub async fn get_message(&self, id: &str) -> Result<Option<StoredMessage>, StoreError> {
        let id = id.to_string();
        self.read(move |c| queries::get_message(c, &id)).await
    }

    /// The newest `limit` messages of the lane `(chat_id, thread_id)` that are older
    /// than `before_message_id` (or the newest overall), oldest first. `thread_id` None
    /// is the chat's flat lane. An unknown `before_message_id`, or one from another
    /// lane, is [`StoreError::NotFound`].
    pub async fn history(
        &self,
        chat_id: &str,
        thread_id: Option<&str>,
        before_message_id: Option<&str>,
        limit: usize,
    ) -> Result<HistoryPage, StoreError> {
        let chat_id = chat_id.to_string();
        let thread_id = thread_id.map(str::to_string);
        let before = before_message_id.map(str::to_string);
        self.read(move |c| {
            let tx = c.transaction()?;
            let page = queries::history(
                &tx,
                &chat_id,
                thread_id.as_deref(),
                before.as_deref(),
                limit,
            )?;
            tx.finish()?;
            Ok(page)
        })
        .await
    }

    /// The sums over the answers of the lane `(chat_id, thread_id)`: how many, their tokens and
    /// their cost, where reported. An unknown lane has none.
    pub async fn lane_usage(
        &self,
        chat_id: &str,
        thread_id: Option<&str>,
    ) -> Result<LaneUsage, StoreError> {
        let (chat_id, thread_id) = (chat_id.to_owned(), thread_id.map(str::to_owned));
        self.read(move |c| queries::lane_usage(c, &chat_id, thread_id.as_deref()))
            .await
    }

    /// Searches message text.
    ///
    /// Query syntax: words are ANDed; `"two words"` is a phrase; a word ending in `*`
    /// (or a phrase followed by `*`) matches as a prefix. Everything else, including
    /// FTS5 operators, is treated as literal text, and input with nothing searchable
    /// yields no hits. Results are ranked by bm25, ties newest first.
    ///
    /// Queries containing Han, Hiragana, Katakana, Hangul or emoji are run as a
    /// substring search instead (every word must occur, ASCII case-insensitive,
    /// newest first), since the tokenizer does not split those scripts into words.
    ///
    /// `snippet` is an excerpt where each match is wrapped in `[` and `]` and cut
    /// text is marked with `…`; brackets already present in the text are not escaped.
    /// `scope` `Some((chat, thread))` restricts to that lane (thread None = flat lane).
    ///
    /// Repeated words count once; more than 16 different ones ([`crate::SEARCH_MAX_TERMS`]) are
    /// [`StoreError::Invalid`].
    pub async fn search(
        &self,
        query: &str,
        scope: Option<(String, Option<String>)>,
        limit: usize,
    ) -> Result<Vec<SearchHit>, StoreError> {
        let query = query.to_string();
        self.read(move |c| {
            let scope = scope
                .as_ref()
                .map(|(chat, thread)| (chat.as_str(), thread.as_deref()));
            search::search(c, &query, scope, limit)
        })
        .await
    }

    /// [`Store::search`] that runs at most `budget`, and stops as soon as the returned future is
    /// dropped (its caller went away): [`StoreError::Interrupted`] then.
    pub async fn search_within(
        &self,
        query: &str,
        scope: Option<(String, Option<String>)>,
        limit: usize,
        budget: std::time::Duration,
    ) -> Result<Vec<SearchHit>, StoreError> {
        /// Tells the running query to stop when the future awaiting it is dropped.
        struct CancelOnDrop(Arc<AtomicBool>);
        impl Drop for CancelOnDrop {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let query = query.to_string();
        let cancel = CancelOnDrop(Arc::new(AtomicBool::new(false)));
        let flag = cancel.0.clone();
        let deadline = std::time::Instant::now() + budget;
        let hits = self
            .read(move |c| {
                let scope = scope
                    .as_ref()
                    .map(|(chat, thread)| (chat.as_str(), thread.as_deref()));
                search::search_bounded(c, &query, scope, limit, deadline, flag)
            })
            .await;
        // Finished (setting the flag now stops nothing).
        drop(cancel);
        hits
    }

    /// All channels and threads in creation order.
    pub async fn list_channels(&self) -> Result<Vec<ChannelRow>, StoreError> {
        Ok(self.channel_directory().await?.as_ref().clone())
    }

    /// The channel or thread with this id, if it exists.
    pub async fn get_channel(&self, id: &str) -> Result<Option<ChannelRow>, StoreError> {
        Ok(self
            .channel_directory()
            .await?
            .iter()
            .find(|c| c.chat_id == id)
            .cloned())
    }

    /// All channels and threads in creation order, shared. Every request names its lane, and a
    /// read of the store per request would be a trip to a reader thread on every message, so
    /// the directory is read once per change: the copy is valid while the writer's generation
    /// is the one it was read at, and the writer raises it after a commit that changed a
    /// channel and before it answers, so a caller whose write returned never gets the
    /// directory from before it. (Only this process writes channels.)
    pub async fn channel_directory(&self) -> Result<Arc<Vec<ChannelRow>>, StoreError> {
        let generation = self.inner.channels_gen.load(Ordering::Acquire);
        if let Some((g, rows)) = &*self
            .inner
            .channels
            .lock()
            .unwrap_or_else(|p| p.into_inner())
        {
            if *g == generation {
                return Ok(rows.clone());
            }
        }
        let rows = Arc::new(self.read(|c| queries::list_channels(c)).await?);
        let mut cached = self
            .inner
            .channels
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if cached.as_ref().is_none_or(|(g, _)| *g <= generation) {
            *cached = Some((generation, rows.clone()));
        }
        Ok(rows)
    }

    /// Every channel's and thread's latest activity and newest message text, in creation order
    /// (one query; see [`ChannelActivity`]).
    pub async fn channel_activity(&self) -> Result<Vec<crate::ChannelActivity>, StoreError> {
        self.read(|c| queries::channel_activity(c)).await
    }

    /// The device with this id, if it is registered.
    pub async fn get_device(&self, id: &str) -> Result<Option<DeviceRow>, StoreError> {
        let id = id.to_string();
        self.read(move |c| queries::get_device(c, &id)).await
    }

    /// All devices, oldest registration first.
    pub async fn list_devices(&self) -> Result<Vec<DeviceRow>, StoreError> {
        self.read(|c| queries::list_devices(c)).await
    }

    /// Devices that read `message_id`, in the order they read it.
    pub async fn read_by(&self, message_id: &str) -> Result<Vec<String>, StoreError> {
        let id = message_id.to_string();
        self.read(move |c| queries::read_by(c, &id)).await
    }

    /// The agent session bound to a lane (`thread_id` None = the flat lane).
    pub async fn lane_session(
        &self,
        chat_id: &str,
        thread_id: Option<&str>,
    ) -> Result<Option<String>, StoreError> {
        let chat_id = chat_id.to_string();
        let thread_id = thread_id.map(str::to_string);
        self.read(move |c| queries::lane_session(c, &chat_id, thread_id.as_deref()))
            .await
    }

    /// A value of the `meta` key/value table.
    pub async fn get_meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        let key = key.to_string();
        self.read(move |c| queries::get_meta(c, &key)).await
    }

    /// The schema version (`PRAGMA user_version`) of the open database.
    pub async fn schema_version(&self) -> Result<u32, StoreError> {
        self.read(|c| schema::schema_version(c)).await
    }

    /// Blocking consistency check for tests and tools: SQLite's `integrity_check` and
    /// FTS5's `integrity-check` (which also compares the index with the messages).
    /// It uses its own connection, so it may be called from any thread.
    pub fn integrity_check(&self) -> Result<(), StoreError> {
        let conn = open_write_connection(&self.inner.path)?;
        let mut stmt = conn.prepare("PRAGMA integrity_check")?;
        let problems: Vec<String> = stmt
            .query_map([], |r| r.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .filter(|line| line != "ok")
            .collect();
        if !problems.is_empty() {
            return Err(StoreError::Invalid(format!(
                "integrity_check: {}",
                problems.join("; ")
            )));
        }
        conn.execute(
            "INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)",
            [],
        )
        .map_err(|e| StoreError::Invalid(format!("fts integrity-check: {e}")))?;
        Ok(())
    }
}

impl Inner {
    fn shutdown(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let _ = self.writer_tx.send(WriterMsg::Shutdown);
        for _ in 0..self.reader_count {
            let _ = self.reader_tx.send(None);
        }
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|p| p.into_inner()));
        let me: ThreadId = thread::current().id();
        for t in threads {
            // Joining our own thread would deadlock; it exits once it returns here.
            if t.thread().id() != me && t.join().is_err() {
                tracing::error!("a store thread panicked");
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn check_parent(path: &Path) -> Result<(), StoreError> {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() && !parent.is_dir() => Err(
            StoreError::Invalid(format!("directory {} does not exist", parent.display())),
        ),
        _ => Ok(()),
    }
}

fn reader_loop(mut conn: Connection, rx: Arc<Mutex<Receiver<Option<ReadJob>>>>) {
    loop {
        // Only the receiving is under the lock; the job runs after it is released.
        let msg = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
        match msg {
            Ok(Some(job)) => {
                job(&mut conn);
                // A job that panicked mid-transaction must not leave a snapshot open,
                // which would pin the WAL and hide later commits from this connection.
                if !conn.is_autocommit() {
                    let _ = conn.execute_batch("ROLLBACK");
                }
            }
            Ok(None) | Err(_) => break,
        }
    }
}
