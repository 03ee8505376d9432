//! `optimize`'s arguments as a Rust type (issue 27 item 4, issue 28; docs/DECISIONS.md
//! D150, D210): parsed once at the tool's edge (after `optimize.input.json`), built by
//! `reticle optimize` from its flags, and written as the op's JSON. What the call asks for
//! — one violation, a list of ids, an evaluation job's groups, a region, the whole layer,
//! one window — is decided here once ([`OptimizeArgs::target`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{EvaluateArgs, Tiling};

/// `scope`: what a `violation_id` repairs (seed 000 §2c).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RepairScope {
    /// The id's whole group (a shadow resolves to its canonical record).
    #[default]
    Group,
    /// The record's own geometry only.
    RecordOnly,
}

/// `mask_style`: how the optimized mask is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaskStyleName {
    /// Smooth polygons (the default).
    #[default]
    Curvilinear,
    /// Axis-parallel polygons on a 4 nm grid.
    Manhattan,
}

/// `optimize`'s arguments (`optimize.input.json`, less `render` and `detail`, which the
/// registry takes). Absent options stay absent in the JSON written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, bound(deserialize = "Model: Deserialize<'de>"))]
pub struct OptimizeArgs<Model = Value> {
    /// One violation to repair (its group, with `scope: group`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub violation_id: Option<String>,
    /// Several violations of one layout and deck: the region covering them (D182).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub violation_ids: Option<Vec<String>>,
    /// A finished tiled `evaluate` job whose groups are repaired (D182).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// With `job_id`: only these rules' groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_ids: Option<Vec<String>>,
    /// What a `violation_id` repairs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<RepairScope>,
    /// The box (µm): a region of any size, or a window inside `clip_um`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub box_um: Option<[f64; 4]>,
    /// The whole evaluated layer as the region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whole_layer: Option<bool>,
    /// `window` keeps the single-window path for a box (the host's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tiling: Option<Tiling>,
    /// `layer/datatype` the mask is written to (a region) or imaged (one window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask_layer: Option<String>,
    /// The layout (resolved by the host through the caller's roots).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<String>,
    /// The layout's SHA-256 (or its first 16 hex digits) the id was made on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout_artifact_id: Option<String>,
    /// A shipped deck name or a deck file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deck: Option<String>,
    /// `layer/datatype` of the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer: Option<String>,
    /// Cell to flatten.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell: Option<String>,
    /// The evaluate call's box (µm) for one window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clip_um: Option<[f64; 4]>,
    /// Pixel size (nm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pixel_nm: Option<f64>,
    /// The lithography model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<Model>,
    /// Report tile side (nm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tile_nm: Option<f64>,
    /// Margin around a violation's markers (nm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub halo_nm: Option<f64>,
    /// ILT iterations of the main stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<u32>,
    /// ILT iterations of the refinement stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refine_iterations: Option<u32>,
    /// How the mask is drawn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask_style: Option<MaskStyleName>,
    /// Whether assist features are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assist_features: Option<bool>,
    /// Whether the call waits (the host's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<bool>,
}

/// What an `optimize` call repairs: the one decision of which path runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptimizeTarget {
    /// `violation_id`: one window around its group (a tiled id's neighbourhood re-derived
    /// first, D181).
    Violation,
    /// `violation_ids`: the region covering their locations (D182).
    Ids,
    /// `job_id`: an evaluation job's groups, as a region (D182).
    Job,
    /// A `box_um` of any size on a GDSII/OASIS layout, in tiles, written back (D170).
    Region,
    /// `whole_layer`: the layer's box as the region (D170).
    WholeLayer,
    /// One window: a `.glp` clip, a `clip_um`, `tiling: window`, or nothing else given.
    Window,
}

impl OptimizeTarget {
    /// Whether this target runs the tiled region path (and writes the layout back).
    #[must_use]
    pub fn is_region(self) -> bool {
        matches!(
            self,
            Self::Ids | Self::Job | Self::Region | Self::WholeLayer
        )
    }
}

impl<Model> OptimizeArgs<Model> {
    /// What the call repairs. A list or a job wins over everything (the host refuses the
    /// combinations the tool forbids); then a violation id; then a region: no `clip_um`,
    /// a GDSII/OASIS layout, `tiling` not `window`, and a `box_um` or `whole_layer: true`;
    /// anything else is one window (D170, D182).
    #[must_use]
    pub fn target(&self) -> OptimizeTarget {
        if self.violation_ids.is_some() {
            return OptimizeTarget::Ids;
        }
        if self.job_id.is_some() {
            return OptimizeTarget::Job;
        }
        if self.violation_id.is_some() {
            return OptimizeTarget::Violation;
        }
        let glp = self
            .layout
            .as_deref()
            .is_some_and(|l| l.to_ascii_lowercase().ends_with(".glp"));
        if self.clip_um.is_some() || glp || self.tiling == Some(Tiling::Window) {
            return OptimizeTarget::Window;
        }
        if self.whole_layer == Some(true) {
            OptimizeTarget::WholeLayer
        } else if self.box_um.is_some() {
            OptimizeTarget::Region
        } else {
            OptimizeTarget::Window
        }
    }

