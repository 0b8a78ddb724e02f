//! Every request that writes has a budget: a device flooding `read.receipt` or
//! `channel.rename` is answered `rate_limited` once its budget is spent (and other devices keep
//! theirs); a device may schedule a bounded number of cron jobs, and its jobs go when it is
//! revoked.

mod common;

use common::*;
use iris_client::{Client, ClientError};
use iris_protocol::{
    ChannelRename, ClientFrame, ErrorCode, Header, ReadReceipt, Role, ServerFrame,
};

/// The result code of one request: `Ok` or the error's code.
async fn code_of(client: &mut Client, header: Header, frame: ClientFrame) -> Result<(), ErrorCode> {
    match client.request(header, frame).await {
        Ok(_) => Ok(()),
        Err(ClientError::Server { code, .. }) => Err(code),
        Err(e) => panic!("{e}"),
    }
}

#[tokio::test]
async fn a_flood_of_receipts_and_renames_is_cut_off_and_other_devices_keep_their_budget() {
    // 8 a minute: a burst of 2, then one every 7.5 s.
    let gw = TestGateway::start_with(|c| c.limits.requests_per_minute = 8).await;
    let (mut mole, _) = gw.connect("mole").await;
    let echo = send_text(&mut mole, "default", "a message to mark read").await;
    let message_id = message_id(&echo);
    let receipt = || {
        ClientFrame::ReadReceipt(ReadReceipt {
            message_id: message_id.clone(),
            chat_id: None,
        })
    };
    let mut accepted = 0;
    let mut limited = 0;
    for _ in 0..20 {
        match code_of(&mut mole, default_lane(), receipt()).await {
            Ok(()) => accepted += 1,
            Err(ErrorCode::RateLimited) => limited += 1,
            Err(other) => panic!("{other:?}"),
        }
    }
    assert!(
        accepted <= 3,
        "{accepted} receipts accepted in a burst of 2"
    );
    assert_eq!(accepted + limited, 20);
    let rename = ClientFrame::ChannelRename(ChannelRename {
        name: "Renamed".into(),
    });
    assert_eq!(
        code_of(&mut mole, default_lane(), rename.clone()).await,
        Err(ErrorCode::RateLimited),
        "the budget is one for every request that writes"
    );
    // Sending has its own budget, and another device has its own.
    send_text(&mut mole, "default", "still allowed to talk").await;
    let (mut owner, _) = gw.connect("owner").await;
    assert_eq!(code_of(&mut owner, default_lane(), rename).await, Ok(()));
    gw.stop().await;
}

/// Sends a slash command and returns the system message that answers it.
async fn command(client: &mut Client, text: &str) -> String {
    send(client, default_lane(), text, false).await;
    let events = until(
        client,
        |e| matches!(&e.body, ServerFrame::Message(m) if m.role == Role::System),
    )
    .await;
    system_texts(&events).pop().unwrap_or_default()
}

#[tokio::test]
async fn a_device_has_few_cron_jobs_and_they_go_when_it_is_revoked() {
    let gw = TestGateway::start_demo().await;
    let (mut owner, _) = gw.connect("owner").await;
    let said = command(&mut owner, "/cron add every 1h owner's report").await;
    assert!(said.starts_with("Scheduled job"), "{said}");

    let (mut mole, _) = gw.connect("mole").await;
    let cap = iris_gateway::cron::command::MAX_JOBS_PER_DEVICE;
    for i in 0..cap {
        let said = command(&mut mole, &format!("/cron add every 1m flood {i}")).await;
        assert!(said.starts_with("Scheduled job"), "job {i}: {said}");
    }
    let said = command(&mut mole, "/cron add every 1m one more").await;
    assert!(
        said.contains(&format!("already has {cap} scheduled jobs")),
        "{said}"
    );
    let jobs = gw.shared.store.list_cron_jobs().await.expect("jobs");
    assert_eq!(jobs.len() as u64, cap + 1);

    mole.close().await.expect("close");
    iris_gateway::admin::devices::revoke(&gw.dir, "mole")
        .await
        .expect("revoke");
    let jobs = gw.shared.store.list_cron_jobs().await.expect("jobs");
    let names: Vec<&str> = jobs.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(
        names,
        vec!["owner's report"],
        "only the owner's job is left"
    );
    gw.stop().await;
}
