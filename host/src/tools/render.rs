//! How a result is shown in `content[0].text` (libmcp doctrine: `render=porcelain|json`,
//! `detail=concise|full`), and the `CallToolResult` of an answer or an error.

use reticle_protocol::ToolError;
use serde_json::{Map, Value, json};

use super::output::ToolOutput;
use super::registry::Tool;

/// How much a text rendering shows (libmcp doctrine).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// The essentials.
    Concise,
    /// Everything.
    Full,
}

/// The `CallToolResult` of a successful answer, `content[0]` rendered per `render`: a
/// started job is its one-line handle; a payload goes through the tool's porcelain
/// renderer (or the generic projection), or is the JSON itself.
pub(crate) fn success_result(tool: &Tool, output: ToolOutput, render: &RenderChoice) -> Value {
    let text = match (&output, render.json, tool.porcelain()) {
        (_, true, _) => None,
        (ToolOutput::Started(started), false, _) => Some(format!(
            "{} {} (poll it with poll(job_id))",
            started.job_id,
            serde_json::to_value(started.status)
                .ok()
                .and_then(|s| s.as_str().map(str::to_owned))
                .unwrap_or_default()
        )),
        (ToolOutput::Finished(payload), false, Some(porcelain)) => {
            Some(porcelain(payload, render.detail))
        }
        (ToolOutput::Finished(payload), false, None) => {
            Some(generic_porcelain(tool.name(), payload, render.detail))
        }
    };
    let payload = output.into_payload();
    let text = text.unwrap_or_else(|| payload.to_string());
    json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": payload,
        "isError": false,
    })
}

/// The presentation arguments every tool accepts (seed 004): `render` and `detail`.
pub const PRESENTATION: [&str; 2] = ["render", "detail"];

/// Porcelain of a tool without a bespoke renderer: a summary line (the tool and the
/// size of each top-level list), then libmcp's bounded JSON projection, one top-level
/// field per line (`schema_version` left out). Concise: at most 24 lines of at most
/// 120-character previews (lists show their first items). Full: every top-level list
/// item on its own line, at most 200 lines of 400-character previews. Deterministic:
/// the payload's own key order, no clocks.
pub fn generic_porcelain(tool: &str, payload: &Value, detail: Detail) -> String {
    let (max_lines, max_chars) = match detail {
        Detail::Concise => (24, 120),
        Detail::Full => (200, 400),
    };
    let mut body = payload.clone();
    if let Value::Object(map) = &mut body {
        map.shift_remove("schema_version");
    }
    let lists: Vec<String> = body
        .as_object()
        .map(|map| {
            map.iter()
                .filter_map(|(k, v)| v.as_array().map(|a| format!("{} {k}", a.len())))
                .take(4)
                .collect()
        })
        .unwrap_or_default();
    let summary = if lists.is_empty() {
        format!("{tool}: ok")
    } else {
        format!("{tool}: {}", lists.join(", "))
    };
    let config = libmcp::JsonPorcelainConfig::try_new(max_lines - 1, max_chars).unwrap_or_default();
    let mut lines = vec![summary];
    match (&body, detail) {
        (Value::Object(map), Detail::Full) => {
            for (key, value) in map {
                let single = Value::Object(Map::from_iter([(key.clone(), value.clone())]));
                match value {
                    Value::Array(items) if !items.is_empty() => {
                        let rendered = libmcp::render_json_porcelain(value, config);
                        let mut item_lines = rendered.lines();
                        if let Some(head) = item_lines.next() {
                            lines.push(format!("{key}: {head}"));
                        }
                        lines.extend(item_lines.map(|l| format!("  {l}")));
                    }
                    _ => lines.extend(
                        libmcp::render_json_porcelain(&single, config)
                            .lines()
                            .map(str::to_owned),
                    ),
                }
            }
        }
        _ => lines.extend(
            libmcp::render_json_porcelain(&body, config)
                .lines()
                .map(str::to_owned),
        ),
    }
    if lines.len() > max_lines {
        let omitted = lines.len() - max_lines + 1;
        lines.truncate(max_lines - 1);
        lines.push(format!("… {omitted} line(s) omitted"));
    }
    lines.join("\n")
}

/// A call's `render` and `detail`.
pub(crate) struct RenderChoice {
    json: bool,
    detail: Detail,
}

impl RenderChoice {
    /// The choice `args` make (porcelain and concise unless they say otherwise).
    pub(crate) fn from_args(args: &Map<String, Value>) -> Self {
        Self {
            json: args.get("render").and_then(Value::as_str) == Some("json"),
            detail: if args.get("detail").and_then(Value::as_str) == Some("full") {
                Detail::Full
            } else {
                Detail::Concise
            },
        }
    }
}

/// The `CallToolResult` of a failed call: errors are values (seed 002).
pub fn error_result(error: &ToolError) -> Value {
    let mut text = format!("{}: {}", error.code, error.message);
    if error.recoverable {
        text.push_str(" (recoverable");
        if let Some(ms) = error.retry_after_ms {
            text.push_str(&format!(", retry after {ms} ms"));
        }
        text.push(')');
    }
    if let Some(hint) = error.hint() {
        text.push_str(&format!("\nhint: {hint}"));
    }
    json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": error.to_structured(),
        "isError": true,
    })
}

/// `text` cut to at most `max` characters, with an ellipsis when cut.
pub fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generic_porcelain_is_summary_first_bounded_and_deterministic() {
        let cells: Vec<Value> = (0..1000)
            .map(|i| json!({"name": format!("CELL_{i:04}"), "bbox": [0, 0, i, i], "note": "x".repeat(500)}))
            .collect();
        let mut payload =
            json!({"schema_version": "1", "session_id": "ses_0123456789ab", "cells": cells});
        for i in 0..100 {
            payload[format!("k{i:03}")] = json!(i);
        }
        let concise = generic_porcelain("list_cells", &payload, Detail::Concise);
        let lines: Vec<&str> = concise.lines().collect();
        assert_eq!(lines[0], "list_cells: 1000 cells");
        assert!(lines.len() <= 24, "{} lines", lines.len());
        assert!(lines.iter().all(|l| l.chars().count() <= 140), "{concise}");
        assert!(lines.last().unwrap().contains("omitted"), "{concise}");
        assert!(!concise.contains("schema_version"));
        let full = generic_porcelain("list_cells", &payload, Detail::Full);
        assert!(full.lines().count() > lines.len() && full.lines().count() <= 200);
        assert_eq!(
            concise,
            generic_porcelain("list_cells", &payload.clone(), Detail::Concise)
        );
        assert_eq!(
            generic_porcelain("close_session", &json!({"closed": true}), Detail::Concise),
            "close_session: ok\nclosed: true"
        );
    }
}
