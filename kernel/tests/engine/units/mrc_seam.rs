//! Unit tests of snapping a window's traced edges to the drawn context (`reticle_kernel::mrc::seam`).

use reticle_kernel::mrc::seam::snap_to_context;
use reticle_layout::{Point, Polygon};

fn rect(l: i64, b: i64, r: i64, t: i64) -> Polygon {
    Polygon::new(vec![
        Point::new(l, b),
        Point::new(r, b),
        Point::new(r, t),
        Point::new(l, t),
    ])
}

#[test]
fn a_traced_line_meets_the_drawn_line_it_continues_without_a_step() {
    // Window 0..1000 × 0..1000 dbu, pixels of 20 dbu; a drawn line 203..570 below it,
    // traced inside as 200..560 (the pixel lattice; 570 is exactly half a pixel from
    // 560, where the coverage threshold of ½ leaves the traced edge).
    let context = [rect(203, -500, 570, 0)];
    let mut window = vec![rect(200, 0, 560, 300)];
    snap_to_context(&mut window, &context, (0, 0, 1000, 1000), 20.0);
    assert_eq!(window[0], rect(203, 0, 570, 300));
}

#[test]
fn an_edge_a_pixel_or_more_away_or_off_the_side_is_kept() {
    let context = [rect(230, -500, 567, 0)];
    let mut window = vec![rect(200, 0, 560, 300), rect(600, 100, 700, 300)];
    let before = window.clone();
    snap_to_context(&mut window, &context, (0, 0, 1000, 1000), 20.0);
    // 200 vs 230: more than half a pixel; 560 vs 567 moves; the second polygon does
    // not touch the side.
    assert_eq!(window[0], rect(200, 0, 567, 300));
    assert_eq!(window[1], before[1]);
}
