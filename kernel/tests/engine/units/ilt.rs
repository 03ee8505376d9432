//! Tests of the ILT: the adjoint against finite differences, the coarse model against
//! full-resolution imaging, windows, checkpoints (`reticle_kernel::ilt`).

use std::sync::Arc;

use num_complex::Complex32;

use reticle_kernel::ilt::problem::{self, Problem};
use reticle_kernel::ilt::{
    EdgeWeight, IltParams, MaskPlan, legal, mobility, optimize_legal, optimize_mask,
    optimize_window, raster_checkpoints,
};
use reticle_kernel::imaging::LithoOutput;
use reticle_kernel::metrics::Checkpoint;
use reticle_kernel::mrc::PixelBox;
use reticle_kernel::{CancelToken, Grid, ImagingError, KernelSet, ModelKernels};

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Random low-pass kernels of side 5 whose open-frame intensity is 1.
fn kernels(count: usize, seed: u64, n: usize) -> Arc<KernelSet> {
    let size = 5;
    let mut rng = Rng(seed);
    let mut ks = Vec::new();
    for _ in 0..count {
        for r in 0..size {
            for c in 0..size {
                let d = ((r as f64 - 2.0).powi(2) + (c as f64 - 2.0).powi(2)).sqrt();
                let amp = (1.0 - d / 3.2).max(0.0);
                ks.push(Complex32::new(
                    (amp * (rng.unit() + 0.3)) as f32,
                    (amp * (rng.unit() - 0.5)) as f32,
                ));
            }
        }
    }
    let mut scales: Vec<f32> = (0..count).map(|k| 1.0 / (k as f32 + 1.0)).collect();
    let open: f32 = (0..count)
        .map(|k| scales[k] * ks[k * 25 + 12].norm_sqr())
        .sum();
    for s in &mut scales {
        *s /= open;
    }
    Arc::new(KernelSet::new(size, ks, scales, n as f64).expect("valid kernels"))
}

fn model(n: usize) -> ModelKernels {
    ModelKernels {
        focus: kernels(3, 1, n),
        defocus: Some(kernels(3, 2, n)),
    }
}

/// Two bars and a square on an `n × n` grid.
fn target(n: usize) -> Grid<u8> {
    let mut t = Grid::filled(n, n, 0u8);
    let s = n / 16;
    for y in 0..n {
        for x in 0..n {
            let bar = (3 * s..5 * s).contains(&x) && (2 * s..13 * s).contains(&y);
            let bar2 = (7 * s..9 * s).contains(&x) && (2 * s..13 * s).contains(&y);
            let sq = (11 * s..14 * s).contains(&x) && (5 * s..9 * s).contains(&y);
            *t.at_mut(x, y) = u8::from(bar || bar2 || sq);
        }
    }
    t
}

fn grad_check(n: usize, ds: u32, window: Option<&Grid<u8>>, edge: Option<EdgeWeight>) {
    let t = target(n);
    let params = IltParams {
        downsample: ds,
        weight_pvb: 0.7,
        weight_band: 0.4,
        edge,
        ..IltParams::default()
    };
    let cancel = CancelToken::new();
    let pb = Problem::new(&t, window, &model(n), &params, &cancel).expect("problem");
    assert_eq!(pb.ds, ds as usize);
    let mut rng = Rng(7);
    let p: Vec<f64> = pb
        .initial_latent()
        .iter()
        .map(|v| 0.4 * v + 0.6 * (rng.unit() - 0.5))
        .collect();
    let beta = 3.0;
    let mut g = vec![0.0; p.len()];
    let l0 = pb.loss_grad(&p, beta, Some(&mut g), &cancel).expect("loss");
    assert!(l0 > 0.0);
    let gmax = g.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    assert!(gmax > 0.0);
    let eps = 1e-5;
    let mut checked = 0;
    for i in (0..p.len()).step_by(p.len() / 40 + 1) {
        let mut q = p.clone();
        q[i] += eps;
        let lp = pb.loss_grad(&q, beta, None, &cancel).expect("loss");
        q[i] -= 2.0 * eps;
        let lm = pb.loss_grad(&q, beta, None, &cancel).expect("loss");
        let fd = (lp - lm) / (2.0 * eps);
        assert!(
            (fd - g[i]).abs() <= 1e-6 * gmax + 1e-6 * fd.abs(),
            "pixel {i}: adjoint {} vs finite difference {fd} (max |g| {gmax})",
            g[i]
        );
        if !pb.active[i] {
            assert_eq!(g[i], 0.0);
        }
        checked += 1;
    }
    assert!(checked >= 30);
}

