//! `POST /v1/actions`: a notification's button answers a picker without a connection. The body
//! is `{"token", "value"}`, the token one a push carried (`crate::actions`); the answer is the
//! token's device's, as if it had sent `picker.select`.
//!
//! Answers (JSON, `{"ok":true,"picker_id"}` or `{"error":{"code","message"}}` with the protocol's
//! error codes):
//! - 200: answered; every device's card closes with the choice (`picker.closed`).
//! - 400 `bad_request`: not JSON of that shape, or a value the token does not offer (the token
//!   stays valid); 415 when the body is not `application/json` (so a page of another site cannot
//!   send it without the browser asking first, which is never allowed).
//! - 403 `auth`: a page of another origin, or the token's device was revoked.
//! - 404 `not_found`: no such token (never given, already used, expired), or the picker was
//!   answered, expired or cancelled meanwhile. Counted as a failed sign-in of the address.
//! - 429 `rate_limited` instead of 404: the address failed too often in the last minute (the
//!   same throttle as a failed `hello`). As with a device token in `hello`, a valid token still
//!   answers: it is 256 random bits, and someone guessing behind the same address (a shared
//!   NAT, a reverse proxy) must not disable the owner's buttons.
//! - 413 for a body over [`MAX_BODY`] bytes.

use std::net::IpAddr;
use std::time::Instant;

use axum::body::Bytes;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use iris_protocol::ErrorCode;
use serde::Deserialize;
use serde_json::json;

use crate::actions::Refusal;
use crate::handlers::Context;
use crate::wire::WireError;

/// Largest body accepted: a token and a value (an option id is at most 256 bytes).
pub const MAX_BODY: usize = 2048;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ActionRequest {
    token: String,
    value: String,
}

/// Answers one action request from `client` (the address the throttle counts).
pub async fn answer(ctx: &Context, client: IpAddr, headers: &HeaderMap, body: Bytes) -> Response {
    if !crate::guard::request_origin_allowed(headers, &ctx.shared.config) {
        return refuse(StatusCode::FORBIDDEN, ErrorCode::Auth, "origin not allowed");
    }
    let header = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    let json_body = header(header::CONTENT_TYPE)
        .and_then(|t| t.split(';').next())
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"));
    if !json_body {
        return refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorCode::BadRequest,
            "the body must be application/json",
        );
    }
    let Ok(req) = serde_json::from_slice::<ActionRequest>(&body) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            ErrorCode::BadRequest,
            "expected {\"token\": string, \"value\": string}",
        );
    };
    let grant = match ctx
        .shared
        .actions
        .redeem(&req.token, &req.value, Instant::now())
    {
        Ok(grant) => grant,
        Err(Refusal::Choice) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                ErrorCode::BadRequest,
                "that is not one of the choices of this question",
            )
        }
        Err(Refusal::Unknown) if ctx.guard.auth_blocked(client) => {
            return refuse(
                StatusCode::TOO_MANY_REQUESTS,
                ErrorCode::RateLimited,
                "too many failed attempts from this address; wait a minute",
            );
        }
        Err(Refusal::Unknown) => {
            ctx.guard.record_auth_failure(client);
            tracing::warn!(%client, "unknown or spent action token refused");
            return refuse(
                StatusCode::NOT_FOUND,
                ErrorCode::NotFound,
                "this answer is no longer possible: already answered, expired or unknown",
            );
        }
    };
    match ctx.shared.store.get_device(&grant.device_id).await {
        Ok(Some(_)) => {}
        Ok(None) => {
            return refuse(
                StatusCode::FORBIDDEN,
                ErrorCode::Auth,
                "this device was revoked",
            )
        }
        Err(e) => return wire_refusal(e.into()),
    }
    let picker_id = grant.picker_id.clone();
    match ctx
        .agents
        .answer_picker(grant.picker_id, req.value, Some(grant.device_id.clone()))
        .await
    {
        Ok(_) => {
            tracing::info!(device_id = %grant.device_id, %picker_id, "picker answered from a notification");
            Json::ok(json!({"ok": true, "picker_id": picker_id}))
        }
        Err(e) => wire_refusal(e.into()),
    }
}

/// A refusal the agent layer or the store gave, with its status.
fn wire_refusal(e: WireError) -> Response {
    let status = match e.code {
        ErrorCode::NotFound => StatusCode::NOT_FOUND,
        ErrorCode::BadRequest => StatusCode::BAD_REQUEST,
        ErrorCode::RateLimited => StatusCode::TOO_MANY_REQUESTS,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    refuse(status, e.code, &e.message)
}

fn refuse(status: StatusCode, code: ErrorCode, message: &str) -> Response {
    let body = json!({"error": {"code": code.as_str(), "message": message}});
    (status, Json::body(body)).into_response()
}

/// A JSON body with its content type.
struct Json;

impl Json {
    fn body(value: serde_json::Value) -> ([(header::HeaderName, &'static str); 1], String) {
        (
            [(header::CONTENT_TYPE, "application/json")],
            value.to_string(),
        )
    }

    fn ok(value: serde_json::Value) -> Response {
        (StatusCode::OK, Json::body(value)).into_response()
    }
}
