//! The resource, prompt and completion methods (issue 30): `resources/list`,
//! `resources/templates/list`, `resources/read` over the client's artifacts
//! (`reticle_tools::resources`), `prompts/list`, `prompts/get` and `completion/complete`
//! (`reticle_tools::prompts`). Each answers for the client of this server only.

use serde_json::{Map, Value, json};

use super::server::Server;
use reticle_tools::{prompts, resources};
use reticle_transport::era::{RequestMeta, RpcError};

/// How long a client may cache the prompt and template lists (they never change).
const STATIC_TTL_MS: u64 = 300_000;

/// A 2026-07-28 result's cache hints: `ttl_ms`, and `private` for what is the caller's.
fn cacheable(mut result: Value, meta: &RequestMeta, ttl_ms: u64, private: bool) -> Value {
    if meta.is_modern() {
        result["ttlMs"] = json!(ttl_ms);
        result["cacheScope"] = json!(if private { "private" } else { "public" });
    }
    result
}

impl Server {
    /// `resources/list`: one page of the caller's artifacts.
    pub(super) fn resources_list(
        &self,
        params: &Map<String, Value>,
        meta: &RequestMeta,
    ) -> Result<Value, RpcError> {
        let page = resources::list(&self.shared.scope, &self.shared.jobs, params.get("cursor"))?;
        Ok(cacheable(page, meta, 0, true))
    }

    /// `resources/templates/list`: the URI shapes of job and session artifacts.
    pub(super) fn resource_templates(
        &self,
        params: &Map<String, Value>,
        meta: &RequestMeta,
    ) -> Result<Value, RpcError> {
        single_page(params, "resources/templates/list")?;
        Ok(cacheable(
            resources::templates(),
            meta,
            STATIC_TTL_MS,
            false,
        ))
    }

    /// `resources/read` of one of the caller's artifacts (or a part of it).
    pub(super) fn resources_read(
        &self,
        params: &Map<String, Value>,
        meta: &RequestMeta,
    ) -> Result<Value, RpcError> {
        let uri = params
            .get("uri")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("resources/read needs a string uri"))?;
        let read = resources::read(&self.shared.scope, &self.shared.jobs, uri, meta.is_modern())?;
        Ok(cacheable(read, meta, 0, true))
    }

    /// `prompts/list`.
    pub(super) fn prompts_list(
        &self,
        params: &Map<String, Value>,
        meta: &RequestMeta,
    ) -> Result<Value, RpcError> {
        single_page(params, "prompts/list")?;
        Ok(cacheable(prompts::list(), meta, STATIC_TTL_MS, false))
    }

    /// `prompts/get`: a prompt's messages with its arguments filled in.
    pub(super) fn prompts_get(&self, params: &Map<String, Value>) -> Result<Value, RpcError> {
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("prompts/get needs a string name"))?;
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(arguments)) => arguments.clone(),
            Some(_) => return Err(RpcError::invalid_params("arguments must be an object")),
        };
        prompts::get_prompt(name, &arguments)
    }

    /// `completion/complete` of a prompt argument.
    pub(super) fn complete(&self, params: &Map<String, Value>) -> Result<Value, RpcError> {
        prompts::complete(&self.shared, params)
    }
}

/// `INVALID_PARAMS` for a (non-null) cursor on `method`, a list of one page.
fn single_page(params: &Map<String, Value>, method: &str) -> Result<(), RpcError> {
    if params.get("cursor").is_some_and(|c| !c.is_null()) {
        return Err(RpcError::invalid_params(format!(
            "invalid cursor: {method} has a single page"
        )));
    }
    Ok(())
}
