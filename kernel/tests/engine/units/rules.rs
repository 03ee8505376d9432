//! Check-level tests on hand-built shapes (`reticle_kernel::rules`).

use reticle_kernel::rules::{
    AppliesTo, CheckError, DeckLayer, Edge, EdgePairHit, Metric, Region, Rule, RuleKind, Severity,
    check_rule, enclosure, notch, space, width,
};
use reticle_layout::{BBox, Point, Polygon};

use crate::common::rect;

fn region(polys: &[Polygon]) -> Region {
    Region::from_polygons(polys)
}

fn rule(kind: RuleKind, value: f64) -> Rule {
    Rule {
        id: format!("R.{}", kind.as_str()),
        kind,
        layer: DeckLayer {
            layer: 1,
            datatype: 0,
        },
        other_layer: None,
        value,
        severity: Severity::Error,
        dedup_radius_nm: 0.0,
        applies_to: AppliesTo::Mask,
        metric: Metric::Euclidean,
    }
}

#[test]
fn width_boundary_is_strict() {
    let r = region(&[rect(0, 0, 40, 200)]);
    assert!(width(&r, 40.0, Metric::Euclidean).is_empty());
    let hits = width(&r, 41.0, Metric::Euclidean);
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].distance, 40.0);
    assert_eq!(
        hits[0].bbox(),
        BBox {
            left: 0,
            bottom: 0,
            right: 40,
            top: 200
        }
    );
    // Both dimensions too small: two pairs.
    assert_eq!(width(&r, 201.0, Metric::Euclidean).len(), 2);
}

#[test]
fn abutting_shapes_do_not_give_false_width_or_space() {
    // Two 30-wide halves of a 60-wide line, and a stack of touching squares.
    let r = region(&[
        rect(0, 0, 30, 500),
        rect(30, 0, 60, 500),
        rect(0, 500, 60, 560),
    ]);
    assert!(width(&r, 50.0, Metric::Euclidean).is_empty());
    assert!(space(&r, 50.0, Metric::Euclidean).is_empty());
    // Unmerged they would show a 30 nm width violation; merged they are one 60 nm shape.
    assert_eq!(width(&r, 61.0, Metric::Euclidean).len(), 1);
}

#[test]
fn space_between_polygons_and_corners() {
    // Facing edges 40 apart.
    let r = region(&[rect(0, 0, 50, 100), rect(90, 0, 140, 100)]);
    assert!(space(&r, 40.0, Metric::Euclidean).is_empty());
    let hits = space(&r, 41.0, Metric::Euclidean);
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].distance, 40.0);
    // Diagonal corner-to-corner: (50,100)-(80,140) is 50 away.
    let c = region(&[rect(0, 0, 50, 100), rect(80, 140, 130, 240)]);
    assert!(space(&c, 50.0, Metric::Euclidean).is_empty());
    let e = space(&c, 51.0, Metric::Euclidean);
    // Two edge pairs touch the corner region (vertical and horizontal facing edges).
    assert_eq!(e.len(), 2);
    assert!(e.iter().all(|h| (h.distance - 50.0).abs() < 1e-9));
    // Projection metric ignores corner-to-corner.
    assert!(space(&c, 51.0, Metric::Projection).is_empty());
}

#[test]
fn notch_is_same_polygon_only_and_space_includes_it() {
    // U shape: notch 20 wide between two arms; a separate rect 20 away.
    let u = [
        rect(0, 0, 100, 30),
        rect(0, 0, 40, 100),
        rect(60, 0, 100, 100),
    ];
    let other = rect(120, 0, 160, 100);
    let r = region(&[u[0].clone(), u[1].clone(), u[2].clone(), other]);
    assert_eq!(r.polygons().len(), 2);
    let n = notch(&r, 25.0, Metric::Euclidean);
    assert_eq!(n.len(), 1);
    assert_eq!(n[0].distance, 20.0);
    assert_eq!(space(&r, 25.0, Metric::Euclidean).len(), 2);
    assert!(notch(&r, 20.0, Metric::Euclidean).is_empty());
}

#[test]
fn area_check_counts_holes() {
    let ring = [
        rect(0, 0, 30, 10),
        rect(0, 20, 30, 30),
        rect(0, 0, 10, 30),
        rect(20, 0, 30, 30),
    ];
    let mut polys = ring.to_vec();
    polys.push(rect(100, 100, 110, 110));
    let r = region(&polys);
    let v = check_rule(&rule(RuleKind::Area, 800.0), &r, None, 1.0).unwrap();
    assert_eq!(
        v.len(),
        1,
        "the ring is exactly 800 (not a violation), the square 100"
    );
    assert_eq!(v[0].measured, 100.0);
    let v = check_rule(&rule(RuleKind::Area, 801.0), &r, None, 1.0).unwrap();
    assert_eq!(v.len(), 2);
    assert!(v[0].bbox < v[1].bbox, "sorted by bbox");
}

