//! `evaluate`: a layout region checked against a rule deck on workers (seed 000): MRC on
//! the drawn polygons, litho DRC on the printed contours, EPE and PV-band rules from the
//! simulation, with aggregate metrics and, at `report_level: detailed`, the structured
//! `violations[]`. One window of the model period is one worker op (`evaluate`); any
//! other region is tiled (`evaluate.plan` / `.tile` / `.merge`, D57) and its records are
//! paged by the `violations` tool. A job, like `simulate`: returns `{job_id, status}` at
//! once unless the call waits. `reticle eval` runs the same ops (G3).

use libmcp::ReplayContract;
use reticle_protocol::args::{EvaluateArgs, ReportLevel};
use reticle_protocol::capabilities::{DetailSupport, ENGINE_PATHS};
use serde_json::{Map, Value, json};

use super::imaging::Imaging;
use super::worker_job::{JobExtras, parse_call, run_op_with, run_tiled_with};
use super::{Detail, TaskSupport, Tool, ToolContext, ToolDef, ToolResult};
use crate::confine::AllowedRoots;
use reticle_protocol::ToolError;

/// The worker op behind `evaluate` and `reticle eval`.
pub const OP: &str = "evaluate";

/// The capabilities matrix of seed 000 §3 (docs/DECISIONS.md D25), on the tool's
/// `tools/list` entry under `_meta.capabilities`.
#[must_use]
pub fn capabilities() -> Value {
    json!({
        "schema_version": reticle_protocol::SCHEMA_VERSION,
        "report_levels": ["aggregate", "detailed"],
        "engine_paths": engine_paths(),
        "detailed_values": DetailSupport::ALL
            .iter()
            .map(|v| (v.as_str().to_owned(), json!(v.meaning())))
            .collect::<Map<String, Value>>(),
        "max_violations_per_response": 100_000,
        "limits": {
            "max_violations_default": 10_000,
            "on_exceeded": ["truncate", "degrade_to_aggregate"],
            "signaled_via": "truncation.truncated: true, or degraded_to_aggregate: true on the response",
        },
        "backends": {
            "cpu": {"imaging": true, "rule_checks": true},
            "gpu": {"imaging": true, "rule_checks": false},
        },
        "optimize": {
            "available": true,
            "tool": "optimize",
            "method": "pixel_ilt_analytic_adjoint",
            "scopes": ["group", "record_only"],
            "targets": ["violation_id", "box_um", "clip", "violation_ids", "job_id", "whole_layer"],
            "violation_id_resolution": ["session_cache", "self_describing_id", "tiled_neighbourhood"],
            "backends": {"ilt": "cpu", "imaging": ["cpu", "gpu"]},
        },
        "coordinate_frames": ["input_layout_native", "post_transform_canvas"],
        "regions": {
            "any_size": true,
            "default": "the whole evaluated layer (GDSII/OASIS); the ICCAD window (.glp)",
            "tiling": ["auto", "tiles", "window"],
            "paging_tool": "violations",
        },
    })
}

/// `engine_paths` of the matrix, from [`reticle_protocol::capabilities::ENGINE_PATHS`]
/// (the table the evaluation reads too): a `conditional` path carries its precondition.
fn engine_paths() -> Value {
    let mut paths = Map::new();
    for path in ENGINE_PATHS {
        let mut entry = json!({"detailed": path.detailed.as_str(), "note": path.note});
        if path.detailed == DetailSupport::Conditional {
            entry["precondition"] = json!({
                "violation_count_max": "limits.max_violations (default 10000, at most 100000)",
                "on_exceeded": "limits.on_exceeded: truncate (default: the first records) or degrade_to_aggregate (none)",
                "signaled_via": "truncation.truncated: true, or degraded_to_aggregate: true on the response",
            });
        }
        paths.insert(path.name.to_owned(), entry);
    }
    Value::Object(paths)
}

