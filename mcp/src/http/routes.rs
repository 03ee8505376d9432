//! The HTTP face of the MCP endpoint: POST (a JSON-RPC message), GET (a legacy
//! session's standalone stream, or a resumption with `Last-Event-ID`), DELETE (end a
//! legacy session), and the RFC 9728 metadata document. Every MCP request passes the
//! `Origin`/`Host` check, then the bearer check, then its own.

// A refusal is the handler's response, returned early as `Err(Response)`: boxing it would
// only add an allocation per refused request.
#![allow(clippy::result_large_err)]

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Map, Value, json};

use super::auth::{
    AuthFailure, MCP_PATH, METADATA_PATHS, OriginPolicy, Principal, Resource, Tokens,
};
use super::client::{Client, Reply};
use super::hub::Hub;
use reticle_transport::era::{self, META_PROTOCOL_VERSION};
use reticle_transport::jsonrpc::{self, INVALID_REQUEST, Incoming, PARSE_ERROR};

/// `Mcp-Session-Id`.
const SESSION_HEADER: HeaderName = HeaderName::from_static("mcp-session-id");
/// `MCP-Protocol-Version`.
const VERSION_HEADER: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// `Mcp-Method` (2026-07-28).
const METHOD_HEADER: HeaderName = HeaderName::from_static("mcp-method");
/// `Mcp-Name` (2026-07-28).
const NAME_HEADER: HeaderName = HeaderName::from_static("mcp-name");
/// `Last-Event-ID`.
const LAST_EVENT_HEADER: HeaderName = HeaderName::from_static("last-event-id");
/// The 2026-07-28 `HeaderMismatch` error.
const HEADER_MISMATCH: i64 = -32020;

/// What the handlers share.
pub struct Endpoint {
    /// The clients.
    pub hub: Hub,
    /// The accepted tokens.
    pub tokens: Tokens,
    /// The resource's URLs and metadata.
    pub resource: Resource,
    /// The Origin/Host policy.
    pub origins: OriginPolicy,
}

/// The router of the endpoint.
pub fn router(endpoint: Arc<Endpoint>) -> Router {
    let max_body = endpoint.hub.limits.max_body;
    let mut router = Router::new().route(MCP_PATH, get(get_stream).post(post).delete(delete));
    for path in METADATA_PATHS {
        router = router.route(path, get(metadata));
    }
    router
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(endpoint)
}

fn rpc_error(status: StatusCode, id: &Value, code: i64, message: &str) -> Response {
    json_response(
        status,
        Bytes::from(jsonrpc::error(id, code, message, None).to_string()),
    )
}

fn json_response(status: StatusCode, body: Bytes) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn sse_response(body: Body, session: Option<&str>) -> Response {
    let mut response = (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response();
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    if let Some(id) = session.and_then(|s| HeaderValue::from_str(s).ok()) {
        response.headers_mut().insert(SESSION_HEADER, id);
    }
    response
}

/// The Origin/Host and bearer checks every MCP request passes first.
fn admit(endpoint: &Endpoint, headers: &HeaderMap) -> Result<Arc<Principal>, Response> {
    if let Err(why) = endpoint.origins.check(headers) {
        tracing::warn!(reason = %why, "request refused: origin");
        return Err(rpc_error(
            StatusCode::FORBIDDEN,
            &Value::Null,
            INVALID_REQUEST,
            &format!("Forbidden: {why}"),
        ));
    }
    endpoint.tokens.check(headers).map_err(|failure| {
        let mut response = rpc_error(
            StatusCode::UNAUTHORIZED,
            &Value::Null,
            INVALID_REQUEST,
            match failure {
                AuthFailure::Missing => "Unauthorized: this server needs a bearer token",
                AuthFailure::Invalid => "Unauthorized: the bearer token is not valid",
            },
        );
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            endpoint.resource.challenge(failure),
        );
        response
    })
}

fn header_str<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn accepts(headers: &HeaderMap, kind: &str) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|v| v.split(';').next().unwrap_or("").trim())
        .any(|v| v == kind || v == "*/*")
}

/// The legacy session a request names: 400 without the header, 404 for a session
/// that does not exist (or ended, or is another token's).
fn legacy_session(
    endpoint: &Endpoint,
    headers: &HeaderMap,
    principal: &Principal,
    id: &Value,
) -> Result<Arc<Client>, Response> {
    let Some(session) = header_str(headers, &SESSION_HEADER) else {
        return Err(rpc_error(
            StatusCode::BAD_REQUEST,
            id,
            INVALID_REQUEST,
            "Bad Request: Mcp-Session-Id header is required (send initialize first, or use protocol version 2026-07-28)",
        ));
    };
    endpoint.hub.session(session, principal).ok_or_else(|| {
        rpc_error(
            StatusCode::NOT_FOUND,
            id,
            INVALID_REQUEST,
            "Session not found",
        )
    })
}

