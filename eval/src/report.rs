//! The `evaluate` payload (seed 000, RFC 0006) of one imaged window: the checks
//! ([`crate::found::find`]), the records ([`crate::records::build`]), then counts,
//! `by_rule`, pass rates, and the `limits.max_violations` truncation or degradation to
//! aggregate. Nothing in it depends on time, the backend or the path spelling, so the CLI
//! and the MCP server emit the same bytes (G3).

use std::path::Path;

use reticle_kernel::model::ModelSpec;
use reticle_kernel::rules::{DeckLayer, Rule, RuleDeck};
use reticle_kernel::{CancelToken, LithoOutput};
use reticle_protocol::capabilities::DetailSupport;
use reticle_protocol::{ErrorCode, ToolError};
use serde_json::json;

use crate::error::{EvalError, check_cancel, invalid};
use crate::found::{Findings, RuleRun, find};
use crate::payload::{
    Counts, EpeSummary, ModelSummary, ReportDeck, ReportHead, ReportLayout, ReportMetrics,
    ReportTiling, RuleLine, Truncation, ViolationReport, WindowNm,
};
use crate::r3;
use crate::records::{
    RecordContext, RecordCounts, Records, RuleCount, applies_to_name, build, severity_name,
};
use crate::window::{ImagedWindow, MaskOverride};

/// Default report tile side (nm).
pub const DEFAULT_TILE_NM: f64 = 1024.0;
pub use reticle_protocol::args::{
    DEFAULT_MAX_VIOLATIONS, OnExceeded, ReportLevel, ViolationLimits,
};

/// What a report needs besides the images: the deck, the layer, the tiling and the
/// report options (`evaluate`'s arguments, parsed).
#[derive(Debug, Clone)]
pub struct Setup {
    /// The deck.
    pub deck: RuleDeck,
    /// Where it came from (`shipped:<name>`, `file:<name>`).
    pub deck_source: String,
    /// Its hash.
    pub deck_hash: String,
    /// The layer evaluated.
    pub target: DeckLayer,
    /// The mask layer imaged instead of the target (post-OPC verification, D180).
    pub mask_layer: Option<String>,
    /// Report tile side (nm).
    pub tile_nm: f64,
    /// The layout's file name.
    pub layout_name: String,
    /// Aggregate or detailed.
    pub report_level: ReportLevel,
    /// Record limits.
    pub limits: ViolationLimits,
}

