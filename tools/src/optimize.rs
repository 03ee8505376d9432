//! `optimize`: pixel ILT around a violation, in a box, or over the whole clip, on a
//! worker (seed 000 §2c, §5; seed 002 `state_after`; docs/DECISIONS.md D44–D46).
//!
//! The host resolves what to optimize before the job starts:
//! - a `violation_id` in this connection's cache (filled by `evaluate` at
//!   `report_level: detailed`) brings the evaluate call's arguments with it (fast path);
//! - a miss is re-resolved from the self-describing id when the caller pins the layout
//!   (`layout`, whose SHA-256 must start with the id's; `layout_artifact_id` optional);
//!   without a `layout` (or a `deck`) the call fails with `CACHE_EVICTED`, recoverable,
//!   naming the arguments to pass; a pinned layout that is gone or changed is
//!   `LAYOUT_NOT_PINNED` (not recoverable with this id: evaluate again).
//!
//! The worker re-evaluates the clip (the id must be among its records), runs the ILT, and
//! writes the optimized mask (GDSII, PNG) into a job directory the host creates under the
//! artifact root.

use libmcp::ReplayContract;
use reticle_protocol::args::{OptimizeArgs, OptimizeTarget};
use reticle_protocol::{ErrorCode, ToolError, ViolationId};
use serde_json::{Value, json};

use super::evaluate::deck_is_path;
use super::optimize_pins::pinned_version;
use super::worker_job::{JobExtras, object_of, parse_call, run_op_with};
use super::{Detail, TaskSupport, Tool, ToolContext, ToolDef, ToolResult};

/// The worker op.
pub const OP: &str = "optimize";

pub(super) fn tool() -> Tool {
    Tool::new(ToolDef {
        name: "optimize",
        title: "Optimize the mask (pixel ILT)",
        description: "Repairs a violation found by evaluate with pixel inverse lithography: \
                      optimize(violation_id) optimizes a window around the violation plus a \
                      halo (scope=group, the default, resolves a shadow record to its \
                      group's canonical record and fixes the whole group; \
                      scope=record_only optimizes around that record alone); box_um \
                      optimizes a box; neither optimizes the whole clip. The rest of the \
                      mask stays as drawn. Returns state_after: the optimized mask as a \
                      GDSII file and a PNG (paths under the artifact root), metrics before \
                      and after (L2, PVB, EPE, violations re-evaluated with the deck), the \
                      violations resolved and the group members. A violation_id from \
                      evaluate(report_level=detailed) in this connection needs no other \
                      argument; otherwise pass layout and deck (and the clip_um, pixel_nm, \
                      model of the evaluate call). Returns a job_id at once (poll it) unless \
                      `wait` is true or the call carries a progressToken.",
        replay: ReplayContract::Convergent,
        read_only: true,
        handler: run,
        porcelain: Some(porcelain),
    })
    .with_task_support(TaskSupport::Optional)
}

/// The parts of an id the errors show (`rv1:<layout16>:<deck16>:<rule>:<x>:<y>:<tile>:<group>:<i>`).
fn id_parts(id: &str) -> Option<Value> {
    let id: ViolationId = id.parse().ok()?;
    Some(json!({
        "layout_sha256_prefix": id.layout_sha16,
        "deck_hash_prefix": id.deck16,
        "rule_id": id.rule_id,
        "location_nm": id.location_nm(),
        "tile_id": id.tile_id,
        "violation_group_id": id.group_id,
    }))
}

/// `resolve_read`, with a missing file reported as the layout no longer being pinned.
fn resolve_pinned(ctx: &ToolContext, raw: &str, id: &str) -> Result<String, ToolError> {
    match ctx.scope.roots.resolve_read(raw) {
        Ok(path) => Ok(path.display().to_string()),
        Err(e) if e.code == ErrorCode::FileNotFound => Err(ToolError::new(
            ErrorCode::LayoutNotPinned,
            format!("the layout of {id} is gone ({})", e.message),
        )
        .with_details(json!({"violation_id": id, "layout": raw, "reason": "layout_gone"}))
        .recoverable(false)
        .with_hint("the layout this id was made on no longer exists; run evaluate on the current layout and use its violation_ids")),
        Err(e) => Err(e),
    }
}

