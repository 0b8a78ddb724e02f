//! Outbox, group commit, durability and lifecycle tests.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use common::{frame, lane_frame, msg, open_at, open_temp, poll_once, replayed, Gate};
use iris_store::{FrameMeta, Store, StoreError};

type Pending<T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send>>;

fn append_job(store: &Store, json: &str) -> Pending<u64> {
    let json = json.to_string();
    let store = store.clone();
    Box::pin(async move {
        store
            .write(move |tx| tx.append(frame("event", &json)))
            .await
    })
}

#[test]
fn handles_and_futures_can_cross_threads() {
    fn assert_send_sync<T: Send + Sync + Clone + 'static>(_: &T) {}
    fn assert_send<T: Send>(_: &T) {}
    let (_dir, store, _) = open_temp();
    assert_send_sync(&store);
    let write = store.write(|tx| tx.append(frame("event", "{}")));
    assert_send(&write);
    let read = store.history("default", None, None, 1);
    assert_send(&read);
}

#[tokio::test]
async fn fresh_file_is_migrated_and_reopen_keeps_schema() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("iris.db");
    let (store, _) = open_at(&path, true);
    let version = store.schema_version().await.unwrap();
    assert!(version >= 1);
    let channels = store.list_channels().await.unwrap();
    assert_eq!(channels.len(), 1);
    let d = &channels[0];
    assert_eq!(
        (d.chat_id.as_str(), d.name.as_str(), d.kind.as_str()),
        ("default", "Default", "default")
    );
    assert!(d.is_default && !d.name_set_by_user && d.parent_chat_id.is_none());
    assert_eq!(store.outbox_head().await.unwrap(), 0);
    assert_eq!(store.outbox_floor().await.unwrap(), 0);
    store.integrity_check().unwrap();
    drop(store);

    let (store, _) = open_at(&path, true);
    assert_eq!(store.schema_version().await.unwrap(), version);
    let channels = store.list_channels().await.unwrap();
    assert_eq!(
        channels.iter().filter(|c| c.chat_id == "default").count(),
        1
    );
    assert_eq!(channels.len(), 1);
}

#[tokio::test]
async fn missing_parent_directory_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = iris_store::StoreConfig::new(dir.path().join("nope").join("iris.db"));
    let hook: iris_store::CommitHook = Arc::new(|_| {});
    assert!(matches!(
        Store::open(cfg, hook),
        Err(StoreError::Invalid(_))
    ));
}

