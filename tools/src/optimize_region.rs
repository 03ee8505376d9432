//! `optimize` of a region of any size, or of the whole evaluated layer (issue 28 items
//! 2–4; docs/DECISIONS.md D170–D173): tiled ILT with halos, written back into the layout,
//! re-evaluated.
//!
//! One job, in the job's artifact directory (`jobs/opt_<hex>/`):
//! 1. the fan-out `optimize.plan` / `optimize.tile` in four waves / `optimize.merge`
//!    ([`FanOut`] with the plan's `waves`: a tile of a later wave reads the finished
//!    neighbours' masks from the job's tiles folder); the merge writes
//!    `optimized.<gds|oas>` (the input layers unchanged, the mask layer added) and the
//!    before/after pictures;
//! 2. two whole-layout evaluations of the region plus one tile halo with the same deck, at
//!    once: the input as drawn (`before/`) and the written layout imaging its mask layer
//!    (`after/`, post-OPC verification);
//! 3. unit `optimize.compare`: groups resolved, remaining and new per rule, and the new
//!    groups within 200 nm of a seam.
//!
//! Every unit goes through the dispatcher (replays, cancel, the executor), so the job
//! behaves as a whole-layout `evaluate` does. [`run_region`] is what other targets (a list
//! of violation ids, an evaluation job's groups) can route to with the boxes they cover.

use std::sync::Arc;

use reticle_dispatch::{Dispatcher, FanOut, Scope, Unit};
use reticle_protocol::{ErrorCode, ToolError};
use serde_json::{Map, Value, json};

use super::{ToolContext, ToolResult};

/// Unit numbers of the job's parts (each fan-out numbers its units from its base, so
/// attempt ids and journal tracks stay distinct).
const BEFORE_BASE: u32 = 1 << 28;
const AFTER_BASE: u32 = 2 << 28;
const COMPARE_UNIT: u32 = 3 << 28;

/// The arguments of `optimize` a region optimize takes (the rest is a single window's).
const REGION_ARGS: [&str; 14] = [
    "layout",
    "deck",
    "layer",
    "cell",
    "box_um",
    "pixel_nm",
    "model",
    "tile_nm",
    "iterations",
    "refine_iterations",
    "mask_style",
    "assist_features",
    "mask_layer",
    "halo_nm",
];

/// Whether an `optimize` call is a region optimize (D170): no `violation_id` and no
/// `clip_um`, on a GDSII/OASIS layout, with a `box_um` (of any size) or `whole_layer:
/// true`, and `tiling` not `"window"`. Everything else is the single-window path, as
/// before (a `.glp` clip, a `clip_um`, a violation id).
#[must_use]
pub(super) fn wants_region(args: &Map<String, Value>) -> bool {
    if args.contains_key("violation_id") || args.contains_key("clip_um") {
        return false;
    }
    let glp = args
        .get("layout")
        .and_then(Value::as_str)
        .is_some_and(|l| l.to_ascii_lowercase().ends_with(".glp"));
    if glp || args.get("tiling").and_then(Value::as_str) == Some("window") {
        return false;
    }
    args.get("whole_layer").and_then(Value::as_bool) == Some(true) || args.contains_key("box_um")
}

/// The evaluate arguments of one re-evaluation: the call's layout window arguments on
/// `layout`, box `box_um`, imaging `mask_layer` when given.
fn evaluate_args(
    call: &Map<String, Value>,
    layout: &Value,
    box_um: [f64; 4],
    mask_layer: Option<&Value>,
) -> Map<String, Value> {
    let mut args = Map::new();
    for key in ["deck", "layer", "cell", "pixel_nm", "model", "tile_nm"] {
        if let Some(v) = call.get(key) {
            args.insert(key.into(), v.clone());
        }
    }
    args.insert("layout".into(), layout.clone());
    args.insert("box_um".into(), json!(box_um));
    args.insert("tiling".into(), json!("tiles"));
    args.insert("report_level".into(), json!("aggregate"));
    if let Some(m) = mask_layer {
        args.insert("mask_layer".into(), m.clone());
    }
    args
}

/// A folder of the job's directory for one evaluation.
fn sub_dir(dir: &std::path::Path, name: &str) -> Result<String, ToolError> {
    let path = dir.join(name);
    std::fs::create_dir_all(&path).map_err(|e| {
        ToolError::new(
            ErrorCode::InternalError,
            format!("cannot create {}: {e}", path.display()),
        )
    })?;
    Ok(path.display().to_string())
}

