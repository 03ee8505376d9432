use std::collections::BTreeSet;

use super::*;

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
