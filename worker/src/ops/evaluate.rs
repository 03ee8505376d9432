//! `evaluate`: one layout window checked against a rule deck (seed 000, RFC 0006).
//!
//! The window is imaged exactly as `simulate` images it (the shared
//! [`super::simulate::image`]); then, for every deck rule on the evaluated layer:
//! mask rules (MRC) run on the drawn polygons clipped to the window, printed rules
//! (litho DRC) on the nominal corner's printed contours (marching squares of the aerial
//! image at the resist threshold, snapped to the dbu grid), EPE rules at the ICCAD
//! checkpoints of the drawn edges, PV-band rules as the distance between the max- and
//! min-corner edges at the same checkpoints.
//!
//! Violations are reported in the layout's own frame (`input_layout_native`, nm). The
//! window is partitioned into square report tiles anchored at the layout origin; a
//! violation whose marker touches several tiles is reported once per tile, and records
//! of one rule closer than the rule's `dedup_radius_nm` share a deterministic
//! `violation_group_id` (docs/DECISIONS.md D23, D24). Nothing in the payload depends on
//! time, on the backend or on the path spelling, so the CLI and the MCP server emit the
//! same bytes (G3).

use std::collections::BTreeMap;
use std::path::PathBuf;

use blake2::Blake2bVar;
use blake2::digest::{Update, VariableOutput};
use reticle_kernel::contour::contours;
use reticle_kernel::metrics::{EpeConfig, checkpoints, epe, epe_at};
use reticle_kernel::model::ModelSpec;
use reticle_kernel::rules::{
    AppliesTo, LayerRef, Marker, Region, Rule, RuleDeck, RuleKind, Severity, Violation, check_rule,
    deck::parse_layer_spec,
};
use reticle_layout::clip::clip_polygon;
use reticle_layout::{BBox, Point, Polygon};
use reticle_protocol::ViolationId;
use reticle_protocol::error::{ErrorCode, ToolError};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::simulate::{self, Imaged};
use super::{Op, cancelled, parse_args};
use crate::job::JobCtx;

/// Decks shipped with reticle, usable by name (`deck: "iccad13_m1"`).
pub const SHIPPED_DECKS: &[(&str, &str)] = &[
    (
        "iccad13_m1",
        include_str!("../../../fixtures/decks/iccad13_m1.json"),
    ),
    (
        "nangate45_m1v1",
        include_str!("../../../fixtures/decks/nangate45_m1v1.json"),
    ),
];

/// Largest rule-deck file read.
const MAX_DECK_BYTES: u64 = 4 << 20;
/// Default report tile side (nm).
pub(crate) const DEFAULT_TILE_NM: f64 = 1024.0;
/// Default `limits.max_violations`.
const DEFAULT_MAX_VIOLATIONS: usize = 10_000;
/// Progress steps of one evaluation.
const STEPS: u64 = 7;

#[derive(Deserialize, Default, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ReportLevel {
    #[default]
    Aggregate,
    Detailed,
}

#[derive(Deserialize, Default, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum OnExceeded {
    #[default]
    Truncate,
    DegradeToAggregate,
}

fn default_max_violations() -> usize {
    DEFAULT_MAX_VIOLATIONS
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Limits {
    #[serde(default = "default_max_violations")]
    pub(crate) max_violations: usize,
    #[serde(default)]
    on_exceeded: OnExceeded,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_violations: DEFAULT_MAX_VIOLATIONS,
            on_exceeded: OnExceeded::default(),
        }
    }
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
    box_um: Option<[f64; 4]>,
    #[serde(default)]
    pixel_nm: Option<f64>,
    #[serde(default)]
    model: Option<ModelSpec>,
    #[serde(default)]
    report_level: ReportLevel,
    #[serde(default)]
    tile_nm: Option<f64>,
    #[serde(default)]
    limits: Limits,
}

/// The `evaluate` op.
pub struct Evaluate;

fn invalid(message: impl Into<String>, details: Value) -> ToolError {
    ToolError::new(ErrorCode::InvalidInput, message).with_details(details)
}

