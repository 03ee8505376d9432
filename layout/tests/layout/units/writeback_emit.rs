//! Unit tests of `reticle_layout::writeback::emit`: shapes placed outside a region.

use reticle_layout::geom::{BBox, Point, Polygon};
use reticle_layout::model::Shape;
use reticle_layout::transform::Affine;
use reticle_layout::writeback::emit::*;

fn area2(shapes: &[Shape]) -> i128 {
    shapes
        .iter()
        .map(|s| match s {
            Shape::Box(b) => 2 * i128::from(b.width()) * i128::from(b.height()),
            Shape::Polygon(p) => p.signed_area2().abs(),
            _ => 0,
        })
        .sum()
}

#[test]
fn plate_around_the_region_loses_exactly_the_region() {
    let region = BBox::from_corners(Point::new(10, 10), Point::new(20, 30));
    let plate = BBox::from_corners(Point::new(0, 0), Point::new(100, 100));
    for shape in [Shape::Box(plate), Shape::Polygon(Polygon::rect(plate))] {
        let mut out = Vec::new();
        placed_outside(&shape, &Affine::IDENTITY, &region, &mut out).expect("ok");
        assert_eq!(area2(&out), 2 * (100 * 100 - 10 * 20));
        assert_eq!(out.len(), 4);
    }
    // A 45° map keeps the area outside (within rounding).
    let rot = Affine::from_placement(Point::new(0, 0), 45.0, false, 1.0);
    let mut out = Vec::new();
    placed_outside(&Shape::Box(plate), &rot, &region, &mut out).expect("ok");
    assert!(out.iter().all(|s| matches!(s, Shape::Polygon(_))));
}

#[test]
fn clear_shapes_are_kept_whole() {
    let region = BBox::from_corners(Point::new(10, 10), Point::new(20, 30));
    let b = BBox::from_corners(Point::new(20, 0), Point::new(25, 40));
    let mut out = Vec::new();
    placed_outside(&Shape::Box(b), &Affine::IDENTITY, &region, &mut out).expect("ok");
    assert_eq!(out, vec![Shape::Box(b)]);
}
