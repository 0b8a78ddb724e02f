//! Message history and search tests.

mod common;

use common::{msg, open_temp, put_messages};
use iris_store::{Store, StoreError, StoredMessage};

fn ids(messages: &[StoredMessage]) -> Vec<&str> {
    messages.iter().map(|m| m.message_id.as_str()).collect()
}

async fn hit_ids(store: &Store, query: &str) -> Vec<String> {
    store
        .search(query, None, 50)
        .await
        .unwrap()
        .into_iter()
        .map(|h| h.message_id)
        .collect()
}

#[tokio::test]
async fn history_pages_by_insertion_order() {
    let (_dir, store, _) = open_temp();
    let empty = store.history("default", None, None, 5).await.unwrap();
    assert!(empty.messages.is_empty() && !empty.has_more);

    // Ids m1..m10 sort differently as strings ("m10" < "m2"); order must follow insertion.
    put_messages(
        &store,
        (1..=10)
            .map(|i| msg(&format!("m{i}"), "default", None, &format!("text {i}")))
            .collect(),
    )
    .await;

    let page = store.history("default", None, None, 5).await.unwrap();
    assert_eq!(ids(&page.messages), ["m6", "m7", "m8", "m9", "m10"]);
    assert!(page.has_more);
    let page = store.history("default", None, Some("m6"), 5).await.unwrap();
    assert_eq!(ids(&page.messages), ["m1", "m2", "m3", "m4", "m5"]);
    assert!(
        !page.has_more,
        "exact multiple of the limit has nothing more"
    );
    let page = store.history("default", None, Some("m1"), 5).await.unwrap();
    assert!(page.messages.is_empty() && !page.has_more);

    let page = store.history("default", None, None, 10).await.unwrap();
    assert_eq!(page.messages.len(), 10);
    assert!(!page.has_more);
    let page = store.history("default", None, None, 0).await.unwrap();
    assert!(page.messages.is_empty() && page.has_more);
    let page = store
        .history("default", None, Some("m3"), 100)
        .await
        .unwrap();
    assert_eq!(ids(&page.messages), ["m1", "m2"]);

    assert!(matches!(
        store.history("default", None, Some("nope"), 5).await,
        Err(StoreError::NotFound)
    ));
    assert!(store
        .history("other", None, None, 5)
        .await
        .unwrap()
        .messages
        .is_empty());

    // Editing keeps the position.
    let mut edited = msg("m2", "default", None, "edited");
    edited.extra = r#"{"model":"x"}"#.into();
    put_messages(&store, vec![edited.clone()]).await;
    let page = store.history("default", None, Some("m4"), 5).await.unwrap();
    assert_eq!(ids(&page.messages), ["m1", "m2", "m3"]);
    assert_eq!(page.messages[1], edited);
    assert_eq!(store.get_message("m2").await.unwrap(), Some(edited));
}

#[tokio::test]
async fn thread_and_flat_lanes_are_separate() {
    let (_dir, store, _) = open_temp();
    put_messages(
        &store,
        vec![
            msg("f1", "c", None, "flat one"),
            msg("t1", "c", Some("th"), "thread one"),
            msg("f2", "c", None, "flat two"),
            msg("t2", "c", Some("th"), "thread two"),
        ],
    )
    .await;
    assert_eq!(
        ids(&store.history("c", None, None, 10).await.unwrap().messages),
        ["f1", "f2"]
    );
    assert_eq!(
        ids(&store
            .history("c", Some("th"), None, 10)
            .await
            .unwrap()
            .messages),
        ["t1", "t2"]
    );
    let page = store
        .history("c", Some("th"), Some("t2"), 10)
        .await
        .unwrap();
    assert_eq!(ids(&page.messages), ["t1"]);
    // A before id from the other lane is unknown to this lane.
    assert!(matches!(
        store.history("c", None, Some("t2"), 10).await,
        Err(StoreError::NotFound)
    ));
    // A message cannot jump lanes on upsert.
    let moved = msg("t1", "c", None, "moved");
    let err = store.write(move |tx| tx.upsert_message(&moved)).await;
    assert!(matches!(err, Err(StoreError::Invalid(_))));
}

