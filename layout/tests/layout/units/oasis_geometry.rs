//! Unit tests of `reticle_layout::oasis::geometry`: trapezoids.

use reticle_layout::oasis::geometry::*;

#[test]
fn trapezoid_deltas() {
    // Checked against KLayout: w=20 h=8 da=3 db=-4 -> (0,0;3,8;16,8;20,0)
    assert_eq!(
        trapezoid(false, 20, 8, 3, -4),
        [(0, 0), (20, 0), (16, 8), (3, 8)]
    );
    assert_eq!(
        trapezoid(false, 20, 8, -3, 4),
        [(3, 0), (16, 0), (20, 8), (0, 8)]
    );
    // vertical w=8 h=20 da=3 db=-4 -> (8,0;0,3;0,16;8,20)
    assert_eq!(
        trapezoid(true, 8, 20, 3, -4),
        [(0, 3), (8, 0), (8, 20), (0, 16)]
    );
}

#[test]
fn ctrapezoid_table_is_complete() {
    for k in 0..=25 {
        assert!(ctrapezoid(k, 20, 8).is_some(), "{k}");
    }
    assert_eq!(ctrapezoid(26, 1, 1), None);
}
