//! Real Hermes over ACP (see `hermes_acp.rs`): what a session reports besides its answers
//! (titles, usage, model switching) and what `/steer` does while a turn runs.
//!
//! Ignored where no Hermes venv or network namespaces exist (the build script looks); never
//! under CI.

#[path = "common/hermes_drive.rs"]
#[macro_use]
mod drive;

use std::time::{Duration, Instant};

use drive::hermes::HermesEnv;
use drive::*;
use iris_acp::{AcpError, ContentBlock, PromptResponse, SessionUpdate, StopReason};
use serde_json::{json, Value};

// ---------------------------------------------------------------------------------------------
// Session metadata.

/// After the first turn Hermes asks the LLM for a title in a non-streamed side call and sends
/// it as session_info_update.
#[tokio::test]
#[cfg_attr(
    lacks_hermes_venv,
    ignore = "needs a Hermes venv: IRIS_HERMES_VENV, or .venv in the checkout (README, Connecting Hermes)"
)]
#[cfg_attr(
    lacks_hermes_netns,
    ignore = "needs network namespaces: unshare (util-linux) and ip (iproute2)"
)]
async fn title_arrives_as_session_info_update_after_the_first_turn() {
    let env = hermes_env!(json!([
        {"kind": "title", "reply": {"content": "Trip To Lisbon"}}
    ]));
    within(async {
        let mut h = start(&env).await;
        let t = turn(&mut h, "plan a trip to Lisbon").await;
        assert_eq!(t.text(), "OK: plan a trip to Lisbon");
        let title = wait_update(&mut h.events, SHORT, |u| {
            matches!(u, SessionUpdate::SessionInfoUpdate(_))
        })
        .await
        .expect("no session_info_update after the turn");
        let SessionUpdate::SessionInfoUpdate(info) = title else {
            unreachable!()
        };
        assert_eq!(info.title.as_deref(), Some("Trip To Lisbon"));
        assert!(info.updated_at.is_some());

        let titles: Vec<Value> = env
            .chat_requests()
            .into_iter()
            .filter(|r| r["kind"] == "title")
            .collect();
        assert_eq!(titles.len(), 1, "{titles:?}");
        assert_eq!(titles[0]["stream"], false);
        assert_eq!(
            titles[0]["last_user"],
            "User: plan a trip to Lisbon\n\nAssistant: OK: plan a trip to Lisbon"
        );
    })
    .await;
}

/// usage_update reports the context window (`size`, from the config) and Hermes' estimate of
/// tokens in use (`used`); the prompt result's `usage` is what the LLM reported, summed over the
/// agent process's lifetime.
#[tokio::test]
#[cfg_attr(
    lacks_hermes_venv,
    ignore = "needs a Hermes venv: IRIS_HERMES_VENV, or .venv in the checkout (README, Connecting Hermes)"
)]
#[cfg_attr(
    lacks_hermes_netns,
    ignore = "needs network namespaces: unshare (util-linux) and ip (iproute2)"
)]
async fn usage_update_and_prompt_usage() {
    let env = hermes_env!(json!([]));
    within(async {
        let mut h = start(&env).await;
        let first = turn(&mut h, "count my tokens").await;
        let usage_updates: Vec<_> = first
            .updates
            .iter()
            .filter_map(|u| match u {
                SessionUpdate::UsageUpdate(usage) => Some(usage.clone()),
                _ => None,
            })
            .collect();
        let last = usage_updates
            .last()
            .expect("no usage_update during the turn");
        assert_eq!(last.size, Some(hermes::CONTEXT_LENGTH));
        assert!(last.used.unwrap_or(0) > 0, "{last:?}");
        assert_eq!(last.cost, None);

        let reported = |text: &str| -> (u64, u64) {
            let r = &turn_requests_for(&env, text)[0]["usage"];
            (
                r["prompt_tokens"].as_u64().unwrap(),
                r["completion_tokens"].as_u64().unwrap(),
            )
        };
        let usage = first
            .response()
            .usage
            .clone()
            .expect("prompt result carries usage");
        let (input1, output1) = reported("count my tokens");
        assert_eq!((usage.input_tokens, usage.output_tokens), (input1, output1));
        assert_eq!(usage.total_tokens, input1 + output1);

        let second = turn(&mut h, "and again").await;
        let usage = second.response().usage.clone().unwrap();
        let (input2, output2) = reported("and again");
        assert_eq!(
            (usage.input_tokens, usage.output_tokens),
            (input1 + input2, output1 + output2),
            "usage is cumulative per agent process"
        );
    })
    .await;
}

