//! The report of a whole-layout evaluation from its tiles' outputs (docs/DECISIONS.md
//! D57): metrics summed tile by tile, the pieces of long printed violations joined
//! ([`crate::stitch`]), the records built once for the whole region
//! ([`crate::records::build`], the same function as a single window's), and a summary that
//! stays small for any region: counts per rule, a histogram of violation groups per tile,
//! the tiles with the most groups and the worst groups. The records themselves go to the
//! caller (the worker writes them to the job's artifact directory, where `violations`
//! pages through them).
//!
//! Tiles are taken in the order given (row-major; the worker reads and parses them a chunk
//! at a time on every core, D240) and their sums added in that order; the records are
//! built a chunk of groups at a time on the compute threads and handed on in report order.
//! The memory of a merge is the found violations (a few hundred bytes each) and one chunk,
//! independent of the region's size.

use std::collections::BTreeMap;

use reticle_kernel::rules::Rule;
use reticle_layout::BBox;
use reticle_protocol::ToolError;
use serde_json::{Value, json};

use crate::error::{EvalError, check_cancel};
use crate::found::{Found, RuleRun, rule_run};
use crate::payload::ViolationRecord;
use crate::r3;
use crate::records::{RecordContext, build_with, tile_dbu};
use crate::report::{HeadParts, Setup, head};
use crate::stitch::join;
use crate::tile::{Piece, TileMetrics, TileOutput};
use crate::tiles::{RegionPlan, TileGrid, TileIndex, TileRange};

/// Tiles listed in `tiles.top` and groups in `worst_groups`.
pub const SUMMARY_ENTRIES: usize = 10;

/// What a merge needs besides the tiles.
#[derive(Debug, Clone, Copy)]
pub struct MergeJob<'a> {
    /// The report setup (deck, layer, report tiling, level, limits).
    pub setup: &'a Setup,
    /// The deck's rules on the layer.
    pub rules: &'a [&'a Rule],
    /// The grid the tiles were cut on.
    pub grid: &'a TileGrid,
    /// The tiles covering the region.
    pub range: &'a TileRange,
    /// The region (dbu).
    pub region: BBox,
    /// How the region was chosen: `box` or `layer_bbox`.
    pub region_source: &'a str,
    /// The layout's SHA-256 (hex).
    pub sha256: &'a str,
    /// `glp` or `gds/oasis`.
    pub format: &'a str,
    /// Pixel size (nm).
    pub pixel_nm: f64,
    /// `hopkins` or `kernels`.
    pub model_kind: &'a str,
    /// The model period (nm).
    pub period_nm: f64,
    /// Focus kernels of the model.
    pub focus_kernels: usize,
}