/// Rounds to 3 decimals (nm values) — enough for sub-pixel EPE, stable in JSON.
pub(crate) fn r3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// The deck named `spec` (a shipped name) or read from the path `spec`, with where it came from.
pub(crate) fn load_deck(ctx: &JobCtx<'_>, spec: &str) -> Result<(RuleDeck, String), ToolError> {
    let (text, source) = if let Some((name, text)) = SHIPPED_DECKS.iter().find(|(n, _)| *n == spec)
    {
        ((*text).to_owned(), format!("shipped:{name}"))
    } else if spec.contains('/') || spec.ends_with(".json") {
        let path = ctx.readable(std::path::Path::new(spec))?;
        let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        if len > MAX_DECK_BYTES {
            return Err(ToolError::new(
                ErrorCode::QueryTooLarge,
                "the rule deck is over the size limit",
            )
            .with_details(json!({"bytes": len, "limit": MAX_DECK_BYTES})));
        }
        let text = std::fs::read_to_string(&path).map_err(|e| {
            ToolError::new(
                ErrorCode::FileNotFound,
                format!("cannot read the rule deck: {e}"),
            )
            .with_details(json!({"deck": spec}))
        })?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        (text, format!("file:{name}"))
    } else {
        let shipped: Vec<&str> = SHIPPED_DECKS.iter().map(|(n, _)| *n).collect();
        return Err(ToolError::new(
            ErrorCode::NotFound,
            format!(
                "no shipped rule deck named {spec:?} (a path must contain '/' or end in .json)"
            ),
        )
        .with_details(json!({"deck": spec, "shipped": shipped})));
    };
    let deck = RuleDeck::from_json(&text).map_err(|e| {
        invalid(
            format!("invalid rule deck: {e}"),
            json!({"deck": spec, "error": e.to_string()}),
        )
    })?;
    Ok((deck, source))
}

/// The layer evaluated: the caller's, else the deck's only layer.
pub(crate) fn target_layer(deck: &RuleDeck, layer: Option<&str>) -> Result<LayerRef, ToolError> {
    let deck_layers: std::collections::BTreeSet<String> =
        deck.rules.iter().map(|r| r.layer.to_string()).collect();
    let target = match layer {
        Some(text) => parse_layer_spec(text).ok_or_else(|| {
            ToolError::new(
                ErrorCode::InvalidLayer,
                format!("layer must be \"layer/datatype\", got {text:?}"),
            )
            .with_details(json!({"layer": text}))
        })?,
        None if deck_layers.len() == 1 => deck.rules[0].layer,
        None => {
            return Err(ToolError::new(
                ErrorCode::InvalidLayer,
                "the deck has rules on several layers; name one with `layer`",
            )
            .with_details(json!({"deck_layers": deck_layers})));
        }
    };
    if !deck_layers.contains(&target.to_string()) {
        return Err(ToolError::new(
            ErrorCode::InvalidLayer,
            format!("the deck has no rules for layer {target}"),
        )
        .with_details(json!({"layer": target.to_string(), "deck_layers": deck_layers})));
    }
    Ok(target)
}

/// A violation before tiling: location in dbu, marker as JSON in nm.
struct Found {
    rule: usize,
    /// Location (marker centre), picometres, in the layout frame.
    at_pm: (i64, i64),
    /// Marker bbox in dbu.
    bbox: BBox,
    measured: Option<f64>,
    marker: Value,
}

fn pm(v_dbu: f64, dbu_nm: f64) -> i64 {
    (v_dbu * dbu_nm * 1000.0).round() as i64
}

fn nm_point(p: Point, dbu_nm: f64) -> Value {
    json!([r3(p.x as f64 * dbu_nm), r3(p.y as f64 * dbu_nm)])
}

fn from_violation(rule: usize, v: &Violation, dbu_nm: f64) -> Found {
    let (cx, cy) = v.center_dbu();
    let marker = match &v.marker {
        Marker::EdgePair { first, second } => json!({
            "type": "edge_pair",
            "first": [nm_point(first.p1, dbu_nm), nm_point(first.p2, dbu_nm)],
            "second": [nm_point(second.p1, dbu_nm), nm_point(second.p2, dbu_nm)],
        }),
        Marker::Polygon { hull } => json!({
            "type": "polygon",
            "hull": hull.iter().map(|p| nm_point(*p, dbu_nm)).collect::<Vec<_>>(),
        }),
    };
    Found {
        rule,
        at_pm: (pm(cx, dbu_nm), pm(cy, dbu_nm)),
        bbox: v.bbox,
        measured: Some(r3(v.measured)),
        marker,
    }
}

/// Printed contours of the nominal corner as integer polygons (outer boundaries only).
fn printed_polygons(imaged: &Imaged, output: &reticle_kernel::LithoOutput) -> Vec<Polygon> {
    let Some(aerial) = output.corners[0].aerial.as_ref() else {
        return Vec::new();
    };
    let level = imaged.resist.threshold;
    contours(aerial, level, &imaged.frame)
        .into_iter()
        .filter(|c| c.signed_area() > 0.0)
        .filter_map(|c| {
            let simplified = simplify_closed(&c.points, SIMPLIFY_DBU);
            let mut points: Vec<Point> = Vec::with_capacity(simplified.len());
            for (x, y) in simplified {
                let p = Point::new(x.round() as i64, y.round() as i64);
                if points.last() != Some(&p) {
                    points.push(p);
                }
            }
            while points.len() > 1 && points.first() == points.last() {
                points.pop();
            }
            (points.len() >= 3).then(|| Polygon::new(points))
        })
        .collect()
}

