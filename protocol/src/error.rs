//! Tool errors as values (seed 002, DESIGN.md "Errors are values").
//!
//! A failed tool call is a successful JSON-RPC response whose result has
//! `isError: true` and `structuredContent = {"error": ToolError}`. The codes are a
//! public API: never rename one, only add.

use libmcp::FaultClass;
use serde::{Deserialize, Serialize};

/// Every error code a tool may return. Serialized SCREAMING_SNAKE.
///
/// Consumers must treat unknown codes as a generic failure (enum widening is a
/// minor schema change).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    // KLayout observer contract (seed 003).
    /// A file the call names does not exist.
    FileNotFound,
    /// The file's format is not one reticle reads, or it is malformed.
    UnsupportedFormat,
    /// The requested top cell is not in the layout.
    TopCellNotFound,
    /// No session has this id.
    SessionNotFound,
    /// The session existed but expired.
    SessionExpired,
    /// A box is empty, inverted or not finite.
    InvalidBox,
    /// A layer reference does not exist or is malformed.
    InvalidLayer,
    /// A target id is missing or of the wrong kind.
    InvalidTarget,
    /// The query would exceed a configured limit.
    QueryTooLarge,
    /// A tool-specific limit was exceeded.
    ToolLimitExceeded,
    /// Rendering failed.
    RenderFailed,
    /// The DRC run failed (including: KLayout missing).
    DrcRunFailed,
    /// An internal error (a bug).
    InternalError,
    // reticle's own (DESIGN.md).
    /// The arguments do not match the tool's input schema or are semantically invalid.
    InvalidInput,
    /// A referenced entity (schema, example, rule, violation) does not exist.
    NotFound,
    /// A payload exceeds a size limit.
    PayloadTooLarge,
    /// The engine path cannot produce the requested report level.
    ReportLevelUnsupported,
    /// The session cache no longer holds this violation; retry with `layout_artifact_id`.
    CacheEvicted,
    /// The violation cannot be re-resolved because its layout is not pinned.
    LayoutNotPinned,
    /// No job has this id (or it expired).
    JobNotFound,
    /// The job was cancelled.
    Cancelled,
    /// The worker failed while running the request.
    WorkerFault,
    /// The imaging backend failed (device lost, out of memory).
    BackendError,
    /// The operation is not supported in this configuration.
    Unsupported,
    /// A path resolves outside the allowed roots.
    PathNotAllowed,
    /// The job went over a host-enforced limit (worker memory, job wall time) and was
    /// stopped; the same call would again.
    ResourceLimit,
    /// `optimize` could not make its mask pass the deck's mask rules; `details` lists
    /// the rules and where (the mask is not returned as a success).
    MaskRulesUnmet,
}

