//! Where user messages stand (`messages.state`) and the requests devices named with their own
//! ids (`client_requests`).

mod common;

use common::{msg, open_temp};
use iris_store::{ClientRequest, StoreError};

#[tokio::test]
async fn a_client_id_is_taken_once_per_device_and_kept_across_a_reopen() {
    let (dir, store, _) = open_temp();
    let request = ClientRequest {
        digest: "d1".into(),
        message_id: Some("m1".into()),
        cursor: Some(7),
    };
    let r = request.clone();
    store
        .write(move |tx| tx.insert_client_request("phone", "c1", &r))
        .await
        .unwrap();
    let r = request.clone();
    let again = store
        .write(move |tx| tx.insert_client_request("phone", "c1", &r))
        .await;
    assert!(matches!(again, Err(StoreError::Invalid(_))), "{again:?}");
    // Another device may use the same id.
    let r = request.clone();
    store
        .write(move |tx| tx.insert_client_request("laptop", "c1", &r))
        .await
        .unwrap();
    store.close();
    drop(store);
    let (store, _) = common::open_at(&dir.path().join("iris.db"), true);
    assert_eq!(
        store.client_request("phone", "c1").await.unwrap(),
        Some(request)
    );
    assert_eq!(store.client_request("phone", "c2").await.unwrap(), None);
    store
        .write(|tx| tx.delete_client_request("phone", "c1"))
        .await
        .unwrap();
    assert_eq!(store.client_request("phone", "c1").await.unwrap(), None);
}

#[tokio::test]
async fn messages_keep_their_state_and_are_found_by_it_oldest_first() {
    let (_dir, store, _) = open_temp();
    store
        .write(|tx| {
            for id in ["m1", "m2", "m3"] {
                let mut m = msg(id, "default", None, id);
                m.state = Some("queued".into());
                tx.upsert_message(&m)?;
            }
            tx.upsert_message(&msg("a1", "default", None, "answer"))
        })
        .await
        .unwrap();
    let before = store
        .write(|tx| tx.set_message_state("m1", "running"))
        .await
        .unwrap();
    assert_eq!(before, Some(Some("queued".into())));
    assert_eq!(
        store
            .write(|tx| tx.set_message_state("nope", "running"))
            .await
            .unwrap(),
        None
    );
    // Rewriting a message without a state keeps the one it has.
    store
        .write(|tx| tx.upsert_message(&msg("m2", "default", None, "m2 edited")))
        .await
        .unwrap();
    let queued: Vec<String> = store
        .messages_in_state("queued")
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.message_id)
        .collect();
    assert_eq!(queued, ["m2", "m3"]);
    let m1 = store.get_message("m1").await.unwrap().unwrap();
    assert_eq!(m1.state.as_deref(), Some("running"));
    assert_eq!(store.get_message("a1").await.unwrap().unwrap().state, None);
}

#[tokio::test]
async fn client_ids_are_forgotten_with_retention_and_with_their_device() {
    let (_dir, store, _) = open_temp();
    let request = ClientRequest {
        digest: "d".into(),
        message_id: None,
        cursor: None,
    };
    for (device, id) in [("phone", "old"), ("phone", "new"), ("laptop", "new")] {
        let r = request.clone();
        store
            .write(move |tx| tx.insert_client_request(device, id, &r))
            .await
            .unwrap();
    }
    let conn = rusqlite::Connection::open(store.path()).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .unwrap();
    conn.execute(
        "UPDATE client_requests SET created_at = 1000 WHERE client_id = 'old'",
        [],
    )
    .unwrap();
    drop(conn);
    // Nothing in the outbox is that old: the request goes all the same.
    store.prune_outbox(2000).await.unwrap();
    assert_eq!(store.client_request("phone", "old").await.unwrap(), None);
    assert!(store
        .client_request("phone", "new")
        .await
        .unwrap()
        .is_some());
    store
        .write(|tx| tx.delete_device("laptop").map(|_| ()))
        .await
        .unwrap();
    assert_eq!(store.client_request("laptop", "new").await.unwrap(), None);
    assert!(store
        .client_request("phone", "new")
        .await
        .unwrap()
        .is_some());
}
