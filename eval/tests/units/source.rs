//! Unit tests of `reticle_eval::source`: the window around a centre.

use reticle_eval::source::square_around;

#[test]
fn a_window_around_a_half_dbu_centre_is_square() {
    for (cx, cy) in [(248.5, 95.0), (0.5, 0.5), (-3.5, 7.25), (100.0, 100.0)] {
        let w = square_around(cx, cy, 2048.0);
        assert_eq!(w.right - w.left, 2048, "{cx},{cy}: {w:?}");
        assert_eq!(w.top - w.bottom, 2048, "{cx},{cy}: {w:?}");
        assert!((w.left as f64 + 1024.0 - cx).abs() <= 0.5);
    }
}
