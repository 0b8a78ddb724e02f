//! Channels, devices, read state, lane sessions and meta tests.

mod common;

use common::{lane_frame, msg, open_temp, replayed};
use iris_store::{ChannelRow, Store, StoreError};

fn channel(id: &str, kind: &str, parent: Option<&str>) -> ChannelRow {
    ChannelRow {
        chat_id: id.into(),
        name: id.to_uppercase(),
        kind: kind.into(),
        parent_chat_id: parent.map(Into::into),
        is_default: false,
        name_set_by_user: false,
        awaiting_title: false,
        created_at: 1,
        agent: None,
    }
}

/// The ids of every channel and thread, in creation order.
async fn channel_ids(store: &Store) -> Vec<String> {
    let channels = store.list_channels().await.unwrap();
    channels.into_iter().map(|c| c.chat_id).collect()
}

#[tokio::test]
async fn channel_crud_and_default_rules() {
    let (_dir, store, _) = open_temp();
    store
        .write(|tx| {
            tx.insert_channel(&channel("c1", "channel", None))?;
            tx.insert_channel(&channel("t1", "thread", Some("c1")))?;
            tx.insert_channel(&channel("c2", "channel", None))?;
            Ok(())
        })
        .await
        .unwrap();
    assert_eq!(channel_ids(&store).await, ["default", "c1", "t1", "c2"]);
    assert_eq!(
        store
            .get_channel("t1")
            .await
            .unwrap()
            .unwrap()
            .parent_chat_id
            .as_deref(),
        Some("c1")
    );
    assert_eq!(store.get_channel("zz").await.unwrap(), None);

    for bad in [
        channel("c1", "channel", None),
        channel("x", "thread", None),
        channel("x", "thread", Some("missing")),
        channel("x", "thread", Some("t1")),
        channel("x", "channel", Some("c1")),
        channel("x", "folder", None),
    ] {
        let res = store.write(move |tx| tx.insert_channel(&bad)).await;
        assert!(matches!(res, Err(StoreError::Invalid(_))), "{res:?}");
    }

    // Automatic renames never override a name the user chose.
    assert!(store
        .write(|tx| tx.rename_channel("c1", "Auto", false))
        .await
        .unwrap());
    assert!(store
        .write(|tx| tx.rename_channel("c1", "Mine", true))
        .await
        .unwrap());
    assert!(!store
        .write(|tx| tx.rename_channel("c1", "Auto again", false))
        .await
        .unwrap());
    let c1 = store.get_channel("c1").await.unwrap().unwrap();
    assert_eq!((c1.name.as_str(), c1.name_set_by_user), ("Mine", true));
    assert!(matches!(
        store.write(|tx| tx.rename_channel("zz", "x", true)).await,
        Err(StoreError::NotFound)
    ));

    assert!(matches!(
        store.write(|tx| tx.set_default("t1")).await,
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        store.write(|tx| tx.set_default("zz")).await,
        Err(StoreError::NotFound)
    ));
    let err = store.write(|tx| tx.delete_channel("default")).await;
    assert!(
        matches!(err, Err(StoreError::Invalid(m)) if m == "the default channel cannot be deleted")
    );

    store.write(|tx| tx.set_default("c2")).await.unwrap();
    let defaults: Vec<String> = store
        .list_channels()
        .await
        .unwrap()
        .into_iter()
        .filter(|c| c.is_default)
        .map(|c| c.chat_id)
        .collect();
    assert_eq!(defaults, ["c2"]);
    assert!(matches!(
        store.write(|tx| tx.delete_channel("c2")).await,
        Err(StoreError::Invalid(_))
    ));
    let deleted = store
        .write(|tx| tx.delete_channel("default"))
        .await
        .unwrap();
    assert_eq!(deleted.chat_ids, ["default"]);
    assert!(matches!(
        store.write(|tx| tx.delete_channel("default")).await,
        Err(StoreError::NotFound)
    ));

    let mut d = channel("c3", "channel", None);
    d.is_default = true;
    store.write(move |tx| tx.insert_channel(&d)).await.unwrap();
    assert!(store.get_channel("c3").await.unwrap().unwrap().is_default);
    assert!(!store.get_channel("c2").await.unwrap().unwrap().is_default);
}

