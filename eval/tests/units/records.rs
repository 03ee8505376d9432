//! Unit tests of `reticle_eval::records`: tiles, groups, ids, canonical and shadow records.

use reticle_kernel::rules::Rule;
use reticle_layout::BBox;
use reticle_protocol::ViolationId;

use reticle_eval::found::Found;
use reticle_kernel::rules::RuleDeck;
use reticle_layout::Point;
use serde_json::{Value, json};

use reticle_eval::records::*;

/// The records as the JSON a report holds.
fn json_records(built: &Records) -> Vec<Value> {
    built
        .records
        .iter()
        .map(|r| serde_json::to_value(r).unwrap())
        .collect()
}

fn bbox(l: i64, b: i64, r: i64, t: i64) -> BBox {
    BBox {
        left: l,
        bottom: b,
        right: r,
        top: t,
    }
}

fn found(rule: usize, x: i64, y: i64, b: BBox) -> Found {
    Found {
        rule,
        at_pm: (x, y),
        bbox: b,
        measured: Some(1.0),
        marker: reticle_eval::payload::Marker::Polygon { hull: Vec::new() },
    }
}

#[test]
fn tiles_are_half_open() {
    assert_eq!(tiles_of(bbox(0, 0, 10, 10), 10), vec![(0, 0)]);
    assert_eq!(tiles_of(bbox(5, 5, 15, 5), 10), vec![(0, 0), (1, 0)]);
    assert_eq!(tiles_of(bbox(-1, 0, 0, 0), 10), vec![(-1, 0)]);
}

#[test]
fn groups_link_within_the_radius() {
    let z = bbox(0, 0, 0, 0);
    let v = [
        found(0, 0, 0, z),
        found(0, 5, 0, z),
        found(0, 9, 0, z),
        found(0, 30, 0, z),
        found(0, 30, 0, z),
    ];
    let refs: Vec<&Found> = v.iter().collect();
    assert_eq!(group(&refs, 5), vec![0, 0, 0, 3, 3]);
    assert_eq!(group(&refs, 0), vec![0, 1, 2, 3, 3]);
}

#[test]
fn tile_sides_round_and_are_at_least_one_dbu() {
    assert_eq!(tile_dbu(1024.0, 1.0), 1024);
    assert_eq!(tile_dbu(1024.0, 0.5), 2048);
    assert_eq!(tile_dbu(0.1, 1.0), 1);
}

fn deck() -> RuleDeck {
    let (deck, _) = reticle_eval::deck::load("iccad13_m1", |_| unreachable!()).unwrap();
    deck
}

const SHA: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn context(deck_hash: &str) -> RecordContext<'_> {
    RecordContext {
        layout_sha256: SHA,
        deck_name: "iccad13_m1",
        deck_hash,
        dbu_nm: 1.0,
        tile_dbu: 100,
        stitch: None,
    }
}

#[test]
fn a_group_across_a_tile_border_has_one_canonical_record_and_shadows() {
    let deck = deck();
    let hash = deck.deck_hash();
    let rules: Vec<&Rule> = deck.rules.iter().take(1).collect();
    let radius_pm = (rules[0].dedup_radius_nm * 1000.0).round() as i64;
    // Two violations closer than the dedup radius; the second straddles x = 100.
    let a = found(0, 50_000, 50_000, bbox(49, 49, 51, 51));
    let b = found(0, 50_000 + radius_pm / 2, 50_000, bbox(95, 49, 105, 51));
    let built = build(&[b.clone(), a.clone()], &rules, &context(&hash));
    assert_eq!(
        built.counts.per_rule,
        vec![RuleCount {
            records: 3,
            groups: 1
        }]
    );
    let sev = severity_name(rules[0].severity);
    assert_eq!(built.counts.groups_by_severity[sev], 1);
    let r = &json_records(&built);
    assert_eq!(r[0]["dedup_strategy"], "canonical");
    assert_eq!(r[1]["dedup_strategy"], "shadow");
    assert_eq!(r[2]["dedup_strategy"], "shadow");
    assert_eq!(r[0]["location_nm"], json!([50.0, 50.0]));
    for (i, record) in r.iter().enumerate() {
        let id: ViolationId = record["violation_id"].as_str().unwrap().parse().unwrap();
        assert_eq!(id.index, i);
        assert_eq!(id.rule_id, rules[0].id);
        assert_eq!(id.group_id, record["violation_group_id"].as_str().unwrap());
        assert_eq!(
            record["dedup_provenance"]["canonical_violation_id"],
            r[0]["violation_id"]
        );
        assert_eq!(record["dedup_provenance"]["group_size"], 3);
    }
    let tiles: Vec<&str> = r
        .iter()
        .map(|x| x["context"]["tile_id"].as_str().unwrap())
        .collect();
    assert_eq!(tiles, ["T_0_0", "T_0_0", "T_1_0"]);
    // The input order does not matter.
    let again = build(&[a, b], &rules, &context(&hash));
    assert_eq!(again.records, built.records);
}

