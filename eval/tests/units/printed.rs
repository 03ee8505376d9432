//! Unit tests of `reticle_eval::printed`: contour simplification.

use reticle_eval::printed::*;

#[test]
fn jogs_below_the_tolerance_go_collinear_points_go_corners_stay() {
    // A 10 × 4 rectangle traced with a half-dbu jog on its bottom edge and extra
    // points along its edges.
    let ring = [
        (0.0, 0.0),
        (3.0, 0.0),
        (3.0, 0.5),
        (6.0, 0.5),
        (6.0, 0.0),
        (10.0, 0.0),
        (10.0, 2.0),
        (10.0, 4.0),
        (5.0, 4.0),
        (0.0, 4.0),
        (0.0, 2.0),
    ];
    let simplified = simplify_closed(&ring, SIMPLIFY_DBU);
    assert_eq!(
        simplified,
        vec![(0.0, 0.0), (10.0, 0.0), (10.0, 4.0), (0.0, 4.0)]
    );
}

#[test]
fn a_jog_over_the_tolerance_stays() {
    let ring = [
        (0.0, 0.0),
        (3.0, 0.0),
        (3.0, 2.0),
        (6.0, 2.0),
        (6.0, 0.0),
        (10.0, 0.0),
        (10.0, 4.0),
        (0.0, 4.0),
    ];
    let simplified = simplify_closed(&ring, SIMPLIFY_DBU);
    assert!(simplified.contains(&(3.0, 2.0)) && simplified.contains(&(6.0, 2.0)));
}

#[test]
fn short_rings_are_kept_as_they_are() {
    let tri = [(0.0, 0.0), (1.0, 0.0), (0.0, 1.0)];
    assert_eq!(simplify_closed(&tri, 10.0), tri.to_vec());
}