/// Fills `call` with what this connection remembers of the evaluate call that made `id`
/// and says where its arguments come from (`session_cache`, or `violation_id`: the id
/// itself, re-derived by the worker), or the error a caller can act on (D181).
fn resolve_id_arguments(
    ctx: &ToolContext,
    call: &mut OptimizeArgs,
    id: &str,
) -> Result<&'static str, ToolError> {
    let parts = id_parts(id).ok_or_else(|| {
        ToolError::new(
            ErrorCode::InvalidInput,
            "not a reticle violation_id (rv1:…, from evaluate at report_level=detailed)",
        )
        .with_details(json!({"violation_id": id}))
    })?;
    let layout16 = parts["layout_sha256_prefix"].as_str().unwrap_or_default();
    let deck16 = parts["deck_hash_prefix"].as_str().unwrap_or_default();
    if let Some(pin) = call.layout_artifact_id.as_deref() {
        let pin = pin.trim_start_matches("sha256:");
        if !(pin.starts_with(layout16) || layout16.starts_with(pin)) {
            return Err(ToolError::new(
                ErrorCode::LayoutNotPinned,
                "layout_artifact_id names another layout than the violation_id",
            )
            .with_details(json!({"violation_id": id, "layout_artifact_id": pin, "violation_id_layout_sha256": layout16, "reason": "pin_mismatch"}))
            .recoverable(false)
            .with_hint("pass the layout_artifact_id of the evaluate call that returned this id, or evaluate again"));
        }
    }
    // A record this connection returned (a window's), else one of a tiled evaluation of
    // this connection, on any page (D181).
    let evaluation = ctx
        .scope
        .violations
        .get(id)
        .map(|(evaluation, _record)| evaluation)
        .or_else(|| ctx.scope.violations.region_for(layout16, deck16));
    if let Some(evaluation) = evaluation {
        // Fast path: the evaluate call's arguments (its box as the clip), unless the call
        // overrides them.
        let evaluate = &evaluation.args;
        call.fill_from_evaluate(evaluate, true);
        return Ok("session_cache");
    }
    if call.layout.is_some() {
        return Ok("violation_id");
    }
    if !ctx.scope.violations.was_evicted(layout16) {
        // Never cached here (another connection, a restarted host): re-derived from the
        // id once the caller names the layout; the deck, when not named, is the shipped
        // deck the id's hash names (D181).
        return Err(ToolError::new(
            ErrorCode::NotFound,
            format!("{id} was not evaluated on this connection; pass layout to re-derive it from the id"),
        )
        .with_details(json!({
            "violation_id": id,
            "missing_arguments": ["layout"],
            "also_pass_if_evaluate_had_them": ["deck (unless shipped)", "clip_um (evaluate's box_um)", "layer", "cell", "pixel_nm", "model", "tile_nm", "mask_layer"],
            "violation": parts,
        }))
        .recoverable(true)
        .with_hint(format!(
            "call optimize again with layout (the file whose SHA-256 starts with {layout16}), plus the deck if it is not a shipped one, and the pixel_nm/model/tile_nm of the evaluate call"
        )));
    }
    Err(ToolError::new(
        ErrorCode::CacheEvicted,
        format!("{id} is not in this connection's violation cache; pass layout to re-resolve it from the id"),
    )
    .with_details(json!({
        "violation_id": id,
        "missing_arguments": ["layout"],
        "also_pass_if_evaluate_had_them": ["clip_um (evaluate's box_um)", "layer", "cell", "pixel_nm", "model", "tile_nm"],
        "violation": parts,
    }))
    .recoverable(true)
    .with_hint(format!(
        "call optimize again with layout (the file whose SHA-256 starts with {layout16}) and deck, plus the clip_um/pixel_nm/model/tile_nm of the evaluate call"
    )))
}