/// Douglas–Peucker tolerance (dbu) for printed contours before they are snapped to the
/// grid: marching squares plus rounding leave 1-dbu jogs whose opposite-facing micro-edges
/// would pair as false width/space markers along straight printed edges (D24).
const SIMPLIFY_DBU: f64 = 0.75;

fn point_segment_distance(p: (f64, f64), a: (f64, f64), b: (f64, f64)) -> f64 {
    let (dx, dy) = (b.0 - a.0, b.1 - a.1);
    let len2 = dx * dx + dy * dy;
    let t = if len2 > 0.0 {
        (((p.0 - a.0) * dx + (p.1 - a.1) * dy) / len2).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let (qx, qy) = (a.0 + t * dx, a.1 + t * dy);
    ((p.0 - qx).powi(2) + (p.1 - qy).powi(2)).sqrt()
}

/// Douglas–Peucker on the open chain `pts[first..=last]`; pushes kept interior indices.
fn simplify_chain(pts: &[(f64, f64)], first: usize, last: usize, eps: f64, keep: &mut Vec<usize>) {
    if last <= first + 1 {
        return;
    }
    let (mut worst, mut at) = (0.0, first);
    for i in (first + 1)..last {
        let d = point_segment_distance(pts[i], pts[first], pts[last]);
        if d > worst {
            (worst, at) = (d, i);
        }
    }
    if worst > eps {
        simplify_chain(pts, first, at, eps, keep);
        keep.push(at);
        simplify_chain(pts, at, last, eps, keep);
    }
}

/// A closed contour simplified within `eps`: split at the first point and the point
/// farthest from it, each half simplified (deterministic).
fn simplify_closed(points: &[(f64, f64)], eps: f64) -> Vec<(f64, f64)> {
    let n = points.len();
    if n < 4 {
        return points.to_vec();
    }
    let far = (1..n)
        .max_by(|&i, &j| {
            let d = |k: usize| {
                (points[k].0 - points[0].0).powi(2) + (points[k].1 - points[0].1).powi(2)
            };
            d(i).total_cmp(&d(j)).then(j.cmp(&i))
        })
        .unwrap_or(1);
    let mut ring: Vec<(f64, f64)> = points.to_vec();
    ring.push(points[0]);
    let mut keep = vec![0];
    simplify_chain(&ring, 0, far, eps, &mut keep);
    keep.push(far);
    simplify_chain(&ring, far, n, eps, &mut keep);
    keep.into_iter().map(|i| ring[i]).collect()
}

/// Status of one deck rule in this evaluation.
struct RuleRun {
    checked: bool,
    skipped_reason: Option<&'static str>,
    engine_path: &'static str,
}

fn unit(kind: RuleKind) -> &'static str {
    if kind == RuleKind::Area { "nm2" } else { "nm" }
}

/// Single-linkage groups of `found` (one rule, sorted by location) within `radius_pm`.
fn group(found: &[&Found], radius_pm: i64) -> Vec<usize> {
    let n = found.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let r2 = (radius_pm as i128) * (radius_pm as i128);
    for i in 0..n {
        for j in (i + 1)..n {
            let dx = i128::from(found[j].at_pm.0 - found[i].at_pm.0);
            if dx > i128::from(radius_pm) {
                break;
            }
            let dy = i128::from(found[j].at_pm.1 - found[i].at_pm.1);
            if dx * dx + dy * dy <= r2 {
                let (a, b) = (root(&mut parent, i), root(&mut parent, j));
                // The smaller index (earlier in location order) stays the root.
                parent[a.max(b)] = a.min(b);
            }
        }
    }
    (0..n).map(|i| root(&mut parent, i)).collect()
}

/// `violation_group_id` (seed 000 §2b): 16 hex digits of BLAKE2b-64 over the deck hash,
/// the dedup radius, the canonical location (pm) and the rule id and layer.
fn group_id(deck_hash: &str, radius_nm: f64, at_pm: (i64, i64), rule: &Rule) -> String {
    let mut h = Blake2bVar::new(8).expect("8 is a valid BLAKE2b output size");
    h.update(deck_hash.as_bytes());
    h.update(&[0]);
    h.update(&radius_nm.to_le_bytes());
    h.update(&at_pm.0.to_le_bytes());
    h.update(&at_pm.1.to_le_bytes());
    h.update(rule.id.as_bytes());
    h.update(&[0]);
    h.update(rule.layer.to_string().as_bytes());
    let mut out = [0u8; 8];
    h.finalize_variable(&mut out)
        .expect("buffer has the requested size");
    out.iter().map(|b| format!("{b:02x}")).collect()
}

