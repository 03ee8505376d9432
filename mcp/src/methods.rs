//! The protocol methods a server answers itself (`initialize`, `server/discover`,
//! `tools/list`, `logging/setLevel`). `tools/call` is in `requests`, with the dispatch
//! that reaches it.

use reticle_protocol::sync::lock;
use serde_json::{Map, Value, json};

use super::server::Server;
use super::tasks;
use reticle_transport::era::{
    self, LogLevel, META_SERVER_INFO, RequestMeta, RpcError, TASKS_EXTENSION, negotiate_legacy,
};

/// How long the lists we serve stay fresh for a caching client (MCP caching).
const LIST_TTL_MS: u64 = 300_000;

const INSTRUCTIONS: &str = "reticle verifies photomasks: it simulates how a layout prints \
(Hopkins/SOCS lithography) and checks the printed shapes against rules. Start with `health`. \
Errors are values: read structuredContent.error.code and .recoverable before retrying.";

impl Server {
    pub(super) fn initialize(&self, params: &Map<String, Value>) -> Result<Value, RpcError> {
        let requested = params
            .get("protocolVersion")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("initialize needs a string protocolVersion"))?;
        let version = negotiate_legacy(requested);
        {
            let mut session = lock(&self.session);
            if session.version.is_some() {
                tracing::warn!("initialize received twice; renegotiating");
            }
            session.version = Some(version);
            session.client_roots = params
                .get("capabilities")
                .and_then(|c| c.get("roots"))
                .is_some_and(Value::is_object);
        }
        tracing::info!(requested, negotiated = version, client = ?params.get("clientInfo"), "initialize");
        let mut capabilities = Self::capabilities();
        if version == "2025-11-25" {
            capabilities["tasks"] = tasks::legacy_capability();
        }
        Ok(json!({
            "protocolVersion": version,
            "capabilities": capabilities,
            "serverInfo": Self::server_info(),
            "instructions": INSTRUCTIONS,
        }))
    }

    pub(super) fn discover(&self) -> Value {
        let mut capabilities = Self::capabilities();
        capabilities["extensions"] = json!({ TASKS_EXTENSION: {} });
        json!({
            "supportedVersions": era::supported_versions(),
            "capabilities": capabilities,
            "_meta": {META_SERVER_INFO: Self::server_info()},
            "instructions": INSTRUCTIONS,
            "ttlMs": LIST_TTL_MS,
            "cacheScope": "public",
        })
    }

    pub(super) fn tools_list(
        &self,
        params: &Map<String, Value>,
        meta: &RequestMeta,
    ) -> Result<Value, RpcError> {
        if params.contains_key("cursor") {
            return Err(RpcError::invalid_params(
                "invalid cursor: tools/list has a single page",
            ));
        }
        let with_task_support = !meta.is_modern() && self.legacy_tasks();
        let mut result = json!({"tools": self.tools.listing(with_task_support)});
        if meta.is_modern() {
            result["ttlMs"] = json!(LIST_TTL_MS);
            result["cacheScope"] = json!("public");
        }
        Ok(result)
    }

    pub(super) fn set_level(&self, params: &Map<String, Value>) -> Result<Value, RpcError> {
        let level = params
            .get("level")
            .and_then(Value::as_str)
            .and_then(LogLevel::parse)
            .ok_or_else(|| RpcError::invalid_params("level must be one of debug, info, notice, warning, error, critical, alert, emergency"))?;
        lock(&self.session).log_level = Some(level);
        Ok(json!({}))
    }
}
