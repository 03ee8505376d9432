//! Unit tests of `reticle_eval::optimize::target`: ids, pins, targets and halos.

use reticle_protocol::ErrorCode;
use reticle_protocol::ViolationId;
use serde_json::{Value, json};

use reticle_eval::optimize::target::*;

const ID: &str = "rv1:0123456789abcdef:fedcba9876543210:R:1000:1000:T_0_0:00112233aabbccdd:0";
const SHADOW: &str = "rv1:0123456789abcdef:fedcba9876543210:R:100000:1000:T_1_0:00112233aabbccdd:1";

fn record(id: &str, group: &str, canonical: &str, strategy: &str, bbox: [f64; 4]) -> Value {
    json!({
        "violation_id": id,
        "violation_group_id": group,
        "rule_id": "R",
        "dedup_strategy": strategy,
        "location_nm": [bbox[0], bbox[1]],
        "bbox_nm": bbox,
        "dedup_provenance": {"canonical_violation_id": canonical},
    })
}

fn records() -> Vec<Value> {
    vec![
        record(ID, "g", ID, "canonical", [10.0, 10.0, 20.0, 20.0]),
        record(SHADOW, "g", ID, "shadow", [100.0, 10.0, 120.0, 20.0]),
        record(
            "other",
            "h",
            "other",
            "canonical",
            [500.0, 500.0, 510.0, 510.0],
        ),
    ]
}

const CLIP: [f64; 4] = [0.0, 0.0, 1000.0, 1000.0];

#[test]
fn ids_and_boxes_are_exclusive_and_foreign_ids_rejected() {
    assert_eq!(parse_id(None, None).unwrap(), None);
    assert!(parse_id(Some(ID), None).unwrap().is_some());
    let e = parse_id(Some(ID), Some([0.0, 0.0, 1.0, 1.0])).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    let e = parse_id(Some("v1a2b3"), None).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
}

#[test]
fn pins_hold_the_deck_and_the_layout() {
    let id: ViolationId = ID.parse().unwrap();
    assert!(check_deck_pin(&id, "sha256:fedcba9876543210ffff", "d").is_ok());
    let e = check_deck_pin(&id, "sha256:00", "d").unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    let sha = "0123456789abcdef99";
    assert!(check_layout_pin(Some(&id), Some("sha256:0123"), sha, "l").is_ok());
    let e = check_layout_pin(Some(&id), None, "ff", "l").unwrap_err();
    assert_eq!(e.code, ErrorCode::LayoutNotPinned);
    let e = check_layout_pin(None, Some("0000"), sha, "l").unwrap_err();
    assert_eq!(e.code, ErrorCode::LayoutNotPinned);
}

#[test]
fn a_shadow_with_scope_group_resolves_to_the_canonical_record_and_the_group_box() {
    let records = records();
    let shadow_id = records[1]["violation_id"].as_str().unwrap().to_owned();
    let parsed: ViolationId = shadow_id.parse().unwrap();
    let request = TargetRequest {
        violation: Some((&shadow_id, &parsed)),
        scope: TargetScope::Group,
        box_um: None,
        halo_nm: Some(5.0),
        resolved_from: None,
    };
    let t = resolve(&records, &request, CLIP).unwrap();
    assert_eq!(t.members.len(), 2);
    assert_eq!(t.targeted.unwrap()["violation_id"], ID);
    assert_eq!(t.window_nm, [5.0, 5.0, 125.0, 25.0]);
    assert_eq!(t.json["resolved_violation_id"], ID);
    assert_eq!(t.json["scope"], "group");
    assert_eq!(t.json["resolved_from"], "violation_id");

    let only = TargetRequest {
        scope: TargetScope::RecordOnly,
        resolved_from: Some("session_cache"),
        ..request
    };
    let t = resolve(&records, &only, CLIP).unwrap();
    assert_eq!(t.targeted.unwrap()["violation_id"], shadow_id.as_str());
    assert_eq!(t.window_nm, [95.0, 5.0, 125.0, 25.0]);
    assert_eq!(t.json["resolved_from"], "session_cache");
}

#[test]
fn boxes_the_clip_and_misses() {
    let records = records();
    let mut request = TargetRequest {
        violation: None,
        scope: TargetScope::Group,
        box_um: None,
        halo_nm: Some(0.0),
        resolved_from: None,
    };
    let t = resolve(&records, &request, CLIP).unwrap();
    assert_eq!((t.window_nm, t.json["mode"].as_str()), (CLIP, Some("clip")));
    request.box_um = Some([0.5, 0.5, 2.0, 2.0]);
    let t = resolve(&records, &request, CLIP).unwrap();
    assert_eq!(t.window_nm, [500.0, 500.0, 1000.0, 1000.0], "clamped");
    request.box_um = Some([2.0, 0.0, 3.0, 1.0]);
    let e = resolve(&records, &request, CLIP).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidBox);
    request.box_um = Some([1.0, 0.0, 0.0, 1.0]);
    let e = resolve(&records, &request, CLIP).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidBox);
    let absent = ID.replace(":R:", ":S:");
    let parsed: ViolationId = absent.parse().unwrap();
    let request = TargetRequest {
        violation: Some((&absent, &parsed)),
        box_um: None,
        ..request
    };
    let e = resolve(&records, &request, CLIP).unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);
}

#[test]
fn halos_are_non_negative() {
    assert_eq!(halo(None).unwrap(), None);
    assert_eq!(halo(Some(0.0)).unwrap(), Some(0.0));
    assert!(halo(Some(-1.0)).is_err());
    assert!(halo(Some(f64::NAN)).is_err());
}

#[test]
fn the_default_halo_follows_what_the_rule_applies_to() {
    assert_eq!(
        default_halo(&json!({"applies_to": "printed"})),
        DEFAULT_PRINTED_HALO_NM
    );
    assert_eq!(
        default_halo(&json!({"applies_to": "mask"})),
        DEFAULT_HALO_NM
    );
}