impl ErrorCode {
    /// The wire spelling (`"FILE_NOT_FOUND"`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FileNotFound => "FILE_NOT_FOUND",
            Self::UnsupportedFormat => "UNSUPPORTED_FORMAT",
            Self::TopCellNotFound => "TOP_CELL_NOT_FOUND",
            Self::SessionNotFound => "SESSION_NOT_FOUND",
            Self::SessionExpired => "SESSION_EXPIRED",
            Self::InvalidBox => "INVALID_BOX",
            Self::InvalidLayer => "INVALID_LAYER",
            Self::InvalidTarget => "INVALID_TARGET",
            Self::QueryTooLarge => "QUERY_TOO_LARGE",
            Self::ToolLimitExceeded => "TOOL_LIMIT_EXCEEDED",
            Self::RenderFailed => "RENDER_FAILED",
            Self::DrcRunFailed => "DRC_RUN_FAILED",
            Self::InternalError => "INTERNAL_ERROR",
            Self::InvalidInput => "INVALID_INPUT",
            Self::NotFound => "NOT_FOUND",
            Self::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            Self::ReportLevelUnsupported => "REPORT_LEVEL_UNSUPPORTED",
            Self::CacheEvicted => "CACHE_EVICTED",
            Self::LayoutNotPinned => "LAYOUT_NOT_PINNED",
            Self::JobNotFound => "JOB_NOT_FOUND",
            Self::Cancelled => "CANCELLED",
            Self::WorkerFault => "WORKER_FAULT",
            Self::BackendError => "BACKEND_ERROR",
            Self::Unsupported => "UNSUPPORTED",
            Self::PathNotAllowed => "PATH_NOT_ALLOWED",
            Self::ResourceLimit => "RESOURCE_LIMIT",
            Self::MaskRulesUnmet => "MASK_RULES_UNMET",
        }
    }

    /// Every code, in declaration order (for documentation and tests).
    pub const ALL: [Self; 27] = [
        Self::FileNotFound,
        Self::UnsupportedFormat,
        Self::TopCellNotFound,
        Self::SessionNotFound,
        Self::SessionExpired,
        Self::InvalidBox,
        Self::InvalidLayer,
        Self::InvalidTarget,
        Self::QueryTooLarge,
        Self::ToolLimitExceeded,
        Self::RenderFailed,
        Self::DrcRunFailed,
        Self::InternalError,
        Self::InvalidInput,
        Self::NotFound,
        Self::PayloadTooLarge,
        Self::ReportLevelUnsupported,
        Self::CacheEvicted,
        Self::LayoutNotPinned,
        Self::JobNotFound,
        Self::Cancelled,
        Self::WorkerFault,
        Self::BackendError,
        Self::Unsupported,
        Self::PathNotAllowed,
        Self::ResourceLimit,
        Self::MaskRulesUnmet,
    ];

    /// Whether an agent may plausibly recover by retrying or changing its call.
    #[must_use]
    pub const fn default_recoverable(self) -> bool {
        !matches!(self, Self::InternalError | Self::Unsupported)
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `error` object of a failed tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ToolError {
    /// Stable code.
    pub code: ErrorCode,
    /// One concise sentence for the model.
    pub message: String,
    /// Structured context (paths, limits, allowed values); `{}` when there is none.
    #[serde(default = "empty_object")]
    pub details: serde_json::Value,
    /// Whether a retry or a changed call may succeed.
    pub recoverable: bool,
    /// When a plain retry makes sense, how long to wait first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// The libmcp fault class when an operational fault caused the error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault_class: Option<FaultClass>,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

impl ToolError {
    /// An error with the code's default recoverability and no details.
    #[must_use]
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            details: empty_object(),
            recoverable: code.default_recoverable(),
            retry_after_ms: None,
            fault_class: None,
        }
    }

    /// Adds structured details.
    #[must_use]
    pub fn with_details(mut self, details: serde_json::Value) -> Self {
        self.details = details;
        self
    }

    /// Overrides recoverability.
    #[must_use]
    pub fn recoverable(mut self, recoverable: bool) -> Self {
        self.recoverable = recoverable;
        self
    }

    /// Marks the error as caused by an operational fault of `class`, with a retry hint.
    #[must_use]
    pub fn with_fault(mut self, class: FaultClass, retry_after_ms: Option<u64>) -> Self {
        self.fault_class = Some(class);
        self.retry_after_ms = retry_after_ms;
        self
    }

    /// Adds the recovery hint for the model, one sentence on what to do next, as
    /// `details.hint` (call after [`Self::with_details`], which replaces `details`).
    /// It lives in `details` rather than in a field of its own so the error stays
    /// under clippy's large-`Err` threshold on every `Result` path that carries it.
    #[must_use]
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        if !self.details.is_object() {
            self.details = empty_object();
        }
        self.details["hint"] = serde_json::Value::String(hint.into());
        self
    }

    /// The recovery hint, if one was given.
    #[must_use]
    pub fn hint(&self) -> Option<&str> {
        self.details.get("hint").and_then(serde_json::Value::as_str)
    }

    /// The `structuredContent` of a failed call: `{"schema_version": …, "error": {...}}`.
    /// Errors carry the schema version like every other payload (seed 000; issue 28 item 7).
    #[must_use]
    pub fn to_structured(&self) -> serde_json::Value {
        serde_json::json!({ "schema_version": crate::SCHEMA_VERSION, "error": self })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_serialize_as_their_wire_names() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_value(code).unwrap();
            assert_eq!(json, serde_json::Value::String(code.as_str().to_owned()));
            let back: ErrorCode = serde_json::from_value(json).unwrap();
            assert_eq!(back, code);
        }
    }

    #[test]
    fn tool_error_shape() {
        let e = ToolError::new(ErrorCode::FileNotFound, "no such file")
            .with_details(serde_json::json!({"path": "/x"}));
        let v = e.to_structured();
        assert_eq!(v["error"]["code"], "FILE_NOT_FOUND");
        assert_eq!(v["error"]["recoverable"], true);
        assert_eq!(v["error"]["details"]["path"], "/x");
        assert!(v["error"].get("retry_after_ms").is_none());
    }
}
