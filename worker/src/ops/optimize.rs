//! `optimize`: pixel ILT of one window of a clip, the rest of the mask as drawn
//! (seed 000 §2c/§5, issue 7 item 5; docs/DECISIONS.md D44–D46).
//!
//! 1. The clip is imaged and evaluated exactly as `evaluate` does it (the shared
//!    [`crate::imaging::image`] and [`reticle_eval::report::report`]), so the violation
//!    ids of the re-evaluation are the ids `evaluate` handed out.
//! 2. The target is resolved: a `violation_id` must be one of those records (its layout
//!    hash must be the file's, else `LAYOUT_NOT_PINNED`; its deck hash the deck's); with
//!    `scope: group` a shadow resolves to its group's canonical record and the window
//!    covers every member of the group, with `record_only` only the record's marker. A
//!    `box_um` is the window itself; neither means the whole clip.
//! 3. [`reticle_kernel::ilt::optimize_window`] optimizes the pixels of the window plus
//!    halo; pixels outside keep the drawn mask.
//! 4. The optimized mask (drawn polygons outside the window, the ILT pixels inside) is
//!    imaged at the three corners and evaluated again with the same deck: metrics before
//!    and after, which groups are resolved, and `state_after` — the mask as GDSII
//!    polygons and a PNG, written into the job's artifact directory.
//!
//! This module is the adapter (arguments, files, backend, progress, artifacts); the logic
//! of each step is [`reticle_eval::optimize`].

use reticle_eval::optimize::compare::{compare, records_in_window, records_of};
use reticle_eval::optimize::mask::{PixelWindow, context_pieces, mask_polygons, pixel_window};
use reticle_eval::optimize::target::{
    self, TargetRequest, TargetScope, check_deck_pin, check_layout_pin,
};
use reticle_eval::optimize::{
    MaskOptions, Outcome, changed_pixels, mask_rule_ids, payload, polygon_summary, reimage, run_ilt,
};
use reticle_eval::report::{ReportLevel, ViolationLimits, report};
use reticle_eval::{EvalError, MaskOverride};
use reticle_kernel::Grid;
use reticle_kernel::ilt::IltParams;
use reticle_kernel::mrc::MaskStyle;
use reticle_layout::{Cell, LayerKey, Library, Shape, write_gds};
use reticle_protocol::error::{ErrorCode, ToolError};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::artifacts;
use crate::attempt::AttemptCtx;
use crate::deck_job::parse_deck_args;
use crate::op::{self, Op, OpResult, cancelled, eval_error};
use crate::resolve_id;

/// `optimize`'s own arguments (the shared ones are [`crate::deck_job::DeckArgs`]).
#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct Own {
    clip_um: Option<[f64; 4]>,
    tile_nm: Option<f64>,
    violation_id: Option<String>,
    scope: TargetScope,
    box_um: Option<[f64; 4]>,
    halo_nm: Option<f64>,
    iterations: Option<u32>,
    refine_iterations: Option<u32>,
    layout_artifact_id: Option<String>,
    mask_style: MaskStyle,
    assist_features: Option<bool>,
    /// Set by the host: `session_cache` when the arguments came from its cache.
    resolved_from: Option<String>,
}

/// The `optimize` op.
pub struct Optimize;

/// The GDSII cell the optimized mask is written in.
const CELL: &str = "OPTIMIZED";

/// PNG of the optimized mask: mask pixels grey, pixels the optimizer added green and
/// removed red, drawn-target edges white, the optimization window yellow.
fn mask_png(target: &Grid<u8>, after: &Grid<u8>, px: PixelWindow) -> Result<Vec<u8>, ToolError> {
    let edge = |x: usize, y: usize| {
        let v = *target.at(x, y);
        let diff = |xx: Option<usize>, yy: Option<usize>| match (xx, yy) {
            (Some(a), Some(b)) if a < target.width && b < target.height => *target.at(a, b) != v,
            _ => v != 0,
        };
        diff(x.checked_sub(1), Some(y))
            || diff(Some(x + 1), Some(y))
            || diff(Some(x), y.checked_sub(1))
            || diff(Some(x), Some(y + 1))
    };
    let on_window = |x: usize, y: usize| {
        let inside_x = x + 1 >= px.0 && x <= px.2;
        let inside_y = y + 1 >= px.1 && y <= px.3;
        (inside_x && (y + 1 == px.1 || y == px.3)) || (inside_y && (x + 1 == px.0 || x == px.2))
    };
    let rgba = artifacts::rgba_of(after, |x, y, &m| {
        let t = *target.at(x, y);
        if on_window(x, y) {
            [255, 215, 0, 255]
        } else if t != 0 && edge(x, y) {
            [255, 255, 255, 255]
        } else if m != 0 && t == 0 {
            [60, 200, 90, 255]
        } else if m == 0 && t != 0 {
            [220, 60, 60, 255]
        } else if m != 0 {
            [150, 150, 160, 255]
        } else {
            [16, 16, 24, 255]
        }
    });
    artifacts::png_rgba(after.width, after.height, &rgba)
}