fn too_many(max: usize) -> Response {
    rpc_error(
        StatusCode::SERVICE_UNAVAILABLE,
        &Value::Null,
        INVALID_REQUEST,
        &format!(
            "Service Unavailable: the server is at its limit of {max} client sessions \
             (RETICLE_HTTP_MAX_SESSIONS) or is stopping; retry later"
        ),
    )
}

/// The 2026-07-28 header checks (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`
/// must repeat the body).
fn modern_headers(
    headers: &HeaderMap,
    version: &str,
    method: &str,
    params: &Map<String, Value>,
) -> Result<(), String> {
    if header_str(headers, &VERSION_HEADER) != Some(version) {
        return Err(
            "MCP-Protocol-Version header does not match the request's protocol version".into(),
        );
    }
    if header_str(headers, &METHOD_HEADER) != Some(method) {
        return Err("Mcp-Method header does not match the request's method".into());
    }
    let name_key = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    };
    if let Some(body) = name_key.and_then(|k| params.get(k)).and_then(Value::as_str) {
        let header = header_str(headers, &NAME_HEADER).map(decode_header_value);
        if header.as_deref() != Some(body) {
            return Err(format!(
                "Mcp-Name header does not match the request's {}",
                name_key.unwrap_or("name")
            ));
        }
    }
    Ok(())
}

/// A header value, with the `=?base64?…?=` form decoded.
fn decode_header_value(raw: &str) -> String {
    use base64::Engine as _;
    raw.strip_prefix("=?base64?")
        .and_then(|rest| rest.strip_suffix("?="))
        .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .unwrap_or_else(|| raw.to_owned())
}

/// The HTTP status of a JSON answer: 2026-07-28 puts some errors in the status too.
fn status_of(body: &[u8], modern: bool) -> StatusCode {
    if !modern {
        return StatusCode::OK;
    }
    let code = serde_json::from_slice::<Value>(body).ok().and_then(|v| {
        v.get("error")
            .and_then(|e| e.get("code"))
            .and_then(Value::as_i64)
    });
    match code {
        Some(jsonrpc::METHOD_NOT_FOUND) => StatusCode::NOT_FOUND,
        Some(jsonrpc::UNSUPPORTED_PROTOCOL_VERSION | HEADER_MISMATCH) => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

async fn post(State(endpoint): State<Arc<Endpoint>>, headers: HeaderMap, body: Bytes) -> Response {
    let principal = match admit(&endpoint, &headers) {
        Ok(p) => p,
        Err(response) => return response,
    };
    let json_body = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case("application/json")
        });
    if !json_body {
        return rpc_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            &Value::Null,
            INVALID_REQUEST,
            "Unsupported Media Type: the body must be application/json",
        );
    }
    // 2025-03-26 introduced this transport; its clients are served as the legacy era
    // (their `initialize` negotiates a version we speak).
    if let Some(version) = header_str(&headers, &VERSION_HEADER)
        && version != "2025-03-26"
        && !era::supported_versions().contains(&version)
    {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            &Value::Null,
            INVALID_REQUEST,
            &format!("Bad Request: unsupported MCP-Protocol-Version {version}"),
        );
    }
    let raw = body.to_vec();
    match jsonrpc::classify(&raw) {
        Incoming::Invalid { id, code, message } => {
            tracing::warn!(code, parse_error = code == PARSE_ERROR, %message, "invalid message");
            rpc_error(StatusCode::BAD_REQUEST, &id, code, &message)
        }
        Incoming::Request { id, method, params } => {
            request(&endpoint, &headers, &principal, id, &method, &params, raw).await
        }
        Incoming::Notification { method, params } => {
            let modern = params
                .get("_meta")
                .and_then(|m| m.get(META_PROTOCOL_VERSION))
                .is_some();
            let client = if modern || header_str(&headers, &SESSION_HEADER).is_none() {
                // A stateless notification concerns the token's client, if it has one;
                // it never creates one.
                match endpoint.hub.existing_stateless(&principal) {
                    Some(c) => c,
                    None => return StatusCode::ACCEPTED.into_response(),
                }
            } else {
                match legacy_session(&endpoint, &headers, &principal, &Value::Null) {
                    Ok(c) => c,
                    Err(response) => return response,
                }
            };
            tracing::debug!(method, "notification");
            client.deliver(raw).await;
            StatusCode::ACCEPTED.into_response()
        }
        Incoming::Response { id, .. } => {
            let client = match legacy_session(&endpoint, &headers, &principal, &id) {
                Ok(c) => c,
                Err(response) => return response,
            };
            client.deliver(raw).await;
            StatusCode::ACCEPTED.into_response()
        }
    }
}