#[test]
fn gradient_matches_finite_differences() {
    grad_check(32, 2, None, None);
    grad_check(48, 3, None, None);
    grad_check(24, 1, None, None);
}

#[test]
fn gradient_matches_finite_differences_in_a_window() {
    let n = 32;
    let mut w = Grid::filled(n, n, 0u8);
    for y in 5..27 {
        for x in 3..20 {
            *w.at_mut(x, y) = 1;
        }
    }
    grad_check(n, 2, Some(&w), None);
}

#[test]
fn gradient_matches_finite_differences_with_the_edges_weighed_more() {
    let edge = EdgeWeight {
        extra: 2.0,
        band_nm: 2.0,
    };
    grad_check(32, 2, None, Some(edge));
}

#[test]
fn edge_weights_cover_the_band_on_both_sides_of_an_edge() {
    // 8 × 8 blocks, the left half set.
    let nc = 8;
    let t: Vec<f64> = (0..nc * nc)
        .map(|i| if i % nc < 4 { 1.0 } else { 0.0 })
        .collect();
    for (r, band) in [(1, 3..5), (2, 2..6)] {
        let w = problem::edge_weights(&t, nc, r, 2.0);
        for (i, &v) in w.iter().enumerate() {
            let want = if band.contains(&(i % nc)) { 3.0 } else { 1.0 };
            assert_eq!(v, want, "radius {r}, block {i}");
        }
    }
}

#[test]
fn coarse_model_equals_full_resolution_imaging_at_block_centres() {
    // Odd block side: the block centre is a full-resolution pixel.
    let (n, ds) = (48, 3);
    let t = target(n);
    let m = model(n);
    let params = IltParams {
        downsample: ds,
        ..IltParams::default()
    };
    let cancel = CancelToken::new();
    let pb = Problem::new(&t, None, &m, &params, &cancel).expect("problem");
    let mut rng = Rng(3);
    let p: Vec<f64> = (0..pb.nc * pb.nc).map(|_| rng.unit() - 0.5).collect();
    let mc = pb.mask(&p, 4.0);
    let fine = Grid {
        width: n,
        height: n,
        data: (0..n * n)
            .map(|i| mc[(i / n / ds as usize) * pb.nc + (i % n) / ds as usize] as f32)
            .collect(),
    };
    for (set, ks) in [(0, &m.focus), (1, m.defocus.as_ref().expect("defocus"))] {
        let (_, coarse) = pb
            .image(
                &pb.sets[set],
                &pb.band(&mc, &cancel).expect("band"),
                &cancel,
            )
            .expect("image");
        let full = reticle_kernel::bandlimited::aerial(&fine, ks, 1.0, &cancel).expect("aerial");
        let mut worst = 0.0f64;
        for y in 0..pb.nc {
            for x in 0..pb.nc {
                let f = f64::from(*full.at(x * 3 + 1, y * 3 + 1));
                worst = worst.max((f - coarse[y * pb.nc + x]).abs());
            }
        }
        assert!(worst < 1e-5, "set {set}: max difference {worst}");
    }
}

#[test]
fn optimisation_lowers_the_loss_and_reports_progress() {
    let n = 64;
    let t = target(n);
    // Pinned settings (not the defaults tuned for the ICCAD-2013 model).
    let params = IltParams {
        iterations: 25,
        downsample: 2,
        step_size: 0.1,
        weight_pvb: 1.0,
        weight_band: 0.0,
        refine_iterations: 0,
        ..IltParams::default()
    };
    let mut reports = Vec::new();
    let out = optimize_mask(&t, &model(n), &params, &CancelToken::new(), &mut |p| {
        reports.push(p);
    })
    .expect("optimize");
    assert_eq!(out.iterations_run, 25);
    assert_eq!(out.loss.len(), 25);
    let (first, last) = (out.loss[0], out.loss[24]);
    assert!(last < 0.75 * first, "loss {first} -> {last}");
    assert_eq!(reports.len(), 25);
    assert_eq!(reports[24].done, 25);
    assert_eq!(reports[24].stage, "ilt_iteration");
    assert!(out.mask.data.iter().all(|&v| v <= 1));
    assert!(
        out.after.l2 < out.before.l2,
        "{:?} -> {:?}",
        out.before,
        out.after
    );
}