#[tokio::test]
async fn delete_channel_wipes_everything_of_the_channel() {
    let (_dir, store, rec) = open_temp();
    store
        .write(|tx| {
            tx.insert_channel(&channel("c1", "channel", None))?;
            tx.insert_channel(&channel("t1", "thread", Some("c1")))?;
            tx.insert_channel(&channel("t2", "thread", Some("c1")))?;
            tx.insert_channel(&channel("c2", "channel", None))?;
            for (id, chat, thread) in [
                ("m1", "c1", None),
                ("m2", "c1", Some("t1")),
                ("m3", "c1", Some("t2")),
                ("k1", "c2", None),
            ] {
                tx.upsert_message(&msg(id, chat, thread, "searchable payload"))?;
                tx.append(lane_frame(chat, thread, Some(id), id))?;
                tx.mark_read(chat, id, "phone", 5)?;
            }
            tx.append(lane_frame("c1", None, None, "typing"))?;
            tx.append(lane_frame("c1", Some("t1"), None, "thread typing"))?;
            tx.set_lane_session("c1", None, Some("s-flat"))?;
            tx.set_lane_session("c1", Some("t1"), Some("s-t1"))?;
            tx.set_lane_session("c2", None, Some("s-c2"))?;
            Ok(())
        })
        .await
        .unwrap();
    assert_eq!(store.search("payload", None, 10).await.unwrap().len(), 4);

    let deleted = store
        .write(|tx| {
            let deleted = tx.delete_channel("c1")?;
            // A notice appended after the delete survives it.
            tx.append(lane_frame("c1", None, None, "channel deleted"))?;
            Ok(deleted)
        })
        .await
        .unwrap();
    assert_eq!(deleted.chat_ids, ["c1", "t1", "t2"]);
    assert_eq!(deleted.message_ids, ["m1", "m2", "m3"]);

    assert_eq!(channel_ids(&store).await, ["default", "c2"]);
    let hits = store.search("payload", None, 10).await.unwrap();
    assert_eq!(
        hits.iter()
            .map(|h| h.message_id.as_str())
            .collect::<Vec<_>>(),
        ["k1"]
    );
    for id in ["m1", "m2", "m3"] {
        assert_eq!(store.get_message(id).await.unwrap(), None);
        assert!(store.read_by(id).await.unwrap().is_empty());
    }
    assert_eq!(store.read_by("k1").await.unwrap(), ["phone"]);
    assert_eq!(replayed(&store, 0).await, ["k1", "channel deleted"]);
    assert_eq!(store.lane_session("c1", None).await.unwrap(), None);
    assert_eq!(store.lane_session("c1", Some("t1")).await.unwrap(), None);
    assert_eq!(
        store.lane_session("c2", None).await.unwrap().as_deref(),
        Some("s-c2")
    );
    assert!(store
        .history("c1", Some("t1"), None, 10)
        .await
        .unwrap()
        .messages
        .is_empty());
    assert_eq!(store.outbox_floor().await.unwrap(), 0);
    assert_eq!(store.outbox_head().await.unwrap(), 7);
    assert_eq!(*rec.cursors().last().unwrap(), 7);
    store.integrity_check().unwrap();
}

#[tokio::test]
async fn deleting_a_thread_keeps_the_channel() {
    let (_dir, store, _) = open_temp();
    store
        .write(|tx| {
            tx.insert_channel(&channel("c1", "channel", None))?;
            tx.insert_channel(&channel("t1", "thread", Some("c1")))?;
            tx.upsert_message(&msg("flat", "c1", None, "x"))?;
            tx.upsert_message(&msg("threaded", "c1", Some("t1"), "y"))?;
            tx.append(lane_frame("c1", None, Some("flat"), "flat"))?;
            tx.append(lane_frame("c1", Some("t1"), Some("threaded"), "threaded"))?;
            tx.set_lane_session("c1", Some("t1"), Some("s"))?;
            Ok(())
        })
        .await
        .unwrap();
    let deleted = store.write(|tx| tx.delete_channel("t1")).await.unwrap();
    assert_eq!(deleted.chat_ids, ["t1"]);
    assert_eq!(deleted.message_ids, ["threaded"]);
    assert!(store.get_channel("c1").await.unwrap().is_some());
    assert!(store.get_message("flat").await.unwrap().is_some());
    let left: Vec<String> = store
        .replay(0, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|(_, j)| j.to_string())
        .collect();
    assert_eq!(left, ["flat"]);
    assert_eq!(store.lane_session("c1", Some("t1")).await.unwrap(), None);
}

