//! Unit tests of the metrics: EPE search, checkpoints, L2 and PVB (`reticle_kernel::metrics`).

use reticle_kernel::Grid;
use reticle_kernel::metrics::{
    Checkpoint, EpeConfig, checkpoints, epe, epe_at, l2, pvb, sample_bilinear,
};
use reticle_kernel::raster::PixelFrame;
use reticle_layout::{BBox, Point, Polygon};

/// The exhaustive scan `epe_at` was before D208.
fn epe_by_scan(
    img: &Grid<f32>,
    frame: &PixelFrame,
    c: &Checkpoint,
    level: f64,
    search_nm: f64,
) -> Option<f64> {
    let step = frame.pixel_nm / 4.0;
    let steps = (search_nm / step).ceil() as i64;
    let val = |d: f64| sample_bilinear(img, frame, c.x + d * c.nx, c.y + d * c.ny) - level;
    let mut best: Option<f64> = None;
    let mut prev = (-(steps as f64) * step, val(-(steps as f64) * step));
    for i in (-steps + 1)..=steps {
        let d = i as f64 * step;
        let v = val(d);
        if (prev.1 > 0.0) != (v > 0.0) {
            let t = prev.1 / (prev.1 - v);
            let z = prev.0 + t * (d - prev.0);
            if best.is_none_or(|b| z.abs() < b.abs()) {
                best = Some(z);
            }
        }
        prev = (d, v);
    }
    best
}

#[test]
fn the_outward_search_finds_the_scan_s_crossing_bit_for_bit() {
    let mut state = 11u64;
    let mut unit = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    // Smooth random images (sums of a few waves) with many crossings, some images with
    // plateaus exactly at the level (ties and zero-width crossings), at 1 and 4 nm.
    for (pixel_nm, n) in [(1.0, 160), (4.0, 48), (1.5, 100)] {
        let f = PixelFrame {
            left_nm: 0.0,
            bottom_nm: 0.0,
            pixel_nm,
            width: n,
            height: n,
        };
        for image in 0..6 {
            let waves: Vec<[f64; 4]> = (0..4)
                .map(|_| [unit() * 0.2, unit() * 0.2, unit() * 6.3, unit()])
                .collect();
            let data = (0..n * n)
                .map(|k| {
                    let (x, y) = ((k % n) as f64, (k / n) as f64);
                    let v: f64 = waves
                        .iter()
                        .map(|w| w[3] * (w[0] * x + w[1] * y + w[2]).sin())
                        .sum();
                    let v = if image == 5 {
                        (v * 2.0).round() / 2.0
                    } else {
                        v
                    };
                    v as f32
                })
                .collect();
            let img = Grid {
                width: n,
                height: n,
                data,
            };
            let side = n as f64 * pixel_nm;
            for _ in 0..300 {
                let a = unit() * std::f64::consts::TAU;
                let c = Checkpoint {
                    x: unit() * side,
                    y: unit() * side,
                    nx: a.cos(),
                    ny: a.sin(),
                };
                for level in [0.0, 0.5, 0.25] {
                    let fast = epe_at(&img, &f, &c, level, 60.0);
                    let scan = epe_by_scan(&img, &f, &c, level, 60.0);
                    assert_eq!(
                        fast.map(f64::to_bits),
                        scan.map(f64::to_bits),
                        "{fast:?} {scan:?} at {c:?}, level {level}, {pixel_nm} nm"
                    );
                }
            }
        }
    }
}

fn frame(n: usize) -> PixelFrame {
    PixelFrame {
        left_nm: 0.0,
        bottom_nm: 0.0,
        pixel_nm: 1.0,
        width: n,
        height: n,
    }
}

#[test]
fn checkpoints_every_40nm_with_outward_normals() {
    let sq = Polygon::rect(BBox::from_corners(Point::new(0, 0), Point::new(120, 40)));
    let cps = checkpoints(std::slice::from_ref(&sq), 40.0);
    assert_eq!(cps.len(), 3 + 1 + 3 + 1);
    assert_eq!(
        (cps[0].x, cps[0].y, cps[0].nx, cps[0].ny),
        (20.0, 0.0, 0.0, -1.0)
    );
    let mut cw = sq;
    cw.points.reverse();
    assert!(
        checkpoints(&[cw], 40.0)
            .iter()
            .any(|c| c.x == 20.0 && c.y == 0.0 && c.ny == -1.0)
    );
}

#[test]
fn epe_of_a_shifted_print() {
    // Target 40..160 square; print grown by 10 nm on every side; intensity ramps.
    let n = 200;
    let target = Polygon::rect(BBox::from_corners(Point::new(40, 40), Point::new(160, 160)));
    let grown = |g: f64| {
        let mut img = Grid::filled(n, n, 0.0f32);
        for y in 0..n {
            for x in 0..n {
                let (cx, cy) = (x as f64 + 0.5, y as f64 + 0.5);
                // Signed distance to the grown square (positive inside), clamped ramp.
                let d = (cx - (40.0 - g))
                    .min((160.0 + g) - cx)
                    .min(cy - (40.0 - g))
                    .min((160.0 + g) - cy);
                *img.at_mut(x, y) = (0.5 + d / 20.0).clamp(0.0, 1.0) as f32;
            }
        }
        img
    };
    let f = frame(n);
    for (g, violations) in [(10.0, 0usize), (20.0, 12)] {
        let img = grown(g);
        let printed = Grid {
            width: n,
            height: n,
            data: img.data.iter().map(|&v| u8::from(v > 0.5)).collect(),
        };
        let r = epe(
            std::slice::from_ref(&target),
            &printed,
            &img,
            0.5,
            &f,
            &EpeConfig::ICCAD2013,
        );
        assert_eq!(r.checkpoints, 12);
        assert_eq!(r.violations, violations, "grow {g}");
        for e in &r.epe_nm {
            let e = e.expect("edge found");
            assert!((e - g).abs() < 0.05, "epe {e} for grow {g}");
        }
    }
    let pa = Grid {
        width: 2,
        height: 1,
        data: vec![1u8, 0],
    };
    let pb = Grid {
        width: 2,
        height: 1,
        data: vec![1u8, 1],
    };
    assert_eq!((l2(&pa, &pb), pvb(&pa, &pa)), (1, 0));
}
