//! Unit tests of `reticle_eval::optimize::region`: waves, ILT boxes, context, seams, put-back.

use reticle_kernel::rules::Rule;
use reticle_layout::{BBox, Point, Polygon};

use reticle_eval::tiles::{TileGrid, TileIndex, TileRange};
use std::collections::BTreeSet;

use reticle_eval::optimize::region::*;

fn grid() -> TileGrid {
    // A 100 nm period at 1 nm pixels, 10 nm halo, 1 nm dbu: 80 dbu cores.
    TileGrid::new(100.0, 10.0, 1.0, 1.0).unwrap()
}

#[test]
fn waves_number_every_tile_once_and_no_two_tiles_of_a_wave_touch() {
    let range = TileRange {
        ix0: -3,
        iy0: 2,
        ix1: 3,
        iy1: 6,
    };
    let counts = wave_counts(&range);
    assert_eq!(counts.iter().sum::<u64>(), range.count());
    let mut seen = BTreeSet::new();
    let mut first = 0;
    for (w, &count) in counts.iter().enumerate() {
        let tiles: Vec<TileIndex> = (first..first + count)
            .map(|n| nth_in_waves(&range, n).unwrap())
            .collect();
        for t in &tiles {
            assert!(range.contains(*t));
            assert_eq!(wave_of(*t), w);
            assert!(seen.insert((t.ix, t.iy)));
            for u in &tiles {
                let adjacent = (t.ix - u.ix).abs() <= 1 && (t.iy - u.iy).abs() <= 1;
                assert!(t == u || !adjacent, "{t:?} and {u:?} touch in wave {w}");
            }
        }
        first += count;
    }
    assert_eq!(nth_in_waves(&range, range.count()), None);
}

#[test]
fn the_ilt_box_is_the_core_inside_the_region_on_whole_pixels() {
    let g = TileGrid::new(100.0, 10.0, 2.0, 1.0).unwrap();
    let t = TileIndex { ix: 0, iy: 0 };
    assert_eq!(
        g.core(t),
        BBox::from_corners(Point::new(0, 0), Point::new(80, 80))
    );
    let region = BBox::from_corners(Point::new(5, -50), Point::new(33, 500));
    // The window starts at -10: pixels at even dbu; 5 rounds up to 6, 33 down to 32.
    assert_eq!(
        ilt_box(&g, t, region),
        Some(BBox::from_corners(Point::new(6, 0), Point::new(32, 80)))
    );
    let outside = BBox::from_corners(Point::new(200, 200), Point::new(300, 300));
    assert_eq!(ilt_box(&g, t, outside), None);
}

fn area(polygons: &[Polygon]) -> i64 {
    polygons
        .iter()
        .map(|p| {
            let n = p.points.len();
            let twice: i64 = (0..n)
                .map(|i| {
                    let (a, b) = (p.points[i], p.points[(i + 1) % n]);
                    a.x * b.y - b.x * a.y
                })
                .sum();
            twice.abs() / 2
        })
        .sum()
}

#[test]
fn the_frozen_context_is_the_drawn_layout_or_a_finished_neighbours_mask() {
    let g = grid();
    let t = TileIndex { ix: 0, iy: 0 };
    let w = g.window(t);
    // One drawn rectangle over the whole window.
    let drawn = vec![Polygon::rect(w)];
    let own = Some(g.core(t));
    let none = |_: TileIndex| None;
    let ctx = frozen_context(&g, t, own, &drawn, &none);
    assert_eq!(area(&ctx), w.width() * w.height() - 80 * 80);
    // The right neighbour finished: its optimized box holds nothing.
    let right = TileIndex { ix: 1, iy: 0 };
    let empty: Vec<Polygon> = Vec::new();
    let fin = |n: TileIndex| {
        (n == right).then_some(Finished {
            optimized: g.core(right),
            polygons: &empty,
        })
    };
    let ctx = frozen_context(&g, t, own, &drawn, &fin);
    // The strip of the right core inside the window (10 × 80) is now empty.
    assert_eq!(area(&ctx), w.width() * w.height() - 80 * 80 - 10 * 80);
}

#[test]
fn long_polygons_are_split_for_gdsii() {
    // A staircase with 2 × 5,000 steps.
    let mut pts = Vec::new();
    for i in 0..5000 {
        pts.push(Point::new(i, i));
        pts.push(Point::new(i + 1, i));
    }
    pts.push(Point::new(5000, 0));
    pts.push(Point::new(0, 0));
    let p = Polygon::new(pts);
    let parts = split_for_gds(&p);
    assert!(parts.len() >= 2);
    assert!(parts.iter().all(|q| q.points.len() <= GDS_MAX_POINTS));
    assert_eq!(area(&parts), area(&[p]));
}

fn group(rule: &str, b: [f64; 4]) -> GroupBox {
    GroupBox {
        group_id: format!("{rule}{b:?}"),
        rule_id: rule.into(),
        applies_to: "printed".into(),
        bbox_nm: b,
    }
}

#[test]
fn groups_are_matched_by_rule_and_place() {
    let before = vec![
        group("W", [0.0, 0.0, 10.0, 10.0]),
        group("S", [50.0, 0.0, 60.0, 10.0]),
    ];
    let after = vec![
        group("W", [12.0, 0.0, 20.0, 10.0]),
        group("W", [200.0, 0.0, 210.0, 10.0]),
    ];
    let near = |b: &[f64; 4]| b[0] < 100.0;
    let (by_rule, new) = compare_groups(&before, &after, 5.0, &near);
    assert_eq!(
        (
            by_rule["W"].resolved,
            by_rule["W"].remaining,
            by_rule["W"].new
        ),
        (0, 1, 1)
    );
    assert_eq!((by_rule["S"].resolved, by_rule["S"].after), (1, 0));
    assert_eq!(by_rule["W"].new_near_seams, 0);
    assert_eq!(new.len(), 1);
}

