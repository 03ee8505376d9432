//! `optimize.merge` (the layout written back, before/after pictures) and
//! `optimize.compare` (the evaluations of region + halo before and after, group by
//! group) of a region optimize (D171–D173).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use reticle_eval::optimize::region::{
    GroupBox, OptTile, compare_groups, seam_distance_nm, split_for_gds,
};
use reticle_eval::region_source::RegionSource;
use reticle_eval::report::Setup;
use reticle_eval::tile::LayoutSource;
use reticle_kernel::Grid;
use reticle_kernel::raster::{PixelFrame, rasterize_in};
use reticle_layout::writeback::{WritebackRequest, default_mask_layer, write_back, write_layout};
use reticle_layout::{BBox, Format, LayerKey, Polygon};
use reticle_protocol::error::{ErrorCode, ToolError};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{RegionOpArgs, open, read_opt_tile};
use crate::artifacts;
use crate::attempt::AttemptCtx;
use crate::layouts::{LayoutRef, load};
use crate::op::{Op, OpResult, parse_args, payload};
use crate::tiled::internal;

/// Longest side of the before/after pictures (pixels).
const PICTURE_SIDE: i64 = 1024;

/// How close (nm) a group after must come to a group before of the same rule to be the
/// same group (D173).
pub const SAME_GROUP_NM: f64 = 20.0;

/// How close (nm) to a seam a new group counts as the seam's (issue 28's acceptance).
pub const SEAM_NM: f64 = 200.0;

/// How many new groups `optimize.compare` lists in `new_groups` (the nearest a seam
/// first): the most one round of the seam pass puts the drawn mask back around (D252).
pub const NEW_GROUPS_LISTED: usize = 200;

/// The format of the layout file at `path`, from its first bytes.
fn sniff(path: &Path) -> Result<Format, ToolError> {
    let mut head = [0u8; 16];
    let read = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .map_err(|e| {
            ToolError::new(
                ErrorCode::FileNotFound,
                format!("cannot read {}: {e}", path.display()),
            )
        })?;
    Format::sniff(&head[..read])
        .ok_or_else(|| ToolError::new(ErrorCode::UnsupportedFormat, "not a GDSII or OASIS file"))
}

/// A picture of `region` (dbu): each pixel's colour is `fill` of whether it lies in each
/// of `layers` (drawn target, mask, optimized boxes; at half coverage).
fn picture(
    region: BBox,
    layers: [&[Polygon]; 3],
    fill: impl Fn([bool; 3]) -> [u8; 4],
) -> Result<(Vec<u8>, PixelFrame), ToolError> {
    let side = region.width().max(region.height()).max(1);
    let step = ((side + PICTURE_SIDE - 1) / PICTURE_SIDE).max(1);
    let frame = PixelFrame {
        left_nm: region.left as f64,
        bottom_nm: region.bottom as f64,
        pixel_nm: step as f64,
        width: (region.width().max(1) as usize).div_ceil(step as usize),
        height: (region.height().max(1) as usize).div_ceil(step as usize),
    };
    let grids = layers.map(|l| rasterize_in(l, &frame));
    let grid = Grid {
        width: frame.width,
        height: frame.height,
        data: (0..frame.width * frame.height)
            .map(|i| grids.each_ref().map(|g| g.data[i] >= 0.5))
            .collect(),
    };
    let rgba = artifacts::rgba_of(&grid, |_, _, &inside| fill(inside));
    Ok((
        artifacts::png_rgba(frame.width, frame.height, &rgba)?,
        frame,
    ))
}

/// The `optimize.merge` op.
pub struct OptimizeMerge;

