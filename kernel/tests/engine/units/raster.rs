//! Unit tests of the rasterizer (`reticle_kernel::raster`).

use reticle_kernel::Grid;
use reticle_kernel::raster::{PixelFrame, RasterError, rasterize, rasterize_with_target};
use reticle_layout::{BBox, Point, Polygon};

fn sum(g: &Grid<f32>) -> f64 {
    g.data.iter().map(|&v| f64::from(v)).sum()
}

// The rasterizer before the scanline (D195): every edge accumulated into a whole-frame
// buffer, then the running sums. The scanline must give the same bits.
fn whole_frame(polygons: &[Polygon], frame: &PixelFrame) -> Grid<f32> {
    let (w, h) = (frame.width, frame.height);
    // One spare column so a segment on the right border has somewhere to write.
    let stride = w + 2;
    let mut acc = vec![0.0f64; stride * h];
    for poly in polygons {
        let n = poly.points.len();
        if n < 3 {
            continue;
        }
        let sign = if poly.signed_area2() < 0 { -1.0 } else { 1.0 };
        let to_px = |i: usize| {
            let p = poly.points[i % n];
            (
                (p.x as f64 - frame.left_nm) / frame.pixel_nm,
                (p.y as f64 - frame.bottom_nm) / frame.pixel_nm,
            )
        };
        for i in 0..n {
            let (a, b) = (to_px(i), to_px(i + 1));
            clipped_edge(&mut acc, stride, w, h, a, b, sign);
        }
    }
    let mut data = vec![0.0f32; w * h];
    for y in 0..h {
        let mut run = 0.0f64;
        for x in 0..w {
            run += acc[y * stride + x];
            data[y * w + x] = run.abs().min(1.0) as f32;
        }
    }
    Grid {
        width: w,
        height: h,
        data,
    }
}

/// Splits an edge where it crosses `x = 0` and `x = w`, clamps the pieces into
/// `[0, w]` (exact: left of the window an edge covers every pixel to its right, right
/// of it none) and accumulates each piece.
fn clipped_edge(
    acc: &mut [f64],
    stride: usize,
    w: usize,
    h: usize,
    a: (f64, f64),
    b: (f64, f64),
    sign: f64,
) {
    let wf = w as f64;
    let mut ts = vec![0.0, 1.0];
    for xb in [0.0, wf] {
        if (a.0 - xb) * (b.0 - xb) < 0.0 {
            ts.push((xb - a.0) / (b.0 - a.0));
        }
    }
    ts.sort_by(f64::total_cmp);
    let at = |t: f64| (a.0 + (b.0 - a.0) * t, a.1 + (b.1 - a.1) * t);
    for pair in ts.windows(2) {
        let (p, q) = (at(pair[0]), at(pair[1]));
        let p = (p.0.clamp(0.0, wf), p.1);
        let q = (q.0.clamp(0.0, wf), q.1);
        accumulate(acc, stride, h, p, q, sign);
    }
}

