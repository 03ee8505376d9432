//! Seed 001's schema tools over reticle's own published schemas:
//! `list_schemas`, `get_schema`, `validate_asset`, `diff_assets`.

use libmcp::ReplayContract;
use reticle_protocol::{ErrorCode, SCHEMA_VERSION, ToolError};
use serde_json::{Map, Value, json};

use super::{Detail, PayloadResult, Tool, ToolContext, ToolDef};
use reticle_assets as assets;

pub(super) fn tools() -> Vec<Tool> {
    vec![
        Tool::new(ToolDef {
            name: "list_schemas",
            title: "List published schemas",
            description: "Every JSON Schema reticle publishes (each tool's request and response), \
                          sorted by name, version, path.",
            replay: ReplayContract::Convergent,
            read_only: true,
            handler: list_schemas,
            porcelain: Some(list_porcelain),
        }),
        Tool::new(ToolDef {
            name: "get_schema",
            title: "Get one schema",
            description: "One published JSON Schema by name (see list_schemas).",
            replay: ReplayContract::Convergent,
            read_only: true,
            handler: get_schema,
            porcelain: None,
        }),
        Tool::new(ToolDef {
            name: "list_examples",
            title: "List example documents",
            description: "Shipped example documents (tool arguments, reports), by the schema they \
                          follow; `component` filters by schema name (default `all`).",
            replay: ReplayContract::Convergent,
            read_only: true,
            handler: list_examples,
            porcelain: None,
        }),
        Tool::new(ToolDef {
            name: "get_example",
            title: "Get one example",
            description: "One example document by path (see list_examples), validated against its \
                          schema at call time.",
            replay: ReplayContract::Convergent,
            read_only: true,
            handler: get_example,
            porcelain: None,
        }),
        Tool::new(ToolDef {
            name: "validate_asset",
            title: "Validate a document",
            description: "Checks a JSON document against a published schema (JSON Schema 2020-12). \
                          Returns ok, or every error as an RFC 6901 pointer and a message, \
                          sorted by path then message.",
            replay: ReplayContract::Convergent,
            read_only: true,
            handler: validate_asset,
            porcelain: Some(validate_porcelain),
        }),
        Tool::new(ToolDef {
            name: "diff_assets",
            title: "Diff two documents",
            description: "An RFC 6902 patch (add/remove/replace) from base to new: keys in sorted \
                          order, arrays replaced whole, ops sorted by path. Use it to compare two \
                          reports or two rule decks.",
            replay: ReplayContract::Convergent,
            read_only: true,
            handler: diff_assets,
            porcelain: Some(diff_porcelain),
        }),
    ]
}

async fn list_schemas(ctx: ToolContext, _args: Map<String, Value>) -> PayloadResult {
    let schemas: Vec<Value> = ctx
        .state
        .schemas
        .entries()
        .iter()
        .map(|e| json!({"name": e.name, "version": e.version, "path": e.path}))
        .collect();
    Ok(json!({"schema_version": SCHEMA_VERSION, "ok": true, "schemas": schemas}))
}

fn not_found(name: &str) -> ToolError {
    ToolError::new(ErrorCode::NotFound, format!("no schema named {name}"))
        .with_details(json!({"reason": "not_found", "name": name, "hint": "call list_schemas"}))
        .recoverable(true)
}

async fn get_schema(ctx: ToolContext, args: Map<String, Value>) -> PayloadResult {
    let name = args["name"].as_str().unwrap_or_default();
    let entry = ctx.state.schemas.get(name).ok_or_else(|| not_found(name))?;
    Ok(
        json!({"schema_version": SCHEMA_VERSION, "ok": true, "name": entry.name, "version": entry.version, "schema": entry.schema}),
    )
}

async fn list_examples(ctx: ToolContext, args: Map<String, Value>) -> PayloadResult {
    let component = args
        .get("component")
        .and_then(Value::as_str)
        .unwrap_or("all");
    let examples: Vec<Value> = ctx
        .state
        .schemas
        .examples()
        .iter()
        .filter(|e| component == "all" || e.component == component)
        .map(|e| json!({"component": e.component, "path": e.path}))
        .collect();
    Ok(json!({"schema_version": SCHEMA_VERSION, "ok": true, "examples": examples}))
}

