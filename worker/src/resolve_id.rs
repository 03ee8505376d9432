//! Resolving a `violation_id` of a tiled report for `optimize` (issue 28 item 1, D181).
//!
//! A tiled evaluation's records are not the records of one periodic window, so a window
//! re-evaluated around the id cannot find them. The id carries the layout hash, the deck
//! hash, the rule, its location (pm) and its report tile; the tiling grid is anchored at
//! the layout origin and depends only on the model, the pixel and the halo. The record is
//! therefore re-derived by running the same tiled evaluation (the same
//! [`reticle_eval::tile::evaluate_tile`] on the same grid, the same
//! [`reticle_eval::merge::merge`]) over a neighbourhood of the location — inside the
//! evaluated region when the caller names it (`clip_um`, the evaluate call's `box_um`) —
//! and finding the id among its records. The neighbourhood starts one model period wide and
//! doubles while the id is not among its records (a group whose members chain beyond it
//! has another canonical record there), up to [`MAX_ROUNDS`] rounds.
//!
//! The tiles run here, in this worker, one after the other: a neighbourhood is a few tiles.

use std::path::Path;

use reticle_eval::merge::{MergeJob, merge};
use reticle_eval::optimize::target::TargetScope;
use reticle_eval::report::Setup;
use reticle_eval::tile::{TileJob, evaluate_tile};
use reticle_kernel::model::ModelSpec;
use reticle_protocol::error::{ErrorCode, ToolError};
use reticle_protocol::violation_id::ViolationId;
use serde_json::{Value, json};

use crate::attempt::AttemptCtx;
use crate::deck_job::DeckArgs;
use crate::op::eval_error;
use crate::tiled::{PlanRequest, image_tile, open_setup_region, plan_region};

/// Rounds of doubling the neighbourhood before the id is declared not found.
pub const MAX_ROUNDS: u32 = 3;

/// Whether `optimize` resolves its id in a tiled neighbourhood: the evaluation it came from
/// was tiled, by the same decision `evaluate` takes (`clip_um` is the evaluate call's
/// `box_um`; a `.glp` clip without one, or a box of one model period, is one window).
#[must_use]
pub fn is_tiled(layout: &Path, clip_um: Option<[f64; 4]>, model: Option<&ModelSpec>) -> bool {
    !reticle_protocol::args::is_one_window(
        None,
        &layout.to_string_lossy(),
        model.map(ModelSpec::period_nm),
        clip_um,
    )
}

/// The records of the tiled re-evaluation that holds the id, and where it ran.
pub struct Rederived {
    /// Every record of the neighbourhood's report (the id among them).
    pub records: Vec<Value>,
    /// The neighbourhood evaluated (nm).
    pub region_nm: [f64; 4],
    /// How many rounds it took (1: the first neighbourhood).
    pub rounds: u32,
    /// nm per dbu of the layout.
    pub dbu_nm: f64,
}

impl Rederived {
    /// The clip (µm) the group of `id` (with `TargetScope::Group`; the record alone with
    /// `RecordOnly`) is optimized in: one model period centred on its records.
    #[must_use]
    pub fn clip_um(&self, id: &str, scope: TargetScope, model: Option<&ModelSpec>) -> [f64; 4] {
        let record = self.records.iter().find(|r| r["violation_id"] == id);
        let chosen: Vec<&Value> = match (record, scope) {
            (Some(r), TargetScope::Group) => self
                .records
                .iter()
                .filter(|m| m["violation_group_id"] == r["violation_group_id"])
                .collect(),
            (Some(r), TargetScope::RecordOnly) => vec![r],
            (None, _) => Vec::new(),
        };
        clip_around(&chosen, model, self.dbu_nm)
    }

    /// What the payload's `target.rederived` says: where the record was re-derived.
    #[must_use]
    pub fn summary(&self) -> Value {
        json!({
            "how": "tiled_neighbourhood",
            "region_nm": self.region_nm,
            "rounds": self.rounds,
            "records": self.records.len(),
        })
    }
}

