//! Helpers shared by the integration tests: temporary stores and a recording hook.

#![allow(dead_code)]

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::task::Poll;

use iris_store::{CommitHook, Committed, NewFrame, Store, StoreConfig, StoreError, StoredMessage};

/// Everything the commit hook saw, so tests can compare it with what callers got.
#[derive(Default)]
pub struct Recorder {
    pub frames: Mutex<Vec<Committed>>,
    pub calls: AtomicUsize,
}

impl Recorder {
    pub fn hook(self: &Arc<Self>) -> CommitHook {
        let me = Arc::clone(self);
        Arc::new(move |batch: &[Committed]| {
            me.calls.fetch_add(1, Ordering::SeqCst);
            me.frames.lock().unwrap().extend_from_slice(batch);
        })
    }

    pub fn cursors(&self) -> Vec<u64> {
        self.frames
            .lock()
            .unwrap()
            .iter()
            .map(|c| c.cursor)
            .collect()
    }

    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

pub fn open_at(path: &Path, group_commit: bool) -> (Store, Arc<Recorder>) {
    let rec = Arc::new(Recorder::default());
    let cfg = StoreConfig {
        path: path.to_path_buf(),
        group_commit,
        readers: 2,
    };
    let store = Store::open(cfg, rec.hook()).expect("open store");
    (store, rec)
}

pub fn open_temp() -> (tempfile::TempDir, Store, Arc<Recorder>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, rec) = open_at(&dir.path().join("iris.db"), true);
    (dir, store, rec)
}

pub fn frame(frame_type: &str, json: &str) -> NewFrame {
    NewFrame {
        frame_type: frame_type.into(),
        json: json.into(),
        ..Default::default()
    }
}

pub fn lane_frame(chat: &str, thread: Option<&str>, message: Option<&str>, json: &str) -> NewFrame {
    NewFrame {
        frame_type: "message".into(),
        chat_id: Some(chat.into()),
        thread_id: thread.map(Into::into),
        message_id: message.map(Into::into),
        json: json.into(),
        ..Default::default()
    }
}

pub fn msg(id: &str, chat: &str, thread: Option<&str>, text: &str) -> StoredMessage {
    StoredMessage {
        message_id: id.into(),
        chat_id: chat.into(),
        thread_id: thread.map(Into::into),
        role: "user".into(),
        text: text.into(),
        ts: 1_700_000_000_000,
        extra: "{}".into(),
        state: None,
    }
}

pub async fn put_messages(store: &Store, messages: Vec<StoredMessage>) {
    store
        .write(move |tx| {
            for m in &messages {
                tx.upsert_message(m)?;
            }
            Ok(())
        })
        .await
        .expect("insert messages");
}

/// Holds the writer thread inside a job until released, so that jobs queued in the
/// meantime are guaranteed to land in one batch.
pub struct Gate {
    release: mpsc::Sender<()>,
    done: Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send>>,
}

impl Gate {
    pub async fn close(store: &Store) -> Gate {
        let (release, wait) = mpsc::channel::<()>();
        let (entered, running) = tokio::sync::oneshot::channel::<()>();
        let mut done: Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send>> = {
            let store = store.clone();
            Box::pin(async move {
                store
                    .write(move |_tx| {
                        let _ = entered.send(());
                        wait.recv().expect("gate released");
                        Ok(())
                    })
                    .await
            })
        };
        poll_once(&mut done).await;
        // Once the gate job runs, the writer has formed its batch: every job queued from now on
        // waits for the next one.
        running.await.expect("the writer runs the gate job");
        Gate { release, done }
    }

    pub async fn open(self) {
        self.release.send(()).expect("writer waits at the gate");
        self.done.await.expect("gate job");
    }
}

/// Polls a future exactly once, which for `Store::write` means its job is queued.
pub async fn poll_once<F: Future + ?Sized>(fut: &mut Pin<Box<F>>) {
    std::future::poll_fn(|cx| {
        assert!(
            fut.as_mut().poll(cx).is_pending(),
            "future finished while the writer was gated"
        );
        Poll::Ready(())
    })
    .await
}

/// The JSON of every outbox frame after `after`, in cursor order (at most 100).
pub async fn replayed(store: &Store, after: u64) -> Vec<String> {
    store
        .replay(after, 100)
        .await
        .expect("replay")
        .into_iter()
        .map(|(_, j)| j.to_string())
        .collect()
}
