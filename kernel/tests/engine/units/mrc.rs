//! Unit tests of mask-rule legalization (`reticle_kernel::mrc`).

use reticle_kernel::mrc::{LegalizeRequest, MaskStyle, check, legalize, rebuild, whole_polygons};
use reticle_kernel::rules::{Region, Rule, RuleDeck, check_rule};
use reticle_kernel::{CancelToken, Grid};
use reticle_layout::{Point, Polygon};

const DECK: &str = r#"{"name": "t", "version": "1", "layers": {"M": "1/0"},
    "rules": [
      {"id": "W", "kind": "width", "layer": "M", "value": 20, "applies_to": "mask"},
      {"id": "S", "kind": "space", "layer": "M", "value": 20, "applies_to": "mask"},
      {"id": "N", "kind": "notch", "layer": "M", "value": 20, "applies_to": "mask", "metric": "projection"}
    ]}"#;

fn rules() -> Vec<Rule> {
    RuleDeck::from_json(DECK).expect("deck").rules
}

/// A messy proposal: two wide bars, a 6 px sliver, a 5 px gap between two blocks, a
/// one-pixel speck and a diagonal staircase.
fn proposal(n: usize) -> (Grid<u8>, Grid<u8>) {
    let mut p = Grid::filled(n, n, 0u8);
    let mut t = Grid::filled(n, n, 0u8);
    let fill = |g: &mut Grid<u8>, x0: usize, y0: usize, x1: usize, y1: usize| {
        for y in y0..y1 {
            for x in x0..x1 {
                *g.at_mut(x, y) = 1;
            }
        }
    };
    fill(&mut t, 20, 20, 80, 180);
    fill(&mut t, 140, 20, 200, 180);
    fill(&mut p, 18, 18, 82, 182);
    fill(&mut p, 138, 18, 202, 182);
    fill(&mut p, 107, 30, 113, 170); // sliver
    fill(&mut p, 30, 190, 60, 230);
    fill(&mut p, 65, 190, 100, 230); // 5 px gap
    *p.at_mut(230, 240) = 1; // speck
    for k in 0..40 {
        fill(&mut p, 140 + k, 200 + k, 170 + k, 201 + k); // staircase band
    }
    (p, t)
}

fn request<'a>(
    p: &'a Grid<u8>,
    t: &'a Grid<u8>,
    rules: &'a [Rule],
    style: MaskStyle,
) -> LegalizeRequest<'a> {
    LegalizeRequest {
        proposal: p,
        target: t,
        outside: None,
        window: (0, 0, p.width, p.height),
        context: &[],
        origin_dbu: (-100.0, 50.0),
        pixel_dbu: 1.0,
        dbu_nm: 1.0,
        rules,
        style,
        grid_px: 4,
    }
}

#[test]
fn a_messy_proposal_becomes_legal_in_both_styles() {
    let rules = rules();
    let (p, t) = proposal(256);
    let req = request(&p, &t, &rules, MaskStyle::Curvilinear);
    assert!(
        !check(&req, &rebuild(&req, p.clone(), 0).polygons).is_empty(),
        "the proposal breaks the rules"
    );
    for style in [MaskStyle::Curvilinear, MaskStyle::Manhattan] {
        let req = request(&p, &t, &rules, style);
        let legal = legalize(&req, &CancelToken::new()).expect("not cancelled");
        assert!(
            legal.violations.is_empty(),
            "{style:?}: {:?}",
            legal.violations
        );
        // The independent check of the returned polygons agrees.
        let region = Region::from_polygons(&legal.polygons);
        for r in &rules {
            assert!(
                check_rule(r, &region, None, 1.0)
                    .expect("geometric")
                    .is_empty(),
                "{style:?} {}",
                r.id
            );
        }
        // The wide bars are still there; the speck and the sliver are gone.
        assert_eq!(*legal.pixels.at(50, 100), 1);
        assert_eq!(*legal.pixels.at(230, 240), 0);
        assert_eq!(*legal.pixels.at(110, 100), 0);
        if style == MaskStyle::Manhattan {
            for poly in &legal.polygons {
                let n = poly.points.len();
                for i in 0..n {
                    let (a, b) = (poly.points[i], poly.points[(i + 1) % n]);
                    assert!(a.x == b.x || a.y == b.y, "axis-parallel: {a:?} {b:?}");
                    // On the 4-pixel grid anchored at the window's corner.
                    assert_eq!((a.x + 100).rem_euclid(4), 0, "{a:?}");
                    assert_eq!((a.y - 50).rem_euclid(4), 0, "{a:?}");
                }
            }
        }
    }
}

