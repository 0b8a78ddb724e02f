//! Scheduled jobs: insert, run records, pause, delete, survival across reopen, and removal with
//! their channel or thread.

mod common;

use common::{open_at, open_temp};
use iris_store::{ChannelRow, CronRunRecord, NewCronJob, StoreError};

fn channel(id: &str, parent: Option<&str>) -> ChannelRow {
    ChannelRow {
        chat_id: id.into(),
        name: id.to_uppercase(),
        kind: if parent.is_some() {
            "thread"
        } else {
            "channel"
        }
        .into(),
        parent_chat_id: parent.map(Into::into),
        is_default: false,
        name_set_by_user: false,
        awaiting_title: false,
        created_at: 1,
        agent: None,
    }
}

fn job(chat: &str, thread: Option<&str>, name: &str) -> NewCronJob {
    NewCronJob {
        chat_id: chat.into(),
        thread_id: thread.map(Into::into),
        name: name.into(),
        kind: "every".into(),
        spec: "1800".into(),
        prompt: format!("{name}, please"),
        created_at: 1_000,
        next_run: Some(1_801_000),
    }
}

#[tokio::test]
async fn jobs_keep_their_run_state_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("iris.db");
    {
        let (store, _) = open_at(&path, true);
        let row = store
            .write(|tx| tx.insert_cron_job(&job("default", None, "Report")))
            .await
            .unwrap();
        assert_eq!((row.job_id, row.run_count, row.paused), (1, 0, false));
        let record = CronRunRecord {
            at: 1_801_000,
            status: "ok".into(),
            next_run: Some(3_601_000),
            counted: true,
        };
        assert!(store
            .write(move |tx| tx.record_cron_run(1, &record))
            .await
            .unwrap());
        let skipped = CronRunRecord {
            at: 3_700_000,
            status: "missed".into(),
            next_run: Some(5_401_000),
            counted: false,
        };
        assert!(store
            .write(move |tx| tx.record_cron_run(1, &skipped))
            .await
            .unwrap());
        assert!(store
            .write(|tx| tx.set_cron_paused(1, true, Some(5_401_000)))
            .await
            .unwrap());
        store.close();
    }
    let (store, _) = open_at(&path, true);
    let row = store
        .get_cron_job(1)
        .await
        .unwrap()
        .expect("the job survives");
    assert_eq!(row.last_status.as_deref(), Some("missed"));
    assert_eq!(
        (row.last_run, row.next_run, row.run_count, row.paused),
        (Some(3_700_000), Some(5_401_000), 1, true)
    );
    assert!(store.write(|tx| tx.delete_cron_job(1)).await.unwrap());
    assert!(!store.write(|tx| tx.delete_cron_job(1)).await.unwrap());
    // Ids are never reused.
    let row = store
        .write(|tx| tx.insert_cron_job(&job("default", None, "Again")))
        .await
        .unwrap();
    assert_eq!(row.job_id, 2);
}

#[tokio::test]
async fn a_job_needs_an_existing_lane() {
    let (_dir, store, _) = open_temp();
    let res = store
        .write(|tx| tx.insert_cron_job(&job("nope", None, "X")))
        .await;
    assert!(matches!(res, Err(StoreError::NotFound)), "{res:?}");
    store
        .write(|tx| {
            tx.insert_channel(&channel("c1", None))?;
            tx.insert_channel(&channel("c2", None))?;
            tx.insert_channel(&channel("t1", Some("c1")))
        })
        .await
        .unwrap();
    let res = store
        .write(|tx| tx.insert_cron_job(&job("c2", Some("t1"), "X")))
        .await;
    assert!(
        matches!(res, Err(StoreError::NotFound)),
        "a thread of another channel: {res:?}"
    );
    let res = store
        .write(|tx| tx.insert_cron_job(&job("t1", None, "X")))
        .await;
    assert!(
        matches!(res, Err(StoreError::Invalid(_))),
        "a thread is not a channel: {res:?}"
    );
    assert!(store.list_cron_jobs().await.unwrap().is_empty());
}

#[tokio::test]
async fn deleting_a_channel_or_thread_deletes_its_jobs() {
    let (_dir, store, _) = open_temp();
    store
        .write(|tx| {
            tx.insert_channel(&channel("c1", None))?;
            tx.insert_channel(&channel("t1", Some("c1")))?;
            tx.insert_channel(&channel("t2", Some("c1")))?;
            tx.insert_channel(&channel("c2", None))?;
            tx.insert_cron_job(&job("c1", None, "channel job"))?;
            tx.insert_cron_job(&job("c1", Some("t1"), "thread one job"))?;
            tx.insert_cron_job(&job("c1", Some("t2"), "thread two job"))?;
            tx.insert_cron_job(&job("c2", None, "other channel job"))?;
            tx.insert_cron_job(&job("default", None, "default job"))
        })
        .await
        .unwrap();
    let names =
        |jobs: Vec<iris_store::CronJobRow>| jobs.into_iter().map(|j| j.name).collect::<Vec<_>>();

    store.write(|tx| tx.delete_channel("t2")).await.unwrap();
    assert_eq!(
        names(store.list_cron_jobs().await.unwrap()),
        [
            "channel job",
            "thread one job",
            "other channel job",
            "default job"
        ]
    );
    store.write(|tx| tx.delete_channel("c1")).await.unwrap();
    assert_eq!(
        names(store.list_cron_jobs().await.unwrap()),
        ["other channel job", "default job"]
    );
}