async fn request(
    endpoint: &Endpoint,
    headers: &HeaderMap,
    principal: &Arc<Principal>,
    id: Value,
    method: &str,
    params: &Map<String, Value>,
    raw: Vec<u8>,
) -> Response {
    let meta = match era::request_meta(params) {
        Ok(meta) => meta,
        Err(e) => {
            return json_response(
                StatusCode::BAD_REQUEST,
                Bytes::from(jsonrpc::error(&id, e.code, &e.message, e.data).to_string()),
            );
        }
    };
    let modern = meta.is_modern();
    let (client, new_session) = if method == "initialize" {
        match endpoint.hub.new_session(principal) {
            Ok(c) => (c, true),
            Err(e) => return too_many(e.max),
        }
    } else if modern {
        let version = params
            .get("_meta")
            .and_then(|m| m.get(META_PROTOCOL_VERSION))
            .and_then(Value::as_str)
            .unwrap_or_default();
        if let Err(why) = modern_headers(headers, version, method, params) {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                &id,
                HEADER_MISMATCH,
                &format!("Header mismatch: {why}"),
            );
        }
        match endpoint.hub.stateless(principal) {
            Ok(c) => (c, false),
            Err(e) => return too_many(e.max),
        }
    } else {
        match legacy_session(endpoint, headers, principal, &id) {
            Ok(c) => (c, false),
            Err(response) => return response,
        }
    };
    let session = match &client.key {
        super::client::ClientKey::Session(s) => Some(s.clone()),
        super::client::ClientKey::Stateless(_) => None,
    };
    // A tool call (and a task's result) may stream progress and log messages: SSE. Every
    // other method answers at once: one JSON body.
    let stream = matches!(method, "tools/call" | "tasks/result")
        && accepts(headers, "text/event-stream")
        || !accepts(headers, "application/json");
    let Some(reply) = client.request(&id, raw, stream).await else {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            &id,
            INVALID_REQUEST,
            "Invalid Request: a request with this id is already in flight",
        );
    };
    match reply {
        Reply::Stream(body) => sse_response(body, session.as_deref()),
        Reply::Json(wait) => {
            let Some(body) = wait.wait().await else {
                return rpc_error(
                    StatusCode::NOT_FOUND,
                    &id,
                    INVALID_REQUEST,
                    "Session ended before the response",
                );
            };
            if new_session
                && serde_json::from_slice::<Value>(&body).is_ok_and(|v| v.get("error").is_some())
            {
                // A failed initialize leaves no session behind.
                if let Some(s) = &session {
                    endpoint.hub.end_session(s, principal);
                }
                return json_response(StatusCode::BAD_REQUEST, body);
            }
            let mut response = json_response(status_of(&body, modern), body);
            if let Some(id) = session
                .as_deref()
                .and_then(|s| HeaderValue::from_str(s).ok())
            {
                response.headers_mut().insert(SESSION_HEADER, id);
            }
            response
        }
    }
}

async fn get_stream(State(endpoint): State<Arc<Endpoint>>, headers: HeaderMap) -> Response {
    let principal = match admit(&endpoint, &headers) {
        Ok(p) => p,
        Err(response) => return response,
    };
    if header_str(&headers, &SESSION_HEADER).is_none() {
        // 2026-07-28 has no GET stream.
        return (StatusCode::METHOD_NOT_ALLOWED, [(header::ALLOW, "POST")]).into_response();
    }
    if !accepts(&headers, "text/event-stream") {
        return rpc_error(
            StatusCode::NOT_ACCEPTABLE,
            &Value::Null,
            INVALID_REQUEST,
            "Not Acceptable: GET needs Accept: text/event-stream",
        );
    }
    let client = match legacy_session(&endpoint, &headers, &principal, &Value::Null) {
        Ok(c) => c,
        Err(response) => return response,
    };
    let last_event = header_str(&headers, &LAST_EVENT_HEADER);
    match client.resume(last_event) {
        Some(body) => {
            let session = header_str(&headers, &SESSION_HEADER);
            sse_response(body, session)
        }
        None => rpc_error(
            StatusCode::BAD_REQUEST,
            &Value::Null,
            INVALID_REQUEST,
            "Bad Request: Last-Event-ID names no stream of this session",
        ),
    }
}

async fn delete(State(endpoint): State<Arc<Endpoint>>, headers: HeaderMap) -> Response {
    let principal = match admit(&endpoint, &headers) {
        Ok(p) => p,
        Err(response) => return response,
    };
    let Some(session) = header_str(&headers, &SESSION_HEADER) else {
        return (StatusCode::METHOD_NOT_ALLOWED, [(header::ALLOW, "POST")]).into_response();
    };
    if endpoint.hub.end_session(session, &principal) {
        StatusCode::OK.into_response()
    } else {
        rpc_error(
            StatusCode::NOT_FOUND,
            &Value::Null,
            INVALID_REQUEST,
            "Session not found",
        )
    }
}

async fn metadata(State(endpoint): State<Arc<Endpoint>>) -> Response {
    json_response(
        StatusCode::OK,
        Bytes::from(json!(endpoint.resource.metadata()).to_string()),
    )
}