/// `session/set_model` with a "provider:model" id switches the model the next request names.
#[tokio::test]
#[cfg_attr(
    lacks_hermes_venv,
    ignore = "needs a Hermes venv: IRIS_HERMES_VENV, or .venv in the checkout (README, Connecting Hermes)"
)]
#[cfg_attr(
    lacks_hermes_netns,
    ignore = "needs network namespaces: unshare (util-linux) and ip (iproute2)"
)]
async fn set_model_switches_the_model_sent_to_the_llm() {
    let env = hermes_env!(json!([]));
    within(async {
        let mut h = start(&env).await;
        turn(&mut h, "first model").await;
        h.client
            .set_model(&h.sid(), hermes::OTHER_MODEL_ID)
            .await
            .expect("session/set_model");
        turn(&mut h, "second model").await;
        assert_eq!(
            turn_requests_for(&env, "first model")[0]["model"],
            "fake-model"
        );
        assert_eq!(
            turn_requests_for(&env, "second model")[0]["model"],
            "fake-model-2"
        );
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// /steer while a turn runs.

const STEER: &str = "STEER-7f3a use the word banana";

/// Sends `/steer <STEER>` as a second prompt as soon as the running turn first streams something,
/// and records how the steer prompt ended and how long it took.
struct SteerOutcome {
    turn: Turn,
    steer: Result<PromptResponse, AcpError>,
    steer_took: Duration,
    /// Whether the first prompt had already finished when the steer prompt returned.
    first_done_before_steer: bool,
}

async fn steer_during(h: &mut Hermes, text: &str) -> SteerOutcome {
    let sid = h.sid();
    let (steer_tx, mut steer_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut sent = false;
    let prompt = h.client.prompt(&sid, vec![ContentBlock::text(text)]);
    let client = h.client.clone();
    let steer_sid = sid.clone();
    let t = drive(&mut h.events, prompt, no_permissions, |update, _| {
        let streaming = matches!(
            update,
            SessionUpdate::AgentMessageChunk(_) | SessionUpdate::AgentThoughtChunk(_)
        );
        if streaming && !sent {
            sent = true;
            let client = client.clone();
            let sid = steer_sid.clone();
            let tx = steer_tx.clone();
            tokio::spawn(async move {
                let started = Instant::now();
                let result = client
                    .prompt(&sid, vec![ContentBlock::text(format!("/steer {STEER}"))])
                    .await;
                let _ = tx.send((result, started.elapsed(), Instant::now()));
            });
        }
    })
    .await;
    let first_done = Instant::now();
    // Only the spawned steer task may still hold a sender now.
    drop(steer_tx);
    let (steer, steer_took, steer_done) = steer_rx.recv().await.expect("the steer prompt ran");
    SteerOutcome {
        turn: t,
        steer,
        steer_took,
        first_done_before_steer: first_done < steer_done,
    }
}

fn mentions_steer(request: &Value) -> bool {
    request.to_string().contains("STEER-7f3a")
}

/// `/steer` during a turn that only streams text: the steer prompt returns end_turn at once
/// while the turn keeps running, its acknowledgement ("⏩ Steer queued for the active turn: …")
/// arrives as an agent_message_chunk in the middle of the running turn's text, the running
/// turn's own output is unchanged, and the steering text never reaches the LLM, neither in this
/// turn nor in the next one: it is lost.
#[tokio::test]
#[cfg_attr(
    lacks_hermes_venv,
    ignore = "needs a Hermes venv: IRIS_HERMES_VENV, or .venv in the checkout (README, Connecting Hermes)"
)]
#[cfg_attr(
    lacks_hermes_netns,
    ignore = "needs network namespaces: unshare (util-linux) and ip (iproute2)"
)]
async fn steer_during_a_text_only_turn_is_acknowledged_but_never_reaches_the_llm() {
    let env = hermes_env!(json!([
        {"match": "count slowly", "reply": {"chunks": ticks(10), "delay": 0.3}}
    ]));
    within(async {
        let mut h = start(&env).await;
        let outcome = steer_during(&mut h, "count slowly").await;
        let steer = outcome.steer.expect("the steer prompt succeeded");
        assert_eq!(steer.stop_reason, StopReason::EndTurn);
        assert_eq!(steer.usage, None);
        assert!(
            outcome.steer_took < Duration::from_millis(1500),
            "{:?}",
            outcome.steer_took
        );
        assert!(
            !outcome.first_done_before_steer,
            "the steer waited for the turn"
        );

        let t = &outcome.turn;
        assert_eq!(t.response().stop_reason, StopReason::EndTurn);
        let ack = format!("⏩ Steer queued for the active turn: {STEER}");
        let chunks = t.message_chunks();
        let at = chunks
            .iter()
            .position(|c| *c == ack)
            .expect("no steer acknowledgement");
        assert!(
            at > 0 && at < chunks.len() - 1,
            "ack not mid-turn: {chunks:?}"
        );
        let own: String = chunks
            .iter()
            .filter(|c| **c != ack)
            .map(String::as_str)
            .collect();
        assert_eq!(own, ticks(10).concat());

        turn(&mut h, "what now").await;
        let reached: Vec<Value> = env
            .chat_requests()
            .into_iter()
            .filter(mentions_steer)
            .collect();
        assert!(
            reached.is_empty(),
            "steer text reached the LLM: {reached:?}"
        );
    })
    .await;
}

