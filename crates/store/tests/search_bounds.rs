//! Search cost bounds: repeated words count once, too many different words are refused, and a
//! query past its time budget is stopped with `Interrupted` while the store keeps serving.

mod common;

use std::time::Duration;

use common::{msg, open_temp, put_messages};
use iris_store::{Store, StoreError};

/// Words that start with `e` and others, so that `e*` matches a lot.
const WORDS: [&str; 12] = [
    "echo", "eager", "engine", "every", "estate", "edge", "alpha", "bravo", "query", "index",
    "deploy", "server",
];

/// 3,000 messages of twenty words each.
async fn filled() -> (tempfile::TempDir, Store) {
    let (dir, store, _) = open_temp();
    let messages = (0..3000)
        .map(|i| {
            let text: Vec<&str> = (0..20)
                .map(|w| WORDS[(i * 7 + w * 5) % WORDS.len()])
                .collect();
            msg(&format!("m{i}"), "default", None, &text.join(" "))
        })
        .collect();
    put_messages(&store, messages).await;
    (dir, store)
}

#[tokio::test]
async fn the_pathological_query_counts_its_repeated_word_once() {
    let (_dir, store) = filled().await;
    let query = "e* ".repeat(341);
    let hits = store
        .search_within(&query, None, 50, Duration::from_secs(5))
        .await
        .expect("answered");
    assert_eq!(hits.len(), 50);
    let seventeen: Vec<String> = (0..17).map(|n| format!("w{n}*")).collect();
    match store.search(&seventeen.join(" "), None, 50).await {
        Err(StoreError::Invalid(msg)) => assert!(msg.contains("at most 16"), "{msg}"),
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[tokio::test]
async fn a_search_over_its_budget_is_interrupted_and_the_readers_keep_serving() {
    let (_dir, store) = filled().await;
    // A substring search reads every message: far more steps than a zero budget allows.
    for query in ["🎉 echo", "e* a* b* q* i* d* s*"] {
        match store.search_within(query, None, 200, Duration::ZERO).await {
            Err(StoreError::Interrupted) => {}
            other => panic!("{query}: expected Interrupted, got {other:?}"),
        }
    }
    // Every reader connection is back to normal: no budget left behind on any of them.
    for _ in 0..6 {
        let hits = store.search("deploy", None, 10).await.expect("search");
        assert_eq!(hits.len(), 10);
        let all = store
            .history("default", None, None, 200)
            .await
            .expect("history");
        assert_eq!(all.messages.len(), 200);
    }
}