impl Op for OptimizeMerge {
    fn name(&self) -> &'static str {
        "optimize.merge"
    }

    fn run(&self, ctx: &AttemptCtx<'_>, args_json: &str) -> OpResult {
        let args: RegionOpArgs = parse_args(self.name(), args_json)?;
        let plan = args.plan("optimization")?;
        let dir = artifacts::dir(ctx)?;
        let (setup, mut source) = open(ctx, &args)?;
        let total = plan.range.count();
        // What the tiles ran (D249): no EPE revert under a deck without an EPE rule.
        let epe_revert_nm =
            reticle_eval::optimize::region::epe_revert(setup.rules()).map(|r| r.radius_nm);
        let mut mask: Vec<Polygon> = Vec::new();
        let mut boxes: Vec<Polygon> = Vec::new();
        let mut kept: BTreeMap<String, u64> = BTreeMap::new();
        let mut with_ilt: Vec<String> = Vec::new();
        let (mut l2, mut pvb, mut left, mut optimized) = ([0u64; 2], [0u64; 2], 0usize, 0u64);
        for (n, t) in plan.range.iter().enumerate() {
            if n % 16 == 0 {
                ctx.progress
                    .report(n as u64, total + 2, "reading the tiles");
            }
            let o: OptTile = read_opt_tile(&dir, t)?;
            if let Some(b) = o.optimized {
                boxes.push(Polygon::rect(b));
            }
            if o.iterations_run > 0 {
                optimized += 1;
            }
            if let Some(why) = &o.kept_drawn {
                *kept.entry(why.clone()).or_insert(0u64) += 1;
            } else if o.iterations_run > 0 {
                with_ilt.push(t.id());
            }
            // A tile that kept the drawn target scores as drawn.
            let kept_after = if o.kept_drawn.is_some() {
                o.before
            } else {
                o.after
            };
            l2[0] += o.before.l2_px;
            l2[1] += kept_after.l2_px;
            pvb[0] += o.before.pvb_px;
            pvb[1] += kept_after.pvb_px;
            left += o.mask_rule_violations;
            mask.extend(o.polygons.iter().flat_map(split_for_gds));
        }
        if ctx.cancel.is_cancelled() {
            return Err(crate::op::cancelled(ctx.job_id));
        }
        // What the seam pass starts from (D252): the tiles' folder is gone after the merge.
        let region_mask = RegionMask { mask, boxes };
        let bytes = serde_json::to_vec(&region_mask)
            .map_err(|e| internal(format!("the region's mask: {e}")))?;
        artifacts::write(&dir, REGION_MASK_FILE, &bytes)?;
        let written = write_region(
            ctx,
            &args,
            &setup,
            &mut source,
            &region_mask,
            (total, total + 2),
        )?;
        let nm = |v: i64| reticle_eval::r3(v as f64 * plan.grid.dbu_nm);
        ctx.progress.report(total + 2, total + 2, "merged");
        payload(json!({
            "region_nm": [nm(plan.region.left), nm(plan.region.bottom), nm(plan.region.right), nm(plan.region.top)],
            "region_source": plan.region_source,
            "plan": plan,
            "tiles": {
                "total": total,
                "optimized": optimized,
                "kept_drawn": kept,
                "ilt_mask_kept": with_ilt,
                "waves": reticle_eval::optimize::region::wave_counts(&plan.range),
                "core_nm": nm(plan.grid.core_dbu),
                "halo_nm": nm(plan.grid.halo_dbu),
                "seam_blend_nm": reticle_eval::optimize::region::SEAM_BLEND_NM,
                "edge_weight": {
                    "extra": reticle_eval::optimize::region::EDGE_WEIGHT.extra,
                    "band_nm": reticle_eval::optimize::region::EDGE_WEIGHT.band_nm,
                },
                "epe_revert_nm": epe_revert_nm,
                "period_nm": plan.period_nm,
                "pixel_nm": plan.pixel_nm,
            },
            "ilt": {
                "l2_px": {"before": l2[0], "after": l2[1]},
                "pvb_px": {"before": pvb[0], "after": pvb[1]},
                "mask_rule_violations_left": left,
                "mask_style": args.call.mask_style,
            },
            "layout_out": written.layout_out,
            "pictures": written.pictures,
        }))
    }
}

/// The file the merge leaves for the seam pass: the region's mask and the optimized
/// boxes (dbu), as the merge wrote them.
pub(super) const REGION_MASK_FILE: &str = "region_mask.json";

/// The region's mask as the merge assembled it from the tiles ([`REGION_MASK_FILE`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct RegionMask {
    /// The mask inside the region, in pieces of at most the GDSII limit.
    pub(super) mask: Vec<Polygon>,
    /// Each tile's ILT box that ran (the after picture shows the mask inside them).
    pub(super) boxes: Vec<Polygon>,
}

/// What [`write_region`] wrote: the result's `layout_out` and `pictures`.
pub(super) struct Written {
    pub(super) layout_out: Value,
    pub(super) pictures: Value,
}

