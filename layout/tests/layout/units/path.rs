//! Unit tests of `reticle_layout::path`: path outlines.

use reticle_layout::geom::{BBox, Point, Polygon};
use reticle_layout::model::{Path, PathEnds};

fn path(pts: &[(i64, i64)], width: i64, ends: PathEnds) -> Path {
    Path {
        spine: pts.iter().map(|&(x, y)| Point::new(x, y)).collect(),
        width,
        ends,
    }
}

#[test]
fn straight_path_end_styles() {
    let flush = path(&[(0, 0), (100, 0)], 10, PathEnds::Flush).to_polygon();
    let flush = flush.expect("outline");
    assert_eq!(
        flush.bbox(),
        Some(BBox::from_corners(Point::new(0, -5), Point::new(100, 5)))
    );
    assert_eq!(flush.signed_area2(), 2 * 1000);
    let ext = path(&[(0, 0), (100, 0)], 10, PathEnds::HalfWidth).to_polygon();
    assert_eq!(
        ext.and_then(|p| p.bbox()),
        Some(BBox::from_corners(Point::new(-5, -5), Point::new(105, 5)))
    );
    let var = path(
        &[(0, 0), (0, 100)],
        10,
        PathEnds::Variable { begin: 3, end: -7 },
    )
    .to_polygon();
    assert_eq!(
        var.and_then(|p| p.bbox()),
        Some(BBox::from_corners(Point::new(-5, -3), Point::new(5, 93)))
    );
    let round = path(&[(0, 0), (10_000, 0)], 1000, PathEnds::Round)
        .to_polygon()
        .expect("outline");
    assert_eq!(
        round.bbox(),
        Some(BBox::from_corners(
            Point::new(-500, -500),
            Point::new(10_500, 500)
        ))
    );
    assert_eq!(round.points.len(), 32, "16 vertices per cap, as KLayout");
    // Body plus a 32-gon of circumradius r / cos(π/32); rounding each cap vertex to the
    // grid moves the area by at most half a dbu times the caps' perimeter (≈ 2πr).
    let a = round.signed_area2() as f64 / 2.0;
    let pi = std::f64::consts::PI;
    let rc = 500.0 / (pi / 32.0).cos();
    let expected = 1e7 + 16.0 * rc * rc * (pi / 16.0).sin();
    assert!(
        (a - expected).abs() < 0.5 * 2.0 * pi * 500.0,
        "{a} vs {expected}"
    );
    assert!(a > 1e7 + pi * 500.0 * 500.0, "caps enclose the circle");
}

#[test]
fn l_bend_is_mitred() {
    let p = path(&[(0, 0), (100, 0), (100, 100)], 10, PathEnds::Flush)
        .to_polygon()
        .expect("outline");
    let mut pts = p.points.clone();
    pts.sort();
    let expect: Vec<Point> = [(0, -5), (0, 5), (95, 5), (95, 100), (105, -5), (105, 100)]
        .iter()
        .map(|&(x, y)| Point::new(x, y))
        .collect();
    assert_eq!(pts, expect);
    assert!(p.signed_area2() > 0, "counter-clockwise");
    assert_eq!(p.signed_area2(), 2 * (105 * 10 + 95 * 10));
}

#[test]
fn degenerate_paths() {
    assert_eq!(
        path(&[(0, 0), (10, 0)], 0, PathEnds::Flush).to_polygon(),
        None
    );
    assert_eq!(
        path(&[(5, 5), (5, 5)], 4, PathEnds::Flush).to_polygon(),
        None
    );
    let sq = path(&[(5, 5)], 4, PathEnds::HalfWidth).to_polygon();
    assert_eq!(
        sq,
        Some(Polygon::rect(BBox::from_corners(
            Point::new(3, 3),
            Point::new(7, 7)
        )))
    );
    assert_eq!(path(&[], 4, PathEnds::HalfWidth).to_polygon(), None);
}