/// Tiles (ix, iy) whose half-open square touches `bbox` (dbu); a degenerate extent
/// counts the tile holding its coordinate.
fn tiles_of(bbox: BBox, tile_dbu: i64) -> Vec<(i64, i64)> {
    let span = |lo: i64, hi: i64| {
        let first = lo.div_euclid(tile_dbu);
        let last = if hi > lo {
            (hi - 1).div_euclid(tile_dbu)
        } else {
            first
        };
        first..=last
    };
    let mut out = Vec::new();
    for iy in span(bbox.bottom, bbox.top) {
        for ix in span(bbox.left, bbox.right) {
            out.push((ix, iy));
        }
    }
    out
}

fn tile_id(t: (i64, i64)) -> String {
    format!("T_{}_{}", t.0, t.1)
}

impl Op for Evaluate {
    fn name(&self) -> &'static str {
        "evaluate"
    }

    #[allow(clippy::too_many_lines)]
    fn run(&self, ctx: &JobCtx<'_>, args_json: &str) -> Result<Value, ToolError> {
        let args: Args = parse_args(self.name(), args_json)?;
        let (deck, deck_source) = load_deck(ctx, &args.deck)?;
        let deck_hash = deck.deck_hash();
        let target = target_layer(&deck, args.layer.as_deref())?;
        let tile_nm = tile_size(args.tile_nm)?;
        let layout_name = layout_name(&args.layout);
        let sim_args = simulate::Args {
            cell: args.cell.clone(),
            box_um: args.box_um,
            pixel_nm: args.pixel_nm,
            model: args.model.clone(),
            ..imaging_args(&args.layout, &deck, target)
        };
        let imaged = simulate::image(ctx, sim_args, STEPS)?;
        if ctx.cancel.is_cancelled() {
            return Err(cancelled(ctx.job_id));
        }
        let setup = Setup {
            deck,
            deck_source,
            deck_hash,
            target,
            tile_nm,
            layout_name,
            report_level: args.report_level,
            limits: args.limits,
        };
        report(ctx, &setup, &imaged, None, &|n, message| {
            ctx.progress.report(n, STEPS, message)
        })
    }
}

/// The `simulate` arguments that image `layout` for checking `deck` on `target`: the target
/// layer (a `.glp` file's shapes are its one layer, named by level, so no layer is passed)
/// plus the second layers its enclosure rules read. Window, cell and model are the caller's.
pub(crate) fn imaging_args(
    layout: &std::path::Path,
    deck: &RuleDeck,
    target: LayerRef,
) -> simulate::Args {
    let is_glp = layout
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("glp"));
    simulate::Args {
        layout: layout.to_path_buf(),
        layer: (!is_glp).then(|| target.to_string()),
        cell: None,
        box_um: None,
        pixel_nm: None,
        model: None,
        context_layers: context_layers(deck, target),
    }
}

/// The layout's file name, as reports name it.
pub(crate) fn layout_name(layout: &std::path::Path) -> String {
    layout
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `tile_nm`, or the default; at least 1 nm.
pub(crate) fn tile_size(tile_nm: Option<f64>) -> Result<f64, ToolError> {
    let tile_nm = tile_nm.unwrap_or(DEFAULT_TILE_NM);
    if !(tile_nm.is_finite() && tile_nm >= 1.0) {
        return Err(invalid(
            "tile_nm must be at least 1",
            json!({"tile_nm": tile_nm}),
        ));
    }
    Ok(tile_nm)
}

/// The second layers the deck's mask enclosure rules on `target` need (read with the
/// target, clipped to the same window, not imaged).
pub(crate) fn context_layers(deck: &RuleDeck, target: LayerRef) -> Vec<String> {
    let mut layers: Vec<String> = deck
        .rules
        .iter()
        .filter(|r| {
            r.layer == target && r.kind == RuleKind::Enclosure && r.applies_to == AppliesTo::Mask
        })
        .filter_map(|r| r.other_layer.map(|l| l.to_string()))
        .collect();
    layers.sort();
    layers.dedup();
    layers
}

/// What a report needs besides the images: the deck, the layer, the tiling and the
/// report options (`evaluate`'s arguments, parsed).
pub(crate) struct Setup {
    pub(crate) deck: RuleDeck,
    pub(crate) deck_source: String,
    pub(crate) deck_hash: String,
    pub(crate) target: LayerRef,
    pub(crate) tile_nm: f64,
    pub(crate) layout_name: String,
    pub(crate) report_level: ReportLevel,
    pub(crate) limits: Limits,
}

/// A mask other than the drawn one, imaged on the same frame (optimize's result): its
/// polygons (for the mask rules) and its corner images (for the printed rules, EPE and PV
/// band, still measured against the drawn target).
pub(crate) struct MaskOverride<'a> {
    pub(crate) polygons: &'a [Polygon],
    pub(crate) output: &'a reticle_kernel::LithoOutput,
}

