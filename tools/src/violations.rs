//! `violations`: pages through the records of a finished whole-layout `evaluate` job
//! (docs/DECISIONS.md D57), optionally only those meeting a box (a sub-region of the job's
//! region) or of one rule, with the counts the filter keeps. Nothing is imaged again: a
//! worker reads the job's `violations.jsonl` (op `evaluate.page`).

use libmcp::ReplayContract;
use reticle_protocol::{ErrorCode, SCHEMA_VERSION, ToolError};
use serde_json::{Map, Value, json};

use super::{Detail, PayloadResult, Tool, ToolContext, ToolDef, clip};
use reticle_dispatch::Unit;
use reticle_dispatch::jobs::JobStatus;

/// Canonical records listed in the porcelain of one page.
const PORCELAIN_RECORDS: usize = 20;

pub(super) fn tool() -> Tool {
    Tool::new(ToolDef {
        name: "violations",
        title: "Page through an evaluation's violations",
        description: "Pages through the violation records of a finished evaluate job that \
                      covered its region in tiles (report `imaging.mode: tiled`): `cursor` \
                      continues from the previous page's `next_cursor`; `box_um` keeps the \
                      records meeting a sub-region (e.g. the lower-left quarter), `rule_id` \
                      one rule's. The first page also counts what the filter keeps. Nothing \
                      is imaged again.",
        replay: ReplayContract::Convergent,
        read_only: true,
        handler: violations,
        porcelain: Some(porcelain),
    })
}

async fn violations(ctx: ToolContext, args: Map<String, Value>) -> PayloadResult {
    let job_id = args
        .get("job_id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let view = ctx.jobs.poll(&job_id)?;
    if view.tool != "evaluate" || view.status != JobStatus::Completed {
        return Err(ToolError::new(
            ErrorCode::InvalidInput,
            format!(
                "job {job_id} is a {} job, {}: violations pages a completed evaluate job",
                view.tool,
                serde_json::to_value(view.status)
                    .unwrap_or_default()
                    .as_str()
                    .unwrap_or("?")
            ),
        )
        .with_details(json!({"job_id": job_id, "tool": view.tool, "status": view.status}))
        .recoverable(!view.status.is_terminal()));
    }
    let dir = view
        .result
        .as_ref()
        .and_then(|r| r["artifacts"]["dir"].as_str())
        .ok_or_else(|| {
            ToolError::new(
                ErrorCode::InvalidInput,
                format!(
                    "job {job_id} imaged one window: its report holds its violations (evaluate with tiling: tiles to page)"
                ),
            )
            .with_details(json!({"job_id": job_id}))
        })?
        .to_owned();
    let mut op_args = args.clone();
    op_args.remove("job_id");
    // The report's own listing keeps its limits (D57): at most `limits.max_violations`
    // records over all pages, none when it degraded to aggregate. A box or a rule asks a
    // question of its own and pages every record that answers it.
    let report = view.result.as_ref().map_or(&Value::Null, |r| r);
    let filtered = args.contains_key("box_um") || args.contains_key("rule_id");
    if !filtered {
        if report["degraded_to_aggregate"] == true {
            return Err(ToolError::new(
                ErrorCode::InvalidInput,
                format!(
                    "job {job_id}'s report degraded to aggregate ({}): ask for a sub-region (box_um) or a rule (rule_id)",
                    report["degraded_reason"].as_str().unwrap_or("over limits.max_violations")
                ),
            )
            .with_details(json!({"job_id": job_id, "total_records": report["truncation"]["total_records"]}))
            .recoverable(true));
        }
        if let Some(cap) = report["truncation"]["max_violations"].as_u64() {
            op_args.insert("max_records".into(), json!(cap));
        }
    }
    let unit =
        Unit::new("evaluate.page", &Value::Object(op_args.clone())).with_artifact_dir(Some(dir));
    let page = ctx.dispatcher.run(&ctx.call_scope("vio"), unit).await?;
    let mut out = Map::new();
    out.insert("schema_version".into(), json!(SCHEMA_VERSION));
    out.insert("job_id".into(), json!(job_id));
    let filter: Map<String, Value> = ["box_um", "rule_id"]
        .iter()
        .filter_map(|k| args.get(*k).map(|v| ((*k).to_owned(), v.clone())))
        .collect();
    out.insert("filter".into(), Value::Object(filter));
    if let Value::Object(page) = page {
        out.extend(page);
    }
    Ok(Value::Object(out))
}

fn porcelain(payload: &Value, detail: Detail) -> String {
    let mut text = format!(
        "{}: {} record(s) on this page",
        payload["job_id"].as_str().unwrap_or("?"),
        payload["returned"]
    );
    if let Some(counts) = payload.get("counts") {
        text.push_str(&format!(
            "; the filter keeps {} record(s) in {} group(s)",
            counts["records"], counts["groups"]
        ));
    }
    match payload["next_cursor"].as_str() {
        Some(cursor) => text.push_str(&format!("; next page: cursor {cursor}")),
        None => text.push_str("; last page"),
    }
    let shown = if detail == Detail::Full {
        usize::MAX
    } else {
        PORCELAIN_RECORDS
    };
    let records = payload["violations"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let canonical: Vec<&Value> = records
        .iter()
        .filter(|v| v["dedup_strategy"] == "canonical")
        .collect();
    for v in canonical.iter().take(shown) {
        text.push_str(&clip(
            &format!(
                "\n  {} {} at {} measured {} {} ({})",
                v["severity"].as_str().unwrap_or("?"),
                v["rule_id"].as_str().unwrap_or("?"),
                v["location_nm"],
                v["measured"],
                v["unit"].as_str().unwrap_or(""),
                v["violation_id"].as_str().unwrap_or("?"),
            ),
            200,
        ));
    }
    if canonical.len() > shown {
        text.push_str(&format!(
            "\n  … {} more canonical record(s) on this page (render=json or detail=full)",
            canonical.len() - shown
        ));
    }
    text
}
