//! How a result is shown in `content[0].text` (libmcp doctrine: `render=porcelain|json`,
//! `detail=concise|full`), and the `CallToolResult` of an answer or an error.

use reticle_protocol::ToolError;
use serde_json::{Map, Value, json};

use super::output::ToolOutput;
use super::registry::Tool;
use crate::scope::ClientScope;

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
/// renderer (or the generic projection), or is the JSON itself. The files the payload
/// names that are the client's (of `scope`) follow as `image` and `resource_link`
/// blocks ([`crate::media`]).
pub(crate) fn success_result(
    tool: &Tool,
    output: ToolOutput,
    render: &RenderChoice,
    scope: &ClientScope,
) -> Value {
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
    let text = match (text, render.detail) {
        (Some(text), detail) => bound_porcelain(&text, detail),
        (None, Detail::Full) => payload.to_string(),
        (None, Detail::Concise) => concise_json(&payload).to_string(),
    };
    let mut content = vec![json!({"type": "text", "text": text})];
    content.extend(crate::media::blocks(&payload, scope, render.detail));
    json!({
        "content": content,
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

/// Most lines of a porcelain text, per detail.
pub const PORCELAIN_MAX_LINES: (usize, usize) = (60, 1000);
/// Most bytes of a porcelain text, per detail.
pub const PORCELAIN_MAX_BYTES: (usize, usize) = (8 * 1024, 128 * 1024);
/// Most bytes of a `render=json detail=concise` text.
pub const CONCISE_JSON_MAX_BYTES: usize = 4 * 1024;

/// `text` within the porcelain bound of `detail` (whatever a renderer produced, for any
/// payload size): whole lines are kept while both the line and byte budgets allow, and a
/// last line says how many lines and bytes were left out and where the rest is.
pub fn bound_porcelain(text: &str, detail: Detail) -> String {
    let (max_lines, max_bytes) = match detail {
        Detail::Concise => (PORCELAIN_MAX_LINES.0, PORCELAIN_MAX_BYTES.0),
        Detail::Full => (PORCELAIN_MAX_LINES.1, PORCELAIN_MAX_BYTES.1),
    };
    let text = text.trim_end_matches('\n');
    let total_lines = text.lines().count();
    if total_lines <= max_lines && text.len() <= max_bytes {
        return text.to_owned();
    }
    // Room for the note: one line, at most 200 bytes.
    let (line_budget, byte_budget) = (max_lines - 1, max_bytes - 200);
    let mut kept = String::new();
    let mut kept_lines = 0;
    for line in text.lines() {
        let line = clip(line, 400);
        if kept_lines == line_budget || kept.len() + line.len() + 1 > byte_budget {
            break;
        }
        kept.push_str(&line);
        kept.push('\n');
        kept_lines += 1;
    }
    let left_lines = total_lines - kept_lines;
    let left_bytes = text.len().saturating_sub(kept.len());
    let more = match detail {
        Detail::Concise => "detail=full shows more; render=json has the whole payload",
        Detail::Full => "render=json has the whole payload",
    };
    format!("{kept}… {left_lines} more line(s) ({left_bytes} bytes) left out: {more}")
}

/// The structured summary `render=json detail=concise` puts in `content[0].text`
/// (libmcp: "json + concise returns a structured summary rather than the full backing
/// object"): the payload with every list cut to its first items (lists in lists
/// emptied), long strings clipped, within [`CONCISE_JSON_MAX_BYTES`]; an
/// `omitted` object counts what was left out per field, and `more` says where the rest
/// is. `structuredContent` always stays the full, schema-checked payload (D72).
pub fn concise_json(payload: &Value) -> Value {
    for (items, depth, chars) in [(3, 3, 160), (1, 2, 80), (0, 1, 60)] {
        let mut omitted = Map::new();
        let summary = summarize(payload, items, depth, chars, "", &mut omitted);
        let mut summary = match summary {
            Value::Object(map) => map,
            other => return other,
        };
        let whole = omitted.is_empty();
        if !whole {
            summary.insert("omitted".into(), Value::Object(omitted));
            summary.insert(
                "more".into(),
                json!("concise summary: detail=full (or structuredContent) has the whole payload"),
            );
        }
        let summary = Value::Object(summary);
        if summary.to_string().len() <= CONCISE_JSON_MAX_BYTES {
            return summary;
        }
    }
    // Only the scalars of the top level fit.
    let mut top: Map<String, Value> = payload
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(_, v)| !v.is_object() && !v.is_array())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    top.insert(
        "more".into(),
        json!("concise summary: detail=full (or structuredContent) has the whole payload"),
    );
    let top = Value::Object(top);
    if top.to_string().len() <= CONCISE_JSON_MAX_BYTES {
        top
    } else {
        json!({"more": "concise summary: detail=full (or structuredContent) has the whole payload"})
    }
}

fn summarize(
    value: &Value,
    items: usize,
    depth: usize,
    chars: usize,
    path: &str,
    omitted: &mut Map<String, Value>,
) -> Value {
    match value {
        Value::String(text) if text.chars().count() > chars => {
            omitted.insert(path.to_owned(), json!("clipped"));
            Value::String(clip(text, chars))
        }
        Value::Array(list) => {
            if depth == 0 || list.len() > items {
                omitted.insert(
                    path.to_owned(),
                    json!(format!(
                        "{} of {} items shown",
                        items.min(list.len()) * usize::from(depth > 0),
                        list.len()
                    )),
                );
            }
            if depth == 0 {
                return json!([]);
            }
            Value::Array(
                list.iter()
                    .take(items)
                    .enumerate()
                    .map(|(i, v)| {
                        summarize(v, items, depth - 1, chars, &format!("{path}/{i}"), omitted)
                    })
                    .collect(),
            )
        }
        // Objects are kept whole (their lists are cut): counts and metrics stay exact.
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let path = format!("{path}/{k}");
                    (k.clone(), summarize(v, items, depth, chars, &path, omitted))
                })
                .collect(),
        ),
        other => other.clone(),
    }
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
    fn porcelain_is_bounded_for_any_size_and_says_what_it_left_out() {
        let huge: String = (0..100_000)
            .map(|i| format!("line {i} {}\n", "y".repeat(i % 700)))
            .collect();
        for (detail, lines, bytes) in [
            (
                Detail::Concise,
                PORCELAIN_MAX_LINES.0,
                PORCELAIN_MAX_BYTES.0,
            ),
            (Detail::Full, PORCELAIN_MAX_LINES.1, PORCELAIN_MAX_BYTES.1),
        ] {
            let out = bound_porcelain(&huge, detail);
            assert!(out.lines().count() <= lines, "{detail:?}");
            assert!(out.len() <= bytes, "{detail:?}: {} bytes", out.len());
            let last = out.lines().last().unwrap();
            assert!(
                last.contains("more line(s)") && last.contains("left out"),
                "{last}"
            );
        }
        assert_eq!(bound_porcelain("a\nb\n", Detail::Concise), "a\nb");
    }

    #[test]
    fn concise_json_is_a_bounded_summary_that_counts_what_it_left_out() {
        let violations: Vec<Value> = (0..5000)
            .map(|i| json!({"violation_id": format!("rv1:{i}"), "note": "z".repeat(300)}))
            .collect();
        let payload = json!({"schema_version": "1.0.0", "counts": {"records": 5000},
                             "violations": violations, "status": "completed"});
        let summary = concise_json(&payload);
        assert!(summary.to_string().len() <= CONCISE_JSON_MAX_BYTES);
        assert_eq!(summary["schema_version"], "1.0.0");
        assert_eq!(summary["counts"]["records"], 5000);
        assert!(
            summary["omitted"]["/violations"]
                .as_str()
                .unwrap()
                .ends_with("of 5000 items shown")
        );
        assert!(summary["more"].as_str().unwrap().contains("detail=full"));
        let small = json!({"schema_version": "1.0.0", "closed": true});
        assert_eq!(
            concise_json(&small),
            small,
            "a small payload is its own summary"
        );
    }

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
