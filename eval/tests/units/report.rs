//! Unit tests of `reticle_eval::report`: tile size, capabilities, report level, pass rates.

use std::path::Path;

use reticle_kernel::rules::RuleDeck;
use reticle_protocol::ErrorCode;
use reticle_protocol::capabilities::DetailSupport;

use reticle_eval::found::RuleRun;
use reticle_eval::records::RuleCount;
use reticle_eval::report::*;

#[test]
fn tiles_are_at_least_one_nm() {
    assert_eq!(tile_size(None).unwrap(), DEFAULT_TILE_NM);
    assert_eq!(tile_size(Some(1.0)).unwrap(), 1.0);
    for bad in [0.5, -3.0, f64::INFINITY, f64::NAN] {
        assert!(tile_size(Some(bad)).is_err(), "{bad}");
    }
}

#[test]
fn every_engine_path_an_evaluation_can_emit_is_in_the_capabilities_matrix() {
    use reticle_kernel::rules::{AppliesTo, RuleKind};
    let (deck, _) = reticle_eval::deck::load("iccad13_m1", |_| unreachable!()).unwrap();
    let mut rule = deck.rules[0].clone();
    let kinds = [
        RuleKind::Width,
        RuleKind::Space,
        RuleKind::Area,
        RuleKind::Notch,
        RuleKind::Enclosure,
        RuleKind::Epe,
        RuleKind::Pvband,
    ];
    for kind in kinds {
        for applies_to in [AppliesTo::Mask, AppliesTo::Printed] {
            rule.kind = kind;
            rule.applies_to = applies_to;
            let run = reticle_eval::found::rule_run(&rule);
            let entry = reticle_protocol::capabilities::engine_path(run.engine_path)
                .unwrap_or_else(|| {
                    panic!(
                        "{kind:?}/{applies_to:?}: {} not in the matrix",
                        run.engine_path
                    )
                });
            // An unchecked rule is on an unsupported path, and only such a rule.
            assert_eq!(
                !run.checked,
                entry.detailed == DetailSupport::Unsupported,
                "{kind:?}/{applies_to:?}"
            );
        }
    }
}

#[test]
fn detailed_on_only_unsupported_paths_is_report_level_unsupported() {
    let (mut deck, _) = reticle_eval::deck::load("iccad13_m1", |_| unreachable!()).unwrap();
    let target = deck.rules[0].layer;
    let setup = |deck: &RuleDeck, report_level| Setup {
        deck: deck.clone(),
        deck_source: "test".into(),
        deck_hash: deck.deck_hash(),
        target,
        mask_layer: None,
        tile_nm: DEFAULT_TILE_NM,
        layout_name: "x.glp".into(),
        report_level,
        limits: ViolationLimits::default(),
    };
    assert!(
        setup(&deck, ReportLevel::Detailed)
            .check_report_level()
            .is_ok()
    );
    for rule in &mut deck.rules {
        rule.kind = reticle_kernel::rules::RuleKind::Enclosure;
        rule.applies_to = reticle_kernel::rules::AppliesTo::Printed;
    }
    assert!(
        setup(&deck, ReportLevel::Aggregate)
            .check_report_level()
            .is_ok()
    );
    let error = setup(&deck, ReportLevel::Detailed)
        .check_report_level()
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::ReportLevelUnsupported);
    assert_eq!(
        error.details["rules"][0]["engine_path"],
        "enclosure.printed"
    );
}

#[test]
fn pass_rates_count_checked_rules_without_groups() {
    let run = |checked, engine_path| RuleRun {
        checked,
        skipped_reason: None,
        engine_path,
    };
    let runs = [
        run(true, "mrc.standard"),
        run(true, "mrc.standard"),
        run(true, "mrc.standard"),
        run(false, "drc.printed_contour"),
        run(true, "epe.gauge"),
    ];
    let count = |groups| RuleCount {
        records: groups,
        groups,
    };
    let counts = [count(0), count(2), count(0), count(0), count(1)];
    assert_eq!(pass_rate(&runs, &counts, &["mrc.standard"]), Some(0.666667));
    assert_eq!(
        pass_rate(&runs, &counts, &["drc.printed_contour", "epe.gauge"]),
        Some(0.0)
    );
    assert_eq!(pass_rate(&runs, &counts, &["pvband.3corner"]), None);
}

#[test]
fn the_layout_is_named_by_its_file_name() {
    assert_eq!(layout_name(Path::new("/a/b/c.gds")), "c.gds");
}
