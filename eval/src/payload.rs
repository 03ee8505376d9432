//! The `evaluate` result as Rust types (seed 000 §2, `protocol/schemas/violation_report.json`
//! and `$defs.result` of `evaluate.output.json`), built by [`crate::report`] and
//! [`crate::records`], and the `simulate` result ([`SimulationResult`], `$defs.result` of
//! `simulate.output.json`), built by the worker's `simulate` ops. The worker serializes
//! them; the bytes a client reads are these types' serialization (serde_json with `preserve_order`: the field order below is the
//! key order of the payload, which the recorded transcripts and fixtures pin).

use std::collections::BTreeMap;

use reticle_protocol::args::{OnExceeded, ReportLevel};
use reticle_protocol::files::FileRef;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A box in nm, as reports give a window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WindowNm {
    /// Left (nm).
    pub left: f64,
    /// Bottom (nm).
    pub bottom: f64,
    /// Right (nm).
    pub right: f64,
    /// Top (nm).
    pub top: f64,
}

/// `layout` of a report: which file and layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportLayout {
    /// The file name.
    pub name: String,
    /// SHA-256 of the file (hex).
    pub sha256: String,
    /// `glp` or `gds/oasis`.
    pub format: String,
    /// nm per database unit.
    pub dbu_nm: f64,
    /// The evaluated layer (`layer/datatype`).
    pub layer: String,
    /// The mask layer imaged instead of `layer` (post-OPC verification, D180); absent
    /// when `layer` itself was imaged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask_layer: Option<String>,
    /// Drawn polygons in the window or region.
    pub polygons_in_window: usize,
}

/// `deck` of a report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportDeck {
    /// Deck name.
    pub name: String,
    /// Deck version.
    pub version: String,
    /// Deck hash.
    pub hash: String,
    /// Where it came from (`shipped:<name>`, `file:<name>`).
    pub source: String,
    /// Rules on the evaluated layer.
    pub rules_on_layer: usize,
}

/// `model` of a report or a simulation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSummary {
    /// `hopkins` or `kernels`.
    pub kind: String,
    /// The period (nm).
    pub period_nm: f64,
    /// Focus kernels used.
    pub focus_kernels: usize,
}

/// `tiling` of a report: the report tiles that give records their tile context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportTiling {
    /// Tile side (nm).
    pub tile_nm: f64,
    /// Tile origin (nm): the layout origin.
    pub origin_nm: [f64; 2],
}

/// The nominal corner's EPE at the ICCAD checkpoints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpeSummary {
    /// Checkpoints gauged.
    pub checkpoints: usize,
    /// Checkpoints failing the ICCAD-2013 binary test.
    pub violations: usize,
    /// Mean |EPE| (nm) where a printed edge was found.
    pub mean_abs_nm: Option<f64>,
    /// Largest |EPE| (nm).
    pub max_abs_nm: Option<f64>,
}

/// `metrics` of a report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportMetrics {
    /// L2 (pixels).
    pub l2_px: Option<u64>,
    /// PV band (pixels).
    pub pvb_px: Option<u64>,
    /// Seed 000 §2's name for `epe.mean_abs_nm` (D74).
    pub epe_mean_nm: Option<f64>,
    /// Seed 000 §2's name for `epe.max_abs_nm` (D74).
    pub epe_max_nm: Option<f64>,
    /// The EPE summary; `null` when the images were not kept.
    pub epe: Option<EpeSummary>,
    /// Share of the checked mask rules with no violation group.
    pub mrc_pass_rate: Option<f64>,
    /// Share of the checked printed, EPE and PV-band rules with no violation group.
    pub drc_pass_rate: Option<f64>,
}

