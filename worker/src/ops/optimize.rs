//! `optimize`: pixel ILT of one window of a clip, the rest of the mask as drawn
//! (seed 000 §2c/§5, issue 7 item 5; docs/DECISIONS.md D44–D46).
//!
//! 1. The clip is imaged and evaluated exactly as `evaluate` does it (the shared
//!    [`super::simulate::image`] and [`super::evaluate::report`]), so the violation ids
//!    of the re-evaluation are the ids `evaluate` handed out.
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

use std::collections::BTreeMap;
use std::path::PathBuf;

use reticle_kernel::ilt::{IltParams, optimize_window};
use reticle_kernel::model::ModelSpec;
use reticle_kernel::raster::PixelFrame;
use reticle_kernel::rules::Region;
use reticle_kernel::{Grid, ImagingError, KeepImages, LithoJob, LithoOutput, ModelKernels};
use reticle_layout::clip::clip_polygon;
use reticle_layout::{BBox, Cell, LayerKey, Library, Point, Polygon, Shape, write_gds};
use reticle_protocol::ViolationId;
use reticle_protocol::error::{ErrorCode, ToolError};
use serde::Deserialize;
use serde_json::{Value, json};

use super::evaluate::{
    self, Limits, MaskOverride, ReportLevel, Setup, load_deck, r3, target_layer,
};
use super::simulate::{self, Imaged};
use super::{Op, artifacts, cancelled, parse_args};
use crate::job::JobCtx;

/// Default margin around the violation's marker(s), nm.
pub const DEFAULT_HALO_NM: f64 = 128.0;

#[derive(Deserialize, Default, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "snake_case")]
enum Scope {
    #[default]
    Group,
    RecordOnly,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    layout: PathBuf,
    deck: String,
    #[serde(default)]
    layer: Option<String>,
    #[serde(default)]
    cell: Option<String>,
    #[serde(default)]
    clip_um: Option<[f64; 4]>,
    #[serde(default)]
    pixel_nm: Option<f64>,
    #[serde(default)]
    model: Option<ModelSpec>,
    #[serde(default)]
    tile_nm: Option<f64>,
    #[serde(default)]
    violation_id: Option<String>,
    #[serde(default)]
    scope: Scope,
    #[serde(default)]
    box_um: Option<[f64; 4]>,
    #[serde(default)]
    halo_nm: Option<f64>,
    #[serde(default)]
    iterations: Option<u32>,
    #[serde(default)]
    refine_iterations: Option<u32>,
    #[serde(default)]
    layout_artifact_id: Option<String>,
    /// Set by the host: `session_cache` when the arguments came from its cache.
    #[serde(default)]
    resolved_from: Option<String>,
}

/// The `optimize` op.
pub struct Optimize;

fn invalid(message: impl Into<String>, details: Value) -> ToolError {
    ToolError::new(ErrorCode::InvalidInput, message).with_details(details)
}

fn imaging_error(e: ImagingError, job_id: &str) -> ToolError {
    match e {
        ImagingError::Cancelled => cancelled(job_id),
        ImagingError::Invalid(m) => invalid(m, json!({})),
        ImagingError::Backend(m) => ToolError::new(ErrorCode::BackendError, m),
    }
}

/// A box in nm `[l, b, r, t]` from a record's `bbox_nm`.
fn bbox_nm(record: &Value) -> Option<[f64; 4]> {
    let b = record["bbox_nm"].as_array()?;
    Some([
        b[0].as_f64()?,
        b[1].as_f64()?,
        b[2].as_f64()?,
        b[3].as_f64()?,
    ])
}

fn union(a: [f64; 4], b: [f64; 4]) -> [f64; 4] {
    [
        a[0].min(b[0]),
        a[1].min(b[1]),
        a[2].max(b[2]),
        a[3].max(b[3]),
    ]
}

