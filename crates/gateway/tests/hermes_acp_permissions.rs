//! Real Hermes over ACP (see `hermes_acp.rs`): permissions, allowed and denied, and cancellation,
//! including the wedge Hermes falls into when a permission is pending and the kill + respawn +
//! `session/load` recovery.
//!
//! Ignored where no Hermes venv or network namespaces exist (the build script looks); never
//! under CI.

#[path = "common/hermes_drive.rs"]
#[macro_use]
mod drive;

use std::future::Future;
use std::time::{Duration, Instant};

use drive::hermes::HermesEnv;
use drive::*;
use iris_acp::{
    AcpError, AgentEvent, ContentBlock, PromptResponse, RequestPermissionRequest, SessionUpdate,
    StopReason, ToolCallStatus, ToolKind,
};
use serde_json::json;

// ---------------------------------------------------------------------------------------------
// Permissions.

/// Prepares `<work>/junk` and a script whose "clean up" prompt runs `rm -rf <work>/junk`, which
/// Hermes' approval rules flag as "delete in root path" (any `rm` of an absolute path).
fn dangerous_setup(env: &HermesEnv, after_tool: &str) -> String {
    let junk = env.work.join("junk");
    std::fs::create_dir_all(&junk).unwrap();
    std::fs::write(junk.join("file"), "x").unwrap();
    let command = format!("rm -rf {}", junk.display());
    env.set_script(&json!([
        {"match": "clean up", "reply": {"tool_calls": [
            {"name": "terminal", "arguments": {"command": command}}
        ]}},
        {"after_tool": true, "reply": {"content": after_tool}}
    ]));
    command
}

fn check_dangerous_request(request: &RequestPermissionRequest, command: &str, live_id: &str) {
    let call = &request.tool_call;
    assert!(
        call.tool_call_id.starts_with("perm-check-"),
        "{}",
        call.tool_call_id
    );
    // The permission's tool-call id is not the live tool call's id.
    assert_ne!(call.tool_call_id, live_id);
    assert_eq!(
        call.title.as_deref(),
        Some(format!("delete in root path: {command}").as_str())
    );
    assert_eq!(call.kind, Some(ToolKind::Execute));
    assert_eq!(call.status, Some(ToolCallStatus::Pending));
    assert_eq!(
        call.raw_input,
        Some(json!({"command": command, "description": "delete in root path"}))
    );
    let options: Vec<(&str, &str)> = request
        .options
        .iter()
        .map(|o| (o.option_id.as_str(), o.name.as_str()))
        .collect();
    assert_eq!(
        options,
        [
            ("allow_once", "Allow once"),
            ("allow_session", "Allow for session"),
            ("allow_always", "Allow always"),
            ("deny", "Deny"),
            ("deny_always", "Deny always"),
        ]
    );
    let kinds: Vec<bool> = request.options.iter().map(|o| o.kind.is_allow()).collect();
    assert_eq!(kinds, [true, true, true, false, false]);
}

/// A dangerous command asks `session/request_permission` after its tool_call; allowing it runs
/// the command for real and the turn completes normally.
#[tokio::test]
#[cfg_attr(
    lacks_hermes_venv,
    ignore = "needs a Hermes venv: IRIS_HERMES_VENV, or .venv in the checkout (README, Connecting Hermes)"
)]
#[cfg_attr(
    lacks_hermes_netns,
    ignore = "needs network namespaces: unshare (util-linux) and ip (iproute2)"
)]
async fn dangerous_command_runs_after_permission_is_allowed() {
    let env = hermes_env!(json!([]));
    let command = dangerous_setup(&env, "Cleaned up.");
    within(async {
        let mut h = start(&env).await;
        let sid = h.sid();
        let prompt = h
            .client
            .prompt(&sid, vec![ContentBlock::text("clean up please")]);
        let t = drive(
            &mut h.events,
            prompt,
            |_| Answer::Select("allow_once"),
            |_, _| {},
        )
        .await;
        assert_eq!(t.response().stop_reason, StopReason::EndTurn);
        assert_eq!(t.permissions.len(), 1);
        let live = t.tool_calls()[0].clone();
        assert_eq!(live.title, format!("terminal: {command}"));
        check_dangerous_request(&t.permissions[0], &command, &live.tool_call_id);

        let updates = t.tool_updates();
        assert_eq!(updates.len(), 1);
        assert_eq!(updates[0].tool_call_id, live.tool_call_id);
        assert_eq!(updates[0].status, Some(ToolCallStatus::Completed));
        assert!(
            !env.work.join("junk").exists(),
            "the approved command did not run"
        );
        assert_eq!(t.text().trim_start(), "Cleaned up.");
        let after = &turn_requests_for(&env, "clean up please")[1];
        assert!(
            last_message_text(after).contains("approved by the user"),
            "{after}"
        );
    })
    .await;
}