#[test]
fn far_apart_violations_are_separate_groups_with_stable_ids() {
    let deck = deck();
    let hash = deck.deck_hash();
    let rules: Vec<&Rule> = deck.rules.iter().take(1).collect();
    let far = (rules[0].dedup_radius_nm * 1000.0).round() as i64 * 3 + 1000;
    let p = Point::new(10, 10);
    let one = found(0, 10_000, 10_000, BBox::from_corners(p, p));
    let two = found(0, 10_000 + far, 10_000, BBox::from_corners(p, p));
    let built = build(&[one.clone(), two], &rules, &context(&hash));
    assert_eq!(built.counts.per_rule[0].groups, 2);
    assert_ne!(
        json_records(&built)[0]["violation_group_id"],
        json_records(&built)[1]["violation_group_id"]
    );
    let alone = build(&[one], &rules, &context(&hash));
    assert_eq!(
        json_records(&alone)[0]["violation_group_id"],
        json_records(&built)[0]["violation_group_id"]
    );
}

#[test]
fn group_id_is_the_seed_recipe_and_re_derives_from_a_records_own_fields() {
    // Pinned against Python: hashlib.blake2b(b"sha256:abc\0" + struct.pack("<dqq", 18.0,
    // 12450000, 8300000) + b"M1.W.MIN\0" + b"1/0").hexdigest()[:16].
    assert_eq!(
        reticle_eval::records::group_id_of(
            "sha256:abc",
            18.0,
            (12_450_000, 8_300_000),
            "M1.W.MIN",
            "1/0"
        ),
        "62c633a950b87014"
    );
    let deck = deck();
    let hash = deck.deck_hash();
    let rules: Vec<&Rule> = deck.rules.iter().take(1).collect();
    let records = vec![
        found(0, 50_000, 50_000, bbox(40, 40, 60, 60)),
        found(0, 95_500, 52_250, bbox(90, 50, 101, 54)),
        found(0, 250_125, 7_000, bbox(250, 5, 251, 9)),
    ];
    let built = build(&records, &rules, &context(&hash));
    assert!(!built.records.is_empty());
    for record in &json_records(&built) {
        let p = &record["dedup_provenance"];
        let at = p["canonical_location_nm"].as_array().unwrap();
        let pm = |v: &Value| (v.as_f64().unwrap() * 1000.0).round() as i64;
        let derived = reticle_eval::records::group_id_of(
            p["rule_deck_hash"].as_str().unwrap(),
            p["radius_nm"].as_f64().unwrap(),
            (pm(&at[0]), pm(&at[1])),
            record["rule_id"].as_str().unwrap(),
            record["layer"].as_str().unwrap(),
        );
        assert_eq!(record["violation_group_id"], json!(derived), "{record}");
    }
}

/// The groups of a report are written a chunk at a time on every compute thread (D240):
/// what comes out is the same records in the same order whatever the thread count, with
/// more groups than a chunk holds.
#[test]
fn records_are_the_same_whatever_the_thread_count() {
    let deck = deck();
    let hash = deck.deck_hash();
    let rules: Vec<&Rule> = deck.rules.iter().take(2).collect();
    assert_eq!(rules.len(), 2);
    // 2 × 3,000 violations, in an order that is not the location order; pairs of them
    // closer than any dedup radius, so groups have shadows.
    let mut all = Vec::new();
    for i in 0..3_000i64 {
        let scrambled = (i * 7_919) % 3_000;
        let (x, y) = (scrambled * 1_000, (scrambled % 37) * 500);
        for rule in 0..2 {
            all.push(found(
                rule,
                x * 1_000,
                y * 1_000,
                bbox(x - 1, y - 1, x + 1, y + 1),
            ));
            if scrambled % 3 == 0 {
                all.push(found(
                    rule,
                    x * 1_000 + 1,
                    y * 1_000,
                    bbox(x, y, x + 2, y + 1),
                ));
            }
        }
    }
    let run = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| build(&all, &rules, &context(&hash)))
    };
    let one = run(1);
    assert!(
        one.counts
            .per_rule
            .iter()
            .all(|c| c.groups > 2 * GROUP_CHUNK)
    );
    let reference = json_records(&one);
    // Report order: rule by rule, groups by their canonical location.
    for pair in reference.windows(2) {
        if pair[0]["rule_id"] == pair[1]["rule_id"] {
            let at = |r: &Value| r["dedup_provenance"]["canonical_location_nm"][0].as_f64();
            assert!(at(&pair[0]) <= at(&pair[1]), "{pair:?}");
        }
    }
    for threads in [2, 4] {
        let many = run(threads);
        assert_eq!(many.counts, one.counts, "{threads} threads");
        assert_eq!(json_records(&many), reference, "{threads} threads");
    }
}
