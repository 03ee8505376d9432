//! Protocol eras and per-request metadata.
//!
//! reticle is dual-era (MCP 2026-07-28 "Versioning"): a request whose `_meta`
//! names a protocol version is served statelessly under the modern rules; any
//! other request is served under the legacy version negotiated by
//! `initialize` (or the newest legacy version if the client never sent one).

use serde_json::{Map, Value, json};

use crate::jsonrpc::{INVALID_PARAMS, UNSUPPORTED_PROTOCOL_VERSION};

/// The 2026-07-28 tasks extension's identifier (in a request's client capabilities).
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Per-request-metadata revisions we serve.
pub const MODERN_VERSIONS: &[&str] = &["2026-07-28"];
/// Handshake revisions we negotiate in `initialize`, newest first.
pub const LEGACY_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18"];

/// `_meta` key of the request's protocol version.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key of the request's client capabilities.
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of the request's log level opt-in.
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// `_meta` key of the server's identity in results.
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// Every version we accept, modern first (the `supported` list of -32022 and
/// `supportedVersions` of `server/discover`).
pub fn supported_versions() -> Vec<&'static str> {
    MODERN_VERSIONS
        .iter()
        .chain(LEGACY_VERSIONS)
        .copied()
        .collect()
}

/// The version `initialize` answers for a requested version.
pub fn negotiate_legacy(requested: &str) -> &'static str {
    LEGACY_VERSIONS
        .iter()
        .find(|v| **v == requested)
        .copied()
        .unwrap_or(LEGACY_VERSIONS[0])
}

/// Log levels of `notifications/message`, in increasing severity (RFC 5424).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    /// Debug.
    Debug,
    /// Info.
    Info,
    /// Notice.
    Notice,
    /// Warning.
    Warning,
    /// Error.
    Error,
    /// Critical.
    Critical,
    /// Alert.
    Alert,
    /// Emergency.
    Emergency,
}

impl LogLevel {
    const NAMES: [(&'static str, Self); 8] = [
        ("debug", Self::Debug),
        ("info", Self::Info),
        ("notice", Self::Notice),
        ("warning", Self::Warning),
        ("error", Self::Error),
        ("critical", Self::Critical),
        ("alert", Self::Alert),
        ("emergency", Self::Emergency),
    ];

    /// Parses a level name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, l)| *l)
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, l)| *l == self)
            .map_or("info", |(n, _)| n)
    }
}

/// Which rules a request is served under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Era {
    /// Handshake era (`initialize`).
    Legacy,
    /// Stateless era, at this version.
    Modern(String),
}

/// What the request's `_meta` says.
#[derive(Debug, Clone)]
pub struct RequestMeta {
    /// The request's era.
    pub era: Era,
    /// Modern per-request log opt-in.
    pub log_level: Option<LogLevel>,
    /// `progressToken`, if the client wants progress notifications.
    pub progress_token: Option<Value>,
    /// Modern: the request's capabilities carry the tasks extension, so the server
    /// may answer a job tool with a task handle.
    pub tasks_extension: bool,
    /// The request's key (`id.to_string()`): notifications sent for it carry it, so
    /// Streamable HTTP puts them on that request's stream.
    pub request_id: Option<String>,
}

impl Default for RequestMeta {
    /// A legacy-era request with nothing in its `_meta`.
    fn default() -> Self {
        Self {
            era: Era::Legacy,
            log_level: None,
            progress_token: None,
            tasks_extension: false,
            request_id: None,
        }
    }
}

impl RequestMeta {
    /// Whether results must carry `resultType` (and cache hints where they apply).
    pub fn is_modern(&self) -> bool {
        matches!(self.era, Era::Modern(_))
    }
}

/// A protocol-level error: becomes a JSON-RPC error response.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// JSON-RPC error code.
    pub code: i64,
    /// One sentence.
    pub message: String,
    /// Optional structured data.
    pub data: Option<Value>,
}

impl RpcError {
    /// -32602 with a message.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self {
            code: INVALID_PARAMS,
            message: message.into(),
            data: None,
        }
    }
}

