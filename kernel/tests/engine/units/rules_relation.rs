//! Unit tests of edge-pair relations (`reticle_kernel::rules::relation`).

use reticle_kernel::rules::Edge;
use reticle_kernel::rules::deck::Metric;
use reticle_kernel::rules::relation::{Limit, check_pair, segment_distance};
use reticle_layout::Point;

fn e(x1: i64, y1: i64, x2: i64, y2: i64) -> Edge {
    Edge::new(Point::new(x1, y1), Point::new(x2, y2))
}

#[test]
fn facing_parallel_edges() {
    // Left side of a rectangle 0..30 wide (going down) and its right side (going up).
    let a = e(0, 100, 0, 0);
    let b = e(30, 0, 30, 100);
    let m = Metric::Euclidean;
    assert!(check_pair(a, b, Limit::new(31.0), m).is_some());
    assert!(
        check_pair(a, b, Limit::new(30.0), m).is_none(),
        "at the limit is fine"
    );
    assert!(check_pair(b, a, Limit::new(31.0), m).is_some(), "symmetric");
    assert!(
        check_pair(a.reversed(), b.reversed(), Limit::new(100.0), m).is_none(),
        "wrong side"
    );
}

#[test]
fn corner_to_corner_is_euclidean() {
    // Offset parallel edges: nearest points (0,0) and (30,-40): distance 50.
    let a = e(0, 100, 0, 0);
    let b = e(30, -100, 30, -40);
    assert!(check_pair(a, b, Limit::new(50.0), Metric::Euclidean).is_none());
    let (na, nb) = check_pair(a, b, Limit::new(51.0), Metric::Euclidean).unwrap();
    assert_eq!(na.p2, Point::new(0, 0));
    assert_eq!(nb.p2, Point::new(30, -40));
    assert!(check_pair(a, b, Limit::new(51.0), Metric::Projection).is_none());
}

#[test]
fn perpendicular_edges_are_ignored() {
    let a = e(0, 100, 0, 0);
    let b = e(10, 0, 10, 1);
    assert!(check_pair(a, b, Limit::new(50.0), Metric::Euclidean).is_some());
    let c = e(5, 50, 20, 50);
    assert!(check_pair(a, c, Limit::new(50.0), Metric::Euclidean).is_none());
}

#[test]
fn partial_overlap_near_parts() {
    let a = e(0, 100, 0, 0);
    let b = e(10, 50, 10, 200);
    let (na, nb) = check_pair(a, b, Limit::new(20.0), Metric::Projection).unwrap();
    assert_eq!(na, e(0, 100, 0, 50));
    assert_eq!(nb, e(10, 50, 10, 100));
    assert!((segment_distance(na, nb) - 10.0).abs() < 1e-12);
}