/// Writes the layout back with `region`'s mask on the mask layer (input format, D160) and
/// the before/after pictures of the region: what the merge and the seam pass write.
/// `step` is where the op's progress stands (done, total): two more steps follow.
pub(super) fn write_region(
    ctx: &AttemptCtx<'_>,
    args: &RegionOpArgs,
    setup: &Setup,
    source: &mut RegionSource,
    region: &RegionMask,
    (done, total): (u64, u64),
) -> Result<Written, ToolError> {
    let plan = args.plan("optimization")?;
    let dir = artifacts::dir(ctx)?;
    let (mask, boxes) = (&region.mask, &region.boxes);
    // The layout written back (D160): input layers unchanged, the mask layer added.
    ctx.progress.report(done, total, "writing the layout");
    let path = ctx.readable(&args.call.layout)?;
    let format = sniff(&path)?;
    let (lib, _) = load(
        ctx,
        &LayoutRef {
            path: path.clone(),
            format: format.name().to_owned(),
            sha256: Some(plan.sha256.clone()),
        },
    )?;
    let top = reticle_layout::flatten::resolve_cell(&lib, args.call.cell.as_deref())
        .map_err(|e| ToolError::new(ErrorCode::TopCellNotFound, e.to_string()))?;
    let target = LayerKey::new(setup.target.layer, setup.target.datatype);
    let mask_layer = match &args.call.mask_layer {
        Some(text) => reticle_eval::source::parse_layer(text)?,
        None => default_mask_layer(&lib, target).map_err(writeback_error)?,
    };
    let limits = reticle_eval::source::layout_limits(&ctx.context.limits);
    let written = write_back(
        &lib,
        &WritebackRequest {
            top,
            target,
            mask_layer,
            region: plan.region,
            mask,
        },
        &limits,
    )
    .map_err(writeback_error)?;
    let bytes = write_layout(&written.library, format).map_err(|e| {
        ToolError::new(
            ErrorCode::InternalError,
            format!("cannot write the layout: {e}"),
        )
    })?;
    let name = match format {
        Format::Gds => "optimized.gds",
        Format::Oasis => "optimized.oas",
    };
    let file = artifacts::write_named(&dir, name, &bytes)?;

    // Before and after, over the region.
    ctx.progress.report(done + 1, total, "drawing the region");
    let drawn = source.polygons(plan.region, false)?.target;
    let (before_png, frame) = picture(plan.region, [&drawn, &[], &[]], |[d, _, _]| {
        if d {
            [230, 230, 235, 255]
        } else {
            [16, 16, 24, 255]
        }
    })?;
    // After: the mask inside the optimized boxes, the drawn target in what they leave.
    let (after_png, _) = picture(plan.region, [&drawn, mask, boxes], |[d, m, b]| {
        match (d, if b { m } else { d }) {
            (true, true) => [150, 150, 160, 255],
            (false, true) => [60, 200, 90, 255],
            (true, false) => [220, 60, 60, 255],
            (false, false) => [16, 16, 24, 255],
        }
    })?;
    let before = artifacts::write(&dir, "region_before.png", &before_png)?;
    let after = artifacts::write(&dir, "region_after.png", &after_png)?;
    let report = &written.report;
    Ok(Written {
        layout_out: json!({
            "path": file.path,
            "sha256": file.sha256,
            "bytes": file.bytes,
            "format": format.name(),
            "mask_layer": format!("{}/{}", mask_layer.layer, mask_layer.datatype),
            "target_layer": setup.target.to_string(),
            "base_layer": format!("{}/{}", report.base_layer.layer, report.base_layer.datatype),
            "cell": lib.cells[top].name,
            "mask_polygons": report.mask_polygons,
            "touched_cells": report.touched_cells.len(),
            "variant_cells": report.variant_cells.len(),
            "flat_shapes": report.flat_shapes,
        }),
        pictures: json!({
            "before": before,
            "after": after,
            "width": frame.width,
            "height": frame.height,
            "nm_per_pixel": reticle_eval::r3(frame.pixel_nm * plan.grid.dbu_nm),
            "legend": {"drawn": "light grey (before)", "mask_and_drawn": "grey", "mask_only": "green", "drawn_only": "red"},
        }),
    })
}

fn writeback_error(e: reticle_layout::writeback::WritebackError) -> ToolError {
    use reticle_layout::writeback::WritebackError as W;
    let code = match e {
        W::MaskIsTarget(_) | W::InvalidRegion { .. } | W::NoFreeDatatype(_) => {
            ErrorCode::InvalidLayer
        }
        W::NoSuchCell(_) | W::NotTopCell { .. } => ErrorCode::TopCellNotFound,
        W::LimitExceeded { .. } => ErrorCode::QueryTooLarge,
        _ => ErrorCode::InternalError,
    };
    ToolError::new(code, format!("cannot write the layout back: {e}"))
}

/// The groups of an evaluation's `violations.jsonl` in `dir` (boxes united per group).
fn groups_of(dir: &Path) -> Result<(Vec<GroupBox>, u64), ToolError> {
    let all = crate::records_file::records(dir).map_err(|e| {
        let path = dir.join(crate::records_file::VIOLATIONS_FILE);
        internal(format!("cannot read {}: {e}", path.display()))
    })?;
    let mut by_id: BTreeMap<String, GroupBox> = BTreeMap::new();
    let mut mask_records = 0u64;
    for r in all {
        let r = r?;
        let b: [f64; 4] = serde_json::from_value(r["bbox_nm"].clone()).unwrap_or_default();
        let applies_to = r["applies_to"].as_str().unwrap_or("").to_owned();
        if applies_to == "mask" {
            mask_records += 1;
        }
        let id = r["violation_group_id"].as_str().unwrap_or("").to_owned();
        by_id
            .entry(id.clone())
            .and_modify(|g| {
                g.bbox_nm = [
                    g.bbox_nm[0].min(b[0]),
                    g.bbox_nm[1].min(b[1]),
                    g.bbox_nm[2].max(b[2]),
                    g.bbox_nm[3].max(b[3]),
                ];
            })
            .or_insert(GroupBox {
                group_id: id,
                rule_id: r["rule_id"].as_str().unwrap_or("").to_owned(),
                applies_to,
                bbox_nm: b,
            });
    }
    Ok((by_id.into_values().collect(), mask_records))
}