#[test]
fn enclosure_of_via_by_metal() {
    let metal = region(&[rect(0, 0, 100, 100)]);
    // Via with margins: left 10, bottom 20, right 30, top 5.
    let via = region(&[rect(10, 20, 70, 95)]);
    let hits = enclosure(&via, &metal, 15.0, Metric::Euclidean);
    let mut d: Vec<f64> = hits.iter().map(|h| h.distance).collect();
    d.sort_by(f64::total_cmp);
    assert_eq!(d, vec![5.0, 10.0]);
    assert!(enclosure(&via, &metal, 5.0, Metric::Euclidean).is_empty());
    let mut r = rule(RuleKind::Enclosure, 21.0);
    assert_eq!(
        check_rule(&r, &via, None, 1.0),
        Err(CheckError::MissingOtherLayer("R.enclosure".into()))
    );
    r.other_layer = Some(DeckLayer {
        layer: 2,
        datatype: 0,
    });
    assert_eq!(check_rule(&r, &via, Some(&metal), 1.0).unwrap().len(), 3);
}

#[test]
fn dbu_scaling_and_non_geometric_rules() {
    // dbu = 0.5 nm: a 40-dbu-wide line is 20 nm.
    let r = region(&[rect(0, 0, 40, 400)]);
    let v = check_rule(&rule(RuleKind::Width, 25.0), &r, None, 0.5).unwrap();
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].measured, 20.0);
    assert!(
        check_rule(&rule(RuleKind::Width, 20.0), &r, None, 0.5)
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        check_rule(&rule(RuleKind::Epe, 15.0), &r, None, 1.0),
        Err(CheckError::NotGeometric(..))
    ));
    assert_eq!(
        check_rule(&rule(RuleKind::Width, 15.0), &r, None, 0.0),
        Err(CheckError::BadDbu(0.0))
    );
}

#[test]
fn acute_angle_width() {
    // A thin 45° sliver: width between the slanted edge and the base near the tip.
    let tri = Polygon::new(vec![
        Point::new(0, 0),
        Point::new(200, 0),
        Point::new(200, 200),
    ]);
    let r = region(&[tri]);
    let hits = width(&r, 30.0, Metric::Euclidean);
    assert!(!hits.is_empty());
    assert!(hits.iter().all(|h| h.distance < 30.0));
}

#[test]
fn many_edges_are_fast_enough_and_deterministic() {
    // 100 x 100 grid of 30x30 squares at pitch 65 (space 35): 40k edges.
    let mut polys = Vec::new();
    for i in 0..100 {
        for j in 0..100 {
            polys.push(rect(i * 65, j * 65, i * 65 + 30, j * 65 + 30));
        }
    }
    let r = region(&polys);
    assert_eq!(r.polygons().len(), 10_000);
    let mut rl = rule(RuleKind::Space, 36.0);
    let v = check_rule(&rl, &r, None, 1.0).unwrap();
    // Horizontal neighbours 99*100, vertical 100*99; diagonals are sqrt(2)*35 > 36.
    assert_eq!(v.len(), 2 * 99 * 100);
    rl.value = 35.0;
    assert!(check_rule(&rl, &r, None, 1.0).unwrap().is_empty());
    let again = check_rule(&rule(RuleKind::Space, 36.0), &r, None, 1.0).unwrap();
    assert_eq!(v, again);
}