/// The shipped deck whose hash the id carries (`optimize` of an id without `deck`).
///
/// # Errors
/// `INVALID_INPUT`: no id, or no shipped deck has its hash (then the deck must be named).
pub fn shipped_deck_of(id: Option<&ViolationId>) -> Result<String, ToolError> {
    let shipped: Vec<(String, String)> = reticle_eval::deck::SHIPPED_DECKS
        .iter()
        .filter_map(|(name, _)| {
            let (deck, _) = reticle_eval::deck::load(name, |_| unreachable_deck()).ok()?;
            Some(((*name).to_owned(), deck.deck_hash()))
        })
        .collect();
    let fits = id.and_then(|id| {
        shipped
            .iter()
            .find(|(_, hash)| hash.trim_start_matches("sha256:").starts_with(&id.deck16))
    });
    match fits {
        Some((name, _)) => Ok(name.clone()),
        None => Err(ToolError::new(
            ErrorCode::InvalidInput,
            "no deck named, and the violation_id's deck hash is not a shipped deck's: pass deck",
        )
        .with_details(json!({
            "violation_id_deck_hash": id.map(|i| i.deck16.clone()),
            "shipped_decks": shipped.iter().map(|(n, h)| json!({"deck": n, "hash": h})).collect::<Vec<_>>(),
        }))
        .with_hint("pass the deck (a shipped name or a deck file) of the evaluate call that returned the id")),
    }
}

/// A shipped deck never reads a file.
fn unreachable_deck() -> Result<reticle_eval::deck::DeckFile, ToolError> {
    Err(ToolError::new(
        ErrorCode::InternalError,
        "a shipped deck asked for a file",
    ))
}

/// `[l, b, r, t]` ∩ `[l, b, r, t]`, `None` when empty.
fn meet(a: [f64; 4], b: [f64; 4]) -> Option<[f64; 4]> {
    let m = [
        a[0].max(b[0]),
        a[1].max(b[1]),
        a[2].min(b[2]),
        a[3].min(b[3]),
    ];
    (m[0] < m[2] && m[1] < m[3]).then_some(m)
}

/// Re-derives the neighbourhood of `id` (text `id_text`) with the tiled evaluation and
/// returns its records, the id among them.
///
/// # Errors
/// `NOT_FOUND` (the id is not among the records of the largest neighbourhood, or lies
/// outside `region_um`), the evaluation's errors.
pub fn rederive(
    ctx: &AttemptCtx<'_>,
    args: &DeckArgs,
    setup: &Setup,
    id: &ViolationId,
    id_text: &str,
    region_um: Option<[f64; 4]>,
    pin: &dyn Fn(&str) -> Result<(), ToolError>,
) -> Result<Rederived, ToolError> {
    let mut source = open_setup_region(
        ctx,
        &args.layout,
        setup,
        args.cell.as_deref(),
        args.mask_layer.as_deref(),
        None,
    )?;
    // The file must still be the one the id was made on (else LAYOUT_NOT_PINNED, before
    // any imaging).
    pin(&source.sha256)?;
    let [x, y] = id.location_nm();
    let (x, y) = (x / 1000.0, y / 1000.0);
    let period_um = args
        .model
        .as_ref()
        .map_or(reticle_eval::imaging::DEFAULT_SIDE_NM, ModelSpec::period_nm)
        / 1000.0;
    let not_found = |region: Option<[f64; 4]>, why: &str| {
        ToolError::new(
            ErrorCode::NotFound,
            format!("{id_text} was not found by re-evaluating its neighbourhood: {why}"),
        )
        .with_details(json!({
            "violation_id": id_text,
            "rule_id": id.rule_id,
            "location_nm": id.location_nm(),
            "tile_id": id.tile_id,
            "neighbourhood_um": region,
        }))
        .with_hint(
            "pass the box_um of the evaluate call as clip_um, and its layer, cell, pixel_nm, \
             model, tile_nm and mask_layer (what the id does not carry); an id from another \
             version of the layout is LAYOUT_NOT_PINNED",
        )
    };
    let mut half = period_um / 2.0;
    let mut last = None;
    for round in 1..=MAX_ROUNDS {
        let around = [x - half, y - half, x + half, y + half];
        let Some(box_um) = region_um.map_or(Some(around), |r| meet(around, r)) else {
            return Err(not_found(region_um, "its location is outside clip_um"));
        };
        last = Some(box_um);
        let records = evaluate_box(ctx, args, setup, &mut source, box_um)?;
        if records.iter().any(|r| r["violation_id"] == id_text) {
            return Ok(Rederived {
                records,
                region_nm: box_um.map(|v| v * 1000.0),
                rounds: round,
                dbu_nm: source.dbu_nm,
            });
        }
        half *= 2.0;
    }
    Err(not_found(
        last,
        "no record with this id (another rule deck, pixel, model, tile size, layer or region than the evaluate call's?)",
    ))
}

