//! Unit tests of `reticle_layout::transform`: placements, rounding, composition, overflow.

use reticle_layout::geom::Point;
use reticle_layout::transform::*;

#[test]
fn manhattan_placements_are_exact() {
    let r90 = Affine::from_placement(Point::new(100, 0), 90.0, false, 1.0);
    assert!(r90.is_integral());
    assert_eq!(r90.apply(Point::new(10, 2)), Ok(Point::new(98, 10)));
    let mirror = Affine::from_placement(Point::new(0, 0), 0.0, true, 1.0);
    assert_eq!(mirror.apply(Point::new(3, 4)), Ok(Point::new(3, -4)));
    // mirror then rotate 90: (x, y) -> (x, -y) -> (y, x)
    let mr = Affine::from_placement(Point::new(0, 0), 90.0, true, 1.0);
    assert_eq!(mr.apply(Point::new(3, 4)), Ok(Point::new(4, 3)));
    let big = Affine::from_placement(Point::new(0, 0), -270.0, false, 1.0);
    let p = Point::new(4_000_000_000_000_000, 1);
    assert_eq!(big.apply(p), Ok(Point::new(-1, 4_000_000_000_000_000)));
}

#[test]
fn arbitrary_angle_rounds_to_nearest() {
    let r45 = Affine::from_placement(Point::new(0, 0), 45.0, false, 1.0);
    assert!(!r45.is_integral());
    // (100, 0) rotated 45°: (70.71, 70.71) -> (71, 71)
    assert_eq!(r45.apply(Point::new(100, 0)), Ok(Point::new(71, 71)));
    let mag = Affine::from_placement(Point::new(1, 1), 0.0, false, 0.5);
    // (2.5, -0.5) rounds half away from zero, like KLayout.
    assert_eq!(mag.apply(Point::new(3, -3)), Ok(Point::new(3, -1)));
}

#[test]
fn composition_order() {
    let outer = Affine::from_placement(Point::new(10, 0), 0.0, false, 1.0);
    let inner = Affine::from_placement(Point::new(0, 0), 90.0, false, 2.0);
    let c = outer.then_inner(&inner);
    // inner: (1,0) -> (0,2); outer: -> (10,2)
    assert_eq!(c.apply(Point::new(1, 0)), Ok(Point::new(10, 2)));
}

#[test]
fn apply_all_matches_apply() {
    let pts = [Point::new(3, -7), Point::new(-100, 42), Point::new(0, 0)];
    for m in [
        Affine::from_placement(Point::new(5, 9), 270.0, true, 3.0),
        Affine::from_placement(Point::new(5, 9), 33.0, false, 0.7),
    ] {
        let one: Vec<Point> = pts.iter().map(|&p| m.apply(p).expect("in range")).collect();
        assert_eq!(m.apply_all(pts.iter().copied()), Ok(one));
    }
}

#[test]
fn inverse_undoes_the_map() {
    let m = Affine::from_placement(Point::new(7, -3), 30.0, true, 2.5);
    let inv = m.inverse().expect("invertible");
    let (x, y) = m.apply_f64(11.0, 5.0);
    let (bx, by) = inv.apply_f64(x, y);
    assert!((bx - 11.0).abs() < 1e-9 && (by - 5.0).abs() < 1e-9);
    let singular = Affine::from_placement(Point::new(0, 0), 0.0, false, 0.0);
    assert_eq!(singular.inverse(), None);
}

#[test]
fn overflow_is_an_error() {
    let m = Affine::from_placement(Point::new(0, 0), 0.0, false, 1e10);
    assert_eq!(m.apply(Point::new(1 << 40, 0)), Err(CoordinateOverflow));
    assert_eq!(to_coord_f64(f64::NAN), Err(CoordinateOverflow));
}