#[tokio::test]
async fn search_ranks_phrases_prefixes_and_snippets() {
    let (_dir, store, _) = open_temp();
    put_messages(
        &store,
        vec![
            msg("long", "default", None, "a rocket is mentioned once in this rather long sentence that goes on and on about many other quite unrelated things"),
            msg("short", "default", None, "rocket rocket"),
            msg("fox", "default", None, "the quick brown fox jumps"),
            msg("xof", "default", None, "brown and quick"),
            msg("cafe", "default", None, "Un café crème"),
            msg("old-tie", "default", None, "identical tie text"),
            msg("new-tie", "default", None, "identical tie text"),
        ],
    )
    .await;
    assert_eq!(hit_ids(&store, "rocket").await, ["short", "long"]);
    assert_eq!(hit_ids(&store, "ROCKET").await, ["short", "long"]);
    assert_eq!(hit_ids(&store, "\"quick brown\"").await, ["fox"]);
    let mut both = hit_ids(&store, "quick brown").await;
    both.sort();
    assert_eq!(both, ["fox", "xof"]);
    assert_eq!(hit_ids(&store, "jum*").await, ["fox"]);
    assert!(hit_ids(&store, "jum").await.is_empty());
    assert_eq!(hit_ids(&store, "\"quick bro\"*").await, ["fox"]);
    assert_eq!(hit_ids(&store, "cafe creme").await, ["cafe"]);
    assert_eq!(hit_ids(&store, "tie").await, ["new-tie", "old-tie"]);

    let hits = store.search("fox", None, 10).await.unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].snippet, "the quick brown [fox] jumps");
    assert_eq!(
        (hits[0].chat_id.as_str(), hits[0].role.as_str()),
        ("default", "user")
    );
    let hits = store.search("unrelated", None, 10).await.unwrap();
    assert!(hits[0].snippet.contains("[unrelated]"));
    assert!(hits[0].snippet.starts_with('…'), "{}", hits[0].snippet);

    assert_eq!(store.search("rocket", None, 1).await.unwrap().len(), 1);
    assert!(store.search("rocket", None, 0).await.unwrap().is_empty());
}

#[tokio::test]
async fn search_scope_and_deletes() {
    let (_dir, store, _) = open_temp();
    put_messages(
        &store,
        vec![
            msg("a", "c1", None, "shared word"),
            msg("b", "c1", Some("t"), "shared word"),
            msg("c", "c2", None, "shared word"),
        ],
    )
    .await;
    let scoped =
        |chat: &str, thread: Option<&str>| Some((chat.to_string(), thread.map(str::to_string)));
    let hits = store
        .search("shared", scoped("c1", None), 10)
        .await
        .unwrap();
    assert_eq!(
        hits.iter()
            .map(|h| h.message_id.as_str())
            .collect::<Vec<_>>(),
        ["a"]
    );
    let hits = store
        .search("shared", scoped("c1", Some("t")), 10)
        .await
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(
        (hits[0].message_id.as_str(), hits[0].thread_id.as_deref()),
        ("b", Some("t"))
    );
    assert_eq!(store.search("shared", None, 10).await.unwrap().len(), 3);

    let gone = store
        .write(|tx| tx.delete_messages(&["a".to_string(), "zzz".to_string()]))
        .await
        .unwrap();
    assert_eq!(gone, ["a"]);
    assert_eq!(store.get_message("a").await.unwrap(), None);
    let mut left = hit_ids(&store, "shared").await;
    left.sort();
    assert_eq!(left, ["b", "c"]);
    assert!(store
        .search("shared", scoped("c1", None), 10)
        .await
        .unwrap()
        .is_empty());

    // An edit replaces the indexed text.
    put_messages(&store, vec![msg("c", "c2", None, "rewritten")]).await;
    assert_eq!(hit_ids(&store, "shared").await, ["b"]);
    assert_eq!(hit_ids(&store, "rewritten").await, ["c"]);
    store.integrity_check().unwrap();
}