#[test]
fn cancellation_stops_the_loop() {
    let n = 32;
    let cancel = CancelToken::new();
    let params = IltParams {
        iterations: 50,
        downsample: 2,
        ..IltParams::default()
    };
    let mut seen = 0;
    let c2 = cancel.clone();
    let r = optimize_mask(&target(n), &model(n), &params, &cancel, &mut |p| {
        seen = p.done;
        if p.done == 3 {
            c2.cancel();
        }
    });
    assert!(matches!(r, Err(ImagingError::Cancelled)), "{r:?}");
    assert_eq!(seen, 3);
}

#[test]
fn pixels_outside_the_window_keep_the_target() {
    let n = 64;
    let t = target(n);
    let mut w = Grid::filled(n, n, 0u8);
    // A window that does not align with the 4-pixel blocks.
    for y in 10..51 {
        for x in 2..31 {
            *w.at_mut(x, y) = 1;
        }
    }
    let params = IltParams {
        iterations: 20,
        downsample: 4,
        refine_iterations: 10,
        ..IltParams::default()
    };
    let out = optimize_window(
        &t,
        Some(&w),
        &model(n),
        &params,
        &CancelToken::new(),
        &mut |_| {},
    )
    .expect("optimize");
    let mut changed_inside = 0;
    for i in 0..n * n {
        if w.data[i] == 0 {
            assert_eq!(
                out.mask.data[i], t.data[i],
                "pixel {i} outside the window changed"
            );
        } else if out.mask.data[i] != t.data[i] {
            changed_inside += 1;
        }
    }
    assert!(changed_inside > 0, "the window was optimised");
    assert!(out.loss[19] < out.loss[0]);
    // The refinement ran on 2-pixel blocks.
    assert_eq!(
        (out.iterations_run, out.downsample, out.loss.len()),
        (30, 2, 30)
    );
    assert!(out.loss[29] < out.loss[20]);
}

#[test]
fn raster_checkpoints_match_polygon_checkpoints() {
    use reticle_layout::{BBox, Point, Polygon};
    let mut t = Grid::filled(200, 200, 0u8);
    for y in 40..80 {
        for x in 30..150 {
            *t.at_mut(x, y) = 1;
        }
    }
    let poly = Polygon::rect(BBox::from_corners(Point::new(30, 40), Point::new(150, 80)));
    let key = |c: &Checkpoint| {
        (
            (c.x * 8.0) as i64,
            (c.y * 8.0) as i64,
            c.nx as i64,
            c.ny as i64,
        )
    };
    let mut a: Vec<_> = raster_checkpoints(&t, 40.0).iter().map(key).collect();
    let mut b: Vec<_> = reticle_kernel::metrics::checkpoints(&[poly], 40.0)
        .iter()
        .map(key)
        .collect();
    a.sort_unstable();
    b.sort_unstable();
    assert_eq!(a.len(), 8);
    assert_eq!(a, b);
}

#[test]
fn mobility_is_one_in_the_box_and_falls_linearly_past_it() {
    let n = 64;
    let params = IltParams {
        downsample: 4,
        ..IltParams::default()
    };
    let problem = Problem::with_frozen(
        &target(n),
        None,
        None,
        &model(n),
        &params,
        &CancelToken::new(),
    )
    .expect("problem");
    assert_eq!(problem.ds, 4);
    // The box: pixels 16..32 both ways; the blend: 8 pixels.
    let mob = mobility(&problem, (16, 16, 32, 32), 8.0);
    let at = |bx: usize, by: usize| mob[by * problem.nc + bx];
    // Blocks 4..8 lie inside the box (centres 18, 22, 26, 30).
    for b in 4..8 {
        assert_eq!(at(b, 5), 1.0);
    }
    // Block 8's centre is 2 pixels past the box, block 9's 6, block 10's 10.
    assert!((at(8, 5) - 0.75).abs() < 1e-12, "{}", at(8, 5));
    assert!((at(9, 5) - 0.25).abs() < 1e-12, "{}", at(9, 5));
    assert_eq!(at(10, 5), 0.0);
    // A corner block: the farther of its two distances counts.
    assert!((at(8, 9) - 0.25).abs() < 1e-12, "{}", at(8, 9));
    assert_eq!(at(0, 0), 0.0);
}

