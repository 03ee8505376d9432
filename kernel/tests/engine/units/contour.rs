//! Unit tests of contour extraction (`reticle_kernel::contour`).

use reticle_kernel::Grid;
use reticle_kernel::contour::{Contour, contours};
use reticle_kernel::raster::PixelFrame;

fn frame(n: usize) -> PixelFrame {
    PixelFrame {
        left_nm: 0.0,
        bottom_nm: 0.0,
        pixel_nm: 2.0,
        width: n,
        height: n,
    }
}

#[test]
fn disc_contour_is_round_and_ccw() {
    let n = 64;
    let mut img = Grid::filled(n, n, 0.0f32);
    let (cx, cy, r) = (64.0, 60.0, 30.0); // nm
    for y in 0..n {
        for x in 0..n {
            let (px, py) = ((x as f64 + 0.5) * 2.0, (y as f64 + 0.5) * 2.0);
            *img.at_mut(x, y) = (r - (px - cx).hypot(py - cy)) as f32; // signed distance
        }
    }
    let cs = contours(&img, 0.0, &frame(n));
    assert_eq!(cs.len(), 1);
    let c = &cs[0];
    for &(x, y) in &c.points {
        assert!(((x - cx).hypot(y - cy) - r).abs() < 0.1, "({x},{y})");
    }
    let area = c.signed_area();
    assert!(
        area > 0.0 && (area - std::f64::consts::PI * r * r).abs() / area < 0.01,
        "{area}"
    );
}

#[test]
fn ring_gives_outer_and_hole_and_border_closes() {
    let n = 20;
    let mut img = Grid::filled(n, n, 0.0f32);
    for y in 0..n {
        for x in 0..n {
            let ring = (3..17).contains(&x)
                && (3..17).contains(&y)
                && !((7..13).contains(&x) && (7..13).contains(&y));
            *img.at_mut(x, y) = if ring { 1.0 } else { 0.0 };
        }
    }
    let cs = contours(&img, 0.5, &frame(n));
    assert_eq!(cs.len(), 2);
    let mut areas: Vec<f64> = cs.iter().map(Contour::signed_area).collect();
    areas.sort_by(f64::total_cmp);
    assert!(areas[0] < 0.0 && areas[1] > 0.0);
    // A full-frame print closes along the clip border; the four frame corners are
    // chamfered by half a pixel (4 × 0.5 × 1 nm × 1 nm here).
    let full = Grid::filled(n, n, 1.0f32);
    let cs = contours(&full, 0.5, &frame(n));
    assert_eq!(cs.len(), 1);
    assert!(
        (cs[0].signed_area() - (40.0 * 40.0 - 2.0)).abs() < 1e-9,
        "{}",
        cs[0].signed_area()
    );
}
