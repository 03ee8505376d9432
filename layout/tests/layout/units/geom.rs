//! Unit tests of `reticle_layout::geom`: rectangles.

use reticle_layout::geom::*;

#[test]
fn rect_area_and_bbox() {
    let b = BBox::from_corners(Point::new(10, 20), Point::new(0, 0));
    let p = Polygon::rect(b);
    assert_eq!(p.signed_area2(), 2 * 10 * 20);
    assert_eq!(p.bbox(), Some(b));
}