#[tokio::test]
async fn hostile_queries_never_error_or_match_everything() {
    let (_dir, store, _) = open_temp();
    put_messages(
        &store,
        vec![
            msg("1", "default", None, "alpha beta"),
            msg("2", "default", None, "gamma delta"),
            msg("3", "default", None, "we drop the table near the door"),
        ],
    )
    .await;
    let hostile = [
        "\"",
        "\"\"",
        "*",
        "**",
        "NEAR(",
        "NEAR(alpha gamma)",
        "a OR b",
        "alpha OR gamma",
        "'); DROP TABLE messages;--",
        "a\" OR 1=1; DROP TABLE messages; --",
        "-x",
        "-alpha",
        "",
        "   ",
        "()",
        "text:alpha",
        "^alpha",
        "alpha NOT beta",
        "{alpha}",
        "\\",
        "%",
        "alpha*beta",
    ];
    for q in hostile {
        let hits = store
            .search(q, None, 50)
            .await
            .unwrap_or_else(|e| panic!("query {q:?} failed: {e}"));
        assert!(hits.len() < 3, "query {q:?} matched everything");
    }
    assert!(
        hit_ids(&store, "alpha OR gamma").await.is_empty(),
        "OR is a literal word"
    );
    assert!(hit_ids(&store, "").await.is_empty());
    assert!(hit_ids(&store, "-- ; ()").await.is_empty());
    assert_eq!(
        hit_ids(&store, "-alpha").await,
        ["1"],
        "a leading minus is not negation"
    );
    assert_eq!(hit_ids(&store, "NEAR(").await, ["3"]);
    assert_eq!(
        store
            .history("default", None, None, 10)
            .await
            .unwrap()
            .messages
            .len(),
        3
    );
    store.integrity_check().unwrap();
}

#[tokio::test]
async fn cjk_and_emoji_use_substring_search() {
    let (_dir, store, _) = open_temp();
    put_messages(
        &store,
        vec![
            msg("ja", "default", None, "今日は良い天気です"),
            msg("ja2", "default", None, "明日の天気は雨"),
            msg("ko", "default", None, "한국어 문장입니다"),
            msg("zh", "default", Some("t"), "我们明天见"),
            msg("emoji", "default", None, "Party time 🎉 tonight"),
            msg("mixed", "default", None, "Tokyo 天気 report"),
        ],
    )
    .await;
    let hits = store.search("天気", None, 10).await.unwrap();
    let got: Vec<&str> = hits.iter().map(|h| h.message_id.as_str()).collect();
    assert_eq!(got, ["mixed", "ja2", "ja"], "newest first");
    assert_eq!(hits[2].snippet, "今日は良い[天気]です");
    assert_eq!(hit_ids(&store, "国어").await, Vec::<String>::new());
    assert_eq!(hit_ids(&store, "한국어").await, ["ko"]);
    assert_eq!(hit_ids(&store, "tokyo 天気").await, ["mixed"]);
    assert_eq!(hit_ids(&store, "明天").await, ["zh"]);
    assert!(store
        .search("明天", Some(("default".into(), None)), 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        store
            .search("明天", Some(("default".into(), Some("t".into()))), 10)
            .await
            .unwrap()
            .len(),
        1
    );

    let hits = store.search("🎉", None, 10).await.unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].snippet, "Party time [🎉] tonight");
    let hits = store.search("party", None, 10).await.unwrap();
    assert_eq!(hits[0].snippet, "[Party] time 🎉 tonight");

    let long = format!("{}天気{}", "あ".repeat(100), "い".repeat(100));
    put_messages(&store, vec![msg("long", "default", None, &long)]).await;
    let hits = store.search("天気", None, 1).await.unwrap();
    assert_eq!(hits[0].message_id, "long");
    assert!(hits[0].snippet.starts_with('…') && hits[0].snippet.ends_with('…'));
    assert!(hits[0].snippet.contains("[天気]"));

    store
        .write(|tx| tx.delete_messages(&["ja".to_string()]))
        .await
        .unwrap();
    assert_eq!(hit_ids(&store, "良い").await, Vec::<String>::new());
}