#[tokio::test]
async fn frames_deleted_in_their_own_batch_are_not_published() {
    let (_dir, store, rec) = open_temp();
    store
        .write(|tx| {
            tx.append(lane_frame("default", None, Some("m"), "doomed"))?;
            tx.append(lane_frame("default", None, None, "kept"))?;
            tx.delete_messages(&["m".to_string()])?;
            Ok(())
        })
        .await
        .unwrap();
    let seen: Vec<String> = rec
        .frames
        .lock()
        .unwrap()
        .iter()
        .map(|c| c.json.to_string())
        .collect();
    assert_eq!(seen, ["kept"]);
}

#[tokio::test]
async fn devices_keep_cursors_monotonic() {
    let (_dir, store, _) = open_temp();
    let row = store
        .write(|tx| tx.upsert_device("phone", "Phone", r#"{"push":true}"#, 100))
        .await
        .unwrap();
    assert_eq!(
        (
            row.confirmed_cursor,
            row.last_pushed_cursor,
            row.created_at,
            row.last_seen
        ),
        (0, 0, 100, 100)
    );

    store
        .write(|tx| {
            tx.confirm_cursor("phone", 10)?;
            tx.confirm_cursor("phone", 5)?;
            tx.set_last_pushed("phone", 8)?;
            tx.set_last_pushed("phone", 3)?;
            tx.set_push_tokens(
                "phone",
                Some(Some("fcm-1".into())),
                Some(Some("topic".into())),
            )?;
            Ok(())
        })
        .await
        .unwrap();
    let d = store.get_device("phone").await.unwrap().unwrap();
    assert_eq!((d.confirmed_cursor, d.last_pushed_cursor), (10, 8));
    assert_eq!(
        (d.fcm_token.as_deref(), d.ntfy_topic.as_deref()),
        (Some("fcm-1"), Some("topic"))
    );

    // Re-registering refreshes name, caps and last_seen but keeps cursors and tokens.
    let d = store
        .write(|tx| tx.upsert_device("phone", "Renamed", "{}", 200))
        .await
        .unwrap();
    assert_eq!(
        (d.name.as_str(), d.caps.as_str(), d.created_at, d.last_seen),
        ("Renamed", "{}", 100, 200)
    );
    assert_eq!(
        (d.confirmed_cursor, d.fcm_token.as_deref()),
        (10, Some("fcm-1"))
    );

    store
        .write(|tx| tx.set_push_tokens("phone", None, Some(None)))
        .await
        .unwrap();
    store.write(|tx| tx.touch("phone", 300)).await.unwrap();
    store
        .write(|tx| tx.confirm_cursor("phone", 12))
        .await
        .unwrap();
    let d = store.get_device("phone").await.unwrap().unwrap();
    assert_eq!(
        (d.fcm_token.as_deref(), d.ntfy_topic.as_deref(), d.last_seen),
        (Some("fcm-1"), None, 300)
    );
    assert_eq!(d.confirmed_cursor, 12);

    assert!(matches!(
        store.write(|tx| tx.confirm_cursor("ghost", 1)).await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        store.write(|tx| tx.touch("ghost", 1)).await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        store
            .write(|tx| tx.set_push_tokens("ghost", None, None))
            .await,
        Err(StoreError::NotFound)
    ));

    store
        .write(|tx| tx.upsert_device("tablet", "Tablet", "{}", 150))
        .await
        .unwrap();
    let all: Vec<String> = store
        .list_devices()
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.device_id)
        .collect();
    assert_eq!(all, ["phone", "tablet"]);
    assert!(store.write(|tx| tx.delete_device("phone")).await.unwrap());
    assert!(!store.write(|tx| tx.delete_device("phone")).await.unwrap());
    assert_eq!(store.get_device("phone").await.unwrap(), None);
}

#[tokio::test]
async fn read_state_lane_sessions_and_meta() {
    let (_dir, store, _) = open_temp();
    let first = store
        .write(|tx| tx.mark_read("default", "m1", "phone", 2))
        .await
        .unwrap();
    let again = store
        .write(|tx| tx.mark_read("default", "m1", "phone", 9))
        .await
        .unwrap();
    store
        .write(|tx| tx.mark_read("default", "m1", "laptop", 1))
        .await
        .unwrap();
    assert!(first && !again);
    assert_eq!(store.read_by("m1").await.unwrap(), ["laptop", "phone"]);
    assert!(store.read_by("m2").await.unwrap().is_empty());

    store
        .write(|tx| {
            tx.set_lane_session("default", None, Some("flat"))?;
            tx.set_lane_session("default", Some("t"), Some("thread"))?;
            tx.set_lane_session("default", Some("t"), Some("thread-2"))?;
            Ok(())
        })
        .await
        .unwrap();
    assert_eq!(
        store
            .lane_session("default", None)
            .await
            .unwrap()
            .as_deref(),
        Some("flat")
    );
    assert_eq!(
        store
            .lane_session("default", Some("t"))
            .await
            .unwrap()
            .as_deref(),
        Some("thread-2")
    );
    store
        .write(|tx| tx.set_lane_session("default", None, None))
        .await
        .unwrap();
    assert_eq!(store.lane_session("default", None).await.unwrap(), None);
    assert_eq!(
        store
            .lane_session("default", Some("t"))
            .await
            .unwrap()
            .as_deref(),
        Some("thread-2")
    );

    assert_eq!(store.get_meta("k").await.unwrap(), None);
    store.write(|tx| tx.set_meta("k", "1")).await.unwrap();
    store.write(|tx| tx.set_meta("k", "2")).await.unwrap();
    assert_eq!(store.get_meta("k").await.unwrap().as_deref(), Some("2"));
}

#[tokio::test]
async fn a_channel_keeps_its_agent_and_its_threads_use_it() {
    let (_dir, store, _) = open_temp();
    store
        .write(|tx| {
            let mut c = channel("c1", "channel", None);
            c.agent = Some("claude".into());
            tx.insert_channel(&c)?;
            let mut t = channel("t1", "thread", Some("c1"));
            t.agent = Some("ignored".into());
            tx.insert_channel(&t)?;
            Ok(())
        })
        .await
        .unwrap();
    let agent = |id: &'static str| {
        let store = store.clone();
        async move { store.get_channel(id).await.unwrap().unwrap().agent }
    };
    assert_eq!(agent("c1").await.as_deref(), Some("claude"));
    assert_eq!(agent("t1").await.as_deref(), Some("claude"));
    assert_eq!(agent("default").await, None);
    store
        .write(|tx| {
            assert!(tx.set_channel_agent("c1", Some("hermes"))?);
            assert!(!tx.set_channel_agent("nope", Some("hermes"))?);
            assert!(matches!(
                tx.set_channel_agent("t1", Some("hermes")),
                Err(StoreError::Invalid(_))
            ));
            Ok(())
        })
        .await
        .unwrap();
    assert_eq!(agent("t1").await.as_deref(), Some("hermes"));
    let listed = store.list_channels().await.unwrap();
    let t1 = listed.iter().find(|c| c.chat_id == "t1").unwrap();
    assert_eq!(t1.agent.as_deref(), Some("hermes"));
}