/// `/steer` during a turn that goes on to call a tool: same immediate acknowledgement, and the
/// steering text reaches the LLM appended to the tool result of the next request, wrapped in
/// Hermes' "[OUT-OF-BAND USER MESSAGE …]" marker. The turn's own output is unchanged.
#[tokio::test]
#[cfg_attr(
    lacks_hermes_venv,
    ignore = "needs a Hermes venv: IRIS_HERMES_VENV, or .venv in the checkout (README, Connecting Hermes)"
)]
#[cfg_attr(
    lacks_hermes_netns,
    ignore = "needs network namespaces: unshare (util-linux) and ip (iproute2)"
)]
async fn steer_during_a_tool_turn_reaches_the_llm_inside_the_tool_result() {
    let env = hermes_env!(json!([
        {"match": "slow tool", "reply": {
            "reasoning": ["Planning ", "the ", "command ", "now."], "delay": 0.3,
            "tool_calls": [{"name": "terminal", "arguments": {"command": "echo hello"}}]}},
        {"after_tool": true, "reply": {"content": "Done after the tool."}}
    ]));
    within(async {
        let mut h = start(&env).await;
        let outcome = steer_during(&mut h, "slow tool please").await;
        let steer = outcome.steer.expect("the steer prompt succeeded");
        assert_eq!(steer.stop_reason, StopReason::EndTurn);
        assert!(
            outcome.steer_took < Duration::from_millis(1500),
            "{:?}",
            outcome.steer_took
        );
        assert!(!outcome.first_done_before_steer);

        let t = &outcome.turn;
        assert_eq!(t.response().stop_reason, StopReason::EndTurn);
        assert_eq!(t.thoughts(), "Planning the command now.");
        let ack = format!("⏩ Steer queued for the active turn: {STEER}");
        let own: String = t
            .message_chunks()
            .iter()
            .filter(|c| **c != ack)
            .map(String::as_str)
            .collect();
        assert_eq!(own.trim_start(), "Done after the tool.");
        assert!(t.message_chunks().contains(&ack));

        let requests = turn_requests_for(&env, "slow tool please");
        assert_eq!(requests.len(), 2, "{requests:?}");
        assert!(!mentions_steer(&requests[0]["body"]));
        let tool_result = last_message_text(&requests[1]);
        assert_eq!(requests[1]["last_role"], "tool");
        assert!(
            tool_result.contains("[OUT-OF-BAND USER MESSAGE") && tool_result.contains(STEER),
            "{tool_result}"
        );
    })
    .await;
}
