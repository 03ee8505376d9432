//! Before and after an optimization (D46): metrics of the two reports, the groups the
//! window touched and whether each is resolved, the targeted group's members, and new
//! violations in the window.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::target::{Target, TargetScope};
use crate::payload::ViolationReport;

/// Metrics of one `evaluate` report for the before/after comparison.
#[must_use]
pub fn metrics_of(report: &ViolationReport) -> Value {
    let metrics = &report.head.metrics;
    let epe = metrics.epe.as_ref();
    json!({
        "l2_px": metrics.l2_px,
        "pvb_px": metrics.pvb_px,
        "epe_violations": epe.map(|e| e.violations),
        "epe_checkpoints": epe.map(|e| e.checkpoints),
        "violation_records": report.head.counts.records,
        "violation_groups": report.head.counts.groups,
    })
}

/// The `violations[]` of a detailed report (none in an aggregate one), as the JSON the
/// target resolution and the comparison read.
#[must_use]
pub fn records_of(report: &ViolationReport) -> Vec<Value> {
    report
        .violations
        .iter()
        .flatten()
        .map(|r| serde_json::to_value(r).unwrap_or(Value::Null))
        .collect()
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

/// The records of `rule_ids` located inside `window_nm` (left, bottom, right, top).
#[must_use]
pub fn records_in_window<'a>(
    records: &'a [Value],
    rule_ids: &[String],
    window_nm: [f64; 4],
) -> Vec<&'a Value> {
    records
        .iter()
        .filter(|r| {
            r["rule_id"]
                .as_str()
                .is_some_and(|id| rule_ids.iter().any(|i| i == id))
        })
        .filter(|r| inside(loc(r), window_nm))
        .collect()
}

/// How far from a record a violation of the same rule counts as the same one:
/// `max(dedup_radius_nm, 2 · pixel_nm)`.
fn match_radius(record: &Value, pixel_nm: f64) -> f64 {
    record["dedup_provenance"]["radius_nm"]
        .as_f64()
        .unwrap_or(0.0)
        .max(2.0 * pixel_nm)
}

/// A before-group is resolved when the after-report has no record of the same rule within
/// the match radius of any of its members' locations.
fn still_there(members: &[&Value], after: &[Value], pixel_nm: f64) -> bool {
    let rule = &members[0]["rule_id"];
    let radius = match_radius(members[0], pixel_nm);
    after.iter().filter(|a| &a["rule_id"] == rule).any(|a| {
        let q = loc(a);
        members.iter().any(|m| {
            let p = loc(m);
            (p.0 - q.0).hypot(p.1 - q.1) <= radius
        })
    })
}

/// What changed in the window.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// Every before-group with a record in the window, with `resolved`.
    pub groups_in_window: Vec<Value>,
    /// Those resolved.
    pub resolved: Vec<Value>,
    /// The targeted group's records with their `resolution`.
    pub group_members: Vec<Value>,
    /// After-records in the window with no before-record of their rule nearby.
    pub new_in_window: usize,
}

/// Compares the records `before` and `after` an optimization of `target` (with `scope`)
/// on a grid of `pixel_nm`.
#[must_use]
pub fn compare(
    before: &[Value],
    after: &[Value],
    target: &Target<'_>,
    scope: TargetScope,
    pixel_nm: f64,
) -> Comparison {
    let window_nm = target.window_nm;
    let mut groups: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for r in before {
        if let Some(g) = r["violation_group_id"].as_str() {
            groups.entry(g.to_owned()).or_default().push(r);
        }
    }
    let mut groups_in_window = Vec::new();
    let mut resolved = Vec::new();
    for (gid, list) in &groups {
        if !list.iter().any(|r| inside(loc(r), window_nm)) {
            continue;
        }
        let fixed = !still_there(list, after, pixel_nm);
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
        groups_in_window.push(entry);
    }
    let members = &target.members;
    let target_group_resolved = members
        .first()
        .is_some_and(|_| !still_there(members, after, pixel_nm));
    let group_members: Vec<Value> = members
        .iter()
        .map(|r| {
            let is_target = target
                .targeted
                .is_some_and(|t| t["violation_id"] == r["violation_id"]);
            let resolution = match (is_target, scope) {
                (true, _) => "target",
                (false, TargetScope::Group) => "resolved_by_group_fix",
                (false, TargetScope::RecordOnly) => "not_targeted",
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
    let new_in_window = after
        .iter()
        .filter(|a| inside(loc(a), window_nm))
        .filter(|a| {
            !before.iter().any(|b| {
                b["rule_id"] == a["rule_id"] && {
                    let (p, q) = (loc(a), loc(b));
                    (p.0 - q.0).hypot(p.1 - q.1) <= match_radius(b, pixel_nm)
                }
            })
        })
        .count();
    Comparison {
        groups_in_window,
        resolved,
        group_members,
        new_in_window,
    }
}
