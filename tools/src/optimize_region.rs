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
use reticle_protocol::args::OptimizeArgs;
use reticle_protocol::optimize_result::{
    ArtifactsDir, EvaluationSummary, Evaluations, IdStatus, RegionResult, RegionStateAfter,
    RegionTarget, Seams,
};
use reticle_protocol::{ErrorCode, ToolError};
use serde_json::{Map, Value, json};

use super::worker_job::object_of;
use super::{ToolContext, ToolResult};

/// Unit numbers of the job's parts (each fan-out numbers its units from its base, so
/// attempt ids and journal tracks stay distinct).
const BEFORE_BASE: u32 = 1 << 28;
const AFTER_BASE: u32 = 2 << 28;
const COMPARE_UNIT: u32 = 3 << 28;
const PUT_BACK_BASE: u32 = 4 << 28;

/// How far (nm) a square of the seam pass's first round reaches past its group's box;
/// round `k` reaches `k` times as far (D252).
pub const PUT_BACK_NM: f64 = 60.0;

/// How many rounds the seam pass tries at most (D252).
pub const PUT_BACK_ROUNDS: u32 = 3;

/// The square of round `round` (from 1) around a group's box `bbox_nm` (nm): the box
/// grown by `round` × [`PUT_BACK_NM`] on every side.
fn square_nm(bbox_nm: [f64; 4], round: u32) -> [f64; 4] {
    let r = PUT_BACK_NM * f64::from(round.max(1));
    // To the picometre, as every length of the result.
    let pm = |v: f64| (v * 1000.0).round() / 1000.0;
    [
        pm(bbox_nm[0] - r),
        pm(bbox_nm[1] - r),
        pm(bbox_nm[2] + r),
        pm(bbox_nm[3] + r),
    ]
}