#[tokio::test]
async fn hook_sees_frames_before_write_returns() {
    let (_dir, store, rec) = open_temp();
    let meta = FrameMeta {
        origin_conn: 7,
        request_id: Some(Arc::from("req-1")),
    };
    let (a, b) = store
        .write(move |tx| {
            let a = tx.append(frame("event", r#"{"n":1}"#))?;
            let mut f = frame("event", r#"{"n":2}"#);
            f.meta = meta;
            let b = tx.append(f)?;
            Ok((a, b))
        })
        .await
        .unwrap();
    assert_eq!((a, b), (1, 2));
    // The hook ran before the write was answered, so the frames are already recorded.
    let seen = rec.frames.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert_eq!((seen[0].cursor, &*seen[0].json), (1, r#"{"n":1}"#));
    assert_eq!((seen[1].cursor, &*seen[1].frame_type), (2, "event"));
    assert_eq!(seen[1].meta.origin_conn, 7);
    assert_eq!(seen[1].meta.request_id.as_deref(), Some("req-1"));

    for expected in 3..=5u64 {
        let c = append_job(&store, "{}").await.unwrap();
        assert_eq!(c, expected);
        assert_eq!(rec.cursors().last(), Some(&c));
    }
    assert_eq!(store.outbox_head().await.unwrap(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_get_contiguous_cursors_in_hook_order() {
    let (_dir, store, rec) = open_temp();
    let mut tasks = Vec::new();
    for t in 0..50 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            for i in 0..20 {
                let json = format!(r#"{{"t":{t},"i":{i}}}"#);
                let cursor = store
                    .write(move |tx| tx.append(frame("event", &json)))
                    .await
                    .unwrap();
                mine.push(cursor);
            }
            mine
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        let mine = task.await.unwrap();
        // A single task's writes are sequential, so its cursors must increase.
        assert!(mine.windows(2).all(|w| w[0] < w[1]));
        all.extend(mine);
    }
    all.sort_unstable();
    assert_eq!(all, (1..=1000).collect::<Vec<u64>>());
    assert_eq!(rec.cursors(), (1..=1000).collect::<Vec<u64>>());
    assert!(rec.calls() <= 1000);

    let replayed = store.replay(0, 2000).await.unwrap();
    assert_eq!(replayed.len(), 1000);
    let hooked = rec.frames.lock().unwrap().clone();
    for ((cursor, json), c) in replayed.iter().zip(&hooked) {
        assert_eq!(*cursor, c.cursor);
        assert_eq!(json, &c.json);
    }
}

#[tokio::test]
async fn group_commit_batches_queued_jobs() {
    let (_dir, store, rec) = open_temp();
    let gate = Gate::close(&store).await;
    let mut pending: Vec<Pending<u64>> = (0..100)
        .map(|i| append_job(&store, &i.to_string()))
        .collect();
    for p in &mut pending {
        poll_once(p).await;
    }
    gate.open().await;
    let mut cursors = Vec::new();
    for p in pending {
        cursors.push(p.await.unwrap());
    }
    // Jobs are committed in queue order, so cursors follow submission order.
    assert_eq!(cursors, (1..=100).collect::<Vec<u64>>());
    assert_eq!(rec.calls(), 1, "all queued jobs share one commit");
    assert_eq!(rec.cursors(), cursors);
}

#[tokio::test]
async fn without_group_commit_every_job_commits_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (store, rec) = open_at(&dir.path().join("iris.db"), false);
    let gate = Gate::close(&store).await;
    let mut pending: Vec<Pending<u64>> = (0..10)
        .map(|i| append_job(&store, &i.to_string()))
        .collect();
    for p in &mut pending {
        poll_once(p).await;
    }
    gate.open().await;
    for (i, p) in pending.into_iter().enumerate() {
        assert_eq!(p.await.unwrap(), i as u64 + 1);
    }
    assert_eq!(rec.calls(), 10);
}

#[tokio::test]
async fn a_lazy_write_rides_along_with_the_next_commit() {
    let (_dir, store, rec) = open_temp();
    let lazy = store.write_lazy(|tx| tx.append(frame("event", "lazy")));
    let now = append_job(&store, "now").await.unwrap();
    let lazy = lazy.await.unwrap();
    assert_eq!(rec.calls(), 1, "one commit for both");
    assert_eq!(
        (now, lazy),
        (1, 2),
        "the lazy job ran after the write it rode with"
    );
}

#[tokio::test]
async fn a_lazy_write_alone_is_committed_soon_and_at_close() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("iris.db");
    let (store, rec) = open_at(&path, true);
    let alone = store.write_lazy(|tx| tx.append(frame("event", "alone")));
    let cursor = tokio::time::timeout(std::time::Duration::from_secs(10), alone)
        .await
        .expect("a lazy write with nothing else to ride on still commits")
        .unwrap();
    assert_eq!((cursor, rec.calls()), (1, 1));
    // Queued just before the store closes: committed, not dropped.
    let last = store.write_lazy(|tx| tx.append(frame("event", "last")));
    store.close();
    assert_eq!(last.await.unwrap(), 2);
    drop(store);
    let (store, _) = open_at(&path, true);
    assert_eq!(replayed(&store, 0).await, ["alone", "last"]);
}

#[tokio::test]
async fn failing_and_panicking_jobs_do_not_affect_their_batch() {
    let (_dir, store, rec) = open_temp();
    let gate = Gate::close(&store).await;
    let mut ok1 = append_job(&store, "ok1");
    let s = store.clone();
    let mut failing: Pending<u64> = Box::pin(async move {
        s.write(|tx| {
            tx.append(frame("event", "lost"))?;
            tx.upsert_message(&msg("ghost", "default", None, "never stored"))?;
            Err::<u64, _>(StoreError::Invalid("refused".into()))
        })
        .await
    });
    let s = store.clone();
    let mut panicking: Pending<u64> = Box::pin(async move {
        s.write(|tx| {
            tx.append(frame("event", "lost too"))?;
            panic!("job exploded");
        })
        .await
    });
    let mut ok2 = append_job(&store, "ok2");
    poll_once(&mut ok1).await;
    poll_once(&mut failing).await;
    poll_once(&mut panicking).await;
    poll_once(&mut ok2).await;
    gate.open().await;

    assert_eq!(ok1.await.unwrap(), 1);
    assert!(matches!(failing.await, Err(StoreError::Invalid(m)) if m == "refused"));
    assert!(matches!(panicking.await, Err(StoreError::Internal(m)) if m.contains("job exploded")));
    // The rolled-back jobs' cursors were never visible, so the next one is reused.
    assert_eq!(ok2.await.unwrap(), 2);
    assert_eq!(rec.calls(), 1);
    let seen: Vec<String> = rec
        .frames
        .lock()
        .unwrap()
        .iter()
        .map(|c| c.json.to_string())
        .collect();
    assert_eq!(seen, ["ok1", "ok2"]);
    assert_eq!(replayed(&store, 0).await, ["ok1", "ok2"]);
    assert_eq!(store.get_message("ghost").await.unwrap(), None);
    // The writer survived the panic.
    assert_eq!(append_job(&store, "after").await.unwrap(), 3);
}

#[tokio::test]
async fn panicking_hook_does_not_stop_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = iris_store::StoreConfig::new(dir.path().join("iris.db"));
    let store = Store::open(cfg, Arc::new(|_| panic!("hook exploded"))).unwrap();
    assert_eq!(append_job(&store, "a").await.unwrap(), 1);
    assert_eq!(append_job(&store, "b").await.unwrap(), 2);
    assert_eq!(store.replay(0, 10).await.unwrap().len(), 2);
}

#[tokio::test]
async fn head_survives_deletes_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("iris.db");
    let (store, _) = open_at(&path, true);
    store
        .write(|tx| {
            tx.append(frame("event", "1"))?;
            tx.append(lane_frame("default", None, Some("m1"), "2"))?;
            tx.append(lane_frame("default", None, Some("m1"), "3"))?;
            Ok(())
        })
        .await
        .unwrap();
    let deleted = store
        .write(|tx| tx.delete_messages(&["m1".to_string()]))
        .await
        .unwrap();
    assert!(deleted.is_empty(), "m1 had frames but no message row");
    assert_eq!(store.replay(0, 10).await.unwrap().len(), 1);
    assert_eq!(store.outbox_head().await.unwrap(), 3);
    assert_eq!(
        store.outbox_floor().await.unwrap(),
        0,
        "deletes do not raise the floor"
    );
    drop(store);

    let (store, _) = open_at(&path, true);
    assert_eq!(store.outbox_head().await.unwrap(), 3);
    assert_eq!(append_job(&store, "4").await.unwrap(), 4);
}

#[tokio::test]
async fn replay_pages_through_the_log() {
    let (_dir, store, _) = open_temp();
    store
        .write(|tx| {
            for i in 1..=25 {
                tx.append(frame("event", &format!("f{i}")))?;
            }
            Ok(())
        })
        .await
        .unwrap();
    let mut after = 0;
    let mut pages = Vec::new();
    loop {
        let page = store.replay(after, 10).await.unwrap();
        if page.is_empty() {
            break;
        }
        after = page.last().unwrap().0;
        pages.push(page);
    }
    assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), [10, 10, 5]);
    let flat: Vec<_> = pages.concat();
    for (i, (cursor, json)) in flat.iter().enumerate() {
        assert_eq!(*cursor, i as u64 + 1);
        assert_eq!(&**json, format!("f{}", i + 1));
    }
    assert!(store.replay(25, 10).await.unwrap().is_empty());
    assert!(store.replay(u64::MAX, 10).await.unwrap().is_empty());
    assert!(store.replay(0, 0).await.unwrap().is_empty());
    assert_eq!(store.replay(20, 100).await.unwrap().len(), 5);
}

#[tokio::test]
async fn prune_raises_the_floor() {
    let (_dir, store, rec) = open_temp();
    store
        .write(|tx| {
            for i in 1..=6 {
                tx.append(frame("event", &i.to_string()))?;
            }
            Ok(())
        })
        .await
        .unwrap();
    // Give the frames known timestamps; cursor 2 pretends the clock stepped forward.
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .unwrap();
    conn.execute_batch(
        "UPDATE outbox SET ts = 1000 WHERE cursor IN (1, 3);
         UPDATE outbox SET ts = 9000 WHERE cursor = 2;
         UPDATE outbox SET ts = 5000 WHERE cursor >= 4;",
    )
    .unwrap();
    drop(conn);

    assert_eq!(store.prune_outbox(500).await.unwrap(), 0);
    assert_eq!(store.outbox_floor().await.unwrap(), 0);

    // Cursor 2 goes with its older neighbours so what remains is a gap-free suffix.
    assert_eq!(store.prune_outbox(2000).await.unwrap(), 3);
    assert_eq!(store.outbox_floor().await.unwrap(), 3);
    let cursors: Vec<u64> = store
        .replay(0, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|(c, _)| c)
        .collect();
    assert_eq!(cursors, [4, 5, 6]);

    // Pruning with an earlier cutoff never lowers the floor.
    assert_eq!(store.prune_outbox(1500).await.unwrap(), 0);
    assert_eq!(store.outbox_floor().await.unwrap(), 3);

    assert_eq!(store.prune_outbox(i64::MAX).await.unwrap(), 3);
    assert_eq!(store.outbox_floor().await.unwrap(), 6);
    assert_eq!(store.outbox_head().await.unwrap(), 6);
    assert_eq!(append_job(&store, "7").await.unwrap(), 7);
    assert_eq!(
        store
            .replay(store.outbox_floor().await.unwrap(), 10)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(*rec.cursors().last().unwrap(), 7);
}

#[tokio::test]
async fn committed_data_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("iris.db");
    {
        let (store, _) = open_at(&path, true);
        let clone = store.clone();
        clone
            .write(|tx| {
                tx.append(lane_frame("default", None, Some("m1"), "frame"))?;
                tx.upsert_message(&msg("m1", "default", None, "persisted words"))?;
                tx.upsert_device("phone", "Phone", "{}", 10)?;
                tx.confirm_cursor("phone", 1)?;
                tx.set_meta("k", "v")?;
                Ok(())
            })
            .await
            .unwrap();
        drop(clone);
    }
    let (store, _) = open_at(&path, true);
    assert_eq!(store.replay(0, 10).await.unwrap().len(), 1);
    assert_eq!(
        store.get_message("m1").await.unwrap().unwrap().text,
        "persisted words"
    );
    assert_eq!(store.search("persisted", None, 10).await.unwrap().len(), 1);
    assert_eq!(
        store
            .get_device("phone")
            .await
            .unwrap()
            .unwrap()
            .confirmed_cursor,
        1
    );
    assert_eq!(store.get_meta("k").await.unwrap().as_deref(), Some("v"));
    store.integrity_check().unwrap();
}

#[tokio::test]
async fn close_finishes_queued_jobs_then_refuses() {
    let (_dir, store, rec) = open_temp();
    let gate = Gate::close(&store).await;
    let mut queued = append_job(&store, "queued");
    poll_once(&mut queued).await;
    let closer = {
        let store = store.clone();
        std::thread::spawn(move || store.close())
    };
    gate.open().await;
    assert_eq!(queued.await.unwrap(), 1);
    closer.join().unwrap();
    assert_eq!(rec.cursors(), [1]);
    assert!(matches!(
        append_job(&store, "late").await,
        Err(StoreError::Closed)
    ));
    assert!(matches!(store.outbox_head().await, Err(StoreError::Closed)));
}