/// One rule's line of `counts.by_rule`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleLine {
    /// The rule.
    pub rule_id: String,
    /// Its kind.
    pub kind: String,
    /// `mask` or `printed`.
    pub applies_to: String,
    /// `error`, `warning` or `info`.
    pub severity: String,
    /// The engine path that checked it.
    pub engine_path: String,
    /// Whether it was checked.
    pub checked: bool,
    /// Why not, when it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped_reason: Option<String>,
    /// Its records.
    pub records: usize,
    /// Its groups.
    pub groups: usize,
    /// Distinct violations (a tiled report: before they become records per report tile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub violations: Option<usize>,
}

/// `counts` of a report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    /// Records in all.
    pub records: usize,
    /// Groups in all.
    pub groups: usize,
    /// Groups by severity (`error`, `info`, `warning`, each present).
    pub groups_by_severity: BTreeMap<String, usize>,
    /// Per rule on the layer.
    pub by_rule: Vec<RuleLine>,
    /// Distinct violations (a tiled report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub violations: Option<usize>,
}

/// The report up to and including `counts`: what a window's report and a tiled region's
/// summary both start with, in this order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportHead {
    /// [`reticle_protocol::SCHEMA_VERSION`].
    pub schema_version: String,
    /// Aggregate or detailed.
    pub report_level: ReportLevel,
    /// The layout.
    pub layout: ReportLayout,
    /// The deck.
    pub deck: ReportDeck,
    /// The window or region (nm).
    pub window_nm: WindowNm,
    /// Pixel size (nm).
    pub pixel_nm: f64,
    /// The model.
    pub model: ModelSummary,
    /// `input_layout_native`.
    pub coordinate_frame: String,
    /// The report tiles.
    pub tiling: ReportTiling,
    /// Metrics.
    pub metrics: ReportMetrics,
    /// Counts.
    pub counts: Counts,
}

/// `truncation` of a window's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Truncation {
    /// Whether `violations[]` holds fewer records than there are.
    pub truncated: bool,
    /// `limits.max_violations`.
    pub max_violations: usize,
    /// Records in all.
    pub total_records: usize,
    /// Records in `violations[]`.
    pub returned: usize,
    /// `limits.on_exceeded`.
    pub on_exceeded: OnExceeded,
}

/// The `evaluate` result of one window (`$defs.result` of `evaluate.output.json`, before
/// the host adds the job's fields).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ViolationReport {
    /// Everything up to `counts`.
    #[serde(flatten)]
    pub head: ReportHead,
    /// Whether a detailed report dropped its records for being over the limit.
    pub degraded_to_aggregate: bool,
    /// How many records `violations[]` holds of how many.
    pub truncation: Truncation,
    /// Why it was degraded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded_reason: Option<String>,
    /// The records (`report_level: detailed`, not degraded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub violations: Option<Vec<ViolationRecord>>,
}

/// `canonical` or `shadow`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DedupStrategy {
    /// The group's representative record.
    Canonical,
    /// Another record of the group.
    Shadow,
}

/// `context` of a record: its report tile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TileContext {
    /// `T_<ix>_<iy>`.
    pub tile_id: String,
    /// The tile's origin (nm).
    pub tile_origin_nm: [f64; 2],
    /// The tile's side (nm).
    pub tile_size_nm: f64,
    /// The location inside the tile (nm).
    pub tile_local_nm: [f64; 2],
}

/// `dedup_provenance` of a record: how its group was formed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DedupProvenance {
    /// The deck's hash.
    pub rule_deck_hash: String,
    /// The rule's dedup radius (nm).
    pub radius_nm: f64,
    /// The rule.
    pub rule_id: String,
    /// The canonical violation's location (nm).
    pub canonical_location_nm: [f64; 2],
    /// Records in the group.
    pub group_size: usize,
    /// The canonical record's id.
    pub canonical_violation_id: String,
}