/// The violation report of one imaged window (the `evaluate` payload): the checks, tiles,
/// groups, canonical/shadow records, counts and limits. `step` reports progress 4..=7.
#[allow(clippy::too_many_lines)]
pub(crate) fn report(
    ctx: &JobCtx<'_>,
    setup: &Setup,
    imaged: &Imaged,
    mask: Option<MaskOverride<'_>>,
    step: &dyn Fn(u64, &str),
) -> Result<Value, ToolError> {
    {
        let Setup {
            deck,
            deck_source,
            deck_hash,
            target,
            tile_nm,
            layout_name,
            ..
        } = setup;
        let (deck_hash, target, tile_nm) = (deck_hash.as_str(), *target, *tile_nm);
        let output = mask.as_ref().map_or(&imaged.output, |m| m.output);
        let check_cancel = || {
            if ctx.cancel.is_cancelled() {
                Err(cancelled(ctx.job_id))
            } else {
                Ok(())
            }
        };
        let dbu_nm = imaged.layout.dbu_nm;
        let window = imaged.layout.window;
        let drawn: Vec<Polygon> = mask
            .as_ref()
            .map_or(imaged.layout.polygons.as_slice(), |m| m.polygons)
            .iter()
            .filter_map(|p| clip_polygon(p, &window))
            .collect();
        let rules: Vec<&Rule> = deck.rules.iter().filter(|r| r.layer == target).collect();
        let mut found: Vec<Found> = Vec::new();
        let mut runs: Vec<RuleRun> = Vec::with_capacity(rules.len());
        let check_err = |e: reticle_kernel::rules::CheckError| invalid(e.to_string(), json!({}));

        // MRC on the drawn polygons.
        step(4, "mask rules");
        let mask_region = Region::from_polygons(&drawn);
        let mut printed_region: Option<Region> = None;
        for (i, rule) in rules.iter().enumerate() {
            let run = match (rule.kind, rule.applies_to) {
                (RuleKind::Enclosure, AppliesTo::Mask) => {
                    // The enclosing layer as drawn (an optimize mask override replaces
                    // only the target layer).
                    let other: Vec<Polygon> = rule
                        .other_layer
                        .and_then(|l| imaged.layout.context.get(&l.to_string()))
                        .map(|polygons| {
                            polygons
                                .iter()
                                .filter_map(|p| clip_polygon(p, &window))
                                .collect()
                        })
                        .unwrap_or_default();
                    let outer = Region::from_polygons(&other);
                    for v in
                        check_rule(rule, &mask_region, Some(&outer), dbu_nm).map_err(check_err)?
                    {
                        found.push(from_violation(i, &v, dbu_nm));
                    }
                    RuleRun {
                        checked: true,
                        skipped_reason: None,
                        engine_path: "mrc.standard",
                    }
                }
                (RuleKind::Enclosure, AppliesTo::Printed) => RuleRun {
                    checked: false,
                    skipped_reason: Some(
                        "enclosure of printed shapes needs the enclosing layer imaged too; evaluate images one layer",
                    ),
                    engine_path: "drc.printed_contour",
                },
                (RuleKind::Epe, _) => RuleRun {
                    checked: true,
                    skipped_reason: None,
                    engine_path: "epe.gauge",
                },
                (RuleKind::Pvband, _) => RuleRun {
                    checked: true,
                    skipped_reason: None,
                    engine_path: "pvband.3corner",
                },
                (_, AppliesTo::Mask) => {
                    for v in check_rule(rule, &mask_region, None, dbu_nm).map_err(check_err)? {
                        found.push(from_violation(i, &v, dbu_nm));
                    }
                    RuleRun {
                        checked: true,
                        skipped_reason: None,
                        engine_path: "mrc.standard",
                    }
                }
                (_, AppliesTo::Printed) => {
                    if printed_region.is_none() {
                        step(5, "printed contours");
                        printed_region =
                            Some(Region::from_polygons(&printed_polygons(imaged, output)));
                    }
                    let region = printed_region.as_ref().expect("set above");
                    for v in check_rule(rule, region, None, dbu_nm).map_err(check_err)? {
                        found.push(from_violation(i, &v, dbu_nm));
                    }
                    RuleRun {
                        checked: true,
                        skipped_reason: None,
                        engine_path: "drc.printed_contour",
                    }
                }
            };
            runs.push(run);
            check_cancel()?;
        }

        // EPE and PV band from the simulation, at the ICCAD checkpoints of the drawn edges.
        step(6, "simulation rules");
        let level = f64::from(imaged.resist.threshold);
        let scale = dbu_nm;
        let cfg = EpeConfig {
            spacing_nm: EpeConfig::ICCAD2013.spacing_nm / scale,
            tolerance_nm: EpeConfig::ICCAD2013.tolerance_nm / scale,
            search_nm: EpeConfig::ICCAD2013.search_nm / scale,
        };
        let corners = &output.corners;
        let polygons = &imaged.layout.polygons;
        let epe_metrics = match (&corners[0].aerial, &corners[0].printed) {
            (Some(aerial), Some(printed)) => {
                let report = epe(polygons, printed, aerial, level, &imaged.frame, &cfg);
                let found_abs: Vec<f64> = report
                    .epe_nm
                    .iter()
                    .flatten()
                    .map(|e| e.abs() * scale)
                    .collect();
                let mean = (!found_abs.is_empty())
                    .then(|| r3(found_abs.iter().sum::<f64>() / found_abs.len() as f64));
                let max = found_abs.iter().copied().reduce(f64::max).map(r3);
                let cps = checkpoints(polygons, cfg.spacing_nm);
                for (i, rule) in rules.iter().enumerate() {
                    let per_checkpoint: Vec<Option<f64>> = match rule.kind {
                        RuleKind::Epe => {
                            report.epe_nm.iter().map(|e| e.map(|e| e * scale)).collect()
                        }
                        RuleKind::Pvband => match (&corners[1].aerial, &corners[2].aerial) {
                            (Some(hi), Some(lo)) => cps
                                .iter()
                                .map(|c| {
                                    let a = epe_at(hi, &imaged.frame, c, level, cfg.search_nm)?;
                                    let b = epe_at(lo, &imaged.frame, c, level, cfg.search_nm)?;
                                    Some((a - b) * scale)
                                })
                                .collect(),
                            _ => continue,
                        },
                        _ => continue,
                    };
                    for (c, value) in cps.iter().zip(per_checkpoint) {
                        let bad = value.is_none_or(|v| v.abs() > rule.value);
                        if !bad {
                            continue;
                        }
                        let p = Point::new(c.x.round() as i64, c.y.round() as i64);
                        found.push(Found {
                            rule: i,
                            at_pm: (pm(c.x, dbu_nm), pm(c.y, dbu_nm)),
                            bbox: BBox::from_corners(p, p),
                            measured: value.map(|v| r3(v.abs())),
                            marker: json!({
                                "type": "checkpoint",
                                "point": [r3(c.x * dbu_nm), r3(c.y * dbu_nm)],
                                "normal": [r3(c.nx), r3(c.ny)],
                            }),
                        });
                    }
                }
                json!({"checkpoints": report.checkpoints, "violations": report.violations, "mean_abs_nm": mean, "max_abs_nm": max})
            }
            _ => Value::Null,
        };
        check_cancel()?;

        // Tiles, groups, canonical/shadow.
        step(7, "report");
        let tile_dbu = ((tile_nm / dbu_nm).round() as i64).max(1);
        let mut records: Vec<Value> = Vec::new();
        let mut rule_counts: Vec<(usize, usize)> = vec![(0, 0); rules.len()];
        let mut severity_groups: BTreeMap<&'static str, usize> =
            [("error", 0), ("warning", 0), ("info", 0)]
                .into_iter()
                .collect();
        for (ri, rule) in rules.iter().enumerate() {
            let mut mine: Vec<&Found> = found.iter().filter(|f| f.rule == ri).collect();
            mine.sort_by(|a, b| {
                (a.at_pm, a.bbox, a.marker.to_string()).cmp(&(
                    b.at_pm,
                    b.bbox,
                    b.marker.to_string(),
                ))
            });
            let radius_pm = (rule.dedup_radius_nm * 1000.0).round() as i64;
            let roots = group(&mine, radius_pm);
            let mut members: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
            for (i, r) in roots.iter().enumerate() {
                members.entry(*r).or_default().push(i);
            }
            rule_counts[ri].1 = members.len();
            *severity_groups
                .entry(match rule.severity {
                    Severity::Error => "error",
                    Severity::Warning => "warning",
                    Severity::Info => "info",
                })
                .or_default() += members.len();
            for (root, list) in &members {
                let canonical = mine[*root];
                let gid = group_id(deck_hash, rule.dedup_radius_nm, canonical.at_pm, rule);
                // One record per (violation, tile); the canonical record is the canonical
                // violation's record in the tile holding its location.
                let home = (
                    (canonical.at_pm.0 as f64 / 1000.0 / dbu_nm).floor() as i64,
                    (canonical.at_pm.1 as f64 / 1000.0 / dbu_nm).floor() as i64,
                );
                let home_tile = (home.0.div_euclid(tile_dbu), home.1.div_euclid(tile_dbu));
                let mut group_records: Vec<(bool, &Found, (i64, i64))> = Vec::new();
                for &m in list {
                    let f = mine[m];
                    for t in tiles_of(f.bbox, tile_dbu) {
                        let is_canonical = m == *root && t == home_tile;
                        group_records.push((is_canonical, f, t));
                    }
                }
                if !group_records.iter().any(|g| g.0) {
                    // The location rounds into a tile the marker does not touch (half-dbu
                    // centres): the canonical violation's first tile holds the canonical record.
                    if let Some(first) = group_records
                        .iter_mut()
                        .find(|g| std::ptr::eq(g.1, canonical))
                    {
                        first.0 = true;
                    }
                }
                group_records.sort_by_key(|g| !g.0);
                rule_counts[ri].0 += group_records.len();
                let group_size = group_records.len();
                let mut canonical_vid = String::new();
                for (index, (is_canonical, f, t)) in group_records.into_iter().enumerate() {
                    let tid = tile_id(t);
                    let origin = [
                        r3((t.0 * tile_dbu) as f64 * dbu_nm),
                        r3((t.1 * tile_dbu) as f64 * dbu_nm),
                    ];
                    let loc = [f.at_pm.0 as f64 / 1000.0, f.at_pm.1 as f64 / 1000.0];
                    let vid = ViolationId::new(
                        &imaged.layout.sha256,
                        deck_hash,
                        &rule.id,
                        f.at_pm,
                        &tid,
                        &gid,
                        index,
                    )
                    .to_string();
                    if is_canonical {
                        canonical_vid.clone_from(&vid);
                    }
                    let b = f.bbox;
                    records.push(json!({
                        "violation_id": vid,
                        "violation_group_id": gid,
                        "rule_id": rule.id,
                        "rule_deck": deck.name,
                        "rule_kind": rule.kind.as_str(),
                        "applies_to": match rule.applies_to { AppliesTo::Mask => "mask", AppliesTo::Printed => "printed" },
                        "severity": match rule.severity { Severity::Error => "error", Severity::Warning => "warning", Severity::Info => "info" },
                        "layer": rule.layer.to_string(),
                        "coordinate_frame": "input_layout_native",
                        "location_nm": loc,
                        "bbox_nm": [r3(b.left as f64 * dbu_nm), r3(b.bottom as f64 * dbu_nm), r3(b.right as f64 * dbu_nm), r3(b.top as f64 * dbu_nm)],
                        "measured": f.measured,
                        "required": rule.value,
                        "unit": unit(rule.kind),
                        "marker": f.marker,
                        "transforms": [],
                        "context": {
                            "tile_id": tid,
                            "tile_origin_nm": origin,
                            "tile_size_nm": r3(tile_dbu as f64 * dbu_nm),
                            "tile_local_nm": [r3(loc[0] - origin[0]), r3(loc[1] - origin[1])],
                        },
                        "dedup_strategy": if is_canonical { "canonical" } else { "shadow" },
                        "dedup_provenance": {
                            "rule_deck_hash": deck_hash,
                            "radius_nm": rule.dedup_radius_nm,
                            "rule_id": rule.id,
                            "canonical_location_nm": [canonical.at_pm.0 as f64 / 1000.0, canonical.at_pm.1 as f64 / 1000.0],
                            "group_size": group_size,
                        },
                    }));
                }
                let n = records.len();
                for record in &mut records[n - group_size..] {
                    record["dedup_provenance"]["canonical_violation_id"] = json!(canonical_vid);
                }
            }
        }

        let total_records = records.len();
        let total_groups: usize = rule_counts.iter().map(|c| c.1).sum();
        let pass_rate = |paths: &[&str]| {
            let checked: Vec<usize> = runs
                .iter()
                .enumerate()
                .filter(|(_, r)| r.checked && paths.contains(&r.engine_path))
                .map(|(i, _)| i)
                .collect();
            (!checked.is_empty()).then(|| {
                let clean = checked.iter().filter(|&&i| rule_counts[i].1 == 0).count();
                (clean as f64 / checked.len() as f64 * 1e6).round() / 1e6
            })
        };
        let by_rule: Vec<Value> = rules
            .iter()
            .zip(&runs)
            .zip(&rule_counts)
            .map(|((rule, run), (records, groups))| {
                let mut entry = Map::new();
                entry.insert("rule_id".into(), json!(rule.id));
                entry.insert("kind".into(), json!(rule.kind.as_str()));
                entry.insert(
                    "applies_to".into(),
                    json!(match rule.applies_to {
                        AppliesTo::Mask => "mask",
                        AppliesTo::Printed => "printed",
                    }),
                );
                entry.insert(
                    "severity".into(),
                    json!(match rule.severity {
                        Severity::Error => "error",
                        Severity::Warning => "warning",
                        Severity::Info => "info",
                    }),
                );
                entry.insert("engine_path".into(), json!(run.engine_path));
                entry.insert("checked".into(), json!(run.checked));
                if let Some(reason) = run.skipped_reason {
                    entry.insert("skipped_reason".into(), json!(reason));
                }
                entry.insert("records".into(), json!(records));
                entry.insert("groups".into(), json!(groups));
                Value::Object(entry)
            })
            .collect();
        let limit = setup.limits.max_violations;
        let exceeded = total_records > limit;
        let detailed = setup.report_level == ReportLevel::Detailed;
        let degraded =
            detailed && exceeded && setup.limits.on_exceeded == OnExceeded::DegradeToAggregate;
        let returned = if detailed && !degraded {
            total_records.min(limit)
        } else {
            0
        };
        let to_nm = |v: i64| r3(v as f64 * dbu_nm);
        let mut payload = json!({
            "schema_version": reticle_protocol::SCHEMA_VERSION,
            "report_level": if detailed { "detailed" } else { "aggregate" },
            "layout": {"name": layout_name, "sha256": imaged.layout.sha256, "format": imaged.layout.format, "dbu_nm": dbu_nm, "layer": target.to_string(), "polygons_in_window": drawn.len()},
            "deck": {"name": deck.name, "version": deck.version, "hash": deck_hash, "source": deck_source, "rules_on_layer": rules.len()},
            "window_nm": {"left": to_nm(window.left), "bottom": to_nm(window.bottom), "right": to_nm(window.right), "top": to_nm(window.top)},
            "pixel_nm": imaged.pixel_nm,
            "model": {"kind": match imaged.model { ModelSpec::Hopkins(_) => "hopkins", ModelSpec::Kernels(_) => "kernels" }, "period_nm": imaged.period, "focus_kernels": imaged.focus_kernels},
            "coordinate_frame": "input_layout_native",
            "tiling": {"tile_nm": r3(tile_dbu as f64 * dbu_nm), "origin_nm": [0.0, 0.0]},
            "metrics": {
                "l2_px": output.l2,
                "pvb_px": output.pvb,
                "epe": epe_metrics,
                "mrc_pass_rate": pass_rate(&["mrc.standard"]),
                "drc_pass_rate": pass_rate(&["drc.printed_contour", "epe.gauge", "pvband.3corner"]),
            },
            "counts": {"records": total_records, "groups": total_groups, "groups_by_severity": severity_groups, "by_rule": by_rule},
            "degraded_to_aggregate": degraded,
            "truncation": {"truncated": detailed && exceeded && !degraded, "max_violations": limit, "total_records": total_records, "returned": returned, "on_exceeded": match setup.limits.on_exceeded { OnExceeded::Truncate => "truncate", OnExceeded::DegradeToAggregate => "degrade_to_aggregate" }},
        });
        if degraded {
            payload["degraded_reason"] = json!(format!(
                "{total_records} violation records exceed limits.max_violations = {limit}"
            ));
        }
        if detailed && !degraded {
            records.truncate(limit);
            payload["violations"] = Value::Array(records);
        }
        Ok(payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_decks_parse() {
        for (name, text) in SHIPPED_DECKS {
            assert!(RuleDeck::from_json(text).is_ok(), "{name}");
        }
    }

    #[test]
    fn tiles_are_half_open() {
        let b = |l, bt, r, t| BBox {
            left: l,
            bottom: bt,
            right: r,
            top: t,
        };
        assert_eq!(tiles_of(b(0, 0, 10, 10), 10), vec![(0, 0)]);
        assert_eq!(tiles_of(b(5, 5, 15, 5), 10), vec![(0, 0), (1, 0)]);
        assert_eq!(tiles_of(b(-1, 0, 0, 0), 10), vec![(-1, 0)]);
    }

    #[test]
    fn groups_link_within_the_radius() {
        let f = |x, y| Found {
            rule: 0,
            at_pm: (x, y),
            bbox: BBox {
                left: 0,
                bottom: 0,
                right: 0,
                top: 0,
            },
            measured: None,
            marker: Value::Null,
        };
        let v = [f(0, 0), f(5, 0), f(9, 0), f(30, 0), f(30, 0)];
        let refs: Vec<&Found> = v.iter().collect();
        assert_eq!(group(&refs, 5), vec![0, 0, 0, 3, 3]);
        assert_eq!(group(&refs, 0), vec![0, 1, 2, 3, 3]);
    }
}
