//! Finding the violations of one imaged window: every deck rule on the evaluated layer,
//! run where it applies. Mask rules (MRC) run on the drawn polygons clipped to the window,
//! printed rules (litho DRC) on the nominal corner's printed contours ([`crate::printed`]),
//! EPE and PV-band rules at the ICCAD checkpoints of the drawn edges ([`crate::gauges`]).
//!
//! The result is a flat list of [`Found`] violations in the layout's frame, one per marker,
//! with no tile, group or id: [`crate::records::build`] turns such a list (of one window,
//! or merged from many) into report records.

use reticle_kernel::CancelToken;
use reticle_kernel::rules::{
    AppliesTo, Region, Rule, RuleKind, Violation, ViolationGeometry, check_rule,
};
use reticle_layout::clip::clip_polygon;
use reticle_layout::{BBox, Point, Polygon};
use serde_json::json;

use crate::error::{EvalError, check_cancel, invalid};
use crate::payload::{EpeSummary, Marker};
use crate::printed::printed_polygons;
use crate::window::{ImagedWindow, MaskOverride};
use crate::{gauges, r3};

/// A violation before tiling: which rule, where, its marker.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Found {
    /// Index of the rule in the list of rules checked (the deck's rules on the layer).
    pub rule: usize,
    /// Location (marker centre), picometres, in the layout frame.
    pub at_pm: (i64, i64),
    /// Marker bbox in dbu.
    pub bbox: BBox,
    /// The measured value (nm, nm² for area), rounded to 3 decimals; `None` where a
    /// gauge found no printed edge.
    pub measured: Option<f64>,
    /// The marker as the report writes it (nm).
    pub marker: Marker,
}

/// Status of one deck rule in an evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleRun {
    /// Whether the rule was checked.
    pub checked: bool,
    /// Why not, when it was not.
    pub skipped_reason: Option<&'static str>,
    /// How it was checked (`mrc.standard`, `drc.printed_contour`, `epe.gauge`,
    /// `pvband.3corner`).
    pub engine_path: &'static str,
}

/// What [`find`] found in one window.
#[derive(Debug, Clone)]
pub struct Findings {
    /// The violations, rule by rule.
    pub found: Vec<Found>,
    /// One status per rule checked, in the same order as the rules.
    pub runs: Vec<RuleRun>,
    /// EPE summary of the nominal corner (`checkpoints`, `violations`, `mean_abs_nm`,
    /// `max_abs_nm`), `null` when the images were not kept.
    pub epe_metrics: Option<EpeSummary>,
    /// Drawn (or overriding) polygons inside the window.
    pub polygons_in_window: usize,
}

/// `v` (dbu) in picometres.
pub(crate) fn pm(v_dbu: f64, dbu_nm: f64) -> i64 {
    (v_dbu * dbu_nm * 1000.0).round() as i64
}

fn nm_point(p: Point, dbu_nm: f64) -> [f64; 2] {
    [r3(p.x as f64 * dbu_nm), r3(p.y as f64 * dbu_nm)]
}

/// The kernel's violation `v` of rule index `rule` as a [`Found`]: its centre in
/// picometres, its marker in nm (3 decimals), its box in dbu.
pub fn from_violation(rule: usize, v: &Violation, dbu_nm: f64) -> Found {
    let (cx, cy) = v.center_dbu();
    let marker = match &v.marker {
        ViolationGeometry::EdgePair { first, second } => Marker::EdgePair {
            first: [nm_point(first.p1, dbu_nm), nm_point(first.p2, dbu_nm)],
            second: [nm_point(second.p1, dbu_nm), nm_point(second.p2, dbu_nm)],
            joined_from_tiles: None,
        },
        ViolationGeometry::Polygon { hull } => Marker::Polygon {
            hull: hull.iter().map(|p| nm_point(*p, dbu_nm)).collect(),
        },
    };
    Found {
        rule,
        at_pm: (pm(cx, dbu_nm), pm(cy, dbu_nm)),
        bbox: v.bbox,
        measured: Some(r3(v.measured)),
        marker,
    }
}

