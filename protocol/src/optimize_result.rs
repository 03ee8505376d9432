//! A region `optimize`'s result as Rust types (issue 27 item 4, issue 28; docs/DECISIONS.md
//! D170–D173, D182, D211): built by the host from its units' answers and serialized once
//! (the tool's job, `reticle optimize` and `reticle bench repair` write the same type);
//! checked against `optimize.output.json`'s `$defs.region_result` by
//! `eval/tests/payload_schema.rs`. The parts the worker ops compute and the host passes on
//! unchanged (the tiles, the ILT sums, the written layout, the pictures, the group
//! comparison) stay JSON values here; their fields are the worker's.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::files::FileRef;

/// Whether one listed violation's group was resolved (`optimize(violation_ids)`, D211).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdResolution {
    /// Its group, found in the re-evaluation before, has no group of its rule left near it.
    Resolved,
    /// A group of its rule is still there after.
    Remaining,
    /// No record of its rule at its location in the re-evaluation before (the layout or
    /// the evaluate arguments differ from the call that made the id).
    NotFound,
}

/// One listed id and what became of its group (D211).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdStatus {
    /// The id as given.
    pub violation_id: String,
    /// Its rule (from the id).
    pub rule_id: String,
    /// What became of its group.
    pub status: IdResolution,
    /// `status == resolved`; `None` when not found.
    pub resolved: Option<bool>,
    /// The group in the re-evaluation before holding the id's record, when found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id_before: Option<String>,
}

/// What a region optimize was asked to repair.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RegionTarget {
    /// `region` (a box), `layer` (the whole layer), `violation_ids` or `job`.
    pub mode: String,
    /// Where the evaluate call's arguments came from: `none`, `session_cache`,
    /// `violation_ids` (the call's own).
    pub resolved_from: String,
    /// The ids listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub violation_ids: Option<Vec<String>>,
    /// Each listed id's group: resolved, remaining or not found (D211).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ids: Option<Vec<IdStatus>>,
    /// The evaluation job whose groups were repaired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// With a job: the rules whose groups were repaired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_ids: Option<Vec<String>>,
    /// With a job: the sub-region asked for (µm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_region_um: Option<[f64; 4]>,
    /// The box optimized for a list or a job (µm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub box_um: Option<[f64; 4]>,
}

/// What changed on disk (seed 002 `state_after`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegionStateAfter {
    /// The written layout.
    pub layout: FileRef,
    /// Its mask layer (`L/D`).
    pub mask_layer: Value,
    /// The region as drawn.
    pub region_before_png: Value,
    /// The region's mask over the drawn target.
    pub region_after_png: Value,
}

/// The part of one re-evaluation (a whole-layout `evaluate`) the result keeps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvaluationSummary {
    /// Its folder (holding `violations.jsonl`).
    pub dir: String,
    /// The report's counts.
    pub counts: Value,
    /// The report's metrics.
    pub metrics: Value,
    /// The report's window.
    pub window_nm: Value,
    /// The report's layout (with `mask_layer` after).
    pub layout: Value,
}

impl EvaluationSummary {
    /// The summary of `report`, an `evaluate` result, whose files are in `dir`.
    #[must_use]
    pub fn of(report: &Value, dir: &str) -> Self {
        Self {
            dir: dir.to_owned(),
            counts: report["counts"].clone(),
            metrics: report["metrics"].clone(),
            window_nm: report["window_nm"].clone(),
            layout: report["layout"].clone(),
        }
    }
}

/// The re-evaluations before (the input as drawn) and after (the written layout's mask
/// layer).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluations {
    /// The input as drawn.
    pub before: EvaluationSummary,
    /// The written layout, its mask layer imaged.
    pub after: EvaluationSummary,
}

/// What a seam guarantees, and what the re-evaluation measured there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Seams {
    /// How seams are made (D170, D171).
    pub guarantee: String,
    /// New groups within the seam distance of a seam.
    pub new_near_seams: Value,
    /// The seam pass (D252): its first reach (nm), its rounds (reach, squares, what the
    /// re-evaluation found, kept or not) and the squares kept (nm).
    pub put_back: Value,
}

/// The job's folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArtifactsDir {
    /// Absolute path.
    pub dir: String,
}

/// A region optimize's result (`optimize.output.json` `$defs.region_result`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegionResult {
    /// [`crate::SCHEMA_VERSION`].
    pub schema_version: String,
    /// What was asked.
    pub target: RegionTarget,
    /// The region optimized (nm), snapped to the pixel lattice.
    pub region_nm: Value,
    /// Where the region came from (the box, or the layer's extent).
    pub region_source: Value,
    /// The tiles (the merge's).
    pub tiles: Value,
    /// L2 and PV band sums, mask-rule violations left (the merge's).
    pub ilt: Value,
    /// The written layout (the merge's).
    pub layout_out: Value,
    /// The before/after pictures (the merge's).
    pub pictures: Value,
    /// What changed on disk.
    pub state_after: RegionStateAfter,
    /// The box re-evaluated: the region plus one tile halo (µm).
    pub evaluated_box_um: [f64; 4],
    /// The re-evaluations.
    pub evaluation: Evaluations,
    /// Groups resolved, remaining and new per rule (`optimize.compare`'s).
    pub changes: Value,
    /// Seams.
    pub seams: Seams,
    /// The job's folder.
    pub artifacts: ArtifactsDir,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_status_writes_null_when_not_found() {
        let s = IdStatus {
            violation_id: "rv1:x".into(),
            rule_id: "M1.W".into(),
            status: IdResolution::NotFound,
            resolved: None,
            group_id_before: None,
        };
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            r#"{"violation_id":"rv1:x","rule_id":"M1.W","status":"not_found","resolved":null}"#
        );
    }
}