/// One violation record (seed 000 §2; `$defs.violation` of `violation_report.json`): a
/// violation in one report tile it touches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ViolationRecord {
    /// The self-describing id (`rv1:…`).
    pub violation_id: String,
    /// The group's deterministic id.
    pub violation_group_id: String,
    /// The rule.
    pub rule_id: String,
    /// The deck's name.
    pub rule_deck: String,
    /// The rule's kind.
    pub rule_kind: String,
    /// `mask` or `printed`.
    pub applies_to: String,
    /// `error`, `warning` or `info`.
    pub severity: String,
    /// The rule's layer.
    pub layer: String,
    /// `input_layout_native`.
    pub coordinate_frame: String,
    /// The marker's centre (nm).
    pub location_nm: [f64; 2],
    /// The marker's box (nm).
    pub bbox_nm: [f64; 4],
    /// The measured value (nm, nm² for area); `null` where nothing was measured.
    pub measured: Option<f64>,
    /// The rule's value.
    pub required: f64,
    /// `nm` or `nm2`.
    pub unit: String,
    /// The marker (an edge pair, a polygon, a checkpoint), as the finding gave it.
    pub marker: Marker,
    /// Frames between `coordinate_frame` and the layout's (none: native).
    pub transforms: Vec<Value>,
    /// Its report tile.
    pub context: TileContext,
    /// Canonical or shadow.
    pub dedup_strategy: DedupStrategy,
    /// How its group was formed.
    pub dedup_provenance: DedupProvenance,
}

/// Min, max and mean of an image (6 decimals).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MinMaxMean {
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Mean.
    pub mean: f64,
}

/// The resist model of a simulation's statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResistSummary {
    /// Sigmoid steepness.
    pub steepness: f64,
    /// Intensity threshold.
    pub threshold: f64,
}

/// One corner's print.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CornerPrint {
    /// `nominal`, `max` or `min`.
    pub corner: String,
    /// Printed pixels.
    pub printed_px: u64,
    /// Printed area (nm²).
    pub printed_area_nm2: f64,
}

/// `statistics` of a simulation: the nominal corner, and each corner's print.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Statistics {
    /// `nominal`.
    pub corner: String,
    /// The aerial image's intensities.
    pub aerial_intensity: Option<MinMaxMean>,
    /// The resist response's values.
    pub resist_response: Option<MinMaxMean>,
    /// The resist model.
    pub resist: ResistSummary,
    /// Printed pixels (nominal).
    pub printed_px: u64,
    /// Printed area (nm², nominal).
    pub printed_area_nm2: f64,
    /// Drawn (target) pixels.
    pub target_px: u64,
    /// Drawn area (nm²).
    pub target_area_nm2: f64,
    /// One pixel's area (nm²).
    pub pixel_area_nm2: f64,
    /// Each corner's print.
    pub corners: Vec<CornerPrint>,
}

/// `layout` of a simulation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimulatedLayout {
    /// The canonical path of the file.
    pub path: String,
    /// SHA-256 of the file (hex).
    pub sha256: String,
    /// `glp` or `gds/oasis`.
    pub format: String,
    /// Drawn polygons in the window or region.
    pub polygons_in_window: u64,
}

/// `grid` of a simulation: the image's size in pixels.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GridSize {
    /// Columns.
    pub width: usize,
    /// Rows.
    pub height: usize,
}

/// `backend` of a simulation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackendSummary {
    /// `cpu` or `gpu`.
    pub kind: String,
    /// The adapter.
    pub adapter: String,
}

/// One window's EPE: checkpoints, failures and the largest |EPE|.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowEpe {
    /// Checkpoints gauged.
    pub checkpoints: usize,
    /// Checkpoints failing the ICCAD-2013 binary test.
    pub violations: usize,
    /// Largest |EPE| (nm).
    pub max_abs_nm: Option<f64>,
}

/// `metrics.epe` of a simulation: one window's, or a tiled region's summary (with the mean).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SimulatedEpe {
    /// One window's (read first: it refuses the tiled summary's `mean_abs_nm`).
    Window(WindowEpe),
    /// A tiled region's summary.
    Tiled(EpeSummary),
}

/// `metrics` of a simulation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimulationMetrics {
    /// L2 (pixels).
    pub l2_px: Option<u64>,
    /// PV band (pixels).
    pub pvb_px: Option<u64>,
    /// EPE; `null` when the images were not kept.
    pub epe: Option<SimulatedEpe>,
}

