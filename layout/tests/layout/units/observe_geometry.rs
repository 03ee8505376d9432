//! Unit tests of `reticle_layout::observe::geometry`.

use reticle_layout::observe::geometry::*;

fn rect(l: f64, b: f64, r: f64, t: f64) -> Vec<P> {
    vec![(l, b), (r, b), (r, t), (l, t)]
}

#[test]
fn rectangle_overlaps() {
    let a = rect(0.0, 0.0, 10.0, 10.0);
    assert_eq!(intersection_area(&a, &rect(5.0, 5.0, 15.0, 15.0)), 25.0);
    assert_eq!(intersection_area(&a, &rect(2.0, 2.0, 4.0, 4.0)), 4.0);
    assert_eq!(intersection_area(&a, &rect(10.0, 0.0, 20.0, 10.0)), 0.0);
    assert_eq!(intersection_area(&a, &a), 100.0);
    // Shared left and bottom edges, clockwise input.
    let mut cw = rect(0.0, 0.0, 4.0, 3.0);
    cw.reverse();
    assert_eq!(intersection_area(&a, &cw), 12.0);
    assert_eq!(intersection_area(&a, &rect(20.0, 20.0, 30.0, 30.0)), 0.0);
}

#[test]
fn l_shape_and_triangle_overlap() {
    // L: 20x20 square minus its upper-right 10x10 quarter; area 300.
    let l = vec![
        (0.0, 0.0),
        (20.0, 0.0),
        (20.0, 10.0),
        (10.0, 10.0),
        (10.0, 20.0),
        (0.0, 20.0),
    ];
    assert_eq!(intersection_area(&l, &rect(5.0, 5.0, 15.0, 15.0)), 75.0);
    // Triangle (0,0),(20,0),(0,20) inside the L except the corner beyond the notch:
    // the notch [10,20]² meets the triangle only at the point (10,10): area 200.
    let tri = vec![(0.0, 0.0), (20.0, 0.0), (0.0, 20.0)];
    assert!((intersection_area(&l, &tri) - 200.0).abs() < 1e-9);
}

#[test]
fn distances() {
    let a = rect(0.0, 0.0, 10.0, 10.0);
    assert_eq!(polygon_distance(&a, &rect(13.0, 0.0, 20.0, 5.0)), 3.0);
    assert_eq!(polygon_distance(&a, &rect(13.0, 14.0, 20.0, 20.0)), 5.0);
    assert_eq!(polygon_distance(&a, &rect(2.0, 2.0, 3.0, 3.0)), 0.0);
    assert_eq!(polygon_distance(&a, &rect(10.0, 2.0, 13.0, 3.0)), 0.0);
    assert_eq!(point_polygon_distance((13.0, 14.0), &a), 5.0);
    assert_eq!(point_polygon_distance((3.0, 4.0), &a), 0.0);
    let l1 = [(0.0, 0.0), (10.0, 0.0)];
    let l2 = [(0.0, 4.0), (10.0, 4.0)];
    assert_eq!(polyline_distance(&l1, &l2), 4.0);
    let cross_line = [(5.0, -5.0), (5.0, 5.0)];
    assert_eq!(polyline_distance(&l1, &cross_line), 0.0);
}