/// The pixels `[x0, x1) × [y0, y1)` of `frame` (dbu units) lying inside the nm box `b`
/// grown by nothing, clamped to the grid. Pixels partly inside count (the window covers
/// the marker).
fn pixel_window(frame: &PixelFrame, dbu_nm: f64, b: [f64; 4]) -> (usize, usize, usize, usize) {
    let p = frame.pixel_nm;
    let to_px = |nm: f64, origin: f64| (nm / dbu_nm - origin) / p;
    let clamp = |v: f64, n: usize| v.clamp(0.0, n as f64) as usize;
    let x0 = clamp(to_px(b[0], frame.left_nm).floor(), frame.width);
    let x1 = clamp(to_px(b[2], frame.left_nm).ceil(), frame.width);
    let y0 = clamp(to_px(b[1], frame.bottom_nm).floor(), frame.height);
    let y1 = clamp(to_px(b[3], frame.bottom_nm).ceil(), frame.height);
    (x0, y0, x1.max(x0), y1.max(y0))
}

/// Axis-aligned rectangles (dbu) covering the set pixels of `mask` inside the pixel window:
/// row runs, merged upwards while identical.
fn pixel_rectangles(
    mask: &Grid<u8>,
    frame: &PixelFrame,
    (x0, y0, x1, y1): (usize, usize, usize, usize),
) -> Vec<Polygon> {
    let xd = |x: usize| (frame.left_nm + x as f64 * frame.pixel_nm).round() as i64;
    let yd = |y: usize| (frame.bottom_nm + y as f64 * frame.pixel_nm).round() as i64;
    let runs_of = |y: usize| {
        let mut runs = Vec::new();
        let mut x = x0;
        while x < x1 {
            if *mask.at(x, y) != 0 {
                let start = x;
                while x < x1 && *mask.at(x, y) != 0 {
                    x += 1;
                }
                runs.push((start, x));
            } else {
                x += 1;
            }
        }
        runs
    };
    // Open rectangles: run → first row.
    let mut open: BTreeMap<(usize, usize), usize> = BTreeMap::new();
    let mut out = Vec::new();
    let close = |(a, b): (usize, usize), from: usize, to: usize, out: &mut Vec<Polygon>| {
        out.push(Polygon::new(vec![
            Point::new(xd(a), yd(from)),
            Point::new(xd(b), yd(from)),
            Point::new(xd(b), yd(to)),
            Point::new(xd(a), yd(to)),
        ]));
    };
    for y in y0..y1 {
        let runs = runs_of(y);
        let keep: Vec<(usize, usize)> = runs.clone();
        let ended: Vec<((usize, usize), usize)> = open
            .iter()
            .filter(|(run, _)| !keep.contains(run))
            .map(|(run, from)| (*run, *from))
            .collect();
        for (run, from) in ended {
            open.remove(&run);
            close(run, from, y, &mut out);
        }
        for run in runs {
            open.entry(run).or_insert(y);
        }
    }
    for (run, from) in open {
        close(run, from, y1, &mut out);
    }
    out
}

/// `window` minus the box `hole`, as up to four boxes (left, right, bottom, top strips).
fn boxes_around(window: BBox, hole: BBox) -> Vec<BBox> {
    let mut out = Vec::new();
    let mut push = |l: i64, b: i64, r: i64, t: i64| {
        if r > l && t > b {
            out.push(BBox::from_corners(Point::new(l, b), Point::new(r, t)));
        }
    };
    push(window.left, window.bottom, hole.left, window.top);
    push(hole.right, window.bottom, window.right, window.top);
    push(hole.left, window.bottom, hole.right, hole.bottom);
    push(hole.left, hole.top, hole.right, window.top);
    out
}

/// The optimized mask as polygons (dbu): the drawn polygons outside the pixel window, the
/// ILT pixels inside it. Returns the pieces and the polygons written to GDSII: merged
/// hulls when no merged polygon has a hole, else the pieces themselves (their union is
/// the mask; GDSII polygons cannot hold holes without cut lines).
fn mask_polygons(
    imaged: &Imaged,
    ilt_mask: &Grid<u8>,
    px: (usize, usize, usize, usize),
) -> (Vec<Polygon>, Vec<Polygon>, Value) {
    let frame = &imaged.frame;
    let xd = |x: usize| (frame.left_nm + x as f64 * frame.pixel_nm).round() as i64;
    let yd = |y: usize| (frame.bottom_nm + y as f64 * frame.pixel_nm).round() as i64;
    let hole = BBox::from_corners(
        Point::new(xd(px.0), yd(px.1)),
        Point::new(xd(px.2), yd(px.3)),
    );
    let clip = imaged.layout.window;
    let mut pieces: Vec<Polygon> = Vec::new();
    for b in boxes_around(clip, hole) {
        pieces.extend(
            imaged
                .layout
                .polygons
                .iter()
                .filter_map(|p| clip_polygon(p, &b)),
        );
    }
    pieces.extend(pixel_rectangles(ilt_mask, frame, px));
    let region = Region::from_polygons(&pieces);
    let merged = region.polygons();
    let holes: usize = merged.iter().map(|p| p.holes.len()).sum();
    let written: Vec<Polygon> = if holes == 0 {
        merged
            .iter()
            .map(|p| Polygon::new(p.hull.clone()))
            .collect()
    } else {
        pieces.clone()
    };
    let vertices: usize = written.iter().map(|p| p.points.len()).sum();
    let summary = json!({
        "merged_polygons": merged.len(),
        "holes": holes,
        "written_as": if holes == 0 { "merged_hulls" } else { "pieces" },
        "gds_polygons": written.len(),
        "gds_vertices": vertices,
    });
    (pieces, written, summary)
}