/// `timing_ms` of a simulation: one window's imaging and total, or a merge's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimulationTiming {
    /// Imaging (one window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imaging: Option<f64>,
    /// The op in all (one window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    /// The merge (a tiled region).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<f64>,
}

/// `region` of a tiled simulation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimulatedRegion {
    /// `box`, `layer_bbox` or `iccad_window`.
    pub source: String,
    /// The region (nm).
    pub box_nm: [f64; 4],
    /// Pixels counted.
    pub pixels: u64,
}

/// `imaging` of a tiled simulation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TiledImaging {
    /// `tiled`.
    pub mode: String,
    /// The model period (nm).
    pub period_nm: f64,
    /// A tile's core (nm).
    pub core_nm: f64,
    /// A tile's halo (nm).
    pub halo_nm: f64,
    /// Tiles.
    pub tiles: u64,
}

/// One image of `images`: its numbers, its picture and what the picture's grey means.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageFile {
    /// The `.npy` (row 0 the bottom row).
    pub npy: FileRef,
    /// The PNG (bottom row at the bottom).
    pub png: FileRef,
    /// What the picture's colours mean.
    pub png_scale: String,
}

/// `images` of a simulation (`images: true`): the nominal corner's aerial image, resist
/// response and print, as files in the job's artifact directory (D232).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageFiles {
    /// `nominal`.
    pub corner: String,
    /// Which way is up.
    pub orientation: String,
    /// The aerial image.
    pub aerial: ImageFile,
    /// The resist response.
    pub resist: ImageFile,
    /// The print.
    pub printed: ImageFile,
    /// A stitched region's: its bottom-left pixel on the tile grid's lattice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin_px: Option<[i64; 2]>,
}

/// The `simulate` result (`$defs.result` of `simulate.output.json`, before the host adds
/// the job's fields): one window, or a tiled region (`region`, `imaging`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimulationResult {
    /// The nominal corner's statistics; `null` when the images were not kept.
    pub statistics: Option<Statistics>,
    /// The image files (`images: true`), as the worker wrote them.
    pub images: Option<ImageFiles>,
    /// [`reticle_protocol::SCHEMA_VERSION`].
    pub schema_version: String,
    /// The layout.
    pub layout: SimulatedLayout,
    /// The window or region (nm).
    pub window_nm: WindowNm,
    /// Pixel size (nm).
    pub pixel_nm: f64,
    /// The image's size.
    pub grid: GridSize,
    /// The model.
    pub model: ModelSummary,
    /// The backend.
    pub backend: BackendSummary,
    /// Metrics.
    pub metrics: SimulationMetrics,
    /// Timing.
    pub timing_ms: SimulationTiming,
    /// The region (tiled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<SimulatedRegion>,
    /// How it was tiled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imaging: Option<TiledImaging>,
}

/// A record's marker: the geometry of the finding in the layout's frame (nm, 3 decimals),
/// tagged by `type` (`violation_report.json`'s `marker`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Marker {
    /// Two edges, each two points: a width, space, notch or enclosure check's pair.
    EdgePair {
        /// The first edge.
        first: [[f64; 2]; 2],
        /// The second edge.
        second: [[f64; 2]; 2],
        /// For a printed violation longer than an imaging tile: the tiles whose pieces
        /// were joined into it (D57).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        joined_from_tiles: Option<std::collections::BTreeSet<String>>,
    },
    /// A polygon's hull: an area check's shape.
    Polygon {
        /// The hull's points.
        hull: Vec<[f64; 2]>,
    },
    /// An EPE or PV-band checkpoint and its outward normal.
    Checkpoint {
        /// The checkpoint.
        point: [f64; 2],
        /// The unit normal there.
        normal: [f64; 2],
    },
}

impl Marker {
    /// The marker as JSON text: the order of markers at one place (the records' sort key,
    /// the same text the report writes).
    #[must_use]
    pub fn sort_key(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}
