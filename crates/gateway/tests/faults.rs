//! Agent faults through the real server: the agent killed mid-turn, hanging, writing garbage, and
//! wedged after a cancel (Hermes' defect, reproduced by the demo agent). After every injection
//! the lane recovers and the next message is answered.

mod common;

use std::time::Duration;

use common::*;
use iris_client::Client;
use iris_protocol::{ClientFrame, Empty, Header, ServerFrame};

async fn send_default(client: &mut Client, text: &str) {
    send(client, default_lane(), text, false).await;
}

async fn stop(client: &mut Client) {
    let ack = client
        .request(
            Header::lane("default", None),
            ClientFrame::AgentStop(Empty {}),
        )
        .await
        .expect("stop answered");
    assert_eq!(ack.frame_type(), "ack");
}

#[tokio::test]
async fn the_lane_recovers_from_every_agent_fault() {
    let gw = TestGateway::start_with(|c| {
        c.agent_command = Some(demo_agent());
        c.cancel_grace = Duration::from_millis(300);
        c.turn_idle_timeout = Duration::from_millis(800);
    })
    .await;
    let (mut a, _) = gw.connect("a").await;
    let faults = ["crash", "freeze", "garbage", "wedge", "hang"];
    let rounds = 4;
    let mut recoveries = 0;
    for round in 0..rounds {
        for fault in faults {
            eprintln!("round {round}: {fault}");
            match fault {
                "crash" => {
                    send_default(&mut a, "crash now").await;
                    let frames = until_idle(&mut a).await;
                    assert!(
                        system_texts(&frames)
                            .iter()
                            .any(|s| s.contains("stopped unexpectedly")),
                        "{:?}",
                        system_texts(&frames)
                    );
                }
                "freeze" => {
                    // No output at all: the idle timeout cancels, the agent ignores the cancel,
                    // and the gateway kills it.
                    send_default(&mut a, "freeze").await;
                    let frames = until_idle(&mut a).await;
                    assert!(frames.iter().any(|e| e.frame_type() == "agent.busy"));
                }
                "garbage" => {
                    send_default(&mut a, "garbage first").await;
                    let frames = until_idle(&mut a).await;
                    assert_eq!(answer(&frames).as_deref(), Some("Echo: garbage first"));
                }
                "wedge" => {
                    send_default(&mut a, "wedge it").await;
                    a.wait_for(|e| e.frame_type() == "tool.start")
                        .await
                        .unwrap();
                    stop(&mut a).await;
                    let frames = until_idle(&mut a).await;
                    let end = frames.iter().find_map(|e| match &e.body {
                        ServerFrame::ToolEnd(t) => Some(t.ok),
                        _ => None,
                    });
                    assert_eq!(end, Some(false), "the interrupted tool is closed");
                }
                "hang" => {
                    send_default(&mut a, "hang there").await;
                    a.wait_for(|e| e.frame_type() == "agent.busy")
                        .await
                        .unwrap();
                    stop(&mut a).await;
                    until_idle(&mut a).await;
                }
                _ => unreachable!(),
            }
            // The probe must not contain a keyword of the demo agent.
            let probe = format!("probe {round} {}", fault.len());
            send_default(&mut a, &probe).await;
            let frames = until_idle(&mut a).await;
            assert_eq!(
                answer(&frames),
                Some(format!("Echo: {probe}")),
                "recovered from {fault} in round {round}"
            );
            recoveries += 1;
        }
    }
    println!(
        "recoveries: {recoveries} of {} injections",
        rounds * faults.len()
    );
    assert_eq!(recoveries, rounds * faults.len());
    let restarts = gw.agents.restarts();
    // Every crash, freeze and wedge needed a new process; garbage and hang did not.
    assert_eq!(restarts, (rounds * 3) as u64, "restarts: {restarts}");
    gw.stop().await;
}

#[tokio::test]
async fn an_agent_that_cannot_start_leaves_the_lane_idle_with_a_reason() {
    let gw = TestGateway::start_with(|c| {
        c.agent_command = Some("/nonexistent/iris-test-agent acp".into());
    })
    .await;
    let (mut a, _) = gw.connect("a").await;
    for attempt in 0..2 {
        send_default(&mut a, "hello").await;
        let frames = until_idle(&mut a).await;
        let t = types(&frames);
        // busy went out with the message (the lane was idle), so the failure must end it.
        assert_eq!(t.first(), Some(&"agent.busy"), "attempt {attempt}: {t:?}");
        assert!(
            system_texts(&frames)
                .iter()
                .any(|s| s.contains("The agent is not available")),
            "attempt {attempt}: {:?}",
            system_texts(&frames)
        );
        assert_eq!(t.last(), Some(&"agent.idle"), "attempt {attempt}: {t:?}");
    }
}
