//! Unit tests of `reticle_eval::optimize::mask`: strips and pixel windows.

use reticle_eval::optimize::mask::*;
use reticle_kernel::raster::PixelFrame;
use reticle_layout::{BBox, Point};

#[test]
fn the_box_minus_a_hole_is_four_strips() {
    let w = BBox::from_corners(Point::new(0, 0), Point::new(10, 10));
    let h = BBox::from_corners(Point::new(2, 3), Point::new(5, 7));
    let strips = boxes_around(w, h);
    let area: i64 = strips.iter().map(|b| b.width() * b.height()).sum();
    assert_eq!(area, 100 - 12);
    assert_eq!(boxes_around(w, w).len(), 0);
}

#[test]
fn the_pixel_window_covers_partly_inside_pixels_and_stays_on_the_grid() {
    let frame = PixelFrame {
        left_nm: 0.0,
        bottom_nm: 0.0,
        pixel_nm: 4.0,
        width: 10,
        height: 10,
    };
    assert_eq!(
        pixel_window(&frame, 1.0, [5.0, 0.0, 13.0, 8.0]),
        (1, 0, 4, 2)
    );
    assert_eq!(
        pixel_window(&frame, 1.0, [-50.0, -50.0, 500.0, 500.0]),
        (0, 0, 10, 10)
    );
}