/// Hits as undirected edge pairs `[(x1, y1, x2, y2); 2]`, each edge and each pair in a
/// canonical order, sorted: compare with KLayout's output regardless of orientation.
fn canon(hits: &[EdgePairHit]) -> Vec<[(i64, i64, i64, i64); 2]> {
    let c = |e: Edge| {
        let (a, b) = if (e.p1.x, e.p1.y) <= (e.p2.x, e.p2.y) {
            (e.p1, e.p2)
        } else {
            (e.p2, e.p1)
        };
        (a.x, a.y, b.x, b.y)
    };
    let mut v: Vec<_> = hits
        .iter()
        .map(|h| {
            let (a, b) = (c(h.first), c(h.second));
            if a <= b { [a, b] } else { [b, a] }
        })
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn width_never_pairs_two_polygons_corner_to_corner() {
    // Two bars whose interiors face each other diagonally: the bottom edge of the first
    // (y = 0, x 0..100) and the top edge of the second (y = 40, x 130..200) are 50 apart
    // corner to corner, but they are different polygons; KLayout checks width polygon by
    // polygon, so only each bar's own 10 and 20 wide pairs are markers.
    let r = region(&[rect(0, 0, 100, 10), rect(130, 20, 200, 40)]);
    assert_eq!(r.polygons().len(), 2);
    assert_eq!(
        canon(&width(&r, 60.0, Metric::Euclidean)),
        vec![
            [(0, 0, 100, 0), (0, 10, 100, 10)],
            [(130, 20, 200, 20), (130, 40, 200, 40)],
        ]
    );
    // The two exterior corners do give space markers (KLayout: these two pairs).
    assert_eq!(
        canon(&space(&r, 60.0, Metric::Euclidean)),
        vec![
            [(71, 10, 100, 10), (130, 20, 159, 20)],
            [(100, 0, 100, 10), (130, 20, 130, 40)],
        ]
    );
}

#[test]
fn width_pairs_corner_to_corner_within_one_staircase_polygon() {
    // A spiral: the same two bars as above joined around the outside into one polygon.
    // Now the bottom edge of the first bar (y = 0) and the top edge of the last (y = 40,
    // from x = 130) are a width pair: (100, 0)-(130, 40) is 50 < 60. Near parts: the
    // circle of radius 60 around (130, 40) cuts y = 0 at x = 130 - √2000 = 85.3 → 85, and
    // the one around (100, 0) cuts y = 40 at x = 144.7 → 145. KLayout gives these six.
    let r = region(&[
        rect(0, 0, 100, 10),
        rect(-50, -50, 0, 10),
        rect(-50, -60, 260, -50),
        rect(250, -60, 260, 40),
        rect(130, 30, 260, 40),
    ]);
    assert_eq!(r.polygons().len(), 1);
    assert_eq!(
        canon(&width(&r, 60.0, Metric::Euclidean)),
        vec![
            [(-50, -60, -50, 10), (0, -50, 0, 0)],
            [(-50, -60, 260, -60), (0, -50, 250, -50)],
            [(-50, 10, 100, 10), (0, 0, 100, 0)],
            [(85, 0, 100, 0), (130, 40, 145, 40)],
            [(130, 30, 250, 30), (130, 40, 260, 40)],
            [(250, -50, 250, 30), (260, -60, 260, 40)],
        ]
    );
    // Projection drops the corner-to-corner pair only.
    assert_eq!(width(&r, 60.0, Metric::Projection).len(), 5);
}

#[test]
fn kissing_corner_gives_zero_distance_width_and_space_pairs() {
    // Two bars touching at (100, 10) merge into one self-touching polygon. The collinear
    // edges that meet there (the two at x = 100 and the two at y = 10) face each other at
    // distance 0: KLayout reports them in width and in space (its fix for the kissing
    // corner problem, issue #281); the other width pairs are the bars' own 10 nm and the
    // corner-to-corner pair (100, 0)-(100, 20) across the pinch.
    let r = region(&[rect(0, 0, 100, 10), rect(100, 10, 200, 20)]);
    assert_eq!(r.polygons().len(), 1);
    let w = width(&r, 40.0, Metric::Euclidean);
    assert_eq!(
        canon(&w),
        vec![
            [(0, 0, 100, 0), (0, 10, 100, 10)],
            [(60, 10, 100, 10), (100, 10, 140, 10)],
            [(65, 0, 100, 0), (100, 20, 135, 20)],
            [(100, 0, 100, 10), (100, 10, 100, 20)],
            [(100, 10, 200, 10), (100, 20, 200, 20)],
        ]
    );
    assert_eq!(w.iter().filter(|h| h.distance == 0.0).count(), 2);
    assert_eq!(
        canon(&space(&r, 40.0, Metric::Euclidean)),
        vec![
            [(60, 10, 100, 10), (100, 10, 140, 10)],
            [(100, 0, 100, 10), (100, 10, 100, 20)],
        ]
    );
    // Collinear edges with a gap are not a pair (only touching ones are).
    let g = region(&[rect(0, 0, 100, 10), rect(130, 10, 200, 20)]);
    assert_eq!(
        canon(&space(&g, 40.0, Metric::Euclidean)),
        vec![[(100, 0, 100, 10), (130, 10, 130, 20)]]
    );
}