async fn run(ctx: ToolContext, args: serde_json::Map<String, Value>) -> ToolResult {
    // Parsed once at the edge (D210): what the call repairs is decided by the type.
    let mut call: OptimizeArgs = parse_call(args)?;
    let wait = call.wait.take().unwrap_or(false);
    // A list of ids or an evaluation job's groups: a region (D182).
    if matches!(call.target(), OptimizeTarget::Ids | OptimizeTarget::Job) {
        return super::optimize_targets::run_targets(&ctx, call, wait).await;
    }
    let id = call.violation_id.clone();
    let resolved_from = match &id {
        Some(id) => resolve_id_arguments(&ctx, &mut call, id)?,
        // The deck defaults to the shipped deck whose layers the layout has (D185).
        None if call.layout.is_none() => {
            return Err(ToolError::new(
                ErrorCode::InvalidInput,
                "optimize without a violation_id needs layout",
            )
            .with_details(json!({"missing_arguments": ["layout"]})));
        }
        None => "none",
    };
    let raw = call.layout.clone().unwrap_or_default();
    call.layout = Some(match &id {
        None => ctx.scope.roots.resolve_read(&raw)?.display().to_string(),
        Some(id) => resolve_pinned(&ctx, &raw, id)?,
    });
    if let Some(deck) = call.deck.clone()
        && deck_is_path(&deck)
    {
        call.deck = Some(ctx.scope.roots.resolve_read(&deck)?.display().to_string());
    }
    // A region of any size or the whole layer: tiled, written back (D170).
    if call.target().is_region() {
        return super::optimize_region::run_region(&ctx, call, wait).await;
    }
    // Made first: making it collects the expired job directories, so a pin found below
    // stays for the job.
    let dir = ctx.scope.sessions.new_job_dir("opt")?;
    // The file edited since the evaluation: the id's version pinned by its job (D214).
    let mut resolved_from = resolved_from;
    let mut pin_root = None;
    if let (Some(id), Some(layout)) = (&id, call.layout.clone()) {
        let layout16 = id_parts(id)
            .and_then(|p| p["layout_sha256_prefix"].as_str().map(str::to_owned))
            .unwrap_or_default();
        let dirs = ctx.scope.sessions.artifact_dirs();
        let evaluated_here = resolved_from == "session_cache";
        let id = id.clone();
        let pinned = tokio::task::spawn_blocking(move || {
            pinned_version(
                std::path::Path::new(&layout),
                &layout16,
                &dirs,
                evaluated_here,
                &id,
            )
        })
        .await
        .map_err(|e| ToolError::new(ErrorCode::InternalError, format!("layout pin: {e}")))??;
        if let Some(copy) = pinned {
            pin_root = copy.parent().map(|p| p.display().to_string());
            call.layout = Some(copy.display().to_string());
            resolved_from = "layout_pin";
        }
    }
    let mut args = window_op_args(call);
    if resolved_from != "none" {
        args.insert("resolved_from".into(), json!(resolved_from));
    }
    let Some(pin_root) = pin_root else {
        let extras = JobExtras {
            artifact_dir: Some(dir),
            on_result: None,
        };
        return run_op_with(&ctx, OP, &args, wait, extras).await;
    };
    // The pinned copy lies in an evaluation job's directory: this job may read it.
    let unit = ctx
        .unit(OP, &Value::Object(args))
        .with_artifact_dir(Some(dir.path().display().to_string()));
    let dispatcher = std::sync::Arc::clone(&ctx.dispatcher);
    ctx.run_as_job(wait, move |scope| async move {
        let _job_dir = dir;
        dispatcher
            .run(&scope.with_allowed_root(pin_root), unit)
            .await
    })
    .await
}

/// The `optimize` op's arguments for one window: the call less what only the host reads
/// (`tiling`, `whole_layer`).
pub(crate) fn window_op_args(mut call: OptimizeArgs) -> serde_json::Map<String, Value> {
    call.tiling = None;
    call.whole_layer = None;
    object_of(&call)
}

fn porcelain(payload: &Value, _detail: Detail) -> String {
    if payload.get("layout_out").is_some() {
        return super::optimize_region::porcelain(payload);
    }
    let (b, a) = (&payload["metrics"]["before"], &payload["metrics"]["after"]);
    let t = &payload["target"];
    let mut text = format!(
        "{} {}: optimized {} {} (window {}..{} × {}..{} nm, {} ILT iterations)\n\
         L2 {} → {} px, PVB {} → {} px, EPE violations {} → {}, rule records {} → {}\n",
        payload["job_id"].as_str().unwrap_or("?"),
        payload["status"].as_str().unwrap_or("?"),
        t["mode"].as_str().unwrap_or("?"),
        t["resolved_violation_id"].as_str().unwrap_or(""),
        payload["window_nm"]["left"],
        payload["window_nm"]["right"],
        payload["window_nm"]["bottom"],
        payload["window_nm"]["top"],
        payload["ilt"]["iterations_run"],
        b["l2_px"],
        a["l2_px"],
        b["pvb_px"],
        a["pvb_px"],
        b["epe_violations"],
        a["epe_violations"],
        b["violation_records"],
        a["violation_records"],
    );
    let resolved = payload["violations_resolved"]
        .as_array()
        .map_or(0, Vec::len);
    text.push_str(&format!("groups resolved: {resolved}\n"));
    for m in payload["group_members"].as_array().into_iter().flatten() {
        text.push_str(&format!(
            "  {} {} ({})\n",
            m["resolution"].as_str().unwrap_or("?"),
            m["violation_id"].as_str().unwrap_or("?"),
            m["dedup_strategy"].as_str().unwrap_or("?"),
        ));
    }
    let s = &payload["state_after"];
    text.push_str(&format!(
        "mask: {} ({} polygons), picture: {}",
        s["mask_gds"]["path"].as_str().unwrap_or("?"),
        s["polygons"]["gds_polygons"],
        s["mask_png"]["path"].as_str().unwrap_or("?"),
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_parts_name_what_a_miss_needs() {
        let p = id_parts(
            "rv1:0123456789abcdef:fedcba9876543210:M1.W:1500:-2000:T_1_0:00112233aabbccdd:3",
        )
        .unwrap();
        assert_eq!(p["layout_sha256_prefix"], "0123456789abcdef");
        assert_eq!(p["location_nm"], json!([1.5, -2.0]));
        assert!(id_parts("rv1:x").is_none());
    }
}
