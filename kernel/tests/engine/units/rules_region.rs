//! Unit tests of merging polygons into regions (`reticle_kernel::rules`, region).

use reticle_kernel::rules::Region;
use reticle_layout::{Point, Polygon};

use crate::common::rect;

/// Twice the signed area of a ring, as the region computes it.
fn area2(points: &[Point]) -> i128 {
    Polygon::new(points.to_vec()).signed_area2()
}

#[test]
fn abutting_rects_merge_into_one() {
    let r = Region::from_polygons(&[rect(0, 0, 10, 10), rect(10, 0, 20, 10)]);
    assert_eq!(r.polygons().len(), 1);
    assert_eq!(r.polygons()[0].hull.len(), 4);
    assert_eq!(r.polygons()[0].area2, 2 * 200);
    assert_eq!(r.edges().len(), 4);
}

#[test]
fn overlapping_and_contained_rects_merge() {
    let r = Region::from_polygons(&[
        rect(0, 0, 10, 10),
        rect(5, 5, 15, 15),
        rect(1, 1, 2, 2),
        // Clockwise input is accepted.
        Polygon::new(vec![
            Point::new(0, 0),
            Point::new(0, 10),
            Point::new(10, 10),
            Point::new(10, 0),
        ]),
    ]);
    assert_eq!(r.polygons().len(), 1);
    assert_eq!(r.polygons()[0].hull.len(), 8);
    assert_eq!(r.polygons()[0].area2, 2 * (100 + 100 - 25));
}

#[test]
fn ring_has_a_hole() {
    let r = Region::from_polygons(&[
        rect(0, 0, 30, 10),
        rect(0, 20, 30, 30),
        rect(0, 0, 10, 30),
        rect(20, 0, 30, 30),
    ]);
    assert_eq!(r.polygons().len(), 1);
    let p = &r.polygons()[0];
    assert_eq!(p.holes.len(), 1);
    assert_eq!(p.area2, 2 * (900 - 100));
    assert!(area2(&p.holes[0]) < 0);
}

#[test]
fn separate_and_kissing_rects() {
    let r = Region::from_polygons(&[rect(0, 0, 10, 10), rect(20, 0, 30, 10)]);
    assert_eq!(r.polygons().len(), 2);
    let k = Region::from_polygons(&[rect(0, 0, 10, 10), rect(10, 10, 20, 20)]);
    assert_eq!(
        k.polygons().len(),
        1,
        "kissing corners join (max coherence)"
    );
    assert_eq!(k.edges().len(), 8);
}

#[test]
fn crossing_diagonal_shapes_merge() {
    let tri = |dx: i64| {
        Polygon::new(vec![
            Point::new(dx, 0),
            Point::new(dx + 20, 0),
            Point::new(dx + 10, 20),
        ])
    };
    let r = Region::from_polygons(&[tri(0), tri(10)]);
    assert_eq!(r.polygons().len(), 1);
    // Two triangles of area 200 overlapping in a triangle of area 50.
    assert_eq!(r.polygons()[0].area2, 2 * 350);
}
