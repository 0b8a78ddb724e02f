//! Light writes (`Store::write_light`): committed before they are answered, like any write, in
//! the order they were queued among other writes, with their frames published first; only the
//! fsync is left out.

mod common;

use common::*;

#[tokio::test]
async fn a_light_write_is_committed_in_order_before_it_is_answered() {
    let (_dir, store, _rec) = open_temp();
    let first = store.write_light(|tx| tx.set_meta("k", "light 1"));
    let second = store.write_queued(|tx| tx.set_meta("k", "full 2"));
    let third = store.write_light(|tx| tx.set_meta("k", "light 3"));
    first.await.expect("light write");
    let now = store.get_meta("k").await.expect("read");
    assert!(now.is_some(), "committed before it was answered");
    second.await.expect("write");
    third.await.expect("light write");
    assert_eq!(
        store.get_meta("k").await.expect("read").as_deref(),
        Some("light 3"),
        "queued last, committed last"
    );
    // A light write alone, then an ordinary one: both land.
    store
        .write_light(|tx| tx.set_meta("a", "1"))
        .await
        .expect("light");
    store
        .write(|tx| tx.set_meta("b", "2"))
        .await
        .expect("write");
    assert_eq!(store.get_meta("a").await.unwrap().as_deref(), Some("1"));
    assert_eq!(store.get_meta("b").await.unwrap().as_deref(), Some("2"));
}

#[tokio::test]
async fn a_light_write_survives_closing_and_reopening_the_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("iris.db");
    {
        let (store, _) = open_at(&path, true);
        store
            .write_light(|tx| tx.set_meta("text", "shown so far"))
            .await
            .expect("light write");
        store.close();
    }
    let (store, _) = open_at(&path, true);
    assert_eq!(
        store.get_meta("text").await.unwrap().as_deref(),
        Some("shown so far")
    );
}
