//! Unit tests of `reticle_eval::optimize::compare`: before/after comparison.

use reticle_eval::optimize::compare::*;
use reticle_eval::optimize::target::{Target, TargetScope};
use reticle_eval::payload::ViolationReport;
use serde_json::{Value, json};

fn record(id: &str, group: &str, rule: &str, at: [f64; 2], strategy: &str) -> Value {
    json!({
        "violation_id": id,
        "violation_group_id": group,
        "rule_id": rule,
        "location_nm": at,
        "dedup_strategy": strategy,
        "context": {"tile_id": "T_0_0"},
        "dedup_provenance": {"radius_nm": 10.0},
    })
}

#[test]
fn groups_in_the_window_are_resolved_when_nothing_of_their_rule_stays_near() {
    let before = vec![
        record("a", "g", "R", [100.0, 100.0], "canonical"),
        record("b", "g", "R", [105.0, 100.0], "shadow"),
        record("c", "h", "R", [300.0, 300.0], "canonical"),
        record("d", "k", "R", [900.0, 900.0], "canonical"),
    ];
    let after = vec![
        // h stays (within 10 nm of c); a new one of another rule in the window.
        record("x", "h2", "R", [305.0, 300.0], "canonical"),
        record("y", "n", "S", [150.0, 150.0], "canonical"),
    ];
    let target = Target {
        json: Value::Null,
        members: vec![&before[0], &before[1]],
        targeted: Some(&before[0]),
        window_nm: [0.0, 0.0, 400.0, 400.0],
        halo_nm: 0.0,
    };
    let c = compare(&before, &after, &target, TargetScope::Group, 1.0);
    let resolved: Vec<&Value> = c.groups_in_window.iter().map(|g| &g["resolved"]).collect();
    assert_eq!(
        resolved,
        [&json!(true), &json!(false)],
        "g fixed, h not; k outside"
    );
    assert_eq!(c.resolved.len(), 1);
    assert_eq!(c.resolved[0]["canonical_violation_id"], "a");
    let how: Vec<&Value> = c.group_members.iter().map(|m| &m["resolution"]).collect();
    assert_eq!(how, [&json!("target"), &json!("resolved_by_group_fix")]);
    assert_eq!(c.new_in_window, 1);
    let only = compare(&before, &after, &target, TargetScope::RecordOnly, 1.0);
    assert_eq!(only.group_members[1]["resolution"], "not_targeted");
    let aggregate: ViolationReport = serde_json::from_str(include_str!(
        "../../../tests/golden/evaluate_lines_and_pad_iccad13_m1.aggregate.json"
    ))
    .unwrap();
    assert!(records_of(&aggregate).is_empty());
}