/// Adds the signed area to the right of segment `p → q` within each pixel (font-rs
/// accumulation); the running row sum then yields the coverage.
fn accumulate(acc: &mut [f64], stride: usize, h: usize, p: (f64, f64), q: (f64, f64), sign: f64) {
    if p.1 == q.1 {
        return;
    }
    // Upward edges of a counter-clockwise polygon are on its right side.
    let (dir, p0, p1) = if p.1 < q.1 {
        (-sign, p, q)
    } else {
        (sign, q, p)
    };
    let dxdy = (p1.0 - p0.0) / (p1.1 - p0.1);
    let y_start = p0.1.max(0.0);
    let y_end = p1.1.min(h as f64);
    if y_start >= y_end {
        return;
    }
    let mut x = p0.0 + (y_start - p0.1) * dxdy;
    let mut y = y_start.floor() as usize;
    while (y as f64) < y_end {
        let row = &mut acc[y * stride..(y + 1) * stride];
        let ya = (y as f64).max(y_start);
        let yb = ((y + 1) as f64).min(y_end);
        let dy = yb - ya;
        let xnext = x + dxdy * dy;
        let d = dy * dir;
        let (x0, x1) = if x < xnext { (x, xnext) } else { (xnext, x) };
        let x0f = x0.floor();
        let x0i = x0f as usize;
        let x1c = x1.ceil();
        let x1i = (x1c as usize).max(x0i + 1);
        if x1i <= x0i + 1 {
            // The segment stays within one column.
            let xm = 0.5 * (x + xnext) - x0f;
            row[x0i] += d - d * xm;
            row[x0i + 1] += d * xm;
        } else {
            let s = 1.0 / (x1 - x0);
            let x0r = x0 - x0f;
            let a0 = 0.5 * s * (1.0 - x0r) * (1.0 - x0r);
            let x1r = x1 - x1c + 1.0;
            let am = 0.5 * s * x1r * x1r;
            row[x0i] += d * a0;
            if x1i == x0i + 2 {
                row[x0i + 1] += d * (1.0 - a0 - am);
            } else {
                let a1 = s * (1.5 - x0r);
                row[x0i + 1] += d * (a1 - a0);
                for cell in &mut row[x0i + 2..x1i - 1] {
                    *cell += d * s;
                }
                let a2 = a1 + (x1i - x0i - 3) as f64 * s;
                row[x1i - 1] += d * (1.0 - a2 - am);
            }
            row[x1i] += d * am;
        }
        x = xnext;
        y += 1;
    }
}

#[test]
fn the_scanline_equals_whole_frame_accumulation_bit_for_bit() {
    let mut seed = 11u64;
    let mut rnd = |m: i64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((seed >> 33) % m as u64) as i64
    };
    let mut polygons = Vec::new();
    for i in 0..120 {
        let (x, y) = (rnd(260) - 30, rnd(260) - 30);
        let (a, b) = (7 + rnd(60), 5 + rnd(90));
        let mut p = if i % 3 == 0 {
            Polygon::new(vec![
                Point::new(x, y),
                Point::new(x + a, y + rnd(9)),
                Point::new(x + rnd(a), y + b),
            ])
        } else {
            Polygon::rect(BBox::from_corners(
                Point::new(x, y),
                Point::new(x + a, y + b),
            ))
        };
        if i % 5 == 0 {
            p.points.reverse();
        }
        polygons.push(p);
    }
    let window = BBox::from_corners(Point::new(3, -2), Point::new(203, 198));
    for pixel in [0.7, 1.0, 2.5, 4.0] {
        let frame = PixelFrame::for_window(window, pixel).unwrap();
        let old = whole_frame(&polygons, &frame);
        let stale = vec![7.0f32; 5];
        let (new, target) = rasterize_with_target(&polygons, &frame, stale, vec![9; 3]);
        assert_eq!((new.width, new.height), (old.width, old.height));
        for (k, (a, b)) in old.data.iter().zip(&new.data).enumerate() {
            assert_eq!(a.to_bits(), b.to_bits(), "pixel {k} at {pixel} nm");
            assert_eq!(target.data[k], u8::from(*a >= 0.5));
        }
    }
}

#[test]
fn rectangle_at_one_nm_is_binary() {
    let r = Polygon::rect(BBox::from_corners(Point::new(3, 2), Point::new(7, 5)));
    let win = BBox::from_corners(Point::new(0, 0), Point::new(10, 10));
    let (g, _) = rasterize(&[r], win, 1.0).unwrap();
    for y in 0..10 {
        for x in 0..10 {
            let inside = (3..7).contains(&x) && (2..5).contains(&y);
            assert_eq!(*g.at(x, y), if inside { 1.0 } else { 0.0 }, "({x},{y})");
        }
    }
}