/// The f32 mask imaged after optimization: the drawn coverage outside the pixel window,
/// the ILT pixels inside.
fn composed_mask(imaged: &Imaged, ilt: &Grid<u8>, px: (usize, usize, usize, usize)) -> Grid<f32> {
    let mut out = imaged.mask.clone();
    for y in px.1..px.3 {
        for x in px.0..px.2 {
            *out.at_mut(x, y) = f32::from(*ilt.at(x, y));
        }
    }
    out
}

/// The after-mask as a binary picture (for the PNG and the changed-pixel count).
fn composed_binary(imaged: &Imaged, ilt: &Grid<u8>, px: (usize, usize, usize, usize)) -> Grid<u8> {
    let mut out = imaged.target.clone();
    for y in px.1..px.3 {
        for x in px.0..px.2 {
            *out.at_mut(x, y) = *ilt.at(x, y);
        }
    }
    out
}

/// PNG of the optimized mask: mask pixels grey, pixels the optimizer added green and
/// removed red, drawn-target edges white, the optimization window yellow.
fn mask_png(
    target: &Grid<u8>,
    after: &Grid<u8>,
    px: (usize, usize, usize, usize),
) -> Result<Vec<u8>, ToolError> {
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

/// Images `mask` on the clip's frame at the clip's three corners.
fn reimage(ctx: &JobCtx<'_>, imaged: &Imaged, mask: &Grid<f32>) -> Result<LithoOutput, ToolError> {
    let job = LithoJob {
        mask,
        target: Some(&imaged.target),
        corners: &imaged.corners,
        resist: imaged.resist,
        keep: KeepImages {
            aerial: true,
            resist: false,
            printed: true,
        },
    };
    let backend = ctx.state.backend.engine()?;
    backend
        .litho(&job, ctx.cancel, &|_| {})
        .map_err(|e| imaging_error(e, ctx.job_id))
}

/// Metrics of one report for the before/after comparison.
fn metrics_of(report: &Value) -> Value {
    json!({
        "l2_px": report["metrics"]["l2_px"],
        "pvb_px": report["metrics"]["pvb_px"],
        "epe_violations": report["metrics"]["epe"]["violations"],
        "epe_checkpoints": report["metrics"]["epe"]["checkpoints"],
        "violation_records": report["counts"]["records"],
        "violation_groups": report["counts"]["groups"],
    })
}

fn records(report: &Value) -> &[Value] {
    report["violations"].as_array().map_or(&[], Vec::as_slice)
}

fn loc(record: &Value) -> (f64, f64) {
    (
        record["location_nm"][0].as_f64().unwrap_or(f64::NAN),
        record["location_nm"][1].as_f64().unwrap_or(f64::NAN),
    )
}

fn inside(p: (f64, f64), b: [f64; 4]) -> bool {
    p.0 >= b[0] && p.0 <= b[2] && p.1 >= b[1] && p.1 <= b[3]
}

/// A before-group is resolved when the after-report has no record of the same rule within
/// `max(dedup_radius_nm, 2 · pixel_nm)` of any of its members' locations (D46).
fn still_there(members: &[&Value], after: &[Value], pixel_nm: f64) -> bool {
    let rule = &members[0]["rule_id"];
    let radius = members[0]["dedup_provenance"]["radius_nm"]
        .as_f64()
        .unwrap_or(0.0)
        .max(2.0 * pixel_nm);
    after.iter().filter(|a| &a["rule_id"] == rule).any(|a| {
        let q = loc(a);
        members.iter().any(|m| {
            let p = loc(m);
            (p.0 - q.0).hypot(p.1 - q.1) <= radius
        })
    })
}

impl Op for Optimize {
    fn name(&self) -> &'static str {
        "optimize"
    }

    #[allow(clippy::too_many_lines)]
    fn run(&self, ctx: &JobCtx<'_>, args_json: &str) -> Result<Value, ToolError> {
        let args: Args = parse_args(self.name(), args_json)?;
        if args.violation_id.is_some() && args.box_um.is_some() {
            return Err(invalid(
                "violation_id and box_um are mutually exclusive",
                json!({}),
            ));
        }
        let parsed = match &args.violation_id {
            Some(id) => Some(id.parse::<ViolationId>().map_err(|_| {
                invalid(
                    "not a reticle violation_id (rv1:…, from evaluate at report_level=detailed)",
                    json!({"violation_id": id}),
                )
            })?),
            None => None,
        };
        let (deck, deck_source) = load_deck(ctx, &args.deck)?;
        let deck_hash = deck.deck_hash();
        if let Some(p) = &parsed {
            let hex = deck_hash.trim_start_matches("sha256:");
            if !hex.starts_with(&p.deck16) {
                return Err(invalid(
                    "the violation_id was evaluated with another rule deck; pass that deck",
                    json!({"violation_id_deck_hash": p.deck16, "deck_hash": deck_hash, "deck": args.deck}),
                )
                .with_hint("pass the deck of the evaluate call that returned this violation_id"));
            }
        }
        let target = target_layer(&deck, args.layer.as_deref())?;
        let tile_nm = evaluate::tile_size(args.tile_nm)?;
        let defaults = IltParams::default();
        let iterations = args.iterations.unwrap_or(defaults.iterations);
        let refine_iterations = args.refine_iterations.unwrap_or(defaults.refine_iterations);
        // ILT progress counts both stages (the refinement may be skipped: progress jumps).
        let ilt_steps = u64::from(iterations) + u64::from(refine_iterations);
        let total = 14 + ilt_steps;
        let layout_name = evaluate::layout_name(&args.layout);
        let sim_args = simulate::Args {
            cell: args.cell.clone(),
            box_um: args.clip_um,
            pixel_nm: args.pixel_nm,
            model: args.model.clone(),
            ..evaluate::imaging_args(&args.layout, &deck, target)
        };
        let imaged = simulate::image(ctx, sim_args, total)?;
        let sha = imaged.layout.sha256.clone();
        // Pinning (seed 000 §5, D45): the file must still be the one the id was made on.
        if let Some(p) = &parsed
            && !sha.starts_with(&p.layout_sha16)
        {
            return Err(ToolError::new(
                ErrorCode::LayoutNotPinned,
                "the layout changed since evaluate: its SHA-256 no longer matches the violation_id",
            )
            .with_details(json!({"violation_id_layout_sha256": p.layout_sha16, "layout_sha256": sha, "layout": layout_name}))
            .recoverable(false)
            .with_hint("run evaluate on the current layout and use one of its violation_ids"));
        }
        if let Some(pin) = &args.layout_artifact_id {
            let pin = pin.trim_start_matches("sha256:");
            if !sha.starts_with(pin) {
                return Err(ToolError::new(
                    ErrorCode::LayoutNotPinned,
                    "the layout does not match layout_artifact_id",
                )
                .with_details(json!({"layout_artifact_id": pin, "layout_sha256": sha}))
                .recoverable(false)
                .with_hint("pass the layout whose SHA-256 is layout_artifact_id, or evaluate the current one"));
            }
        }
        let mut limits = Limits::default();
        limits.max_violations = usize::MAX;
        let setup = Setup {
            deck,
            deck_source,
            deck_hash: deck_hash.clone(),
            target,
            tile_nm,
            layout_name: layout_name.clone(),
            report_level: ReportLevel::Detailed,
            limits,
        };
        let before = evaluate::report(ctx, &setup, &imaged, None, &|n, m| {
            ctx.progress.report(n, total, format!("before: {m}"));
        })?;
        let dbu_nm = imaged.layout.dbu_nm;
        let clip = imaged.layout.window;
        let clip_nm = [
            clip.left as f64 * dbu_nm,
            clip.bottom as f64 * dbu_nm,
            clip.right as f64 * dbu_nm,
            clip.top as f64 * dbu_nm,
        ];
        let halo = args.halo_nm.unwrap_or(DEFAULT_HALO_NM);
        if !(halo.is_finite() && halo >= 0.0) {
            return Err(invalid("halo_nm must be >= 0", json!({"halo_nm": halo})));
        }

        // Resolve the target and the window.
        let all = records(&before);
        let mut target_json = json!({"mode": "clip", "resolved_from": "none"});
        let mut members: Vec<&Value> = Vec::new();
        let mut targeted: Option<&Value> = None;
        let window_nm = if let (Some(id), Some(p)) = (&args.violation_id, &parsed) {
            let record = all
                .iter()
                .find(|r| r["violation_id"] == id.as_str())
                .ok_or_else(|| {
                    ToolError::new(
                        ErrorCode::NotFound,
                        "the violation_id is not in the re-evaluation of this clip",
                    )
                    .with_details(json!({"violation_id": id, "rule_id": p.rule_id, "violation_group_id": p.group_id}))
                    .with_hint("pass the clip_um, pixel_nm, model, tile_nm and layer of the evaluate call that returned the id")
                })?;
            let gid = record["violation_group_id"].clone();
            members = all
                .iter()
                .filter(|r| r["violation_group_id"] == gid)
                .collect();
            let canonical_id = record["dedup_provenance"]["canonical_violation_id"].clone();
            let chosen: &Value = match args.scope {
                Scope::Group => members
                    .iter()
                    .copied()
                    .find(|r| r["violation_id"] == canonical_id)
                    .unwrap_or(record),
                Scope::RecordOnly => record,
            };
            targeted = Some(chosen);
            let marker_box = match args.scope {
                Scope::Group => members
                    .iter()
                    .filter_map(|r| bbox_nm(r))
                    .reduce(union)
                    .unwrap_or(clip_nm),
                Scope::RecordOnly => bbox_nm(record).unwrap_or(clip_nm),
            };
            target_json = json!({
                "mode": "violation",
                "scope": match args.scope { Scope::Group => "group", Scope::RecordOnly => "record_only" },
                "violation_id": id,
                "dedup_strategy": record["dedup_strategy"],
                "resolved_violation_id": chosen["violation_id"],
                "violation_group_id": gid,
                "canonical_violation_id": canonical_id,
                "rule_id": record["rule_id"],
                "location_nm": chosen["location_nm"],
                "resolved_from": args.resolved_from.as_deref().unwrap_or("violation_id"),
            });
            [
                marker_box[0] - halo,
                marker_box[1] - halo,
                marker_box[2] + halo,
                marker_box[3] + halo,
            ]
        } else if let Some([l, b, r, t]) = args.box_um {
            if !(l < r && b < t) {
                return Err(ToolError::new(
                    ErrorCode::InvalidBox,
                    "box_um must have left < right and bottom < top",
                )
                .with_details(json!({"box_um": args.box_um})));
            }
            target_json = json!({"mode": "box", "resolved_from": "none"});
            [l * 1000.0, b * 1000.0, r * 1000.0, t * 1000.0]
        } else {
            clip_nm
        };
        let window_nm = [
            window_nm[0].max(clip_nm[0]),
            window_nm[1].max(clip_nm[1]),
            window_nm[2].min(clip_nm[2]),
            window_nm[3].min(clip_nm[3]),
        ];
        if !(window_nm[0] < window_nm[2] && window_nm[1] < window_nm[3]) {
            return Err(ToolError::new(
                ErrorCode::InvalidBox,
                "the window does not overlap the clip",
            )
            .with_details(json!({"box_um": args.box_um, "clip_nm": clip_nm})));
        }
        let px = pixel_window(&imaged.frame, dbu_nm, window_nm);
        let mut window = Grid::filled(imaged.target.width, imaged.target.height, 0u8);
        for y in px.1..px.3 {
            for x in px.0..px.2 {
                *window.at_mut(x, y) = 1;
            }
        }

        // ILT.
        let model = ModelKernels {
            focus: std::sync::Arc::clone(&imaged.corners[0].kernels),
            defocus: Some(std::sync::Arc::clone(&imaged.corners[2].kernels)),
        };
        let params = IltParams {
            iterations,
            refine_iterations,
            pixel_nm: imaged.pixel_nm,
            resist: imaged.resist,
            ..IltParams::default()
        };
        let mut progress = |p: reticle_kernel::Progress| {
            ctx.progress.report(
                7 + p.done,
                total,
                format!("ilt iteration {}/{}", p.done, p.total),
            );
        };
        let outcome = optimize_window(
            &imaged.target,
            Some(&window),
            &model,
            &params,
            ctx.cancel,
            &mut progress,
        )
        .map_err(|e| imaging_error(e, ctx.job_id))?;

        // The optimized mask, imaged and evaluated again.
        let base = 8 + ilt_steps;
        ctx.progress
            .report(base, total, "imaging the optimized mask");
        let after_f32 = composed_mask(&imaged, &outcome.mask, px);
        let after_binary = composed_binary(&imaged, &outcome.mask, px);
        let after_out = reimage(ctx, &imaged, &after_f32)?;
        let (pieces, written, polygon_summary) = mask_polygons(&imaged, &outcome.mask, px);
        let after = evaluate::report(
            ctx,
            &setup,
            &imaged,
            Some(MaskOverride {
                polygons: &pieces,
                output: &after_out,
            }),
            &|n, m| {
                ctx.progress
                    .report(base + n - 3, total, format!("after: {m}"))
            },
        )?;
        if ctx.cancel.is_cancelled() {
            return Err(cancelled(ctx.job_id));
        }

        // Groups touched by the window: resolved or not.
        let after_records = records(&after);
        let mut groups: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
        for r in all {
            if let Some(g) = r["violation_group_id"].as_str() {
                groups.entry(g.to_owned()).or_default().push(r);
            }
        }
        let mut in_window = Vec::new();
        let mut resolved = Vec::new();
        for (gid, list) in &groups {
            if !list.iter().any(|r| inside(loc(r), window_nm)) {
                continue;
            }
            let fixed = !still_there(list, after_records, imaged.pixel_nm);
            let canonical = list
                .iter()
                .find(|r| r["dedup_strategy"] == "canonical")
                .unwrap_or(&list[0]);
            let entry = json!({
                "violation_group_id": gid,
                "rule_id": canonical["rule_id"],
                "canonical_violation_id": canonical["violation_id"],
                "location_nm": canonical["location_nm"],
                "records": list.len(),
                "resolved": fixed,
            });
            if fixed {
                resolved.push(entry.clone());
            }
            in_window.push(entry);
        }
        let target_group_resolved = members
            .first()
            .is_some_and(|_| !still_there(&members, after_records, imaged.pixel_nm));
        let group_members: Vec<Value> = members
            .iter()
            .map(|r| {
                let is_target = targeted.is_some_and(|t| t["violation_id"] == r["violation_id"]);
                let resolution = match (is_target, args.scope) {
                    (true, _) => "target",
                    (false, Scope::Group) => "resolved_by_group_fix",
                    (false, Scope::RecordOnly) => "not_targeted",
                };
                json!({
                    "violation_id": r["violation_id"],
                    "dedup_strategy": r["dedup_strategy"],
                    "tile_id": r["context"]["tile_id"],
                    "location_nm": r["location_nm"],
                    "resolution": resolution,
                    "resolved": target_group_resolved,
                })
            })
            .collect();
        let new_in_window = after_records
            .iter()
            .filter(|a| inside(loc(a), window_nm))
            .filter(|a| {
                !all.iter().any(|b| {
                    b["rule_id"] == a["rule_id"] && {
                        let (p, q) = (loc(a), loc(b));
                        let radius = b["dedup_provenance"]["radius_nm"]
                            .as_f64()
                            .unwrap_or(0.0)
                            .max(2.0 * imaged.pixel_nm);
                        (p.0 - q.0).hypot(p.1 - q.1) <= radius
                    }
                })
            })
            .count();

        // state_after: GDSII polygons and a PNG in the job's artifact directory.
        ctx.progress.report(total - 1, total, "writing artifacts");
        let dir = artifacts::dir(ctx)?;
        let layer_key = LayerKey::new(target.layer, target.datatype);
        let mut cell = Cell::new("OPTIMIZED");
        for p in &written {
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
        let changed = after_binary
            .data
            .iter()
            .zip(&imaged.target.data)
            .filter(|(a, b)| a != b)
            .count();
        let bbox = written
            .iter()
            .filter_map(Polygon::bbox)
            .reduce(|a, b| a.union(&b));
        let to_nm = |v: i64| r3(v as f64 * dbu_nm);
        let mut polygons = polygon_summary;
        polygons["layer"] = json!(target.to_string());
        polygons["cell"] = json!("OPTIMIZED");
        polygons["dbu_nm"] = json!(dbu_nm);
        polygons["bbox_nm"] = match bbox {
            Some(b) => json!([to_nm(b.left), to_nm(b.bottom), to_nm(b.right), to_nm(b.top)]),
            None => Value::Null,
        };
        ctx.progress.report(total, total, "done");
        let after_metrics = metrics_of(&after);
        Ok(json!({
            "schema_version": reticle_protocol::SCHEMA_VERSION,
            "target": target_json,
            "layout": before["layout"],
            "deck": before["deck"],
            "clip_nm": before["window_nm"],
            "window_nm": {
                "left": to_nm(clip.left + (px.0 as f64 * imaged.frame.pixel_nm).round() as i64),
                "bottom": to_nm(clip.bottom + (px.1 as f64 * imaged.frame.pixel_nm).round() as i64),
                "right": to_nm(clip.left + (px.2 as f64 * imaged.frame.pixel_nm).round() as i64),
                "top": to_nm(clip.bottom + (px.3 as f64 * imaged.frame.pixel_nm).round() as i64),
            },
            "halo_nm": halo,
            "pixel_nm": imaged.pixel_nm,
            "ilt": {
                "iterations": iterations,
                "refine_iterations": refine_iterations,
                "iterations_run": outcome.iterations_run,
                "downsample": outcome.downsample,
                "window_pixels": (px.2 - px.0) * (px.3 - px.1),
                "before": outcome.before,
                "after": outcome.after,
                "final_loss": outcome.loss.last(),
            },
            "metrics": {"before": metrics_of(&before), "after": after_metrics},
            "groups_in_window": in_window,
            "violations_resolved": resolved,
            "group_members": group_members,
            "violations_after": {
                "records": after["counts"]["records"],
                "groups": after["counts"]["groups"],
                "new_in_window": new_in_window,
                "by_rule": after["counts"]["by_rule"],
            },
            "state_after": {
                "mask_gds": gds_file,
                "mask_png": png_file,
                "polygons": polygons,
                "changed_pixels": changed,
                "mask_sha256": reticle_layout::sha256_hex(&after_binary.data),
            },
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rectangles_cover_exactly_the_set_pixels() {
        let frame = PixelFrame {
            left_nm: 100.0,
            bottom_nm: 0.0,
            pixel_nm: 2.0,
            width: 4,
            height: 3,
        };
        // Row 0: .XX.  Row 1: .XX.  Row 2: X...
        let mask = Grid {
            width: 4,
            height: 3,
            data: vec![0, 1, 1, 0, 0, 1, 1, 0, 1, 0, 0, 0],
        };
        let rects = pixel_rectangles(&mask, &frame, (0, 0, 4, 3));
        let area: i128 = rects.iter().map(|p| p.signed_area2().abs() / 2).sum();
        assert_eq!(area, 5 * 4, "5 pixels of 2×2 dbu");
        assert_eq!(rects.len(), 2);
        assert!(
            rects
                .iter()
                .any(|r| r.bbox()
                    == Some(BBox::from_corners(Point::new(102, 0), Point::new(106, 4))))
        );
    }

    #[test]
    fn the_box_minus_a_hole_is_four_strips() {
        let w = BBox::from_corners(Point::new(0, 0), Point::new(10, 10));
        let h = BBox::from_corners(Point::new(2, 3), Point::new(5, 7));
        let strips = boxes_around(w, h);
        let area: i64 = strips.iter().map(|b| b.width() * b.height()).sum();
        assert_eq!(area, 100 - 12);
        assert_eq!(boxes_around(w, w).len(), 0);
    }
}
