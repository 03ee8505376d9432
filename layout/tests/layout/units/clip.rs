//! Unit tests of `reticle_layout::clip`: polygon clipping.

use reticle_layout::clip::*;
use reticle_layout::geom::{BBox, Point, Polygon};

fn poly(pts: &[(i64, i64)]) -> Polygon {
    Polygon::new(pts.iter().map(|&(x, y)| Point::new(x, y)).collect())
}

#[test]
fn rectangle_clip_is_exact() {
    let r = Polygon::rect(BBox::from_corners(Point::new(-10, -10), Point::new(10, 10)));
    let c = BBox::from_corners(Point::new(0, 0), Point::new(100, 5));
    let out = clip_polygon(&r, &c).expect("overlap");
    assert_eq!(out.signed_area2().abs(), 2 * 10 * 5);
    assert_eq!(
        out.bbox(),
        Some(BBox::from_corners(Point::new(0, 0), Point::new(10, 5)))
    );
}

#[test]
fn outside_and_touching_give_none() {
    let r = Polygon::rect(BBox::from_corners(Point::new(0, 0), Point::new(10, 10)));
    let touching = BBox::from_corners(Point::new(10, 0), Point::new(20, 10));
    assert_eq!(clip_polygon(&r, &touching), None);
    let far = BBox::from_corners(Point::new(50, 50), Point::new(60, 60));
    assert_eq!(clip_polygon(&r, &far), None);
}

#[test]
fn triangle_and_concave_clip_areas() {
    // Right triangle with legs 100; clip to x <= 50 keeps a trapezoid of area 3750.
    let t = poly(&[(0, 0), (100, 0), (0, 100)]);
    let c = BBox::from_corners(Point::new(-1000, -1000), Point::new(50, 1000));
    assert_eq!(
        clip_polygon(&t, &c).expect("overlap").signed_area2(),
        2 * 3750
    );
    // U shape: two 10x30 legs joined by a 30x10 base; clip off the base.
    let u = poly(&[
        (0, 0),
        (30, 0),
        (30, 30),
        (20, 30),
        (20, 10),
        (10, 10),
        (10, 30),
        (0, 30),
    ]);
    let c = BBox::from_corners(Point::new(-5, 10), Point::new(35, 40));
    let out = clip_polygon(&u, &c).expect("overlap");
    assert_eq!(out.signed_area2(), 2 * 2 * 10 * 20);
}

#[test]
fn extreme_coordinates_do_not_overflow() {
    let m = i64::MAX / 2;
    let t = poly(&[(-m, -m), (m, -m + 7), (0, m)]);
    let c = BBox::from_corners(Point::new(i64::MIN, 0), Point::new(i64::MAX, i64::MAX));
    let out = clip_polygon(&t, &c).expect("overlap");
    assert!(out.points.iter().all(|p| p.y >= 0));
}

#[test]
fn rounding_division() {
    assert_eq!(div_round(5, 2), Some(3));
    assert_eq!(div_round(-5, 2), Some(-3));
    assert_eq!(div_round(5, -2), Some(-3));
    assert_eq!(div_round(4, 3), Some(1));
    assert_eq!(div_round(-4, 3), Some(-1));
    assert_eq!(div_round(1, 0), None);
    assert_eq!(div_round(i128::MAX, 1), None);
}