pub(super) fn tool() -> Tool {
    Tool::new(ToolDef {
        name: "evaluate",
        title: "Evaluate against a rule deck",
        description: "Checks a square window of a layout (.glp, .gds, .oas) against a rule deck \
                      (a shipped deck name such as iccad13_m1, or a deck JSON path): mask rules \
                      (MRC) on the drawn polygons, printed rules (litho DRC) on the simulated \
                      printed contours at the nominal corner, EPE and PV-band rules from the \
                      ICCAD-2013 corners. Always returns aggregate metrics (counts per rule and \
                      severity, L2, PVB, EPE); report_level=detailed adds violations[] with \
                      coordinates, deterministic violation_group_id, canonical/shadow records \
                      and self-describing violation_id. Returns a job_id at once (poll it) \
                      unless `wait` is true or the call carries a progressToken.",
        replay: ReplayContract::Convergent,
        read_only: true,
        handler: run,
        porcelain: Some(porcelain),
    })
    .with_meta(json!({"capabilities": capabilities()}))
    .with_task_support(TaskSupport::Optional)
}

/// Whether a `deck` argument names a file (resolved through the allowed roots) rather
/// than a shipped deck.
#[must_use]
pub fn deck_is_path(deck: &str) -> bool {
    deck.contains('/') || deck.ends_with(".json")
}

/// An `evaluate` call's arguments (checked against the input schema) parsed once into
/// [`EvaluateArgs`], `layout` and a deck path resolved through `roots`, `tiling` taken out
/// and decided ([`Imaging::of`]): the tool's edge, and `reticle eval`'s (D150, D156).
///
/// # Errors
/// `INVALID_INPUT` when they do not fit the type; the roots' refusal of a path.
pub fn prepare(
    args: Map<String, Value>,
    roots: &AllowedRoots,
) -> Result<(EvaluateArgs, Imaging), ToolError> {
    let mut call: EvaluateArgs = parse_call(args)?;
    call.layout = roots.resolve_read(&call.layout)?.display().to_string();
    if deck_is_path(&call.deck) {
        call.deck = roots.resolve_read(&call.deck)?.display().to_string();
    }
    let imaging = Imaging::of(
        call.tiling.take(),
        &call.layout,
        call.model.as_ref(),
        call.box_um,
    );
    Ok((call, imaging))
}

async fn run(ctx: ToolContext, args: Map<String, Value>) -> ToolResult {
    let (mut call, imaging) = prepare(args, &ctx.scope.roots)?;
    let wait = call.wait.take().unwrap_or(false);
    if imaging == Imaging::Tiles {
        // The job's artifact directory holds the tiles' outputs, every record
        // (`violations.jsonl`, paged by the `violations` tool) and the heat map. The
        // evaluation is remembered, so every id of it resolves for optimize (D181).
        let scope = std::sync::Arc::clone(&ctx.scope);
        let cached = EvaluateArgs {
            report_level: None,
            limits: None,
            ..call.clone()
        };
        let on_result: super::worker_job::OnResult = Box::new(move |payload: Value| {
            // Its layout version stays repairable while the job lives (D214).
            super::optimize_pins::pin(&cached.layout, &payload);
            scope.violations.insert_region(cached, &payload);
            Ok(payload)
        });
        return run_tiled_with(&ctx, OP, "eval", &call, wait, Some(on_result)).await;
    }
    // At report_level=detailed the returned violations go into the session's cache, so
    // optimize(violation_id) needs no other argument (seed 000 §5 fast path, D45).
    let on_result: Option<super::worker_job::OnResult> =
        (call.report_level == Some(ReportLevel::Detailed)).then(|| {
            let scope = std::sync::Arc::clone(&ctx.scope);
            let cached = EvaluateArgs {
                report_level: None,
                limits: None,
                ..call.clone()
            };
            Box::new(move |payload: Value| {
                let n = scope.violations.insert(cached, &payload);
                tracing::debug!(records = n, "violation cache filled");
                Ok(payload)
            }) as super::worker_job::OnResult
        });
    let extras = JobExtras {
        artifact_dir: None,
        on_result,
    };
    run_op_with(&ctx, OP, &call, wait, extras).await
}

/// One line per rule with violations, for people (porcelain and `reticle eval --format=table`).
#[must_use]
pub fn table(payload: &Value) -> String {
    table_limited(payload, usize::MAX)
}

/// Canonical violations a concise porcelain lists (the rest are counted).
pub const CONCISE_CANONICAL: usize = 10;