#[test]
fn a_record_is_repaired_where_it_is_not_by_replacing_the_shapes() {
    // Two 100 px squares on the 4 px grid whose corners touch (a 0 nm space record
    // that the projection keeps); the drawn target is smaller, so putting either
    // square back to it would change thousands of pixels.
    let n = 256;
    let (mut p, mut t) = (Grid::filled(n, n, 0u8), Grid::filled(n, n, 0u8));
    for (x0, y0) in [(20, 20), (120, 120)] {
        for y in y0..y0 + 100 {
            for x in x0..x0 + 100 {
                *p.at_mut(x, y) = 1;
                if x >= x0 + 12 && x < x0 + 88 && y >= y0 + 12 && y < y0 + 88 {
                    *t.at_mut(x, y) = 1;
                }
            }
        }
    }
    let rules = rules();
    let req = LegalizeRequest {
        origin_dbu: (0.0, 0.0),
        ..request(&p, &t, &rules, MaskStyle::Manhattan)
    };
    assert!(!check(&req, &rebuild(&req, p.clone(), 0).polygons).is_empty());
    let legal = legalize(&req, &CancelToken::new()).expect("not cancelled");
    assert!(legal.violations.is_empty(), "{:?}", legal.violations);
    assert_eq!(legal.repair_rounds, 1, "one local round");
    let changed = (0..n * n)
        .filter(|&i| legal.pixels.data[i] != p.data[i])
        .count();
    assert!(
        changed > 0 && changed <= 2 * 24 * 24,
        "{changed} pixels changed"
    );
}

#[test]
fn a_violation_in_the_frozen_context_is_reported_not_hidden() {
    let rules = rules();
    let (p, t) = proposal(256);
    // A 10 dbu wide drawn bar outside the window (left of x = 0 in pixels).
    let context = vec![Polygon::new(vec![
        Point::new(-200, 100),
        Point::new(-190, 100),
        Point::new(-190, 200),
        Point::new(-200, 200),
    ])];
    let req = LegalizeRequest {
        context: &context,
        ..request(&p, &t, &rules, MaskStyle::Curvilinear)
    };
    let legal = legalize(&req, &CancelToken::new()).expect("not cancelled");
    assert!(
        legal.violations.iter().any(|v| v.rule_id == "W"),
        "{:?}",
        legal.violations
    );
}

#[test]
fn whole_polygons_join_holes_by_cut_lines() {
    // A square ring as four rectangles.
    let r = |l, b, rr, t| {
        Polygon::new(vec![
            Point::new(l, b),
            Point::new(rr, b),
            Point::new(rr, t),
            Point::new(l, t),
        ])
    };
    let pieces = vec![
        r(0, 0, 100, 30),
        r(0, 70, 100, 100),
        r(0, 30, 30, 70),
        r(70, 30, 100, 70),
    ];
    let whole = whole_polygons(&pieces);
    assert_eq!(
        (
            whole.polygons.len(),
            whole.merged,
            whole.holes,
            whole.unjoined
        ),
        (1, 1, 1, 0)
    );
    assert_eq!(
        whole.polygons[0].signed_area2().abs(),
        2 * (100 * 100 - 40 * 40)
    );
    // Merged again, the hole comes back.
    let region = Region::from_polygons(&whole.polygons);
    assert_eq!(region.polygons().len(), 1);
    assert_eq!(region.polygons()[0].holes.len(), 1);
}