    /// Copies the arguments of the `evaluate` call that made an id (layout, deck, layer,
    /// cell, pixel, model, tile size, mask layer) where this call gives none; with
    /// `clip`, the evaluate call's box becomes `clip_um` (one window), else it is not
    /// carried (a region is not the evaluate call's box).
    pub fn fill_from_evaluate(&mut self, evaluate: &EvaluateArgs<Model>, clip: bool)
    where
        Model: Clone,
    {
        fn fill<T: Clone>(slot: &mut Option<T>, from: Option<&T>) {
            if slot.is_none() {
                *slot = from.cloned();
            }
        }
        fill(&mut self.layout, Some(&evaluate.layout));
        fill(
            &mut self.deck,
            (!evaluate.deck.is_empty()).then_some(&evaluate.deck),
        );
        fill(&mut self.layer, evaluate.layer.as_ref());
        fill(&mut self.cell, evaluate.cell.as_ref());
        fill(&mut self.pixel_nm, evaluate.pixel_nm.as_ref());
        fill(&mut self.model, evaluate.model.as_ref());
        fill(&mut self.tile_nm, evaluate.tile_nm.as_ref());
        fill(&mut self.mask_layer, evaluate.mask_layer.as_ref());
        if clip {
            fill(&mut self.clip_um, evaluate.box_um.as_ref());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> OptimizeArgs {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn the_target_is_decided_once() {
        use OptimizeTarget as T;
        let cases = [
            (
                r#"{"layout": "a.gds", "box_um": [5, 5, 11, 11]}"#,
                T::Region,
            ),
            (
                r#"{"layout": "a.gds", "box_um": [0, 0, 1, 1], "tiling": "tiles"}"#,
                T::Region,
            ),
            (
                r#"{"layout": "a.gds", "box_um": [0, 0, 1, 1], "tiling": "window"}"#,
                T::Window,
            ),
            (r#"{"layout": "a.gds"}"#, T::Window),
            (r#"{"layout": "a.oas", "whole_layer": true}"#, T::WholeLayer),
            (
                r#"{"layout": "a.glp", "box_um": [5, 5, 11, 11]}"#,
                T::Window,
            ),
            (
                r#"{"layout": "a.gds", "box_um": [5, 5, 11, 11], "clip_um": [0, 0, 20, 20]}"#,
                T::Window,
            ),
            (
                r#"{"layout": "a.gds", "violation_id": "rv1:x"}"#,
                T::Violation,
            ),
            (r#"{"violation_ids": ["rv1:x"]}"#, T::Ids),
            (r#"{"job_id": "job_1", "box_um": [0, 0, 2, 2]}"#, T::Job),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text).target(), want, "{text}");
        }
        assert!(T::Job.is_region() && !T::Violation.is_region() && !T::Window.is_region());
    }

    #[test]
    fn absent_options_stay_absent_and_unknown_keys_are_refused() {
        let args = parse(r#"{"layout": "/a.gds", "iterations": 3, "mask_style": "manhattan"}"#);
        assert_eq!(
            serde_json::to_string(&args).unwrap(),
            r#"{"layout":"/a.gds","iterations":3,"mask_style":"manhattan"}"#
        );
        assert!(serde_json::from_str::<OptimizeArgs>(r#"{"layout": "a", "typo": 1}"#).is_err());
        assert!(serde_json::from_str::<OptimizeArgs>(r#"{"scope": "all"}"#).is_err());
    }

    #[test]
    fn the_evaluate_calls_arguments_fill_what_the_call_lacks() {
        let evaluate: EvaluateArgs = serde_json::from_str(
            r#"{"layout": "/e.gds", "deck": "d", "box_um": [0, 0, 6, 6], "pixel_nm": 4}"#,
        )
        .unwrap();
        let mut call = parse(r#"{"pixel_nm": 8}"#);
        call.fill_from_evaluate(&evaluate, false);
        assert_eq!(call.layout.as_deref(), Some("/e.gds"));
        assert_eq!(call.pixel_nm, Some(8.0), "the call's own value wins");
        assert_eq!(
            call.clip_um, None,
            "a region does not carry the evaluate box"
        );
        call.fill_from_evaluate(&evaluate, true);
        assert_eq!(call.clip_um, Some([0.0, 0.0, 6.0, 6.0]));
    }
}