/// Reads `params._meta`.
pub fn request_meta(params: &Map<String, Value>) -> Result<RequestMeta, RpcError> {
    let meta = match params.get("_meta") {
        None => return Ok(legacy(None)),
        Some(Value::Object(meta)) => meta,
        Some(_) => return Err(RpcError::invalid_params("_meta must be an object")),
    };
    let progress_token = match meta.get("progressToken") {
        None => None,
        Some(token @ (Value::String(_) | Value::Number(_))) => Some(token.clone()),
        Some(_) => {
            return Err(RpcError::invalid_params(
                "_meta.progressToken must be a string or a number",
            ));
        }
    };
    let Some(version) = meta.get(META_PROTOCOL_VERSION) else {
        return Ok(legacy(progress_token));
    };
    let Some(version) = version.as_str() else {
        return Err(RpcError::invalid_params(format!(
            "_meta.{META_PROTOCOL_VERSION} must be a string"
        )));
    };
    if !MODERN_VERSIONS.contains(&version) {
        return Err(RpcError {
            code: UNSUPPORTED_PROTOCOL_VERSION,
            message: "Unsupported protocol version".into(),
            data: Some(json!({"supported": supported_versions(), "requested": version})),
        });
    }
    let caps = meta.get(META_CLIENT_CAPABILITIES);
    if caps.is_some_and(|caps| !caps.is_object()) {
        return Err(RpcError::invalid_params(format!(
            "_meta.{META_CLIENT_CAPABILITIES} must be an object"
        )));
    }
    let tasks_extension = caps
        .and_then(|c| c.get("extensions"))
        .and_then(|e| e.get(TASKS_EXTENSION))
        .is_some_and(Value::is_object);
    let log_level = match meta.get(META_LOG_LEVEL) {
        None => None,
        Some(level) => Some(level.as_str().and_then(LogLevel::parse).ok_or_else(|| {
            RpcError::invalid_params(format!("_meta.{META_LOG_LEVEL} is not a log level"))
        })?),
    };
    Ok(RequestMeta {
        era: Era::Modern(version.to_owned()),
        log_level,
        progress_token,
        tasks_extension,
        request_id: None,
    })
}

fn legacy(progress_token: Option<Value>) -> RequestMeta {
    RequestMeta {
        era: Era::Legacy,
        log_level: None,
        progress_token,
        tasks_extension: false,
        request_id: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(v: Value) -> Result<RequestMeta, RpcError> {
        request_meta(v.as_object().unwrap())
    }

    #[test]
    fn eras() {
        assert_eq!(meta(json!({})).unwrap().era, Era::Legacy);
        let m = meta(json!({"_meta": {META_PROTOCOL_VERSION: "2026-07-28",
            META_CLIENT_CAPABILITIES: {}, META_LOG_LEVEL: "warning", "progressToken": 5}}))
        .unwrap();
        assert_eq!(m.era, Era::Modern("2026-07-28".into()));
        assert_eq!(m.log_level, Some(LogLevel::Warning));
        assert_eq!(m.progress_token, Some(json!(5)));
        assert!(!m.tasks_extension);
        let m = meta(json!({"_meta": {META_PROTOCOL_VERSION: "2026-07-28",
            META_CLIENT_CAPABILITIES: {"extensions": {"io.modelcontextprotocol/tasks": {}}}}}))
        .unwrap();
        assert!(m.tasks_extension);
        let e = meta(json!({"_meta": {META_PROTOCOL_VERSION: "1900-01-01"}})).unwrap_err();
        assert_eq!(e.code, UNSUPPORTED_PROTOCOL_VERSION);
        assert_eq!(e.data.unwrap()["supported"][0], "2026-07-28");
        assert_eq!(meta(json!({"_meta": 3})).unwrap_err().code, INVALID_PARAMS);
    }

    #[test]
    fn negotiation_and_levels() {
        assert_eq!(negotiate_legacy("2025-06-18"), "2025-06-18");
        assert_eq!(negotiate_legacy("2024-11-05"), "2025-11-25");
        assert!(LogLevel::Error > LogLevel::Warning);
        for (name, level) in LogLevel::NAMES {
            assert_eq!(LogLevel::parse(name), Some(level));
            assert_eq!(level.as_str(), name);
        }
    }
}
