//! `populate_backend` (seed 001 §4): POST a validated document to the
//! configured backend. 5 s timeout, no retries, never replayed (the POST may
//! have taken effect even when we saw no answer).

use std::io::Read;
use std::time::Duration;

use libmcp::{FaultClass, ReplayContract};
use reticle_protocol::{ErrorCode, SCHEMA_VERSION, ToolError};
use serde_json::{Map, Value, json};

use super::{Detail, PayloadResult, Tool, ToolContext, ToolDef};
use reticle_assets as assets;

/// Seed 001: HTTP client timeout 5 s.
const TIMEOUT: Duration = Duration::from_secs(5);
/// Largest response body read back.
const MAX_RESPONSE_BYTES: u64 = 64 * 1024;

pub(super) fn tool() -> Tool {
    Tool::new(ToolDef {
        name: "populate_backend",
        title: "Publish to the backend",
        description: "Validates a document (report, rule deck) against a published schema and \
                      POSTs it to the backend at RETICLE_BACKEND_URL (5 s timeout, no retries). \
                      Not replayed after a crash: on an uncertain outcome, check the backend \
                      before posting again.",
        replay: ReplayContract::NeverReplay,
        read_only: false,
        handler: run,
        porcelain: Some(porcelain),
    })
}

/// Where to POST: `RETICLE_BACKEND_URL` + `RETICLE_BACKEND_ASSETS_PATH`
/// ([`reticle_config::ToolSettings`]).
fn endpoint(tools: &reticle_config::ToolSettings) -> Option<String> {
    let base = tools.backend_url.as_deref()?;
    let path = &tools.backend_assets_path;
    Some(format!(
        "{}/{}",
        base.trim_end_matches('/'),
        path.trim_start_matches('/')
    ))
}

async fn run(ctx: ToolContext, args: Map<String, Value>) -> PayloadResult {
    let Some(url) = endpoint(&ctx.state.config().tools) else {
        return Err(ToolError::new(
            ErrorCode::Unsupported,
            "no backend configured: set RETICLE_BACKEND_URL",
        )
        .with_details(json!({"reason": "unsupported"}))
        .recoverable(false));
    };
    let asset = &args["asset"];
    if args
        .get("validate_first")
        .and_then(Value::as_bool)
        .unwrap_or(true)
    {
        let Some(name) = args.get("schema").and_then(Value::as_str) else {
            return Err(ToolError::new(ErrorCode::InvalidInput, "validate_first needs a schema name")
                .with_details(json!({"errors": [{"path": "/schema", "msg": "required when validate_first is true"}]})));
        };
        let entry = ctx.state.schemas.get(name).ok_or_else(|| {
            ToolError::new(ErrorCode::NotFound, format!("no schema named {name}"))
                .with_details(json!({"reason": "not_found"}))
        })?;
        let errors = assets::validate(&entry.schema, asset).map_err(|e| {
            ToolError::new(
                ErrorCode::InternalError,
                format!("schema {name} is invalid: {e}"),
            )
        })?;
        if !errors.is_empty() {
            return Err(ToolError::new(
                ErrorCode::InvalidInput,
                format!("the asset does not match {name}; nothing was posted"),
            )
            .with_details(
                json!({"reason": "validation_failed", "errors": assets::errors_json(&errors)}),
            ));
        }
    }
    let body = serde_json::to_vec(asset)
        .map_err(|e| ToolError::new(ErrorCode::InternalError, e.to_string()))?;
    let target = url.clone();
    let posted = tokio::task::spawn_blocking(move || post(&target, &body))
        .await
        .map_err(|e| {
            ToolError::new(
                ErrorCode::InternalError,
                format!("backend call panicked: {e}"),
            )
        })??;
    Ok(
        json!({"schema_version": SCHEMA_VERSION, "ok": true, "asset_id": posted.asset_id, "backend_url": url, "status": posted.status}),
    )
}

struct Posted {
    status: u16,
    asset_id: String,
}

fn backend_error(status: Option<u16>, detail: String) -> ToolError {
    let mut details = json!({"reason": "backend_error", "detail": detail});
    if let Some(status) = status {
        details["status"] = json!(status);
    }
    // The outcome of a failed POST may be unknown (timeout): say so, never retry for the caller.
    ToolError::new(ErrorCode::BackendError, format!("backend error: {detail}"))
        .with_details(details)
        .recoverable(true)
}

/// The POST never reached the backend (refused, unreachable): nothing was stored,
/// so a later retry is safe.
fn unreachable(detail: String) -> ToolError {
    backend_error(Some(503), detail)
        .with_fault(FaultClass::Transport, Some(2000))
        .with_hint("the backend is unreachable; retry later or check RETICLE_BACKEND_URL")
}

/// The POST may or may not have stored the asset (timeout, unreadable reply): the
/// tool is NeverReplay, so the model must check before posting again.
fn outcome_unknown(status: Option<u16>, detail: String) -> ToolError {
    backend_error(status, detail)
        .with_fault(FaultClass::AmbiguousOutcome, None)
        .with_hint("the asset may have been stored; check the backend before posting again")
}

/// The backend answered with a failure status.
fn rejected(status: u16, detail: String) -> ToolError {
    let error = backend_error(Some(status), detail);
    if status >= 500 {
        // A server-side failure: the asset was not accepted; a later retry may work.
        error
            .with_fault(FaultClass::Downstream, Some(2000))
            .with_hint("the backend failed; retry after the delay")
    } else {
        // The backend refused this request (4xx): resending the same body will not help.
        error
            .with_fault(FaultClass::Downstream, None)
            .recoverable(false)
            .with_hint("the backend refused this asset; read details.detail and fix it first")
    }
}

fn post(url: &str, body: &[u8]) -> Result<Posted, ToolError> {
    let config = ureq::Agent::config_builder()
        .timeout_global(Some(TIMEOUT))
        .http_status_as_error(false)
        .max_redirects(0)
        .build();
    let agent = ureq::Agent::new_with_config(config);
    let response = agent
        .post(url)
        .header("content-type", "application/json")
        .send(body)
        .map_err(|e| match e {
            ureq::Error::Timeout(_) => outcome_unknown(
                Some(504),
                "timeout after 5 s (the asset may or may not have been stored)".into(),
            ),
            ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
                unreachable("network_unreachable: connection refused".into())
            }
            other => unreachable(format!("network_unreachable: {other}")),
        })?;
    let status = response.status().as_u16();
    let mut text = String::new();
    let _ = response
        .into_body()
        .into_reader()
        .take(MAX_RESPONSE_BYTES)
        .read_to_string(&mut text);
    if !(200..300).contains(&status) {
        return Err(rejected(status, super::clip(text.trim(), 200)));
    }
    let reply: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let asset_id = ["asset_id", "id"]
        .iter()
        .find_map(|k| {
            reply.get(k).and_then(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .or_else(|| v.as_u64().map(|n| n.to_string()))
            })
        })
        .ok_or_else(|| {
            outcome_unknown(
                Some(status),
                "the backend's reply has no asset_id or id".into(),
            )
        })?;
    Ok(Posted { status, asset_id })
}

fn porcelain(payload: &Value, _detail: Detail) -> String {
    format!(
        "posted: asset_id={} status={} url={}",
        payload["asset_id"].as_str().unwrap_or("?"),
        payload["status"],
        payload["backend_url"].as_str().unwrap_or("?")
    )
}
