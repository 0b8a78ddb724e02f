//! What a chat has used (`usage`, an Iris extension): the sums over a lane's answers of the
//! tokens and the cost each reported, kept across a restart, per lane; an unknown lane is
//! refused, and the request is budgeted like a write, so a device cannot spin it.

mod common;

use common::*;
use iris_client::{Client, ClientError};
use iris_protocol::{ClientFrame, Empty, ErrorCode, Header, ServerFrame, Usage};

async fn usage(client: &mut Client, lane: Header) -> Result<Usage, ErrorCode> {
    match client.request(lane, ClientFrame::Usage(Empty {})).await {
        Ok(event) => match event.body {
            ServerFrame::Usage(u) => Ok(u),
            other => panic!("expected usage, got {other:?}"),
        },
        Err(ClientError::Server { code, .. }) => Err(code),
        Err(e) => panic!("request failed: {e}"),
    }
}

/// The sum of the `tokens` the lane's answers carry in its history.
async fn history_tokens(client: &mut Client, lane: Header) -> u64 {
    lane_history(client, lane)
        .await
        .iter()
        .filter_map(|m| m.tokens)
        .sum()
}

#[tokio::test]
async fn a_chat_s_usage_sums_its_answers_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let demo = |c: &mut iris_gateway::Config| c.agent_command = Some(demo_agent());
    let gw = TestGateway::start_in(dir.path(), demo).await;
    let (mut phone, _) = gw.connect("phone").await;

    // Nothing answered yet: no figures at all, not zeros.
    assert_eq!(
        usage(&mut phone, default_lane()).await,
        Ok(Usage::default())
    );

    turn(&mut phone, default_lane(), "hello").await;
    turn(&mut phone, default_lane(), "cost please").await;
    let tokens = history_tokens(&mut phone, default_lane()).await;
    assert!(tokens > 0, "the demo agent reports tokens");
    let sums = usage(&mut phone, default_lane()).await.unwrap();
    assert_eq!(sums.answers, 2);
    assert_eq!(sums.tokens, Some(tokens));
    assert_eq!(sums.cost, Some(0.0125), "only the second answer had a cost");

    // A thread is a lane of its own.
    let thread = create_channel(&mut phone, "Side", Some("default")).await;
    let side = Header::lane("default", Some(thread.clone()));
    turn(&mut phone, side.clone(), "cost again").await;
    let in_thread = usage(&mut phone, side.clone()).await.unwrap();
    assert_eq!((in_thread.answers, in_thread.cost), (1, Some(0.0125)));
    assert_eq!(usage(&mut phone, default_lane()).await.unwrap(), sums);

    // Kept in the store: the same after a restart, for another device.
    gw.stop().await;
    let gw = TestGateway::start_in(dir.path(), demo).await;
    let (mut laptop, _) = gw.connect("laptop").await;
    assert_eq!(usage(&mut laptop, default_lane()).await.unwrap(), sums);

    // An unknown lane is not found, and the connection goes on.
    assert_eq!(
        usage(&mut laptop, Header::lane("c_missing", None)).await,
        Err(ErrorCode::NotFound)
    );
    assert_eq!(usage(&mut laptop, side).await.unwrap().answers, 1);
    gw.stop().await;
}

#[tokio::test]
async fn asking_for_usage_again_and_again_is_refused_once_the_budget_is_spent() {
    let gw = TestGateway::start_with(|c| c.limits.requests_per_minute = 8).await;
    let (mut phone, _) = gw.connect("phone").await;
    let mut answered = 0;
    let refused = loop {
        match usage(&mut phone, default_lane()).await {
            Ok(_) => answered += 1,
            Err(code) => break code,
        }
        assert!(answered <= 20, "never refused");
    };
    assert_eq!(refused, ErrorCode::RateLimited);
    // 8 a minute: a burst of 2 (a third may come as the bucket refills).
    assert!((2..=3).contains(&answered), "the budget allowed {answered}");
    // The connection survives the refusal.
    let pong = phone
        .request(Header::default(), ClientFrame::Ping(Default::default()))
        .await;
    assert!(pong.is_ok(), "{pong:?}");
    gw.stop().await;
}