/// The part of an evaluation's summary the result keeps.
fn evaluation_summary(report: &Value, dir: &str) -> Value {
    json!({
        "dir": dir,
        "counts": report["counts"],
        "metrics": report["metrics"],
        "window_nm": report["window_nm"],
        "layout": report["layout"],
    })
}

/// Runs the region optimize of `args` (paths resolved, `wait` taken) as a job.
pub(super) async fn run_region(
    ctx: &ToolContext,
    args: Map<String, Value>,
    wait: bool,
) -> ToolResult {
    run_region_for(ctx, args, wait, Map::new()).await
}

/// [`run_region`] for a target that is not a box (a list of violation ids, an evaluation
/// job's groups): `target` (its `mode` and what it named) goes into the result's `target`.
pub(super) async fn run_region_for(
    ctx: &ToolContext,
    args: Map<String, Value>,
    wait: bool,
    target: Map<String, Value>,
) -> ToolResult {
    let call: Map<String, Value> = args
        .into_iter()
        .filter(|(k, _)| REGION_ARGS.contains(&k.as_str()))
        .collect();
    let job_dir = ctx.scope.sessions.new_job_dir("opt")?;
    let dispatcher = Arc::clone(&ctx.dispatcher);
    ctx.run_as_job(wait, move |scope| async move {
        let dir = job_dir.path().to_path_buf();
        let payload = region_job(&dispatcher, &scope, &dir, call).await;
        drop(job_dir);
        let mut payload = payload?;
        if let Some(t) = payload["target"].as_object_mut() {
            t.extend(target);
        }
        Ok(payload)
    })
    .await
}

/// The region optimize of `args` (paths resolved) run on `dispatcher` in `scope` with its
/// files in `dir`, outside any job: what `reticle optimize` runs (the tool runs the same in
/// its job).
///
/// # Errors
/// The units' errors.
pub(crate) async fn region_result(
    dispatcher: &Arc<Dispatcher>,
    scope: &Scope,
    dir: &std::path::Path,
    args: Map<String, Value>,
) -> Result<Value, ToolError> {
    let call: Map<String, Value> = args
        .into_iter()
        .filter(|(k, _)| REGION_ARGS.contains(&k.as_str()))
        .collect();
    region_job(dispatcher, scope, dir, call).await
}

async fn region_job(
    dispatcher: &Arc<Dispatcher>,
    scope: &Scope,
    dir: &std::path::Path,
    call: Map<String, Value>,
) -> Result<Value, ToolError> {
    let dir_text = dir.display().to_string();
    let mut opt_args = call.clone();
    opt_args.insert("tiles_dir".into(), json!(dir_text));
    let whole = !call.contains_key("box_um");
    // 1. The tiles, in waves, and the layout written back.
    let optimize = FanOut {
        prefix: "optimize",
        artifact_dir: &dir_text,
    };
    let merged = optimize
        .run_at(dispatcher, scope, opt_args.clone(), 0)
        .await?;

    // 2. Region + halo evaluated before and after, with the same deck.
    let r: Vec<f64> = serde_json::from_value(merged["region_nm"].clone()).unwrap_or_default();
    let halo = merged["tiles"]["halo_nm"].as_f64().unwrap_or(0.0);
    let [l, b, rr, t] = <[f64; 4]>::try_from(r).map_err(|_| {
        ToolError::new(ErrorCode::InternalError, "the merge did not say the region")
    })?;
    let um = |v: f64| v / 1000.0;
    let checked = [um(l - halo), um(b - halo), um(rr + halo), um(t + halo)];
    let layout_in = call.get("layout").cloned().unwrap_or(Value::Null);
    let layout_out = merged["layout_out"]["path"].clone();
    let mask_layer = merged["layout_out"]["mask_layer"].clone();
    let (before_dir, after_dir) = (sub_dir(dir, "before")?, sub_dir(dir, "after")?);
    let before_eval = FanOut {
        prefix: "evaluate",
        artifact_dir: &before_dir,
    };
    let after_eval = FanOut {
        prefix: "evaluate",
        artifact_dir: &after_dir,
    };
    // The written layout lies in the job's directory: the after-evaluation may read it.
    let canonical = dir
        .canonicalize()
        .map_or(dir_text.clone(), |p| p.display().to_string());
    let after_scope = scope.with_allowed_root(canonical);
    let (before, after) = tokio::try_join!(
        before_eval.run_at(
            dispatcher,
            scope,
            evaluate_args(&call, &layout_in, checked, None),
            BEFORE_BASE,
        ),
        after_eval.run_at(
            dispatcher,
            &after_scope,
            evaluate_args(&call, &layout_out, checked, Some(&mask_layer)),
            AFTER_BASE,
        ),
    )?;

    // 3. Group by group.
    let mut compare_args = opt_args;
    compare_args.insert("plan".into(), merged["plan"].clone());
    compare_args.insert("evaluations".into(), json!(["before", "after"]));
    let compared = dispatcher
        .run(
            scope,
            Unit::new("optimize.compare", &Value::Object(compare_args))
                .indexed(COMPARE_UNIT)
                .with_artifact_dir(Some(dir_text.clone()))
                .on_progress(|_| {}),
        )
        .await?;
    let mut merged = merged;
    if let Some(m) = merged.as_object_mut() {
        m.remove("plan");
    }
    Ok(json!({
        "schema_version": reticle_protocol::SCHEMA_VERSION,
        "target": {
            "mode": if whole { "layer" } else { "region" },
            "resolved_from": "none",
        },
        "region_nm": merged["region_nm"],
        "region_source": merged["region_source"],
        "tiles": merged["tiles"],
        "ilt": merged["ilt"],
        "layout_out": merged["layout_out"],
        "pictures": merged["pictures"],
        "state_after": {
            "layout": {
                "path": merged["layout_out"]["path"],
                "sha256": merged["layout_out"]["sha256"],
                "bytes": merged["layout_out"]["bytes"],
            },
            "mask_layer": merged["layout_out"]["mask_layer"],
            "region_before_png": merged["pictures"]["before"],
            "region_after_png": merged["pictures"]["after"],
        },
        "evaluated_box_um": checked,
        "evaluation": {
            "before": evaluation_summary(&before, &before_dir),
            "after": evaluation_summary(&after, &after_dir),
        },
        "changes": compared,
        "seams": {
            "guarantee": "tiles run in four waves (2x2 colouring); each tile's ILT and mask-rule legalizer see the finished neighbours' mask as frozen context, so every seam is legalized by the later tile against the earlier tile's final mask (D170); measured by the re-evaluation: changes.totals.new_near_seams",
            "new_near_seams": compared["totals"]["new_near_seams"],
        },
        "artifacts": {"dir": dir_text},
    }))
}

