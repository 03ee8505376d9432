//! `reticle bench repair` (issue 28 item 8, D213): a region of gcd_45nm repaired in tiles
//! by the optimize tool's own work, on the pool and then on one worker in the same
//! process. `--quick` keeps it to a 2 × 2-tile box at 4 nm. The two runs must write the
//! same layout and the same comparison, the written mask must break no mask rule, and the
//! figures must add up (groups per rule against the totals, µm²/s against the area and
//! the time, the projection's tiles against the measured tile grid).

use std::process::Command;

use reticle_tests::binary;

use crate::bench_cli::{gcd_or_skip, json_report};

#[test]
fn repair_bench_reports_groups_per_rule_one_worker_against_the_pool_and_a_projection() {
    let bad = Command::new(binary("reticle"))
        .args(["bench", "repair", "--box", "3,0,1,4"])
        .output()
        .unwrap();
    assert_eq!(
        bad.status.code(),
        Some(2),
        "a box with left > right: {bad:?}"
    );

    let Some(gds) = gcd_or_skip("the repair bench needs a real layout") else {
        return;
    };
    let out = Command::new(binary("reticle"))
        .args([
            "bench",
            "repair",
            "--quick",
            "--workers",
            "2",
            "--json",
            "--layout",
        ])
        .arg(&gds)
        .env("RETICLE_BACKEND", "cpu")
        .env("RETICLE_WORKER_BIN", binary("reticle-worker"))
        .output()
        .unwrap();
    let report = json_report(&out);
    eprintln!("{report}");
    assert_eq!(report["deck"], "nangate45_m1_litho");
    assert_eq!(report["deterministic"], true, "pool and one worker differ");
    assert_eq!(report["tiles"]["total"], 4, "the quick box is 2 x 2 tiles");
    assert_eq!(
        report["mask_rule_records_after"], 0,
        "the written mask breaks a mask rule"
    );
    let area = report["area_um2"].as_f64().unwrap();
    assert!(area > 1.0, "{area}");
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(
        (runs[0]["workers"].as_u64(), runs[1]["workers"].as_u64()),
        (Some(2), Some(1))
    );
    for r in runs {
        let (s, rate) = (
            r["seconds"].as_f64().unwrap(),
            r["um2_per_s"].as_f64().unwrap(),
        );
        assert!(s > 0.0 && (rate * s - area).abs() <= 0.01 * area, "{r}");
    }
    let speedup = runs[1]["seconds"].as_f64().unwrap() / runs[0]["seconds"].as_f64().unwrap();
    assert!(
        (report["speedup"].as_f64().unwrap() - speedup).abs() < 0.01,
        "{report}"
    );
    // Groups per rule add up to the totals, before and after.
    let totals = &report["groups"]["totals"];
    let by_rule = report["groups"]["by_rule"].as_object().unwrap();
    assert!(!by_rule.is_empty(), "the box has groups");
    for key in ["before", "after", "resolved", "remaining", "new"] {
        let sum: u64 = by_rule.values().map(|r| r[key].as_u64().unwrap()).sum();
        assert_eq!(sum, totals[key].as_u64().unwrap(), "{key}: {by_rule:?}");
    }
    // The projection: the whole layout holds at least the measured tiles, 1 mm² more.
    let p = &report["projection"];
    let whole = p["whole_layout"]["tiles"].as_f64().unwrap();
    let mm2 = p["one_mm2"]["tiles"].as_f64().unwrap();
    assert!(whole >= 4.0 && mm2 > whole, "{p}");
    assert!(
        p["one_mm2"]["slurm_s"].as_f64().unwrap() < p["one_mm2"]["one_worker_s"].as_f64().unwrap()
    );
}