#[test]
fn the_seam_distance_counts_only_seams_inside_the_region() {
    let g = grid();
    let region = BBox::from_corners(Point::new(0, 0), Point::new(160, 80));
    let range = g.covering(region);
    assert_eq!(range.count(), 2);
    // The one seam is x = 80, from y = 0 to 80.
    assert_eq!(
        seam_distance_nm(&g, &range, region, &[70.0, 10.0, 75.0, 20.0]),
        5.0
    );
    assert_eq!(
        seam_distance_nm(&g, &range, region, &[80.0, 100.0, 81.0, 103.0]),
        20.0
    );
    let one = g.covering(BBox::from_corners(Point::new(0, 0), Point::new(10, 10)));
    assert!(seam_distance_nm(&g, &one, region, &[0.0, 0.0, 1.0, 1.0]).is_infinite());
}

#[test]
fn the_blend_box_grows_the_tile_box_inside_the_region_only() {
    let region = BBox {
        left: 0,
        bottom: 0,
        right: 300,
        top: 200,
    };
    let own = BBox {
        left: 0,
        bottom: 80,
        right: 80,
        top: 160,
    };
    // Grown by 30 everywhere but past the region's left edge and top edge.
    assert_eq!(
        blend_box(own, region, 30),
        BBox {
            left: 0,
            bottom: 50,
            right: 110,
            top: 190,
        }
    );
    assert_eq!(blend_box(own, region, 0), own);
    assert_eq!(blend_box(own, region, -5), own);
}

fn rect(l: i64, b: i64, r: i64, t: i64) -> BBox {
    BBox::from_corners(Point::new(l, b), Point::new(r, t))
}

#[test]
fn put_back_puts_the_drawn_polygons_in_the_squares_and_keeps_the_mask_elsewhere() {
    use put_back::put_back;
    let mask = [Polygon::rect(rect(0, 0, 100, 100))];
    let drawn = [Polygon::rect(rect(40, 0, 60, 100))];
    let out = put_back(&mask, &drawn, &[rect(30, 30, 70, 70)], rect(0, 0, 100, 100));
    // The mask less the square, plus the drawn line's part in it; no piece overlaps.
    assert_eq!(area(&out), 100 * 100 - 40 * 40 + 20 * 40);
    // Two overlapping squares put the drawn line back once: the union is 40 × 60.
    let two = [rect(30, 30, 70, 70), rect(30, 50, 70, 90)];
    let out = put_back(&mask, &drawn, &two, rect(0, 0, 100, 100));
    assert_eq!(area(&out), 100 * 100 - 40 * 60 + 20 * 60);
    // A square past the region changes nothing outside it.
    let out = put_back(&mask, &drawn, &[rect(80, 80, 140, 140)], rect(0, 0, 90, 90));
    assert_eq!(area(&out), 100 * 100 - 10 * 10);
    // No square: the mask as it is.
    assert_eq!(
        put_back(&mask, &drawn, &[], rect(0, 0, 100, 100)),
        mask.to_vec()
    );
}

#[test]
fn put_back_squares_land_on_whole_pixels_outward() {
    use put_back::to_dbu;
    // 1 nm dbu, 2 dbu pixels: outward to even coordinates.
    assert_eq!(to_dbu([3.0, -3.0, 7.0, 9.0], 1.0, 2.0), rect(2, -4, 8, 10));
}

#[test]
fn a_legal_put_back_moves_a_side_that_would_leave_a_sliver_and_keeps_the_mask_legal() {
    use put_back::{put_back, put_back_legal};
    use reticle_kernel::rules::{Region, RuleDeck, check_rule};
    let deck = RuleDeck::from_json(
        r#"{"name": "t", "version": "1", "layers": {"M1": "1/0"},
            "defaults": {"severity": "error", "applies_to": "mask", "dedup_radius_nm": 0},
            "rules": [{"id": "W", "kind": "width", "layer": "M1", "value": 30},
                      {"id": "S", "kind": "space", "layer": "M1", "value": 30}]}"#,
    )
    .unwrap();
    let rules: Vec<&Rule> = deck.rules.iter().collect();
    let width_hits = |polygons: &[Polygon]| {
        check_rule(rules[0], &Region::from_polygons(polygons), None, 1.0)
            .unwrap()
            .len()
    };
    // An optimized feature 0..60 in x; nothing drawn there. A square from x = 10 would
    // leave a 10 nm sliver of it: the plain put-back breaks the width rule, the legal one
    // moves the square's left side out past the feature's edge instead.
    let mask = [Polygon::rect(rect(0, 0, 60, 100))];
    let drawn: [Polygon; 0] = [];
    let region = rect(-500, -500, 500, 500);
    let square = rect(10, -50, 200, 150);
    assert!(width_hits(&put_back(&mask, &drawn, &[square], region)) > 0);
    let (out, outcomes) = put_back_legal(&mask, &drawn, &[square], region, &rules, 1.0);
    assert_eq!(width_hits(&out), 0);
    let kept = outcomes[0].square.expect("the square was put back");
    assert!(outcomes[0].moves >= 1 && kept.left <= 0, "{outcomes:?}");
    assert_eq!(area(&out), 0, "the whole feature lies in the moved square");
    // A square that breaks nothing is put back where it is.
    let (_, outcomes) = put_back_legal(
        &mask,
        &drawn,
        &[rect(-50, -50, 200, 150)],
        region,
        &rules,
        1.0,
    );
    assert_eq!(outcomes[0].moves, 0);
}