impl Setup {
    /// `REPORT_LEVEL_UNSUPPORTED` when `report_level` is `detailed` and every rule on the
    /// evaluated layer runs on an engine path the capabilities matrix marks
    /// `unsupported` for detailed output: there are no records the report could hold
    /// (seed 000 §3, D73). With some supported rules the report is built, and the
    /// unsupported ones say why in `counts.by_rule`.
    ///
    /// # Errors
    /// `REPORT_LEVEL_UNSUPPORTED`, with the rules and their paths in `details`.
    pub fn check_report_level(&self) -> Result<(), ToolError> {
        let rules = self.rules();
        if self.report_level != ReportLevel::Detailed || rules.is_empty() {
            return Ok(());
        }
        let paths: Vec<(&Rule, &'static str)> = rules
            .iter()
            .map(|rule| (*rule, crate::found::rule_run(rule).engine_path))
            .collect();
        let unsupported = |path: &str| {
            reticle_protocol::capabilities::engine_path(path)
                .is_some_and(|p| p.detailed == DetailSupport::Unsupported)
        };
        if !paths.iter().all(|(_, path)| unsupported(path)) {
            return Ok(());
        }
        Err(ToolError::new(
            ErrorCode::ReportLevelUnsupported,
            format!(
                "report_level=detailed is unsupported for every rule of deck {} on layer {}; use report_level=aggregate",
                self.deck.name, self.target
            ),
        )
        .with_details(json!({
            "report_level": "detailed",
            "rules": paths.iter().map(|(rule, path)| json!({"rule_id": rule.id, "engine_path": path})).collect::<Vec<_>>(),
            "capabilities": "tools/list evaluate _meta.capabilities.engine_paths",
        }))
        .recoverable(true))
    }

    /// The deck's rules on the evaluated layer, in deck order (`Found::rule` indexes them).
    #[must_use]
    pub fn rules(&self) -> Vec<&Rule> {
        self.deck
            .rules
            .iter()
            .filter(|r| r.layer == self.target)
            .collect()
    }
}

/// `tile_nm`, or the default; at least 1 nm.
///
/// # Errors
/// `INVALID_INPUT` below 1 nm or not finite.
pub fn tile_size(tile_nm: Option<f64>) -> Result<f64, ToolError> {
    let tile_nm = tile_nm.unwrap_or(DEFAULT_TILE_NM);
    if !(tile_nm.is_finite() && tile_nm >= 1.0) {
        return Err(invalid(
            "tile_nm must be at least 1",
            json!({"tile_nm": tile_nm}),
        ));
    }
    Ok(tile_nm)
}

/// The layout's file name, as reports name it.
#[must_use]
pub fn layout_name(layout: &Path) -> String {
    layout
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The violation report of one imaged window (the `evaluate` payload), for the drawn
/// mask or for `mask` imaged on the same frame. `step` reports progress 4..=7.
///
/// # Errors
/// [`EvalError::Cancelled`], or `INVALID_INPUT` when a rule cannot be checked.
pub fn report(
    setup: &Setup,
    imaged: &ImagedWindow,
    mask: Option<MaskOverride<'_>>,
    cancel: &CancelToken,
    step: &dyn Fn(u64, &str),
) -> Result<ViolationReport, EvalError> {
    let rules = setup.rules();
    let output = mask.as_ref().map_or(&imaged.output, |m| m.output);
    let findings = find(&rules, imaged, mask, cancel, step)?;
    check_cancel(cancel)?;

    // Tiles, groups, canonical/shadow.
    step(7, "report");
    let dbu_nm = imaged.layout.dbu_nm;
    let context = RecordContext {
        layout_sha256: &imaged.layout.sha256,
        deck_name: &setup.deck.name,
        deck_hash: &setup.deck_hash,
        dbu_nm,
        tile_dbu: crate::records::tile_dbu(setup.tile_nm, dbu_nm),
        stitch: None,
    };
    let records = build(&findings.found, &rules, &context);
    Ok(payload(
        setup, imaged, output, &rules, &findings, records, &context,
    ))
}

/// Share of the checked rules on `paths` with no violation group (6 decimals); `None`
/// when no such rule was checked.
pub fn pass_rate(runs: &[RuleRun], counts: &[RuleCount], paths: &[&str]) -> Option<f64> {
    let checked: Vec<usize> = runs
        .iter()
        .enumerate()
        .filter(|(_, r)| r.checked && paths.contains(&r.engine_path))
        .map(|(i, _)| i)
        .collect();
    (!checked.is_empty()).then(|| {
        let clean = checked.iter().filter(|&&i| counts[i].groups == 0).count();
        (clean as f64 / checked.len() as f64 * 1e6).round() / 1e6
    })
}

pub(crate) fn by_rule(rules: &[&Rule], runs: &[RuleRun], counts: &[RuleCount]) -> Vec<RuleLine> {
    rules
        .iter()
        .zip(runs)
        .zip(counts)
        .map(|((rule, run), count)| RuleLine {
            rule_id: rule.id.clone(),
            kind: rule.kind.as_str().to_owned(),
            applies_to: applies_to_name(rule.applies_to).to_owned(),
            severity: severity_name(rule.severity).to_owned(),
            engine_path: run.engine_path.to_owned(),
            checked: run.checked,
            skipped_reason: run.skipped_reason.map(str::to_owned),
            records: count.records,
            groups: count.groups,
            violations: None,
        })
        .collect()
}

/// The parts of a report that do not depend on how the region was imaged.
pub(crate) struct HeadParts<'a> {
    /// The layout's SHA-256 (hex).
    pub(crate) sha256: &'a str,
    /// `glp` or `gds/oasis`.
    pub(crate) format: &'a str,
    /// Drawn polygons in the window or region.
    pub(crate) polygons: usize,
    /// The window or region (dbu).
    pub(crate) window: reticle_layout::BBox,
    /// Pixel size (nm).
    pub(crate) pixel_nm: f64,
    /// `hopkins` or `kernels`.
    pub(crate) model_kind: &'a str,
    /// The model period (nm).
    pub(crate) period_nm: f64,
    /// Focus kernels used.
    pub(crate) focus_kernels: usize,
    /// L2 (pixels).
    pub(crate) l2_px: Option<u64>,
    /// PV band (pixels).
    pub(crate) pvb_px: Option<u64>,
    /// `metrics.epe`.
    pub(crate) epe: Option<EpeSummary>,
}

/// The report up to and including `counts` (in the key order every report has: G3 bytes
/// depend on it).
pub(crate) fn head(
    setup: &Setup,
    parts: &HeadParts<'_>,
    rules: &[&Rule],
    runs: &[RuleRun],
    records: &RecordCounts,
    context: &RecordContext<'_>,
) -> ReportHead {
    let dbu_nm = context.dbu_nm;
    let window = parts.window;
    let deck = &setup.deck;
    let per_rule = &records.per_rule;
    let to_nm = |v: i64| r3(v as f64 * dbu_nm);
    ReportHead {
        schema_version: reticle_protocol::SCHEMA_VERSION.to_owned(),
        report_level: setup.report_level,
        layout: ReportLayout {
            name: setup.layout_name.clone(),
            sha256: parts.sha256.to_owned(),
            format: parts.format.to_owned(),
            dbu_nm,
            layer: setup.target.to_string(),
            mask_layer: setup.mask_layer.clone(),
            polygons_in_window: parts.polygons,
        },
        deck: ReportDeck {
            name: deck.name.clone(),
            version: deck.version.clone(),
            hash: setup.deck_hash.clone(),
            source: setup.deck_source.clone(),
            rules_on_layer: rules.len(),
        },
        window_nm: WindowNm {
            left: to_nm(window.left),
            bottom: to_nm(window.bottom),
            right: to_nm(window.right),
            top: to_nm(window.top),
        },
        pixel_nm: parts.pixel_nm,
        model: ModelSummary {
            kind: parts.model_kind.to_owned(),
            period_nm: parts.period_nm,
            focus_kernels: parts.focus_kernels,
        },
        coordinate_frame: "input_layout_native".to_owned(),
        tiling: ReportTiling {
            tile_nm: r3(context.tile_dbu as f64 * dbu_nm),
            origin_nm: [0.0, 0.0],
        },
        metrics: ReportMetrics {
            l2_px: parts.l2_px,
            pvb_px: parts.pvb_px,
            // Seed 000 §2's names (mean and max of |EPE| over the checkpoints), beside
            // the nested `epe` object they come from (D74).
            epe_mean_nm: parts.epe.as_ref().and_then(|e| e.mean_abs_nm),
            epe_max_nm: parts.epe.as_ref().and_then(|e| e.max_abs_nm),
            epe: parts.epe.clone(),
            mrc_pass_rate: pass_rate(runs, per_rule, &["mrc.standard"]),
            drc_pass_rate: pass_rate(
                runs,
                per_rule,
                &["drc.printed_contour", "epe.gauge", "pvband.3corner"],
            ),
        },
        counts: Counts {
            records: records.records,
            groups: per_rule.iter().map(|c| c.groups).sum(),
            groups_by_severity: records
                .groups_by_severity
                .iter()
                .map(|(k, v)| ((*k).to_owned(), *v))
                .collect(),
            by_rule: by_rule(rules, runs, per_rule),
            violations: None,
        },
    }
}

/// `hopkins` or `kernels`: how reports name a model.
#[must_use]
pub fn model_kind(model: &ModelSpec) -> &'static str {
    match model {
        ModelSpec::Hopkins(_) => "hopkins",
        ModelSpec::Kernels(_) => "kernels",
    }
}

