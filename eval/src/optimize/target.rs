//! What an `optimize` call targets (seed 000 §5, D45, D46): a `violation_id` pinned to the
//! layout and deck it was made with, resolved among the records of the re-evaluated clip
//! (`scope: group` fixes the record's whole group from its canonical record,
//! `record_only` the record alone), a box, or the whole clip; and the window that follows,
//! grown by the halo and clamped to the clip.

use reticle_protocol::{ErrorCode, ToolError, ViolationId};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::invalid;

/// Default margin around the marker(s) of a mask-rule violation, nm: a mask-rule fix is
/// geometric and local.
pub const DEFAULT_HALO_NM: f64 = 128.0;

/// Default margin around the marker(s) of a printed-rule violation (EPE, printed width and
/// space, PV band), nm: about two optical radii (λ/NA ≈ 143 nm at 193 nm, NA 1.35), so that
/// the mask can move as far out as the light that prints the marker comes from. With 128 nm
/// a 4 nm printed-space group of the 6 µm gcd box stayed unresolved (0 of 12 records); with
/// 256 nm all 12 resolve (D246).
pub const DEFAULT_PRINTED_HALO_NM: f64 = 256.0;

/// The default halo for a targeted record: [`DEFAULT_PRINTED_HALO_NM`] when its rule applies
/// to the printed image, [`DEFAULT_HALO_NM`] otherwise.
#[must_use]
pub fn default_halo(record: &Value) -> f64 {
    if record["applies_to"] == "printed" {
        DEFAULT_PRINTED_HALO_NM
    } else {
        DEFAULT_HALO_NM
    }
}

/// `scope`: what a `violation_id` targets.
#[derive(Deserialize, Default, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "snake_case")]
pub enum TargetScope {
    /// The record's whole group, resolved to its canonical record.
    #[default]
    Group,
    /// The record alone.
    RecordOnly,
}

impl TargetScope {
    /// The name reports use.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Group => "group",
            Self::RecordOnly => "record_only",
        }
    }
}

/// The parsed `violation_id` of a call (`None` without one).
///
/// # Errors
/// `INVALID_INPUT` with both `violation_id` and `box_um`, or for an id that is not ours.
pub fn parse_id(
    violation_id: Option<&str>,
    box_um: Option<[f64; 4]>,
) -> Result<Option<ViolationId>, ToolError> {
    if violation_id.is_some() && box_um.is_some() {
        return Err(invalid(
            "violation_id and box_um are mutually exclusive",
            json!({}),
        ));
    }
    violation_id
        .map(|id| {
            id.parse::<ViolationId>().map_err(|_| {
                invalid(
                    "not a reticle violation_id (rv1:…, from evaluate at report_level=detailed)",
                    json!({"violation_id": id}),
                )
            })
        })
        .transpose()
}

/// The deck (`deck_hash`, named `deck` by the caller) must be the one the id was made with.
///
/// # Errors
/// `INVALID_INPUT` naming both hashes.
pub fn check_deck_pin(id: &ViolationId, deck_hash: &str, deck: &str) -> Result<(), ToolError> {
    let hex = deck_hash.trim_start_matches("sha256:");
    if hex.starts_with(&id.deck16) {
        return Ok(());
    }
    Err(invalid(
        "the violation_id was evaluated with another rule deck; pass that deck",
        json!({"violation_id_deck_hash": id.deck16, "deck_hash": deck_hash, "deck": deck}),
    )
    .with_hint("pass the deck of the evaluate call that returned this violation_id"))
}

/// Pinning (seed 000 §5, D45): the layout file (SHA-256 `sha`) must still be the one the
/// id was made on, and the one `layout_artifact_id` names.
///
/// # Errors
/// `LAYOUT_NOT_PINNED`, not recoverable with this id.
pub fn check_layout_pin(
    id: Option<&ViolationId>,
    layout_artifact_id: Option<&str>,
    sha: &str,
    layout_name: &str,
) -> Result<(), ToolError> {
    if let Some(id) = id
        && !sha.starts_with(&id.layout_sha16)
    {
        return Err(ToolError::new(
            ErrorCode::LayoutNotPinned,
            "the layout changed since evaluate: its SHA-256 no longer matches the violation_id",
        )
        .with_details(json!({"violation_id_layout_sha256": id.layout_sha16, "layout_sha256": sha, "layout": layout_name}))
        .recoverable(false)
        .with_hint("run evaluate on the current layout and use one of its violation_ids"));
    }
    if let Some(pin) = layout_artifact_id {
        let pin = pin.trim_start_matches("sha256:");
        if !sha.starts_with(pin) {
            return Err(ToolError::new(
                ErrorCode::LayoutNotPinned,
                "the layout does not match layout_artifact_id",
            )
            .with_details(json!({"layout_artifact_id": pin, "layout_sha256": sha}))
            .recoverable(false)
            .with_hint(
                "pass the layout whose SHA-256 is layout_artifact_id, or evaluate the current one",
            ));
        }
    }
    Ok(())
}