/// Every record of the tiled evaluation of `box_um`, as `evaluate` makes them.
fn evaluate_box(
    ctx: &AttemptCtx<'_>,
    args: &DeckArgs,
    setup: &Setup,
    source: &mut reticle_eval::region_source::RegionSource,
    box_um: [f64; 4],
) -> Result<Vec<Value>, ToolError> {
    let plan = plan_region(
        ctx,
        source,
        &PlanRequest {
            box_um: Some(box_um),
            model: args.model.as_ref(),
            pixel_nm: args.pixel_nm,
            halo_nm: None,
            layer_name: setup.target.to_string(),
        },
    )?;
    let rules = setup.rules();
    let mut outputs = Vec::new();
    for (n, tile) in plan.range.iter().enumerate() {
        ctx.progress.report(
            n as u64,
            plan.range.count(),
            "re-deriving the violation's neighbourhood",
        );
        let imaged = image_tile(ctx, &plan, tile, source, args.model.as_ref())?;
        let job = TileJob::of_plan(&plan, tile, &rules, false);
        let out = evaluate_tile(&job, imaged.as_ref(), source, ctx.cancel)
            .map_err(|e| eval_error(e, ctx.job_id))?;
        outputs.push(Ok(out));
    }
    let job = MergeJob::for_plan(setup, &rules, &plan);
    let mut records = Vec::new();
    merge(
        &job,
        outputs,
        &mut |record| {
            records.push(record.value.clone());
            Ok(())
        },
        ctx.cancel,
    )
    .map_err(|e| eval_error(e, ctx.job_id))?;
    Ok(records)
}

/// A clip of one model period (µm) centred on the box of `records` (the group to repair):
/// what the single-window ILT then optimizes in.
#[must_use]
pub fn clip_around(records: &[&Value], model: Option<&ModelSpec>, dbu_nm: f64) -> [f64; 4] {
    let period_nm = model.map_or(reticle_eval::imaging::DEFAULT_SIDE_NM, ModelSpec::period_nm);
    let mut b = [f64::MAX, f64::MAX, f64::MIN, f64::MIN];
    for r in records {
        for i in 0..4 {
            let v = r["bbox_nm"][i].as_f64().unwrap_or(0.0);
            b[i] = if i < 2 { b[i].min(v) } else { b[i].max(v) };
        }
    }
    // The centre on the database grid, so the clip's corners are whole dbu.
    let snap = |v: f64| (v / dbu_nm).round() * dbu_nm;
    let (cx, cy) = (snap((b[0] + b[2]) / 2.0), snap((b[1] + b[3]) / 2.0));
    let half = period_nm / 2.0;
    [cx - half, cy - half, cx + half, cy + half].map(|v| v / 1000.0)
}