#[tokio::test]
async fn watermarks_of_several_devices_in_one_job_skip_the_unknown() {
    let (_dir, store, _) = open_temp();
    for id in ["phone", "laptop"] {
        store
            .write(move |tx| tx.upsert_device(id, id, "{}", 1))
            .await
            .unwrap();
    }
    let batch = vec![
        ("phone".to_owned(), 7),
        ("ghost".to_owned(), 9),
        ("laptop".to_owned(), 3),
    ];
    let stored = store.write(move |tx| tx.confirm_cursors(&batch)).await;
    assert_eq!(
        stored.unwrap(),
        vec![("phone".to_owned(), 7), ("laptop".to_owned(), 3)],
        "a device that no longer exists is skipped, not an error"
    );
    let phone = store.get_device("phone").await.unwrap().unwrap();
    assert_eq!(phone.confirmed_cursor, 7);
}

#[tokio::test]
async fn queued_writes_commit_in_the_order_they_were_queued() {
    let (_dir, store, _) = open_temp();
    // The first job is not awaited before the second is queued; the second still sees it.
    let first = store.write_queued(|tx| tx.upsert_device("phone", "Phone", "{}", 1));
    let second = store.write_queued(|tx| tx.confirm_cursor("phone", 4));
    second.await.unwrap();
    first.await.unwrap();
    let phone = store.get_device("phone").await.unwrap().unwrap();
    assert_eq!(phone.confirmed_cursor, 4);
}

