//! Operability: `/metrics` counts what an operator needs, without ids or text.

mod common;

use common::*;

fn value(body: &str, name: &str) -> f64 {
    body.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("{name} missing from\n{body}"))
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn metrics_count_connections_syncs_turns_and_agent_restarts() {
    let gw = TestGateway::start_demo().await;
    let (mut a, _) = gw.connect("a").await;
    send_text(&mut a, "default", "secret words").await;
    a.wait_for(|e| e.frame_type() == "agent.idle")
        .await
        .unwrap();
    // A device that joins later replays what it missed.
    let (mut b, _) = gw.connect("b").await;
    b.sync(0).await.unwrap();
    send_text(&mut a, "default", "crash please").await;
    a.wait_for(|e| e.frame_type() == "agent.idle")
        .await
        .unwrap();

    let (status, body) = gateway_get(&gw, "/metrics").await;
    assert_eq!(status, 200);
    assert_eq!(value(&body, "iris_connected_devices"), 2.0);
    assert_eq!(value(&body, "iris_sync_replays_total"), 1.0);
    assert!(value(&body, "iris_frames_replayed_total") >= 5.0, "{body}");
    assert!(value(&body, "iris_outbox_head") > 5.0);
    assert_eq!(value(&body, "iris_turn_latency_seconds_count"), 2.0);
    assert_eq!(value(&body, "iris_sync_gaps_total"), 0.0);
    for name in [
        "iris_frames_coalesced_total",
        "iris_slow_device_disconnects_total",
        "iris_push_sent_total",
        "iris_push_failed_total",
    ] {
        value(&body, name);
    }
    // The next turn restarts the crashed agent.
    send_text(&mut a, "default", "hello again").await;
    a.wait_for(|e| e.frame_type() == "agent.idle")
        .await
        .unwrap();
    let (_, body) = gateway_get(&gw, "/metrics").await;
    assert!(value(&body, "iris_agent_restarts_total{agent=\"demo\"}") >= 1.0);
    assert!(
        !body.contains("secret words") && !body.contains(TOKEN),
        "metrics carry no text or secrets"
    );
    gw.stop().await;
}