/// The text of a region optimize's result.
pub(super) fn porcelain(payload: &Value) -> String {
    let c = &payload["changes"]["totals"];
    let p = &payload["changes"]["printed_groups"];
    format!(
        "{} {}: optimized {} {:?} nm in {} tiles ({} with ILT)\n\
         groups {} → {} (resolved {}, remaining {}, new {}, new within 200 nm of a seam {}); printed {} → {}; mask-rule records after {}\n\
         layout: {} (mask layer {}), pictures: {} / {}",
        payload["job_id"].as_str().unwrap_or("?"),
        payload["status"].as_str().unwrap_or("?"),
        payload["target"]["mode"].as_str().unwrap_or("?"),
        payload["region_nm"],
        payload["tiles"]["total"],
        payload["tiles"]["optimized"],
        c["before"],
        c["after"],
        c["resolved"],
        c["remaining"],
        c["new"],
        c["new_near_seams"],
        p["before"],
        p["after"],
        payload["changes"]["mask_rule_records_after"],
        payload["layout_out"]["path"].as_str().unwrap_or("?"),
        payload["layout_out"]["mask_layer"].as_str().unwrap_or("?"),
        payload["pictures"]["before"]["path"]
            .as_str()
            .unwrap_or("?"),
        payload["pictures"]["after"]["path"].as_str().unwrap_or("?"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn a_region_is_a_box_or_the_whole_layer_on_a_layout_file() {
        assert!(wants_region(&args(
            json!({"layout": "a.gds", "box_um": [5, 5, 11, 11]})
        )));
        assert!(wants_region(&args(
            json!({"layout": "a.gds", "box_um": [0, 0, 1, 1]})
        )));
        assert!(!wants_region(&args(
            json!({"layout": "a.gds", "box_um": [0, 0, 1, 1], "tiling": "window"})
        )));
        assert!(!wants_region(&args(json!({"layout": "a.gds"}))));
        assert!(wants_region(&args(
            json!({"layout": "a.gds", "box_um": [0, 0, 1, 1], "tiling": "tiles"})
        )));
        assert!(wants_region(&args(
            json!({"layout": "a.oas", "whole_layer": true})
        )));
        assert!(!wants_region(&args(
            json!({"layout": "a.glp", "box_um": [5, 5, 11, 11]})
        )));
        assert!(!wants_region(&args(
            json!({"layout": "a.gds", "box_um": [5, 5, 11, 11], "clip_um": [0, 0, 20, 20]})
        )));
        assert!(!wants_region(&args(
            json!({"layout": "a.gds", "violation_id": "rv1:x"})
        )));
    }
}