fn payload(
    setup: &Setup,
    imaged: &ImagedWindow,
    output: &LithoOutput,
    rules: &[&Rule],
    findings: &Findings,
    records: Records,
    context: &RecordContext<'_>,
) -> ViolationReport {
    let parts = HeadParts {
        sha256: &imaged.layout.sha256,
        format: imaged.layout.format,
        polygons: findings.polygons_in_window,
        window: imaged.layout.window,
        pixel_nm: imaged.pixel_nm,
        model_kind: model_kind(&imaged.model),
        period_nm: imaged.period,
        focus_kernels: imaged.focus_kernels,
        l2_px: output.l2,
        pvb_px: output.pvb,
        epe: findings.epe_metrics.clone(),
    };
    let head = head(
        setup,
        &parts,
        rules,
        &findings.runs,
        &records.counts,
        context,
    );
    let mut records = records.records;
    let total_records = records.len();
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
    ViolationReport {
        head,
        degraded_to_aggregate: degraded,
        truncation: Truncation {
            truncated: detailed && exceeded && !degraded,
            max_violations: limit,
            total_records,
            returned,
            on_exceeded: setup.limits.on_exceeded,
        },
        degraded_reason: degraded.then(|| {
            format!("{total_records} violation records exceed limits.max_violations = {limit}")
        }),
        violations: (detailed && !degraded).then(|| {
            records.truncate(limit);
            records
        }),
    }
}