/// Denying the permission blocks the command: the tool call fails with Hermes' "BLOCKED" text,
/// the model is told so, and the turn still ends normally. An answer of `cancelled` does the same.
#[tokio::test]
#[cfg_attr(
    lacks_hermes_venv,
    ignore = "needs a Hermes venv: IRIS_HERMES_VENV, or .venv in the checkout (README, Connecting Hermes)"
)]
#[cfg_attr(
    lacks_hermes_netns,
    ignore = "needs network namespaces: unshare (util-linux) and ip (iproute2)"
)]
async fn dangerous_command_is_blocked_when_permission_is_denied() {
    let env = hermes_env!(json!([]));
    let command = dangerous_setup(&env, "Understood, not deleting.");
    within(async {
        let mut h = start(&env).await;
        let sid = h.sid();
        let prompt = h
            .client
            .prompt(&sid, vec![ContentBlock::text("clean up please")]);
        let t = drive(&mut h.events, prompt, |_| Answer::Select("deny"), |_, _| {}).await;
        assert_eq!(t.response().stop_reason, StopReason::EndTurn);
        let live = t.tool_calls()[0].clone();
        check_dangerous_request(&t.permissions[0], &command, &live.tool_call_id);

        let updates = t.tool_updates();
        assert_eq!(updates.len(), 1);
        assert_eq!(updates[0].status, Some(ToolCallStatus::Failed));
        let shown = content_text(updates[0].content.as_deref().unwrap_or_default());
        assert!(
            shown.contains("BLOCKED: User denied this command"),
            "{shown}"
        );
        assert!(
            env.work.join("junk/file").exists(),
            "the denied command ran"
        );
        assert_eq!(t.text().trim_start(), "Understood, not deleting.");
        let after = &turn_requests_for(&env, "clean up please")[1];
        assert!(last_message_text(after).contains("BLOCKED"), "{after}");

        // Answering `cancelled` (what a dropped PermissionResponder sends) is a denial too, and
        // without a session/cancel it leaves the session healthy.
        let prompt = h
            .client
            .prompt(&sid, vec![ContentBlock::text("clean up again")]);
        let t = drive(&mut h.events, prompt, |_| Answer::Cancel, |_, _| {}).await;
        assert_eq!(t.response().stop_reason, StopReason::EndTurn);
        assert_eq!(t.permissions.len(), 1);
        assert_eq!(t.tool_updates()[0].status, Some(ToolCallStatus::Failed));
        assert!(
            env.work.join("junk/file").exists(),
            "the cancelled command ran"
        );
        assert_eq!(
            turn(&mut h, "still there?").await.text(),
            "OK: still there?"
        );
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Cancellation.

/// `session/cancel` while text streams ends the prompt with stopReason cancelled within a
/// moment, no more text of that reply arrives, and the session keeps working.
#[tokio::test]
#[cfg_attr(
    lacks_hermes_venv,
    ignore = "needs a Hermes venv: IRIS_HERMES_VENV, or .venv in the checkout (README, Connecting Hermes)"
)]
#[cfg_attr(
    lacks_hermes_netns,
    ignore = "needs network namespaces: unshare (util-linux) and ip (iproute2)"
)]
async fn cancel_mid_stream_ends_the_turn_as_cancelled() {
    let env = hermes_env!(json!([
        {"match": "count slowly", "reply": {"chunks": ticks(20), "delay": 0.25}}
    ]));
    within(async {
        let mut h = start(&env).await;
        let sid = h.sid();
        let client = h.client.clone();
        let mut cancelled_at = None;
        let prompt = h
            .client
            .prompt(&sid, vec![ContentBlock::text("count slowly")]);
        let t = drive(&mut h.events, prompt, no_permissions, |update, turn| {
            let chunks = turn
                .updates
                .iter()
                .filter(|u| matches!(u, SessionUpdate::AgentMessageChunk(_)))
                .count();
            if cancelled_at.is_none()
                && matches!(update, SessionUpdate::AgentMessageChunk(_))
                && chunks >= 1
            {
                client.cancel(&sid).expect("send session/cancel");
                cancelled_at = Some(Instant::now());
            }
        })
        .await;
        let cancelled_at = cancelled_at.expect("no text streamed before the cancel");
        assert_eq!(t.response().stop_reason, StopReason::Cancelled);
        assert!(
            cancelled_at.elapsed() < Duration::from_secs(3),
            "{:?}",
            cancelled_at.elapsed()
        );
        let text = t.text();
        assert!(text.starts_with("tick 0 tick 1 "), "{text}");
        assert!(
            !text.contains("tick 19"),
            "the whole reply streamed despite the cancel: {text}"
        );
        // Nothing of the abandoned reply trickles in afterwards. (Hermes stops reading the LLM
        // stream but may close the HTTP connection only later, so the fake LLM's "client
        // disconnected" event is not a reliable signal here.)
        let late = wait_update(&mut h.events, Duration::from_millis(1500), |u| {
            matches!(u, SessionUpdate::AgentMessageChunk(_))
        })
        .await;
        assert!(late.is_none(), "text after the cancelled result: {late:?}");

        let next = turn(&mut h, "hello again").await;
        assert_eq!(next.response().stop_reason, StopReason::EndTurn);
        assert_eq!(next.text(), "OK: hello again");
    })
    .await;
}