/// `MASK_RULES_UNMET`: which mask rules fail inside the window and where (at most 50
/// records), with what to try instead.
fn mask_rules_unmet(unmet: &[&Value], window_nm: [f64; 4]) -> ToolError {
    let mut by_rule: std::collections::BTreeMap<&str, usize> = Default::default();
    for r in unmet {
        *by_rule
            .entry(r["rule_id"].as_str().unwrap_or(""))
            .or_default() += 1;
    }
    let records: Vec<Value> = unmet
        .iter()
        .take(50)
        .map(|v| json!({"rule_id": v["rule_id"], "location_nm": v["location_nm"], "measured": v["measured"]}))
        .collect();
    ToolError::new(
        ErrorCode::MaskRulesUnmet,
        format!(
            "the optimized mask breaks {} mask-rule record(s) inside the window; no mask is returned",
            unmet.len()
        ),
    )
    .with_details(json!({
        "by_rule": by_rule,
        "records": records,
        "window_nm": window_nm,
        "hint": "try mask_style \"manhattan\", assist_features false, or another window (box_um or halo_nm)",
    }))
    .recoverable(true)
}

impl Op for Optimize {
    fn name(&self) -> &'static str {
        "optimize"
    }

    fn run(&self, ctx: &AttemptCtx<'_>, args_json: &str) -> OpResult {
        let (mut args, mut own): (_, Own) = parse_deck_args(self.name(), args_json)?;
        let parsed = target::parse_id(own.violation_id.as_deref(), own.box_um)?;
        if args.deck.is_empty() && parsed.is_some() {
            // No deck named: the shipped deck the id was evaluated with (D181); without
            // an id, the setup picks the one whose layers the layout has (D185).
            args.deck = resolve_id::shipped_deck_of(parsed.as_ref())?;
        }
        let limits = ViolationLimits {
            max_violations: usize::MAX,
            ..ViolationLimits::default()
        };
        let setup = args.setup(ctx, own.tile_nm, ReportLevel::Detailed, limits, |hash| {
            parsed
                .as_ref()
                .map_or(Ok(()), |p| check_deck_pin(p, hash, &args.deck))
        })?;
        let defaults = IltParams::default();
        let iterations = own.iterations.unwrap_or(defaults.iterations);
        let refine_iterations = own.refine_iterations.unwrap_or(defaults.refine_iterations);
        // ILT progress counts both stages (the refinement may be skipped: progress jumps).
        let ilt_steps = u64::from(iterations) + u64::from(refine_iterations);
        let total = 14 + ilt_steps;
        // An id of a tiled report: its neighbourhood re-derived in tiles, then the group
        // optimized in one window centred on it (D181).
        let rederived = match (own.violation_id.as_deref(), parsed.as_ref()) {
            (Some(text), Some(id))
                if resolve_id::is_tiled(&args.layout, own.clip_um, args.model.as_ref()) =>
            {
                let pin = |sha: &str| {
                    check_layout_pin(
                        parsed.as_ref(),
                        own.layout_artifact_id.as_deref(),
                        sha,
                        &setup.layout_name,
                    )
                };
                let found = resolve_id::rederive(ctx, &args, &setup, id, text, own.clip_um, &pin)?;
                own.clip_um = Some(found.clip_um(text, own.scope, args.model.as_ref()));
                Some(found)
            }
            _ => None,
        };
        let imaged = args.image(ctx, &setup.deck, setup.target, own.clip_um, total)?;
        check_layout_pin(
            parsed.as_ref(),
            own.layout_artifact_id.as_deref(),
            &imaged.layout.sha256,
            &setup.layout_name,
        )?;
        let fail = |e: EvalError| eval_error(e, ctx.job_id);
        let before = report(&setup, &imaged, None, ctx.cancel, &|n, m| {
            ctx.progress.report(n, total, format!("before: {m}"));
        })
        .map_err(fail)?;

        // Resolve the target and the window.
        let dbu_nm = imaged.layout.dbu_nm;
        let clip = imaged.layout.window;
        let clip_nm = [
            clip.left as f64 * dbu_nm,
            clip.bottom as f64 * dbu_nm,
            clip.right as f64 * dbu_nm,
            clip.top as f64 * dbu_nm,
        ];
        let request = TargetRequest {
            violation: own.violation_id.as_deref().zip(parsed.as_ref()),
            scope: own.scope,
            box_um: own.box_um,
            halo_nm: target::halo(own.halo_nm)?,
            resolved_from: own.resolved_from.as_deref(),
        };
        let all = match &rederived {
            Some(found) => found.records.clone(),
            None => records_of(&before),
        };
        let target = target::resolve(&all, &request, clip_nm)?;
        let px = pixel_window(&imaged.frame, dbu_nm, target.window_nm);

        // ILT, legalized by the deck's mask rules.
        let options = MaskOptions {
            style: own.mask_style,
            assist_features: own.assist_features.unwrap_or(true),
        };
        let rules: Vec<_> = setup.rules().into_iter().cloned().collect();
        let context = context_pieces(&imaged, px);
        let ilt = run_ilt(
            &imaged,
            px,
            iterations,
            refine_iterations,
            &rules,
            &context,
            options,
            ctx.cancel,
            &mut |p| {
                ctx.progress.report(
                    7 + p.done,
                    total,
                    format!("ilt iteration {}/{}", p.done, p.total),
                );
            },
        )
        .map_err(fail)?;

        // The optimized mask, imaged and evaluated again.
        let base = 8 + ilt_steps;
        ctx.progress
            .report(base, total, "imaging the optimized mask");
        // The mask imaged is the written polygons' exact coverage (what a re-read of the
        // GDSII rasterises to), not the optimizer's pixels.
        let after_binary = ilt.ilt.mask.clone();
        let backend = ctx.state.backend.engine()?;
        let after_out = reimage(backend, &imaged, &ilt.coverage, ctx.cancel).map_err(fail)?;
        let polygons = mask_polygons(context, &ilt.legal.polygons);
        let after = report(
            &setup,
            &imaged,
            Some(MaskOverride {
                polygons: &polygons.pieces,
                output: &after_out,
            }),
            ctx.cancel,
            &|n, m| {
                ctx.progress
                    .report(base + n - 3, total, format!("after: {m}"))
            },
        )
        .map_err(fail)?;
        if ctx.cancel.is_cancelled() {
            return Err(cancelled(ctx.job_id));
        }
        let after_records = records_of(&after);
        let comparison = compare(&all, &after_records, &target, own.scope, imaged.pixel_nm);
        // The final check is the evaluation's own: a mask that breaks a mask rule where
        // it was optimized is never returned as a success (records outside the window
        // are the drawn layout's, reported in `violations_after` as before).
        let mask_rules = mask_rule_ids(&after);
        let unmet = records_in_window(&after_records, &mask_rules, target.window_nm);
        if !unmet.is_empty() {
            return Err(mask_rules_unmet(&unmet, target.window_nm));
        }

        // state_after: GDSII polygons and a PNG in the job's artifact directory.
        ctx.progress.report(total - 1, total, "writing artifacts");
        let dir = artifacts::dir(ctx)?;
        let layer_key = LayerKey::new(setup.target.layer, setup.target.datatype);
        let mut cell = Cell::new(CELL);
        for p in &polygons.written {
            cell.push_shape(layer_key, Shape::Polygon(p.clone()));
        }
        let mut library = Library::new("RETICLE_OPTIMIZE", dbu_nm * 1e-9);
        library.cells.push(cell);
        let gds = write_gds(&library).map_err(|e| {
            ToolError::new(ErrorCode::InternalError, format!("cannot write GDSII: {e}"))
        })?;
        let gds_file = artifacts::write(&dir, "optimized_mask.gds", &gds)?;
        let png = mask_png(&imaged.target, &after_binary, px)?;
        let png_file = artifacts::write(&dir, "optimized_mask.png", &png)?;
        let state_after = json!({
            "mask_gds": gds_file,
            "mask_png": png_file,
            "polygons": polygon_summary(&polygons, setup.target, CELL, dbu_nm),
            "changed_pixels": changed_pixels(&imaged.target, &after_binary),
            "mask_sha256": reticle_layout::sha256_hex(&after_binary.data),
        });
        ctx.progress.report(total, total, "done");
        let outcome = Outcome {
            imaged: &imaged,
            target: &target,
            px,
            iterations: (iterations, refine_iterations),
            ilt: &ilt,
            options,
            before: &before,
            after: &after,
            comparison: &comparison,
        };
        let mut out = payload(&outcome, state_after);
        if let Some(found) = &rederived {
            out["target"]["rederived"] = found.summary();
        }
        op::payload(out)
    }
}