/// The arguments of `optimize` a region optimize takes (the rest is a single window's or
/// a target's, resolved before).
fn region_call(call: &OptimizeArgs) -> OptimizeArgs {
    OptimizeArgs {
        layout: call.layout.clone(),
        deck: call.deck.clone(),
        layer: call.layer.clone(),
        cell: call.cell.clone(),
        box_um: call.box_um,
        pixel_nm: call.pixel_nm,
        model: call.model.clone(),
        tile_nm: call.tile_nm,
        iterations: call.iterations,
        refine_iterations: call.refine_iterations,
        mask_style: call.mask_style,
        assist_features: call.assist_features,
        mask_layer: call.mask_layer.clone(),
        halo_nm: call.halo_nm,
        ..OptimizeArgs::default()
    }
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

/// Runs the region optimize of `call` (paths resolved, `wait` taken) as a job: a box or
/// the whole layer.
pub(super) async fn run_region(ctx: &ToolContext, call: OptimizeArgs, wait: bool) -> ToolResult {
    let mode = if call.box_um.is_some() {
        "region"
    } else {
        "layer"
    };
    let target = RegionTarget {
        mode: mode.into(),
        resolved_from: "none".into(),
        ..RegionTarget::default()
    };
    run_region_for(ctx, call, wait, target).await
}

/// [`run_region`] for any target: `target` (its `mode` and what it named) is the
/// result's `target`; the ids it lists get their group's status (D211).
pub(super) async fn run_region_for(
    ctx: &ToolContext,
    call: OptimizeArgs,
    wait: bool,
    target: RegionTarget,
) -> ToolResult {
    let job_dir = ctx.scope.sessions.new_job_dir("opt")?;
    let dispatcher = Arc::clone(&ctx.dispatcher);
    ctx.run_as_job(wait, move |scope| async move {
        let dir = job_dir.path().to_path_buf();
        let payload = region_result(&dispatcher, &scope, &dir, &call, target).await;
        drop(job_dir);
        payload
    })
    .await
}

/// The region optimize of `call` (paths resolved) for `target` run on `dispatcher` in
/// `scope` with its files in `dir`: what the tool's job runs, and `reticle optimize` and
/// `reticle bench repair` outside any job.
///
/// # Errors
/// The units' errors.
pub(crate) async fn region_result(
    dispatcher: &Arc<Dispatcher>,
    scope: &Scope,
    dir: &std::path::Path,
    call: &OptimizeArgs,
    target: RegionTarget,
) -> Result<Value, ToolError> {
    let result = region_job(dispatcher, scope, dir, call, target).await?;
    serde_json::to_value(&result)
        .map_err(|e| ToolError::new(ErrorCode::InternalError, format!("region result: {e}")))
}

async fn region_job(
    dispatcher: &Arc<Dispatcher>,
    scope: &Scope,
    dir: &std::path::Path,
    call: &OptimizeArgs,
    mut target: RegionTarget,
) -> Result<RegionResult, ToolError> {
    let dir_text = dir.display().to_string();
    let call = object_of(&region_call(call));
    // A tile reads its finished neighbours in the tiles folder of its artifact directory:
    // the job's folder on the pool, the batch's on a cluster (where the executor places
    // what the earlier waves left, D253).
    let opt_args = call.clone();
    // 1. The tiles, in waves, and the layout written back.
    let optimize = FanOut {
        prefix: "optimize",
        artifact_dir: &dir_text,
    };
    let mut merged = optimize
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
    // The job's progress counts on through each later fan-out (D256).
    let (before_stage, after_stage) = (
        scope.next_stage("evaluation before"),
        after_scope.next_stage("evaluation after"),
    );
    let (before, after) = tokio::try_join!(
        before_eval.run_at(
            dispatcher,
            &before_stage,
            evaluate_args(&call, &layout_in, checked, None),
            BEFORE_BASE,
        ),
        after_eval.run_at(
            dispatcher,
            &after_stage,
            evaluate_args(&call, &layout_out, checked, Some(&mask_layer)),
            AFTER_BASE,
        ),
    )?;

    // 3. Group by group, and each listed id's group (D211).
    let mut compare_args = opt_args;
    compare_args.insert("plan".into(), merged["plan"].clone());
    if let Some(ids) = &target.violation_ids {
        compare_args.insert("targets".into(), json!(ids));
    }
    let compared = compare(dispatcher, scope, &dir_text, &compare_args, "after", 0).await?;

    // 4. The seam pass (D252): the drawn mask back around the new groups near seams.
    let mut pass = SeamPass {
        dispatcher,
        scope,
        after_scope: &after_scope,
        dir,
        call: &call,
        args: compare_args,
        checked,
        mask_layer: &mask_layer,
    };
    let (kept, put_back) = pass
        .run(Checked {
            after,
            after_dir,
            compared,
            written: None,
        })
        .await?;
    let Checked {
        after,
        after_dir,
        mut compared,
        written,
    } = kept;
    if let (Some(w), Some(m)) = (written, merged.as_object_mut()) {
        m.insert("layout_out".into(), w["layout_out"].clone());
        m.insert("pictures".into(), w["pictures"].clone());
    }
    let ids = compared.as_object_mut().and_then(|c| c.remove("targets"));
    if let Some(ids) = ids.filter(|v| !v.is_null()) {
        let ids: Vec<IdStatus> = serde_json::from_value(ids).map_err(|e| {
            ToolError::new(
                ErrorCode::InternalError,
                format!("optimize.compare's targets: {e}"),
            )
        })?;
        target.ids = Some(ids);
    }
    if let Some(m) = merged.as_object_mut() {
        m.remove("plan");
    }
    let layout_file = &merged["layout_out"];
    Ok(RegionResult {
        schema_version: reticle_protocol::SCHEMA_VERSION.to_owned(),
        target,
        region_nm: merged["region_nm"].clone(),
        region_source: merged["region_source"].clone(),
        tiles: merged["tiles"].clone(),
        ilt: merged["ilt"].clone(),
        layout_out: layout_file.clone(),
        pictures: merged["pictures"].clone(),
        state_after: RegionStateAfter {
            layout: serde_json::from_value(layout_file.clone()).map_err(|e| {
                ToolError::new(
                    ErrorCode::InternalError,
                    format!("optimize.merge's layout_out: {e}"),
                )
            })?,
            mask_layer: layout_file["mask_layer"].clone(),
            region_before_png: merged["pictures"]["before"].clone(),
            region_after_png: merged["pictures"]["after"].clone(),
        },
        evaluated_box_um: checked,
        evaluation: Evaluations {
            before: EvaluationSummary::of(&before, &before_dir),
            after: EvaluationSummary::of(&after, &after_dir),
        },
        seams: Seams {
            guarantee: "tiles run in four waves (2x2 colouring); each tile's ILT and mask-rule legalizer see the finished neighbours' mask as frozen context, so every seam is legalized by the later tile against the earlier tile's final mask (D170); then a seam pass puts the drawn mask back, where no mask rule breaks, in growing squares around each new group the re-evaluation finds (the nearest a seam first), keeping a round only when the next re-evaluation has fewer new groups near seams or fewer new groups, neither more, and no more mask-rule records (D252, seams.put_back); measured by the final re-evaluation: changes.totals.new_near_seams".to_owned(),
            new_near_seams: compared["totals"]["new_near_seams"].clone(),
            put_back,
        },
        changes: compared,
        artifacts: ArtifactsDir { dir: dir_text },
    })
}

/// One re-evaluation of the written layout and its comparison with the drawn one; with
/// the seam pass's put-back that wrote the layout (`None`: the merge's).
struct Checked {
    after: Value,
    after_dir: String,
    compared: Value,
    written: Option<Value>,
}

impl Checked {
    fn total(&self, key: &str) -> u64 {
        self.compared["totals"][key].as_u64().unwrap_or(0)
    }

    fn mask_records(&self) -> u64 {
        self.compared["mask_rule_records_after"]
            .as_u64()
            .unwrap_or(0)
    }

    /// The boxes (nm) of the new groups the comparison lists (`new_groups`: the nearest a
    /// seam first, at most `NEW_GROUPS_LISTED` of them).
    fn new_groups(&self) -> Vec<[f64; 4]> {
        self.compared["new_groups"]
            .as_array()
            .map(|groups| {
                groups
                    .iter()
                    .filter_map(|g| serde_json::from_value(g["bbox_nm"].clone()).ok())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether `self` is better than `kept`: fewer new groups near seams or fewer new
    /// groups, neither more, and no more mask-rule records (D252).
    fn improves_on(&self, kept: &Self) -> bool {
        let (near, new) = (self.total("new_near_seams"), self.total("new"));
        let (kept_near, kept_new) = (kept.total("new_near_seams"), kept.total("new"));
        (near < kept_near || new < kept_new)
            && near <= kept_near
            && new <= kept_new
            && self.mask_records() <= kept.mask_records()
    }
}

/// Runs `optimize.compare` of the evaluation before and the one in folder `after` of the
/// job's directory; `round` numbers its unit.
async fn compare(
    dispatcher: &Arc<Dispatcher>,
    scope: &Scope,
    dir_text: &str,
    args: &Map<String, Value>,
    after: &str,
    round: u32,
) -> Result<Value, ToolError> {
    let mut args = args.clone();
    args.insert("evaluations".into(), json!(["before", after]));
    dispatcher
        .run(
            scope,
            Unit::new("optimize.compare", &Value::Object(args))
                .indexed(COMPARE_UNIT + round)
                .with_artifact_dir(Some(dir_text.to_owned()))
                .on_progress(|_| {}),
        )
        .await
}

/// The seam pass of a region optimize (D252; the worker's `optimize.put_back`).
struct SeamPass<'a> {
    dispatcher: &'a Arc<Dispatcher>,
    scope: &'a Scope,
    /// `scope` with the job's directory readable (the written layout lies there).
    after_scope: &'a Scope,
    dir: &'a std::path::Path,
    call: &'a Map<String, Value>,
    /// The region ops' arguments (the call, the plan, the listed ids).
    args: Map<String, Value>,
    checked: [f64; 4],
    mask_layer: &'a Value,
}

impl SeamPass<'_> {
    /// Up to [`PUT_BACK_ROUNDS`] rounds from `first` (the merge's layout, checked): each
    /// puts the drawn mask back in the squares kept so far and in one square of its reach
    /// around each new group the last kept check found (the nearest a seam first), and is
    /// kept when it [`Checked::improves_on`] what was kept. Answers the check of what is
    /// on disk at the end and the result's `seams.put_back`.
    async fn run(&mut self, first: Checked) -> Result<(Checked, Value), ToolError> {
        let mut kept = first;
        let mut squares: Vec<[f64; 4]> = Vec::new();
        let mut rounds = Vec::new();
        let mut on_disk_kept = true;
        for round in 1..=PUT_BACK_ROUNDS {
            let new = kept.new_groups();
            if new.is_empty() {
                break;
            }
            let mut trial = squares.clone();
            trial.extend(new.iter().map(|b| square_nm(*b, round)));
            let written = self.put_back(&trial, round).await?;
            on_disk_kept = false;
            // Squares the worker could not put back without a new mask-rule violation.
            let dropped = written["squares"]
                .as_array()
                .map_or(0, |o| o.iter().filter(|s| s["square_nm"].is_null()).count());
            let name = format!("after_{round}");
            let after_dir = sub_dir(self.dir, &name)?;
            let layout = written["layout_out"]["path"].clone();
            let after = FanOut {
                prefix: "evaluate",
                artifact_dir: &after_dir,
            }
            .run_at(
                self.dispatcher,
                &self
                    .after_scope
                    .next_stage(&format!("seam pass round {round}, evaluation")),
                evaluate_args(self.call, &layout, self.checked, Some(self.mask_layer)),
                AFTER_BASE + (round << 24),
            )
            .await?;
            let dir_text = self.dir.display().to_string();
            let compared = compare(
                self.dispatcher,
                self.scope,
                &dir_text,
                &self.args,
                &name,
                round,
            )
            .await?;
            let trial_checked = Checked {
                after,
                after_dir,
                compared,
                written: Some(written),
            };
            let better = trial_checked.improves_on(&kept);
            rounds.push(json!({
                "round": round,
                "reach_nm": PUT_BACK_NM * f64::from(round),
                "squares": trial.len(),
                "dropped": dropped,
                "new_near_seams": trial_checked.total("new_near_seams"),
                "new": trial_checked.total("new"),
                "mask_rule_records_after": trial_checked.mask_records(),
                "kept": better,
            }));
            if better {
                squares = trial;
                kept = trial_checked;
                on_disk_kept = true;
            }
        }
        if !on_disk_kept {
            // The last round was not kept: the layout of the squares kept goes back on disk
            // (the same bytes as when they were checked).
            let written = self.put_back(&squares, PUT_BACK_ROUNDS + 1).await?;
            kept.written = Some(written);
        }
        Ok((
            kept,
            json!({
                "reach_nm": PUT_BACK_NM,
                "rounds": rounds,
                "squares_nm": squares,
            }),
        ))
    }

    /// Unit `optimize.put_back` with `squares` (nm), numbered by `round`.
    async fn put_back(&self, squares: &[[f64; 4]], round: u32) -> Result<Value, ToolError> {
        let mut args = self.args.clone();
        args.insert("put_back".into(), json!(squares));
        self.dispatcher
            .run(
                self.scope,
                Unit::new("optimize.put_back", &Value::Object(args))
                    .indexed(PUT_BACK_BASE + round)
                    .with_artifact_dir(Some(self.dir.display().to_string()))
                    .on_progress(|_| {}),
            )
            .await
    }
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
    ) + &ids_lines(&payload["target"]["ids"])
}

/// One line per listed id: its group resolved, remaining or not found (D211); at most
/// ten, then a count.
fn ids_lines(ids: &Value) -> String {
    let ids = ids.as_array().map_or(&[][..], Vec::as_slice);
    let mut text = String::new();
    for s in ids.iter().take(10) {
        text.push_str(&format!(
            "\n  {} {}",
            s["status"].as_str().unwrap_or("?"),
            s["violation_id"].as_str().unwrap_or("?")
        ));
    }
    if ids.len() > 10 {
        text.push_str(&format!("\n  … and {} more ids", ids.len() - 10));
    }
    text
}
