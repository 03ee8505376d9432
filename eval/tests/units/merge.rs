//! Unit tests of `reticle_eval::merge`: the worst groups of a merged report.

use reticle_eval::merge::*;
use serde_json::{Value, json};

#[test]
fn the_worst_group_is_the_error_furthest_past_its_limit() {
    let record = |id: &str, severity: &str, kind: &str, measured: Option<f64>, required: f64| {
        json!({"violation_id": id, "dedup_strategy": "canonical", "severity": severity,
               "rule_kind": kind, "measured": measured, "required": required,
               "dedup_provenance": {"group_size": 1}})
    };
    let records = vec![
        record("a", "warning", "width", Some(1.0), 65.0),
        record("b", "error", "width", Some(60.0), 65.0),
        record("c", "error", "space", Some(30.0), 65.0),
        record("d", "error", "epe", None, 15.0),
        record("e", "error", "epe", Some(16.0), 15.0),
    ];
    let worst = worst_groups(&records);
    let ids: Vec<&str> = worst
        .iter()
        .map(|r| r["violation_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["d", "c", "b", "e", "a"]);
}

/// The worst groups' canonical records of `records` (any order).
fn worst_groups(records: &[Value]) -> Vec<Value> {
    let mut entries: Vec<Value> = records
        .iter()
        .filter(|r| is_canonical(r))
        .map(worst_entry)
        .collect();
    sort_worst(&mut entries);
    entries.truncate(SUMMARY_ENTRIES);
    entries
}