const MRC: RuleRun = RuleRun {
    checked: true,
    skipped_reason: None,
    engine_path: "mrc.standard",
};

const PRINTED: RuleRun = RuleRun {
    checked: true,
    skipped_reason: None,
    engine_path: "drc.printed_contour",
};

/// How `rule` is checked (or why it is not): the same for every window and tile.
#[must_use]
pub fn rule_run(rule: &Rule) -> RuleRun {
    match (rule.kind, rule.applies_to) {
        (RuleKind::Enclosure, AppliesTo::Printed) => RuleRun {
            checked: false,
            skipped_reason: Some(
                "enclosure of printed shapes needs the enclosing layer imaged too; evaluate images one layer",
            ),
            engine_path: "enclosure.printed",
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
        (_, AppliesTo::Mask) => MRC,
        (_, AppliesTo::Printed) => PRINTED,
    }
}

/// Checks `rules` on `imaged` (or on `mask`, a mask imaged on the same frame instead of
/// the drawn one). `step` reports progress steps 4 (mask rules), 5 (printed contours,
/// when a printed rule needs them) and 6 (simulation rules); `cancel` is checked after
/// every rule.
///
/// # Errors
/// [`EvalError::Cancelled`], or `INVALID_INPUT` when a rule cannot be checked.
pub fn find(
    rules: &[&Rule],
    imaged: &ImagedWindow,
    mask: Option<MaskOverride<'_>>,
    cancel: &CancelToken,
    step: &dyn Fn(u64, &str),
) -> Result<Findings, EvalError> {
    let output = mask.as_ref().map_or(&imaged.output, |m| m.output);
    let dbu_nm = imaged.layout.dbu_nm;
    let window = imaged.layout.window;
    let drawn: Vec<Polygon> = mask
        .as_ref()
        .map_or(imaged.layout.mask_polygons(), |m| m.polygons)
        .iter()
        .filter_map(|p| clip_polygon(p, &window))
        .collect();
    let mut found: Vec<Found> = Vec::new();
    let mut runs: Vec<RuleRun> = Vec::with_capacity(rules.len());
    let check_err = |e: reticle_kernel::rules::CheckError| invalid(e.to_string(), json!({}));

    // MRC on the drawn polygons.
    step(4, "mask rules");
    let mask_region = Region::from_polygons(&drawn);
    let mut printed_region: Option<Region> = None;
    for (i, rule) in rules.iter().enumerate() {
        let run = rule_run(rule);
        match (rule.kind, rule.applies_to) {
            (RuleKind::Enclosure, AppliesTo::Mask) => {
                // The enclosing layer as drawn (an optimize mask override replaces only
                // the target layer).
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
                for v in check_rule(rule, &mask_region, Some(&outer), dbu_nm).map_err(check_err)? {
                    found.push(from_violation(i, &v, dbu_nm));
                }
            }
            (_, AppliesTo::Mask) if run.engine_path == MRC.engine_path => {
                for v in check_rule(rule, &mask_region, None, dbu_nm).map_err(check_err)? {
                    found.push(from_violation(i, &v, dbu_nm));
                }
            }
            (_, AppliesTo::Printed) if run.checked && run.engine_path == PRINTED.engine_path => {
                let region = printed_region.get_or_insert_with(|| {
                    step(5, "printed contours");
                    Region::from_polygons(&printed_polygons(imaged, output))
                });
                for v in check_rule(rule, region, None, dbu_nm).map_err(check_err)? {
                    found.push(from_violation(i, &v, dbu_nm));
                }
            }
            _ => {}
        }
        runs.push(run);
        check_cancel(cancel)?;
    }

    // EPE and PV band from the simulation, at the ICCAD checkpoints of the drawn edges.
    step(6, "simulation rules");
    let epe_metrics = gauges::check(rules, imaged, output, &mut found);
    check_cancel(cancel)?;
    Ok(Findings {
        found,
        runs,
        epe_metrics,
        polygons_in_window: drawn.len(),
    })
}