/// `halo_nm` as given, checked (`None`: the default of the targeted rule, [`default_halo`]).
///
/// # Errors
/// `INVALID_INPUT` when negative or not finite.
pub fn halo(halo_nm: Option<f64>) -> Result<Option<f64>, ToolError> {
    match halo_nm {
        Some(halo) if !(halo.is_finite() && halo >= 0.0) => {
            Err(invalid("halo_nm must be >= 0", json!({"halo_nm": halo})))
        }
        other => Ok(other),
    }
}

/// What the caller asked to optimize.
#[derive(Debug, Clone, Copy)]
pub struct TargetRequest<'a> {
    /// The `violation_id` as given, and parsed.
    pub violation: Option<(&'a str, &'a ViolationId)>,
    /// Group or record only.
    pub scope: TargetScope,
    /// A box (µm) instead of a violation.
    pub box_um: Option<[f64; 4]>,
    /// Margin around the marker(s), nm (`None`: [`default_halo`] of the targeted record).
    pub halo_nm: Option<f64>,
    /// Set by the host when the arguments came from its cache (`session_cache`).
    pub resolved_from: Option<&'a str>,
}

/// The resolved target of an optimize call.
#[derive(Debug, Clone)]
pub struct Target<'r> {
    /// The payload's `target` object.
    pub json: Value,
    /// The records of the targeted violation's group (empty without a violation).
    pub members: Vec<&'r Value>,
    /// The record optimized around: the canonical record with `scope: group`.
    pub targeted: Option<&'r Value>,
    /// The window `[l, b, r, t]` (nm): marker box(es) plus halo, the box, or the clip,
    /// clamped to the clip.
    pub window_nm: [f64; 4],
    /// The margin the window was grown by around the marker(s), nm (0 for a box or the
    /// clip).
    pub halo_nm: f64,
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

/// Resolves `request` among `records` (the detailed re-evaluation of the clip `clip_nm`).
///
/// # Errors
/// `NOT_FOUND` for an id that is not among the records, `INVALID_BOX` for a bad box or a
/// window outside the clip.
pub fn resolve<'r>(
    records: &'r [Value],
    request: &TargetRequest<'_>,
    clip_nm: [f64; 4],
) -> Result<Target<'r>, ToolError> {
    let mut halo = 0.0;
    let mut json = json!({"mode": "clip", "resolved_from": "none"});
    let mut members: Vec<&Value> = Vec::new();
    let mut targeted: Option<&Value> = None;
    let window_nm = if let Some((id, parsed)) = request.violation {
        let record = records
            .iter()
            .find(|r| r["violation_id"] == id)
            .ok_or_else(|| {
                ToolError::new(
                    ErrorCode::NotFound,
                    "the violation_id is not in the re-evaluation of this clip",
                )
                .with_details(json!({"violation_id": id, "rule_id": parsed.rule_id, "violation_group_id": parsed.group_id}))
                .with_hint("pass the clip_um, pixel_nm, model, tile_nm and layer of the evaluate call that returned the id")
            })?;
        let gid = record["violation_group_id"].clone();
        members = records
            .iter()
            .filter(|r| r["violation_group_id"] == gid)
            .collect();
        let canonical_id = record["dedup_provenance"]["canonical_violation_id"].clone();
        let chosen: &Value = match request.scope {
            TargetScope::Group => members
                .iter()
                .copied()
                .find(|r| r["violation_id"] == canonical_id)
                .unwrap_or(record),
            TargetScope::RecordOnly => record,
        };
        targeted = Some(chosen);
        let marker_box = match request.scope {
            TargetScope::Group => members
                .iter()
                .filter_map(|r| bbox_nm(r))
                .reduce(union)
                .unwrap_or(clip_nm),
            TargetScope::RecordOnly => bbox_nm(record).unwrap_or(clip_nm),
        };
        halo = request.halo_nm.unwrap_or_else(|| default_halo(chosen));
        json = json!({
            "mode": "violation",
            "scope": request.scope.name(),
            "violation_id": id,
            "dedup_strategy": record["dedup_strategy"],
            "resolved_violation_id": chosen["violation_id"],
            "violation_group_id": gid,
            "canonical_violation_id": canonical_id,
            "rule_id": record["rule_id"],
            "location_nm": chosen["location_nm"],
            "resolved_from": request.resolved_from.unwrap_or("violation_id"),
        });
        [
            marker_box[0] - halo,
            marker_box[1] - halo,
            marker_box[2] + halo,
            marker_box[3] + halo,
        ]
    } else if let Some([l, b, r, t]) = request.box_um {
        if !(l < r && b < t) {
            return Err(ToolError::new(
                ErrorCode::InvalidBox,
                "box_um must have left < right and bottom < top",
            )
            .with_details(json!({"box_um": request.box_um})));
        }
        json = json!({"mode": "box", "resolved_from": "none"});
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
        .with_details(json!({"box_um": request.box_um, "clip_nm": clip_nm})));
    }
    Ok(Target {
        json,
        members,
        targeted,
        window_nm,
        halo_nm: halo,
    })
}