/// The `optimize.compare` op.
pub struct OptimizeCompare;

impl Op for OptimizeCompare {
    fn name(&self) -> &'static str {
        "optimize.compare"
    }

    fn run(&self, ctx: &AttemptCtx<'_>, args_json: &str) -> OpResult {
        let args: RegionOpArgs = parse_args(self.name(), args_json)?;
        let plan = args.plan("optimization")?;
        let dir = artifacts::dir(ctx)?;
        let [before_dir, after_dir] = match &args.call.evaluations {
            Some([b, a])
                if [b, a]
                    .iter()
                    .all(|n| reticle_protocol::wire::is_plain_artifact_name(n)) =>
            {
                [dir.join(b), dir.join(a)]
            }
            _ => {
                return Err(internal(
                    "optimize.compare needs the two evaluations' folder names",
                ));
            }
        };
        let (before, _) = groups_of(&before_dir)?;
        let (after, mask_records_after) = groups_of(&after_dir)?;
        let seam = |b: &[f64; 4]| seam_distance_nm(&plan.grid, &plan.range, plan.region, b);
        let (by_rule, new) =
            compare_groups(&before, &after, SAME_GROUP_NM, &|b| seam(b) <= SEAM_NM);
        let sum = |f: fn(&reticle_eval::optimize::region::RuleChange) -> u64,
                   kind: Option<&str>|
         -> u64 {
            by_rule
                .values()
                .filter(|r| kind.is_none_or(|k| r.applies_to == k))
                .map(f)
                .sum()
        };
        let record = |g: &GroupBox| {
            let at = (
                (g.bbox_nm[0] + g.bbox_nm[2]) / 2.0,
                (g.bbox_nm[1] + g.bbox_nm[3]) / 2.0,
            );
            let tile = plan.grid.owner(
                &plan.range,
                ((at.0 * 1000.0) as i64, (at.1 * 1000.0) as i64),
            );
            json!({
                "rule_id": g.rule_id,
                "violation_group_id": g.group_id,
                "bbox_nm": g.bbox_nm,
                "seam_distance_nm": reticle_eval::r3(seam(&g.bbox_nm)),
                "tile": tile.id(),
            })
        };
        let near: Vec<Value> = new
            .iter()
            .filter(|g| seam(&g.bbox_nm) <= SEAM_NM)
            .take(50)
            .map(|g| record(g))
            .collect();
        // Every new group, the nearest a seam first: where the host's seam pass puts the
        // drawn mask back (D252).
        let mut by_seam: Vec<(f64, &GroupBox)> =
            new.iter().map(|g| (seam(&g.bbox_nm), &**g)).collect();
        by_seam.sort_by(|a, b| a.0.total_cmp(&b.0));
        let new_groups: Vec<Value> = by_seam
            .iter()
            .take(NEW_GROUPS_LISTED)
            .map(|(_, g)| record(g))
            .collect();
        // Each id an `optimize(violation_ids)` listed: its group's status (D211).
        let targets = match &args.call.targets {
            Some(ids) => json!(super::targets::id_statuses(
                ids,
                &before_dir,
                &before,
                &after,
                SAME_GROUP_NM
            )?),
            None => Value::Null,
        };
        let printed_before = sum(|r| r.before, Some("printed"));
        let printed_after = sum(|r| r.after, Some("printed"));
        payload(json!({
            "same_group_within_nm": SAME_GROUP_NM,
            "seam_distance_nm": SEAM_NM,
            "by_rule": by_rule,
            "totals": {
                "before": sum(|r| r.before, None),
                "after": sum(|r| r.after, None),
                "resolved": sum(|r| r.resolved, None),
                "remaining": sum(|r| r.remaining, None),
                "new": sum(|r| r.new, None),
                "new_near_seams": sum(|r| r.new_near_seams, None),
            },
            "printed_groups": {
                "before": printed_before,
                "after": printed_after,
                "reduction": if printed_before == 0 { Value::Null } else {
                    json!(reticle_eval::r3(1.0 - printed_after as f64 / printed_before as f64))
                },
            },
            "new_mask_rule_groups": sum(|r| r.new, Some("mask")),
            "mask_rule_records_after": mask_records_after,
            "new_near_seams": near,
            "new_groups": new_groups,
            "targets": targets,
        }))
    }
}