impl<'a> MergeJob<'a> {
    /// The merge of the tiles of `plan` (the one way every tiled caller builds it: the
    /// whole-layout merge and the id resolution's re-derivation).
    pub fn for_plan(setup: &'a Setup, rules: &'a [&'a Rule], plan: &'a RegionPlan) -> Self {
        MergeJob {
            setup,
            rules,
            grid: &plan.grid,
            range: &plan.range,
            region: plan.region,
            region_source: &plan.region_source,
            sha256: &plan.sha256,
            format: if plan.format == "glp" {
                "glp"
            } else {
                "gds/oasis"
            },
            pixel_nm: plan.pixel_nm,
            model_kind: &plan.model_kind,
            period_nm: plan.period_nm,
            focus_kernels: plan.focus_kernels,
        }
    }
}

/// A merged report: the summary payload (no `violations`); the records went to the
/// caller's sink.
#[derive(Debug, Clone)]
pub struct Merged {
    /// The `evaluate` payload without `violations`, `truncation` and paging (the caller adds them).
    pub payload: Value,
    /// Records written to the sink.
    pub records: usize,
    /// The location (nm) of every canonical record, in report order (the heat map's dots).
    pub canonical_nm: Vec<(f64, f64)>,
}

/// A record as the merge hands it on: its JSON value and that value serialized (one line
/// of `violations.jsonl`, without the newline).
#[derive(Debug, Clone)]
pub struct MergedRecord {
    /// The record.
    pub value: Value,
    /// `serde_json::to_vec(&value)`.
    pub line: Vec<u8>,
}

/// What the merge keeps of the records it hands on: enough for the summary.
#[derive(Debug, Default)]
struct RecordsSummary {
    per_tile: BTreeMap<TileIndex, u64>,
    worst: Vec<Value>,
    canonical_nm: Vec<(f64, f64)>,
}

impl RecordsSummary {
    fn see(&mut self, job: &MergeJob<'_>, record: &Value) {
        if !is_canonical(record) {
            return;
        }
        *self
            .per_tile
            .entry(job.grid.owner(job.range, location_pm(record)))
            .or_default() += 1;
        let c = |i: usize| record["location_nm"][i].as_f64().unwrap_or(0.0);
        self.canonical_nm.push((c(0), c(1)));
        self.worst.push(worst_entry(record));
        // Keep the worst few only: the summary's memory does not grow with the report.
        if self.worst.len() > 8 * SUMMARY_ENTRIES {
            sort_worst(&mut self.worst);
            self.worst.truncate(SUMMARY_ENTRIES);
        }
    }
}

/// Running sums over tiles.
#[derive(Debug, Default)]
struct Sums {
    tiles: u64,
    imaged: u64,
    growths: u64,
    metrics: TileMetrics,
}

/// Merges the outputs of every tile of `job.range` (from `tiles`, in row-major order),
/// handing every record to `sink` in report order (rule by rule, group by group, canonical
/// first) as its group is complete.
///
/// # Errors
/// [`EvalError::Cancelled`]; the first error `tiles` or `sink` yields; `INTERNAL_ERROR`
/// when a tile is missing or out of order (the caller's bug, never the layout's).
pub fn merge(
    job: &MergeJob<'_>,
    tiles: impl IntoIterator<Item = Result<TileOutput, ToolError>>,
    sink: &mut dyn FnMut(&MergedRecord) -> Result<(), ToolError>,
    cancel: &reticle_kernel::CancelToken,
) -> Result<Merged, EvalError> {
    let mut sums = Sums::default();
    let mut found: Vec<Found> = Vec::new();
    let mut pieces: Vec<Piece> = Vec::new();
    let mut expected = job.range.iter();
    for tile in tiles {
        let tile = tile?;
        if expected.next() != Some(tile.tile) {
            return Err(EvalError::Tool(ToolError::new(
                reticle_protocol::ErrorCode::InternalError,
                format!("tile {} arrived out of order", tile.tile.id()),
            )));
        }
        sums.tiles += 1;
        sums.imaged += u64::from(tile.metrics.imaged);
        sums.growths += u64::from(tile.mask_box_growths);
        sums.metrics.add(&tile.metrics);
        found.extend(tile.found);
        pieces.extend(tile.pieces);
        check_cancel(cancel)?;
    }
    if let Some(missing) = expected.next() {
        return Err(EvalError::Tool(ToolError::new(
            reticle_protocol::ErrorCode::InternalError,
            format!("tile {} is missing from the merge", missing.id()),
        )));
    }
    let dbu_nm = job.grid.dbu_nm;
    // Neighbouring tiles contour their own images: pieces of one violation meet within a
    // couple of pixels.
    let tolerance = (2.0 * job.grid.pixel_dbu).ceil() as i64;
    found.extend(join(&pieces, dbu_nm, tolerance));
    let context = RecordContext {
        layout_sha256: job.sha256,
        deck_name: &job.setup.deck.name,
        deck_hash: &job.setup.deck_hash,
        dbu_nm,
        tile_dbu: tile_dbu(job.setup.tile_nm, dbu_nm),
        stitch: Some(crate::records::StitchGrid {
            core_nm: crate::r3(job.grid.core_dbu as f64 * dbu_nm),
            halo_nm: crate::r3(job.grid.halo_dbu as f64 * dbu_nm),
        }),
    };
    let mut summary = RecordsSummary::default();
    let mut failed: Option<ToolError> = None;
    // The merge's summary and the records file read records as JSON still: each is made
    // and serialized once, on the compute threads (D240).
    let prepare = |record: ViolationRecord| {
        let value = serde_json::to_value(&record).unwrap_or(Value::Null);
        // Infallible: a `Value` always serializes, into a `Vec` that cannot fail to grow.
        let line = serde_json::to_vec(&value).unwrap_or_default();
        MergedRecord { value, line }
    };
    let counts = build_with(&found, job.rules, &context, &prepare, &mut |record| {
        if failed.is_none() {
            summary.see(job, &record.value);
            if let Err(e) = sink(&record) {
                failed = Some(e);
            }
        }
    });
    if let Some(e) = failed {
        return Err(EvalError::Tool(e));
    }
    check_cancel(cancel)?;
    let runs: Vec<RuleRun> = job.rules.iter().map(|r| rule_run(r)).collect();
    let epe = Some(sums.metrics.epe.summary());
    let parts = HeadParts {
        sha256: job.sha256,
        format: job.format,
        polygons: sums.metrics.polygons as usize,
        window: job.region,
        pixel_nm: job.pixel_nm,
        model_kind: job.model_kind,
        period_nm: job.period_nm,
        focus_kernels: job.focus_kernels,
        l2_px: Some(sums.metrics.l2_px),
        pvb_px: Some(sums.metrics.pvb_px),
        epe,
    };
    let mut head = head(job.setup, &parts, job.rules, &runs, &counts, &context);
    // Distinct violations per rule (before they become one record per report tile they
    // touch, and before groups merge those within the dedup radius): what a DRC tool counts.
    for (i, entry) in head.counts.by_rule.iter_mut().enumerate() {
        entry.violations = Some(found.iter().filter(|f| f.rule == i).count());
    }
    head.counts.violations = Some(found.len());
    let mut payload = serde_json::to_value(&head).map_err(|e| {
        EvalError::Tool(ToolError::new(
            reticle_protocol::ErrorCode::InternalError,
            format!("report: {e}"),
        ))
    })?;
    let to_nm = |v: i64| r3(v as f64 * dbu_nm);
    let r = job.region;
    payload["region"] = json!({
        "source": job.region_source,
        "box_nm": [to_nm(r.left), to_nm(r.bottom), to_nm(r.right), to_nm(r.top)],
        "pixels": sums.metrics.pixels,
    });
    payload["imaging"] = json!({
        "mode": "tiled",
        "period_nm": job.period_nm,
        "core_nm": to_nm(job.grid.core_dbu),
        "halo_nm": to_nm(job.grid.halo_dbu),
        "tiles": sums.tiles,
        "tiles_imaged": sums.imaged,
        "mask_box_growths": sums.growths,
    });
    payload["tiles"] = tile_summary(job, &summary.per_tile);
    sort_worst(&mut summary.worst);
    summary.worst.truncate(SUMMARY_ENTRIES);
    payload["worst_groups"] = Value::Array(summary.worst);
    Ok(Merged {
        payload,
        records: counts.records,
        canonical_nm: summary.canonical_nm,
    })
}

/// `location_nm` of a record in picometres.
fn location_pm(record: &Value) -> (i64, i64) {
    let c = |i: usize| (record["location_nm"][i].as_f64().unwrap_or(0.0) * 1000.0).round() as i64;
    (c(0), c(1))
}

// Public for the crate's tests (tests/units), not an API.
#[doc(hidden)]
pub fn is_canonical(record: &Value) -> bool {
    record["dedup_strategy"] == "canonical"
}

/// Groups per tile (by the tile owning the canonical record): a histogram and the tiles
/// with the most.
fn tile_summary(job: &MergeJob<'_>, per_tile: &BTreeMap<TileIndex, u64>) -> Value {
    let total = job.range.count();
    let bins: [(&str, u64, u64); 5] = [
        ("1", 1, 1),
        ("2-9", 2, 9),
        ("10-99", 10, 99),
        ("100-999", 100, 999),
        ("1000+", 1000, u64::MAX),
    ];
    let mut histogram = vec![json!({"groups": "0", "tiles": total - per_tile.len() as u64})];
    for (label, lo, hi) in bins {
        let n = per_tile.values().filter(|&&g| g >= lo && g <= hi).count();
        histogram.push(json!({"groups": label, "tiles": n}));
    }
    let mut top: Vec<(TileIndex, u64)> = per_tile.iter().map(|(t, n)| (*t, *n)).collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let dbu_nm = job.grid.dbu_nm;
    let top: Vec<Value> = top
        .into_iter()
        .take(SUMMARY_ENTRIES)
        .map(|(t, n)| {
            let c = job.grid.core(t);
            let nm = |v: i64| r3(v as f64 * dbu_nm);
            json!({"tile_id": t.id(), "core_nm": [nm(c.left), nm(c.bottom), nm(c.right), nm(c.top)], "groups": n})
        })
        .collect();
    json!({
        "total": total,
        "with_violations": per_tile.len(),
        "histogram": histogram,
        "top": top,
    })
}

/// How far past its limit a record is, relative to the limit (infinite when nothing was
/// measured: a gauge that found no printed edge).
fn shortfall(record: &Value) -> f64 {
    let required = record["required"].as_f64().unwrap_or(0.0);
    let Some(measured) = record["measured"].as_f64() else {
        return f64::INFINITY;
    };
    let excess = match record["rule_kind"].as_str() {
        Some("epe" | "pvband") => measured - required,
        _ => required - measured,
    };
    if required.abs() > 0.0 {
        excess / required.abs()
    } else {
        excess
    }
}

/// A canonical record as the summary lists it among the worst groups.
// Public for the crate's tests (tests/units), not an API.
#[doc(hidden)]
pub fn worst_entry(r: &Value) -> Value {
    json!({
        "violation_id": r["violation_id"],
        "violation_group_id": r["violation_group_id"],
        "rule_id": r["rule_id"],
        "rule_kind": r["rule_kind"],
        "severity": r["severity"],
        "location_nm": r["location_nm"],
        "measured": r["measured"],
        "required": r["required"],
        "unit": r["unit"],
        "group_size": r["dedup_provenance"]["group_size"],
    })
}

/// Worst first: errors before warnings before infos, then the largest relative shortfall,
/// then the id (a total order: reports are reproducible).
// Public for the crate's tests (tests/units), not an API.
#[doc(hidden)]
pub fn sort_worst(entries: &mut [Value]) {
    let rank = |r: &Value| match r["severity"].as_str() {
        Some("error") => 0,
        Some("warning") => 1,
        _ => 2,
    };
    entries.sort_by(|a, b| {
        rank(a)
            .cmp(&rank(b))
            .then(shortfall(b).total_cmp(&shortfall(a)))
            .then(a["violation_id"].as_str().cmp(&b["violation_id"].as_str()))
    });
}