#[tokio::test]
async fn the_directory_read_before_a_change_is_never_served_after_it() {
    let (_dir, store, _) = open_temp();
    // Read (and keep) the directory, then change it in every way; each read after a write
    // returned sees that write.
    assert_eq!(store.list_channels().await.unwrap().len(), 1);
    store
        .write(|tx| tx.insert_channel(&channel("c1", "channel", None)))
        .await
        .unwrap();
    assert_eq!(store.list_channels().await.unwrap().len(), 2);
    store
        .write(|tx| tx.rename_channel("c1", "Renamed", true))
        .await
        .unwrap();
    let c1 = store.get_channel("c1").await.unwrap().unwrap();
    assert_eq!(c1.name, "Renamed");
    store.write(|tx| tx.set_default("c1")).await.unwrap();
    assert!(store.get_channel("c1").await.unwrap().unwrap().is_default);
    store
        .write(|tx| tx.set_channel_agent("c1", Some("claude")))
        .await
        .unwrap();
    let agent = store.get_channel("c1").await.unwrap().unwrap().agent;
    assert_eq!(agent.as_deref(), Some("claude"));
    store.write(|tx| tx.set_default("default")).await.unwrap();
    store.write(|tx| tx.delete_channel("c1")).await.unwrap();
    assert_eq!(store.get_channel("c1").await.unwrap(), None);
    // A job that changed a channel and then failed leaves the directory as it was.
    let failed = store
        .write(|tx| {
            tx.insert_channel(&channel("c2", "channel", None))?;
            Err::<(), _>(StoreError::Invalid("changed my mind".into()))
        })
        .await;
    assert!(failed.is_err());
    assert_eq!(channel_ids(&store).await, ["default"]);
}

#[tokio::test]
async fn activity_is_the_newest_message_or_the_creation_and_previews_skip_system_lines() {
    let (_dir, store, _) = open_temp();
    store
        .write(|tx| {
            tx.insert_channel(&channel("c1", "channel", None))?;
            tx.insert_channel(&channel("t1", "thread", Some("c1")))?;
            tx.insert_channel(&channel("c2", "channel", None))?;
            Ok(())
        })
        .await
        .unwrap();
    let mut flat = msg("m1", "c1", None, "hello there");
    flat.ts = 10;
    let mut answer = msg("m2", "c1", None, "  ");
    (answer.role, answer.ts) = ("assistant".into(), 20);
    let mut note = msg("m3", "c1", None, "This channel now talks to demo.");
    (note.role, note.ts) = ("system".into(), 30);
    let mut threaded = msg("m4", "c1", Some("t1"), "in the thread");
    threaded.ts = 40;
    common::put_messages(&store, vec![flat, answer, note, threaded]).await;
    let activity = store.channel_activity().await.unwrap();
    let got: Vec<(&str, i64, Option<&str>, Option<&str>)> = activity
        .iter()
        .map(|a| {
            (
                a.chat_id.as_str(),
                a.last_activity_at,
                a.latest_text.as_deref(),
                a.latest_id.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        got[1..],
        [
            ("c1", 30, Some("hello there"), Some("m1")),
            ("t1", 40, Some("in the thread"), Some("m4")),
            ("c2", 1, None, None),
        ]
    );
}

#[tokio::test]
async fn only_a_chat_awaiting_its_title_is_given_one() {
    let (_dir, store, _) = open_temp();
    let mut waiting = channel("c1", "channel", None);
    waiting.awaiting_title = true;
    let mut renamed = channel("c2", "channel", None);
    renamed.awaiting_title = true;
    store
        .write(move |tx| {
            tx.insert_channel(&waiting)?;
            tx.insert_channel(&renamed)?;
            tx.insert_channel(&channel("c3", "channel", None))?;
            tx.rename_channel("c2", "Mine", true)
        })
        .await
        .unwrap();
    let given = store
        .write(|tx| {
            Ok([
                tx.give_awaited_title("c1", "Trip plans")?,
                tx.give_awaited_title("c1", "Second try")?,
                tx.give_awaited_title("c2", "Trip plans")?,
                tx.give_awaited_title("c3", "Trip plans")?,
            ])
        })
        .await
        .unwrap();
    assert_eq!(given, [true, false, false, false]);
    let names: Vec<String> = store
        .list_channels()
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names[1..], ["Trip plans", "Mine", "C3"]);
}
