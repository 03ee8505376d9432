//! The arguments of the worker-backed tools as Rust types: parsed once at the tool's edge
//! (the host, after the call passed `<tool>.input.json`), sent to the worker as the
//! op's JSON, and read there as the same type. Host and worker share these; the host
//! never interprets a model, so `model` is a type parameter: the host keeps the JSON
//! object as it came (`serde_json::Value`), the worker reads its `ModelSpec`.
//!
//! Optional fields are skipped when absent, so the op's JSON holds what the caller gave
//! plus what the host resolved (paths), nothing else. `wait` and `tiling` are the host's:
//! it takes them out before the op runs.

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod optimize;
pub use optimize::{MaskStyleName, OptimizeArgs, OptimizeTarget, RepairScope};

/// `tiling`: how a call images its region (docs/DECISIONS.md D57).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tiling {
    /// A `.glp` clip without a box, or a box of exactly one model period, is one window;
    /// anything else is tiled.
    #[default]
    Auto,
    /// Tiles of the model period with halos of real layout context, stitched.
    Tiles,
    /// One periodic window of exactly the model period (the ICCAD-2013 convention).
    Window,
}

/// `report_level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReportLevel {
    /// Counts only.
    #[default]
    Aggregate,
    /// Counts and `violations[]`.
    Detailed,
}

impl ReportLevel {
    /// The name reports use.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Aggregate => "aggregate",
            Self::Detailed => "detailed",
        }
    }
}

/// `limits.on_exceeded`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnExceeded {
    /// Return the first `max_violations` records.
    #[default]
    Truncate,
    /// Return no records, only counts.
    DegradeToAggregate,
}

impl OnExceeded {
    /// The name reports use.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Truncate => "truncate",
            Self::DegradeToAggregate => "degrade_to_aggregate",
        }
    }
}

/// Default `limits.max_violations`.
pub const DEFAULT_MAX_VIOLATIONS: usize = 10_000;

fn default_max_violations() -> usize {
    DEFAULT_MAX_VIOLATIONS
}

/// `evaluate`'s `limits`: how many records a detailed report returns, and what happens
/// beyond.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ViolationLimits {
    /// Most records returned.
    #[serde(default = "default_max_violations")]
    pub max_violations: usize,
    /// What a detailed report does with more records.
    #[serde(default)]
    pub on_exceeded: OnExceeded,
}

impl Default for ViolationLimits {
    fn default() -> Self {
        Self {
            max_violations: DEFAULT_MAX_VIOLATIONS,
            on_exceeded: OnExceeded::default(),
        }
    }
}

/// `evaluate`'s arguments (`evaluate.input.json`, less `render` and `detail`, which the
/// registry takes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, bound(deserialize = "Model: Deserialize<'de>"))]
pub struct EvaluateArgs<Model = Value> {
    /// The layout file (resolved by the host through the caller's roots).
    pub layout: String,
    /// A shipped deck name, or a deck file (resolved like `layout`); empty (absent): the
    /// shipped deck whose layers the layout has (D185).
    #[serde(default)]
    pub deck: String,
    /// `layer/datatype`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer: Option<String>,
    /// `layer/datatype` of a mask to image instead of the target layer (post-OPC
    /// verification, D180): the printed result, EPE included, is checked against `layer`
    /// and the deck's mask rules apply to this layer. `None`: the target layer is imaged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask_layer: Option<String>,
    /// Cell to flatten.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell: Option<String>,
    /// The region (µm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub box_um: Option<[f64; 4]>,
    /// Pixel size (nm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pixel_nm: Option<f64>,
    /// The lithography model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<Model>,
    /// Aggregate (default) or detailed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_level: Option<ReportLevel>,
    /// Report tile side (nm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tile_nm: Option<f64>,
    /// Record limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<ViolationLimits>,
    /// How the region is imaged (the host's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tiling: Option<Tiling>,
    /// Whether the call waits (the host's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<bool>,
}

/// `simulate`'s arguments (`simulate.input.json`, less `render` and `detail`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, bound(deserialize = "Model: Deserialize<'de>"))]
pub struct SimulateArgs<Model = Value> {
    /// The layout file (resolved by the host through the caller's roots).
    pub layout: String,
    /// `layer/datatype`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer: Option<String>,
    /// `layer/datatype` of a mask to image instead of the target layer (post-OPC
    /// verification, D180): the printed result, EPE included, is checked against `layer`
    /// and the deck's mask rules apply to this layer. `None`: the target layer is imaged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask_layer: Option<String>,
    /// Cell to flatten.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell: Option<String>,
    /// The region (µm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub box_um: Option<[f64; 4]>,
    /// Pixel size (nm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pixel_nm: Option<f64>,
    /// The lithography model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<Model>,
    /// Whether to write the nominal images (one window: the host's, which then gives the
    /// job an artifact directory; tiles: the tiles write their blocks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<bool>,
    /// How the region is imaged (the host's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tiling: Option<Tiling>,
    /// Whether the call waits (the host's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<bool>,
}

/// The default model's period (nm), the window side when the call names no model.
const DEFAULT_PERIOD_NM: f64 = 2048.0;

/// Whether a call is imaged as one window: `tiles` and `window` as given; `auto` (or
/// none): a `.glp` clip without a box, or a box of exactly one model period (`period_nm`,
/// the period the `model` names, else the default model's), is one window (what such
/// calls always were); anything else is tiled. The one place `evaluate`, `simulate` and
/// `reticle eval` decide it (docs/DECISIONS.md D57).
#[must_use]
pub fn is_one_window(
    tiling: Option<Tiling>,
    layout: &str,
    period_nm: Option<f64>,
    box_um: Option<[f64; 4]>,
) -> bool {
    match tiling {
        Some(Tiling::Tiles) => return false,
        Some(Tiling::Window) => return true,
        Some(Tiling::Auto) | None => {}
    }
    let period = period_nm.unwrap_or(DEFAULT_PERIOD_NM);
    let one_period = |lo: f64, hi: f64| ((hi - lo) * 1000.0 - period).abs() <= 1e-6 * period;
    match box_um {
        None => layout.to_ascii_lowercase().ends_with(".glp"),
        Some([l, b, r, t]) => one_period(l, r) && one_period(b, t),
    }
}

/// The period (nm) a `model` object names, if it names one.
#[must_use]
pub fn model_period_nm(model: Option<&Value>) -> Option<f64> {
    model
        .and_then(|m| m.get("period_nm"))
        .and_then(Value::as_f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_options_stay_absent_and_unknown_keys_are_refused() {
        let args: EvaluateArgs =
            serde_json::from_str(r#"{"layout": "/a.gds", "deck": "iccad13_m1", "pixel_nm": 4}"#)
                .unwrap();
        assert_eq!(args.pixel_nm, Some(4.0));
        assert_eq!(
            serde_json::to_string(&args).unwrap(),
            r#"{"layout":"/a.gds","deck":"iccad13_m1","pixel_nm":4.0}"#
        );
        assert!(
            serde_json::from_str::<EvaluateArgs>(r#"{"layout": "a", "deck": "d", "typo": 1}"#)
                .is_err()
        );
        let l: ViolationLimits = serde_json::from_str("{}").unwrap();
        assert_eq!(l, ViolationLimits::default());
        assert!(serde_json::from_str::<ViolationLimits>(r#"{"max": 3}"#).is_err());
    }
}