async fn get_example(ctx: ToolContext, args: Map<String, Value>) -> PayloadResult {
    let path = args["path"].as_str().unwrap_or_default();
    let example = ctx
        .state
        .schemas
        .examples()
        .iter()
        .find(|e| e.path == path)
        .ok_or_else(|| {
            ToolError::new(ErrorCode::NotFound, format!("no example at {path}")).with_details(
                json!({"reason": "not_found", "path": path, "hint": "call list_examples"}),
            )
        })?;
    let errors = match ctx.state.schemas.get(&example.component) {
        Some(schema) => assets::validate(&schema.schema, &example.document)
            .unwrap_or_else(|e| vec![(String::new(), e)]),
        None => vec![(
            String::new(),
            format!("unknown schema {}", example.component),
        )],
    };
    let mut payload = json!({"schema_version": SCHEMA_VERSION, "ok": true, "example": example.document,
        "schema": example.component, "validated": errors.is_empty()});
    if !errors.is_empty() {
        payload["errors"] = assets::errors_json(&errors);
    }
    Ok(payload)
}

async fn validate_asset(ctx: ToolContext, args: Map<String, Value>) -> PayloadResult {
    let name = args["schema"].as_str().unwrap_or_default();
    let entry = ctx.state.schemas.get(name).ok_or_else(|| not_found(name))?;
    let errors = assets::validate(&entry.schema, &args["asset"]).map_err(|e| {
        ToolError::new(
            ErrorCode::InternalError,
            format!("schema {name} is not valid: {e}"),
        )
    })?;
    let mut payload =
        json!({"schema_version": SCHEMA_VERSION, "ok": errors.is_empty(), "schema": entry.name});
    if !errors.is_empty() {
        payload["errors"] = assets::errors_json(&errors);
        payload["reason"] = json!("validation_failed");
    }
    Ok(payload)
}

async fn diff_assets(_ctx: ToolContext, args: Map<String, Value>) -> PayloadResult {
    let patch = assets::diff(&args["base"], &args["new"]);
    Ok(json!({"schema_version": SCHEMA_VERSION, "ok": true, "patch": patch}))
}

/// Lines shown in concise porcelain before eliding.
const CONCISE_LINES: usize = 20;

fn bounded(lines: Vec<String>, detail: Detail, header: String) -> String {
    let shown = if detail == Detail::Full {
        lines.len()
    } else {
        lines.len().min(CONCISE_LINES)
    };
    let mut text = header;
    for line in &lines[..shown] {
        text.push('\n');
        text.push_str(line);
    }
    if shown < lines.len() {
        text.push_str(&format!("\n… {} more (detail=full)", lines.len() - shown));
    }
    text
}

fn list_porcelain(payload: &Value, detail: Detail) -> String {
    let schemas = payload["schemas"].as_array().cloned().unwrap_or_default();
    let lines = schemas
        .iter()
        .map(|s| {
            format!(
                "{} {} {}",
                s["name"].as_str().unwrap_or("?"),
                s["version"].as_str().unwrap_or("?"),
                s["path"].as_str().unwrap_or("?")
            )
        })
        .collect();
    bounded(lines, detail, format!("{} schemas", schemas.len()))
}

fn validate_porcelain(payload: &Value, detail: Detail) -> String {
    let errors = payload["errors"].as_array().cloned().unwrap_or_default();
    let lines = errors
        .iter()
        .map(|e| {
            format!(
                "{}: {}",
                e["path"]
                    .as_str()
                    .map_or("?", |p| if p.is_empty() { "/" } else { p }),
                e["msg"].as_str().unwrap_or("?")
            )
        })
        .collect();
    let header = if errors.is_empty() {
        format!(
            "valid against {}",
            payload["schema"].as_str().unwrap_or("?")
        )
    } else {
        format!(
            "{} errors against {}",
            errors.len(),
            payload["schema"].as_str().unwrap_or("?")
        )
    };
    bounded(lines, detail, header)
}

fn diff_porcelain(payload: &Value, detail: Detail) -> String {
    let patch = payload["patch"].as_array().cloned().unwrap_or_default();
    let lines = patch
        .iter()
        .map(|op| {
            let value = op
                .get("value")
                .map(|v| format!(" {}", crate::clip(&v.to_string(), 120)))
                .unwrap_or_default();
            format!(
                "{} {}{}",
                op["op"].as_str().unwrap_or("?"),
                op["path"].as_str().unwrap_or("?"),
                value
            )
        })
        .collect();
    bounded(lines, detail, format!("{} changes", patch.len()))
}