#[test]
fn fractional_pixels_and_orientation() {
    // Clockwise rectangle, pixel 4 nm: 3..9 × 1..6 covers partial pixels.
    let mut r = Polygon::rect(BBox::from_corners(Point::new(3, 1), Point::new(9, 6)));
    r.points.reverse();
    let win = BBox::from_corners(Point::new(0, 0), Point::new(12, 8));
    let (g, _) = rasterize(&[r], win, 4.0).unwrap();
    assert_eq!((g.width, g.height), (3, 2));
    // Column 0 [0,4): x∈[3,4) → 1/4; row 0 [0,4): y∈[1,4) → 3/4.
    assert!((g.at(0, 0) - 0.25 * 0.75).abs() < 1e-6);
    assert!((g.at(1, 0) - 1.0 * 0.75).abs() < 1e-6);
    assert!((g.at(2, 0) - 0.25 * 0.75).abs() < 1e-6);
    assert!((g.at(1, 1) - 1.0 * 0.5).abs() < 1e-6);
    assert!((sum(&g) * 16.0 - 30.0).abs() < 1e-6);
}

#[test]
fn triangle_area_is_exact_and_clipped() {
    // A triangle half outside the window on the left and the top.
    let t = Polygon::new(vec![
        Point::new(-7, 1),
        Point::new(13, 3),
        Point::new(2, 19),
    ]);
    let win = BBox::from_corners(Point::new(0, 0), Point::new(16, 16));
    let (g, _) = rasterize(std::slice::from_ref(&t), win, 1.5).unwrap();
    // Reference: the exact clipped area by brute-force fine sampling of the window.
    let fine = 2000;
    let mut inside = 0u64;
    let pts: Vec<(f64, f64)> = t.points.iter().map(|p| (p.x as f64, p.y as f64)).collect();
    let w = g.width as f64 * 1.5;
    for i in 0..fine {
        for j in 0..fine {
            let x = (i as f64 + 0.5) * w / fine as f64;
            let y = (j as f64 + 0.5) * w / fine as f64;
            let mut s = [0.0; 3];
            for k in 0..3 {
                let (a, b) = (pts[k], pts[(k + 1) % 3]);
                s[k] = (b.0 - a.0) * (y - a.1) - (b.1 - a.1) * (x - a.0);
            }
            if s.iter().all(|&v| v > 0.0) || s.iter().all(|&v| v < 0.0) {
                inside += 1;
            }
        }
    }
    let expected = inside as f64 / (fine * fine) as f64 * w * w;
    let got = sum(&g) * 1.5 * 1.5;
    assert!((got - expected).abs() < 0.05, "{got} vs {expected}");
    assert!(g.data.iter().all(|&v| (0.0..=1.0).contains(&v)));
}

#[test]
fn touching_rectangles_fill_exactly() {
    let a = Polygon::rect(BBox::from_corners(Point::new(0, 0), Point::new(5, 10)));
    let b = Polygon::rect(BBox::from_corners(Point::new(5, 0), Point::new(10, 10)));
    let win = BBox::from_corners(Point::new(0, 0), Point::new(10, 10));
    let (g, _) = rasterize(&[a, b], win, 3.0).unwrap();
    // 4×4 pixels of 3 nm over a 10×10 nm square: column 3 / row 3 cover 1 nm.
    assert!((g.at(1, 1) - 1.0).abs() < 1e-6);
    assert!((g.at(3, 1) - 1.0 / 3.0).abs() < 1e-6);
    assert!((g.at(3, 3) - 1.0 / 9.0).abs() < 1e-6);
}

#[test]
fn bad_requests_are_errors() {
    let win = BBox::from_corners(Point::new(0, 0), Point::new(10, 10));
    assert!(matches!(
        rasterize(&[], win, 0.0),
        Err(RasterError::BadPixel(_))
    ));
    assert!(matches!(
        rasterize(&[], win, f64::NAN),
        Err(RasterError::BadPixel(_))
    ));
    let empty = BBox::from_corners(Point::new(0, 0), Point::new(0, 10));
    assert!(matches!(
        rasterize(&[], empty, 1.0),
        Err(RasterError::BadWindow { .. })
    ));
    assert!(matches!(
        rasterize(&[], win, 1e-9),
        Err(RasterError::BadWindow { .. })
    ));
}