#[test]
fn a_blended_window_keeps_only_its_own_pixels() {
    let n = 64;
    let t = target(n);
    // The frozen mask outside the window differs from the target: a neighbour's mask.
    let mut frozen = t.clone();
    for y in 20..28 {
        for x in 34..40 {
            *frozen.at_mut(x, y) = 1;
        }
    }
    let params = IltParams {
        iterations: 12,
        downsample: 2,
        refine_iterations: 0,
        ..IltParams::default()
    };
    let window = (8, 8, 32, 56);
    let run = |blend: Option<PixelBox>| {
        let plan = MaskPlan {
            rules: &[],
            style: reticle_kernel::mrc::MaskStyle::Manhattan,
            grid_px: 1,
            assist_features: true,
            context: &[],
            origin_dbu: (0.0, 0.0),
            pixel_dbu: 1.0,
            dbu_nm: 1.0,
            frozen: Some(&frozen),
            blend,
            epe_revert: None,
        };
        optimize_legal(
            &t,
            Some(window),
            &model(n),
            &params,
            &plan,
            &CancelToken::new(),
            &mut |_| {},
        )
        .expect("optimize")
    };
    let pinned = run(None);
    let blended = run(Some((0, 0, 44, 64)));
    let inside = |x: usize, y: usize| (8..32).contains(&x) && (8..56).contains(&y);
    let mut differs = 0;
    for y in 0..n {
        for x in 0..n {
            let (p, b) = (
                *pinned.legal.pixels.at(x, y),
                *blended.legal.pixels.at(x, y),
            );
            if inside(x, y) {
                differs += usize::from(p != b);
            } else {
                assert_eq!(
                    b,
                    *frozen.at(x, y),
                    "pixel ({x}, {y}) past the window changed"
                );
                assert_eq!(p, *frozen.at(x, y));
            }
        }
    }
    assert!(differs > 0, "the blend changed nothing inside the window");
}

/// An imaging output whose nominal print is `printed`.
fn print_of(printed: &Grid<u8>) -> LithoOutput {
    LithoOutput {
        corners: vec![reticle_kernel::imaging::CornerOutput {
            aerial: None,
            resist: None,
            printed: Some(printed.clone()),
            printed_pixels: 0,
        }],
        l2: None,
        pvb: None,
    }
}

#[test]
fn a_new_epe_violation_is_found_and_put_back_only_near_its_checkpoint() {
    let n = 64;
    let t = target(n);
    let params = IltParams::default();
    // The window holds the first bar (x 12..20, y 8..52) and the left edge of the second.
    let window = (0, 0, 32, 64);
    let new_epe = legal::NewEpe::of(&t, &print_of(&t), window, &params, 2.0).expect("before");
    assert!(new_epe.at(&print_of(&t)).expect("print").is_empty());
    assert!(
        new_epe
            .checkpoints
            .iter()
            .all(|c| c.x <= 32.0 && c.y <= 64.0),
        "a checkpoint outside the window"
    );
    // The first bar printed 4 pixels narrower on its left: its left edge's checkpoint
    // (x 12, y 30) is new; the top and bottom edges' (x 16) still hold.
    let mut thin = t.clone();
    for y in 0..n {
        for x in 12..16 {
            *thin.at_mut(x, y) = 0;
        }
    }
    let new = new_epe.at(&print_of(&thin)).expect("print");
    let at: Vec<(f64, f64)> = new
        .iter()
        .map(|&i| (new_epe.checkpoints[i].x, new_epe.checkpoints[i].y))
        .collect();
    assert_eq!(at, vec![(12.0, 30.0)]);
    // Put back within 3 pixels of it: only that square changes, to the "before" mask.
    let back = new_epe.put_back(&thin, &t, &new, 3.0);
    let mut changed = 0;
    for y in 0..n {
        for x in 0..n {
            if back.at(x, y) != thin.at(x, y) {
                assert!((9..15).contains(&x) && (27..33).contains(&y), "({x}, {y})");
                assert_eq!(back.at(x, y), t.at(x, y));
                changed += 1;
            }
        }
    }
    assert_eq!(changed, 3 * 6, "the square's pixels of the bar");
    // A checkpoint past the window's edge (x 12 of a window up to x 10) is not watched,
    // and one at its edge is put back only inside it.
    let outside =
        legal::NewEpe::of(&t, &print_of(&t), (0, 0, 10, 64), &params, 2.0).expect("before");
    assert!(outside.at(&print_of(&thin)).expect("print").is_empty());
    let at_edge =
        legal::NewEpe::of(&t, &print_of(&t), (0, 0, 13, 64), &params, 2.0).expect("before");
    let new = at_edge.at(&print_of(&thin)).expect("print");
    assert_eq!(new.len(), 1);
    let back = at_edge.put_back(&thin, &t, &new, 3.0);
    assert_ne!(back, thin, "the square inside the window was not put back");
    for y in 0..n {
        for x in 13..n {
            assert_eq!(back.at(x, y), thin.at(x, y), "({x}, {y}) past the window");
        }
    }
}