/// The Hermes 0.19.0 wedge and its recovery. `session/cancel` while a permission is pending does
/// not release the permission (the prompt keeps waiting); answering it `cancelled` then fails the
/// prompt with -32603, and every later prompt answers "Queued for the next turn" at once without
/// running. Killing the process group, respawning and `session/load`ing the same session id
/// brings the session back: history replays and a new prompt runs.
#[tokio::test]
#[cfg_attr(
    lacks_hermes_venv,
    ignore = "needs a Hermes venv: IRIS_HERMES_VENV, or .venv in the checkout (README, Connecting Hermes)"
)]
#[cfg_attr(
    lacks_hermes_netns,
    ignore = "needs network namespaces: unshare (util-linux) and ip (iproute2)"
)]
async fn cancel_during_permission_wedges_until_respawn_and_load() {
    let env = hermes_env!(json!([]));
    dangerous_setup(&env, "Cleaned up.");
    within(async {
        let mut h = start(&env).await;
        let sid = h.sid();
        let prompt = tokio::spawn({
            let client = h.client.clone();
            let sid = sid.clone();
            async move {
                client
                    .prompt(&sid, vec![ContentBlock::text("clean up please")])
                    .await
            }
        });
        let responder = loop {
            match tokio::time::timeout(SHORT * 2, h.events.recv()).await {
                Ok(Some(AgentEvent::Permission { responder, .. })) => break responder,
                Ok(Some(_)) => continue,
                other => panic!("no permission request: {other:?}\n{}", h.stderr()),
            }
        };
        h.client.cancel(&sid).unwrap();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(
            !prompt.is_finished(),
            "session/cancel released a pending permission"
        );
        responder.cancel();
        let failed = tokio::time::timeout(SHORT, prompt)
            .await
            .expect("prompt still running after the permission was answered")
            .unwrap();
        match failed {
            Err(AcpError::Rpc { code, .. }) => assert_eq!(code, -32603),
            other => panic!("expected the -32603 failure, got {other:?}"),
        }
        assert!(env.work.join("junk/file").exists());

        let started = Instant::now();
        let wedged = turn(&mut h, "hello while wedged").await;
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(wedged.response().stop_reason, StopReason::EndTurn);
        assert!(
            wedged.text().starts_with("Queued for the next turn."),
            "{}",
            wedged.text()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(turn_requests_for(&env, "hello while wedged").is_empty());

        // Recovery: kill the whole group (Hermes and the fake LLM), start again, reload.
        let process = h.client.process().expect("a process");
        process.kill();
        tokio::time::timeout(SHORT, process.wait_exit())
            .await
            .expect("Hermes did not die");
        drop(h);

        let (client, mut events, _) = spawn(&env).await;
        let load = client.load_session(&sid, &env.work);
        let replay = drive(&mut events, load_as_prompt(load), no_permissions, |_, _| {}).await;
        replay.response();
        let replayed_users = chunk_text(&replay.updates, |u| match u {
            SessionUpdate::UserMessageChunk(c) => Some(&c.content),
            _ => None,
        });
        assert!(
            replayed_users.contains("clean up please"),
            "{replayed_users}"
        );

        let prompt = client.prompt(&sid, vec![ContentBlock::text("hello after restart")]);
        let t = drive(&mut events, prompt, no_permissions, |_, _| {}).await;
        assert_eq!(t.response().stop_reason, StopReason::EndTurn);
        assert_eq!(t.text(), "OK: hello after restart");
        let request = &turn_requests_for(&env, "hello after restart")[0];
        assert!(request["body"]["messages"]
            .to_string()
            .contains("clean up please"));
    })
    .await;
}

/// Adapts `session/load` to [`drive`], which collects the replayed history like a turn's updates.
async fn load_as_prompt(
    load: impl Future<Output = Result<iris_acp::LoadSessionResponse, AcpError>>,
) -> Result<PromptResponse, AcpError> {
    load.await.map(|_| PromptResponse {
        stop_reason: StopReason::EndTurn,
        usage: None,
    })
}