/// [`table`] listing at most `max_canonical` canonical violations, then a line counting
/// the rest and saying where they are.
#[must_use]
pub fn table_limited(payload: &Value, max_canonical: usize) -> String {
    let m = &payload["metrics"];
    let mut text = format!(
        "{} on {} ({} {}): L2={} px PVB={} px EPE {}/{} (mean |EPE| {} nm, max {} nm) MRC pass {} DRC pass {}\n",
        payload["deck"]["name"].as_str().unwrap_or("?"),
        payload["layout"]["name"].as_str().unwrap_or("?"),
        payload["layout"]["layer"].as_str().unwrap_or("?"),
        payload["report_level"].as_str().unwrap_or("?"),
        m["l2_px"],
        m["pvb_px"],
        m["epe"]["violations"],
        m["epe"]["checkpoints"],
        m["epe"]["mean_abs_nm"],
        m["epe"]["max_abs_nm"],
        m["mrc_pass_rate"],
        m["drc_pass_rate"],
    );
    text.push_str(&format!(
        "{:<14} {:<10} {:<8} {:<8} {:>8} {:>8}\n",
        "rule", "kind", "target", "severity", "groups", "records"
    ));
    for rule in payload["counts"]["by_rule"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let groups = if rule["checked"] == true {
            rule["groups"].to_string()
        } else {
            "skipped".to_owned()
        };
        text.push_str(&format!(
            "{:<14} {:<10} {:<8} {:<8} {:>8} {:>8}\n",
            rule["rule_id"].as_str().unwrap_or("?"),
            rule["kind"].as_str().unwrap_or("?"),
            rule["applies_to"].as_str().unwrap_or("?"),
            rule["severity"].as_str().unwrap_or("?"),
            groups,
            rule["records"],
        ));
    }
    let canonical = payload["violations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["dedup_strategy"] == "canonical");
    let mut listed = 0;
    let mut unlisted = 0;
    for v in canonical {
        if listed == max_canonical {
            unlisted += 1;
            continue;
        }
        listed += 1;
        {
            text.push_str(&format!(
                "  {} {} at {} measured {} {} (group {})\n",
                v["severity"].as_str().unwrap_or("?"),
                v["rule_id"].as_str().unwrap_or("?"),
                v["location_nm"],
                v["measured"],
                v["unit"].as_str().unwrap_or(""),
                v["violation_group_id"].as_str().unwrap_or("?"),
            ));
        }
    }
    if unlisted > 0 {
        text.push_str(&format!(
            "… {unlisted} more canonical violation(s) not listed: detail=full, render=json or violations(job_id)\n"
        ));
    }
    if payload["truncation"]["truncated"] == true {
        text.push_str(&format!(
            "violations truncated: {} of {} records\n",
            payload["truncation"]["returned"], payload["truncation"]["total_records"]
        ));
    }
    if payload["degraded_to_aggregate"] == true {
        text.push_str("degraded to aggregate: ");
        text.push_str(payload["degraded_reason"].as_str().unwrap_or(""));
        text.push('\n');
    }
    if let Some(imaging) = payload.get("imaging") {
        let region = &payload["region"];
        text.push_str(&format!(
            "region {} nm ({}), {} tiles (core {} nm, halo {} nm), {} with violations\n",
            region["box_nm"],
            region["source"].as_str().unwrap_or("?"),
            imaging["tiles"],
            imaging["core_nm"],
            imaging["halo_nm"],
            payload["tiles"]["with_violations"],
        ));
        let artifacts = &payload["artifacts"];
        text.push_str(&format!(
            "records: {}; heat map: {}\n",
            artifacts["violations"]["path"].as_str().unwrap_or("?"),
            artifacts["heatmap"]["png"]["path"].as_str().unwrap_or("?"),
        ));
        if let Some(cursor) = payload["page"]["next_cursor"].as_str() {
            text.push_str(&format!(
                "more records: violations(job_id, cursor: \"{cursor}\")\n"
            ));
        }
    }
    text
}

fn porcelain(payload: &Value, detail: Detail) -> String {
    let max_canonical = match detail {
        Detail::Concise => CONCISE_CANONICAL,
        Detail::Full => usize::MAX,
    };
    format!(
        "{} {}: {}",
        payload["job_id"].as_str().unwrap_or("?"),
        payload["status"].as_str().unwrap_or("?"),
        table_limited(payload, max_canonical)
    )
}
