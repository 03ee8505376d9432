//! The coarse-grid optimisation problem: the exact block-mask model, its loss and the
//! analytic adjoint (see the module docs of [`super`]), and Adam.

use num_complex::Complex64;
use rayon::prelude::*;

use crate::bandlimited::{real_band, small_2d};
use crate::fft::{self, Direction};
use crate::imaging::ImagingError;
use crate::{CancelToken, Cancelled, Grid, KernelSet, ModelKernels};

use super::{IltParams, grid_f32};

/// Adam on a flat parameter vector.
pub(super) struct Adam {
    m: Vec<f64>,
    v: Vec<f64>,
    t: i32,
}

impl Adam {
    pub(super) fn new(len: usize) -> Self {
        Self {
            m: vec![0.0; len],
            v: vec![0.0; len],
            t: 0,
        }
    }

    pub(super) fn step(&mut self, p: &mut [f64], g: &[f64], lr: f64) {
        const B1: f64 = 0.9;
        const B2: f64 = 0.999;
        self.t += 1;
        let c1 = 1.0 - B1.powi(self.t);
        let c2 = 1.0 - B2.powi(self.t);
        p.par_iter_mut()
            .zip(self.m.par_iter_mut())
            .zip(self.v.par_iter_mut())
            .zip(g.par_iter())
            .for_each(|(((p, m), v), &g)| {
                *m = B1 * *m + (1.0 - B1) * g;
                *v = B2 * *v + (1.0 - B2) * g * g;
                *p -= lr * (*m / c1) / ((*v / c2).sqrt() + 1e-12);
            });
    }
}

/// One kernel set prepared for the coarse model.
pub struct SetData {
    /// Side of each kernel.
    size: usize,
    /// Kernels as f64, `size²` each.
    kernels: Vec<Vec<Complex64>>,
    /// `w_k / n⁴`: the weight with both unnormalized-transform factors.
    weights: Vec<f64>,
}

impl SetData {
    fn new(k: &KernelSet, n: usize) -> Self {
        let n4 = (n as f64).powi(4);
        Self {
            size: k.size,
            kernels: (0..k.count())
                .map(|i| {
                    k.kernel(i)
                        .iter()
                        .map(|c| Complex64::new(f64::from(c.re), f64::from(c.im)))
                        .collect()
                })
                .collect(),
            weights: k.scales.iter().map(|&w| f64::from(w) / n4).collect(),
        }
    }
}

/// The coarse-grid optimisation problem.
pub struct Problem {
    /// Fine side.
    pub(super) n: usize,
    /// Downsampling factor.
    pub ds: usize,
    /// Coarse side.
    pub nc: usize,
    /// Side of the field grid.
    m: usize,
    /// Mask band half-width (largest kernel half-width).
    c: usize,
    /// Focus and defocus sets.
    pub sets: [SetData; 2],
    /// `D(u)` for `u ∈ [-c, c]`.
    dfac: Vec<f64>,
    /// Band (half `c`, shifted like the coarse samples) of the frozen part of the mask.
    fixed_band: Option<Vec<Complex64>>,
    /// Coarse pixels that may change.
    pub active: Vec<bool>,
    /// Block averages of the target.
    pub(super) target: Vec<f64>,
    /// Squared corner doses.
    dose2: [f64; 3],
    alpha: f64,
    threshold: f64,
    w_l2: f64,
    w_pvb: f64,
    w_band: f64,
    /// Per coarse pixel, the weight of the nominal L2 term (`None`: 1 everywhere).
    edge_weight: Option<Vec<f64>>,
}

impl Problem {
    /// The problem of `target` with the mask outside `window` (`None`: no window) fixed
    /// to the target: [`Problem::with_frozen`] without a frozen mask.
    pub fn new(
        target: &Grid<u8>,
        window: Option<&Grid<u8>>,
        model: &ModelKernels,
        params: &IltParams,
        cancel: &CancelToken,
    ) -> Result<Self, ImagingError> {
        Self::with_frozen(target, window, None, model, params, cancel)
    }

    /// [`Problem::new`] with the mask outside the window given (`frozen`, the target's
    /// size; `None`: the target): a tiled optimize's finished neighbours (D170).
    pub fn with_frozen(
        target: &Grid<u8>,
        window: Option<&Grid<u8>>,
        frozen_mask: Option<&Grid<u8>>,
        model: &ModelKernels,
        params: &IltParams,
        cancel: &CancelToken,
    ) -> Result<Self, ImagingError> {
        let n = target.width;
        let defocus = model.defocus.as_ref().unwrap_or(&model.focus);
        for k in [&model.focus, defocus] {
            check_target(target, k)?;
        }
        if let Some(w) = window.into_iter().chain(frozen_mask).next()
            && (w.width != n || w.height != n || w.data.len() != n * n)
        {
            return Err(ImagingError::Invalid(
                "window and target sizes differ".into(),
            ));
        }
        let c = model.focus.size.max(defocus.size) / 2;
        let mut ds = (params.downsample.max(1) as usize).min(n);
        while ds > 1 && (!n.is_multiple_of(ds) || n / ds < 4 * c + 2) {
            ds -= 1;
        }
        let nc = n / ds;
        if nc < 4 * c + 2 {
            return Err(ImagingError::Invalid(format!(
                "grid side {n} is too small for kernels of side {}",
                2 * c + 1
            )));
        }
        let m = fft::fast_size(4 * c + 1);
        let shift = (ds as f64 - 1.0) / 2.0;
        let dfac: Vec<f64> = (-(c as isize)..=c as isize)
            .map(|u| {
                (0..ds)
                    .map(|j| {
                        let ph =
                            -2.0 * std::f64::consts::PI * u as f64 * (j as f64 - shift) / n as f64;
                        ph.cos()
                    })
                    .sum()
            })
            .collect();
        let mut active = vec![true; nc * nc];
        let mut fixed_band = None;
        if let Some(w) = window {
            for (i, a) in active.iter_mut().enumerate() {
                let (bx, by) = (i % nc, i / nc);
                *a = (0..ds).all(|dy| (0..ds).all(|dx| *w.at(bx * ds + dx, by * ds + dy) != 0));
            }
            // Frozen fine pixels: everything not in an active block, at the target's value.
            let mut frozen = grid_f32(frozen_mask.unwrap_or(target));
            for (i, v) in frozen.data.iter_mut().enumerate() {
                let (x, y) = (i % n, i / n);
                if active[(y / ds) * nc + x / ds] {
                    *v = 0.0;
                }
            }
            let band = crate::bandlimited::mask_band(&frozen, c, cancel)?;
            let side = 2 * c + 1;
            let mut data = vec![Complex64::default(); side * side];
            for v in -(c as isize)..=c as isize {
                for u in -(c as isize)..=c as isize {
                    let ph = 2.0 * std::f64::consts::PI * (u + v) as f64 * shift / n as f64;
                    data[(v + c as isize) as usize * side + (u + c as isize) as usize] =
                        band.at(u, v) * Complex64::from_polar(1.0, ph);
                }
            }
            fixed_band = Some(data);
        }
        let target_c = block_means(target, ds, nc);
        let edge_weight = params.edge.map(|e| {
            let block_nm = ds as f64 * params.pixel_nm;
            let r = (e.band_nm / block_nm).round().max(1.0) as isize;
            edge_weights(&target_c, nc, r, e.extra)
        });
        let d = params.doses.map(|d| f64::from(d) * f64::from(d));
        Ok(Self {
            n,
            ds,
            nc,
            m,
            c,
            sets: [SetData::new(&model.focus, n), SetData::new(defocus, n)],
            dfac,
            fixed_band,
            active,
            target: target_c,
            dose2: d,
            alpha: f64::from(params.resist.steepness),
            threshold: f64::from(params.resist.threshold),
            w_l2: params.weight_l2,
            w_pvb: params.weight_pvb,
            w_band: params.weight_band,
            edge_weight,
        })
    }

    /// The latent field of the target: `±1` around the block average.
    pub fn initial_latent(&self) -> Vec<f64> {
        self.target.iter().map(|&t| 2.0 * t - 1.0).collect()
    }

    /// The latent field of a 0/1 mask: `±1` around its block average (D248: a region's
    /// tile starts the pixels past its box from its finished neighbours' mask).
    pub(super) fn latent_of(&self, mask: &Grid<u8>) -> Vec<f64> {
        block_means(mask, self.ds, self.nc)
            .into_iter()
            .map(|t| 2.0 * t - 1.0)
            .collect()
    }

    /// The 0/1 full-resolution mask of a latent field: `P > 0` in active blocks, the
    /// target elsewhere.
    pub(super) fn binarised(&self, p: &[f64], target: &Grid<u8>) -> Grid<u8> {
        let (n, ds, nc) = (self.n, self.ds, self.nc);
        let data = (0..n * n)
            .into_par_iter()
            .map(|i| {
                let (x, y) = (i % n, i / n);
                let b = (y / ds) * nc + x / ds;
                if self.active[b] {
                    u8::from(p[b] > 0.0)
                } else {
                    u8::from(target.data[i] != 0)
                }
            })
            .collect();
        Grid {
            width: n,
            height: n,
            data,
        }
    }

    /// Like [`Problem::binarised`], but the latent is interpolated bilinearly between
    /// block centres before the threshold (frozen blocks count as `2T − 1`), so the
    /// boundary is smooth at the full resolution instead of a staircase of blocks.
    pub(super) fn binarised_smooth(&self, p: &[f64], target: &Grid<u8>) -> Grid<u8> {
        let (n, ds, nc) = (self.n, self.ds, self.nc);
        let value = |bx: isize, by: isize| -> f64 {
            let (bx, by) = (
                bx.clamp(0, nc as isize - 1) as usize,
                by.clamp(0, nc as isize - 1) as usize,
            );
            let b = by * nc + bx;
            if self.active[b] {
                p[b]
            } else {
                2.0 * self.target[b] - 1.0
            }
        };
        let data = (0..n * n)
            .into_par_iter()
            .map(|i| {
                let (x, y) = (i % n, i / n);
                let b = (y / ds) * nc + x / ds;
                if !self.active[b] {
                    return u8::from(target.data[i] != 0);
                }
                // Block coordinates of the pixel centre, block centres at integers.
                let fx = (x as f64 + 0.5) / ds as f64 - 0.5;
                let fy = (y as f64 + 0.5) / ds as f64 - 0.5;
                let (ix, iy) = (fx.floor(), fy.floor());
                let (tx, ty) = (fx - ix, fy - iy);
                let (ix, iy) = (ix as isize, iy as isize);
                let v = (1.0 - ty) * ((1.0 - tx) * value(ix, iy) + tx * value(ix + 1, iy))
                    + ty * ((1.0 - tx) * value(ix, iy + 1) + tx * value(ix + 1, iy + 1));
                u8::from(v > 0.0)
            })
            .collect();
        Grid {
            width: n,
            height: n,
            data,
        }
    }

    /// The coarse mask `sigmoid(β P)` on active pixels, 0 elsewhere.
    pub fn mask(&self, p: &[f64], beta: f64) -> Vec<f64> {
        p.par_iter()
            .zip(self.active.par_iter())
            .map(|(&p, &a)| if a { sigmoid(beta * p) } else { 0.0 })
            .collect()
    }

    /// The mask band (half `c`) of a coarse mask, frozen part included.
    pub fn band(&self, mc: &[f64], cancel: &CancelToken) -> Result<Vec<Complex64>, Cancelled> {
        let c = self.c;
        let side = 2 * c + 1;
        let mut b = real_band(mc, self.nc, c, cancel)?;
        for (i, z) in b.iter_mut().enumerate() {
            *z *= self.dfac[i / side] * self.dfac[i % side];
        }
        if let Some(f) = &self.fixed_band {
            for (z, f) in b.iter_mut().zip(f) {
                *z += f;
            }
        }
        Ok(b)
    }

    /// Fields (unnormalized, on the `m` grid) and the `N × N` intensity of one set.
    pub fn image(
        &self,
        set: &SetData,
        band: &[Complex64],
        cancel: &CancelToken,
    ) -> Result<(Vec<Vec<Complex64>>, Vec<f64>), Cancelled> {
        let m = self.m;
        let c = self.c as isize;
        let side = 2 * self.c + 1;
        let plan = fft::plan(m, Direction::Inverse);
        let fields: Vec<Vec<Complex64>> = set
            .kernels
            .par_iter()
            .map(|ker| {
                cancel.check()?;
                let s = set.size;
                let h = (s / 2) as isize;
                let mut field = vec![Complex64::default(); m * m];
                for r in 0..s {
                    let v = r as isize - h;
                    for col in 0..s {
                        let u = col as isize - h;
                        let b = band[(v + c) as usize * side + (u + c) as usize];
                        field[fft::wrap(v, m) * m + fft::wrap(u, m)] += b * ker[r * s + col];
                    }
                }
                small_2d(&mut field, m, &plan);
                Ok(field)
            })
            .collect::<Result<_, Cancelled>>()?;
        let mut ic = vec![0.0; m * m];
        for (f, &w) in fields.iter().zip(&set.weights) {
            for (a, z) in ic.iter_mut().zip(f) {
                *a += w * z.norm_sqr();
            }
        }
        let half = 2 * self.c;
        let scale = 1.0 / (m * m) as f64;
        let mut spec = real_band(&ic, m, half, cancel)?;
        for z in &mut spec {
            *z *= scale;
        }
        Ok((fields, real_from_band(&spec, half, self.nc)))
    }

    /// Loss at latent `p` with mask steepness `beta`; writes `dL/dp` into `grad` when given.
    pub fn loss_grad(
        &self,
        p: &[f64],
        beta: f64,
        grad: Option<&mut [f64]>,
        cancel: &CancelToken,
    ) -> Result<f64, Cancelled> {
        let mc = self.mask(p, beta);
        let band = self.band(&mc, cancel)?;
        let (f_fields, f_int) = self.image(&self.sets[0], &band, cancel)?;
        cancel.check()?;
        let (d_fields, d_int) = self.image(&self.sets[1], &band, cancel)?;
        cancel.check()?;
        let (a, th, d2) = (self.alpha, self.threshold, self.dose2);
        let (wl, wp, wb) = (self.w_l2, self.w_pvb, self.w_band);
        // Per pixel: loss, dL/dI_focus, dL/dI_defocus.
        let per: Vec<(f64, f64, f64)> = (0..self.nc * self.nc)
            .into_par_iter()
            .map(|i| {
                let t = self.target[i];
                let wl = self.edge_weight.as_ref().map_or(wl, |e| wl * e[i]);
                let (fi, di) = (f_int[i], d_int[i]);
                let z0 = sigmoid(a * (d2[0] * fi - th));
                let z1 = sigmoid(a * (d2[1] * fi - th));
                let z2 = sigmoid(a * (d2[2] * di - th));
                let l = wl * (z0 - t).powi(2)
                    + wp * ((z1 - t).powi(2) + (z2 - t).powi(2))
                    + wb * (z1 - z2).powi(2);
                let g0 = 2.0 * wl * (z0 - t) * a * z0 * (1.0 - z0) * d2[0];
                let g1 = 2.0 * (wp * (z1 - t) + wb * (z1 - z2)) * a * z1 * (1.0 - z1) * d2[1];
                let g2 = 2.0 * (wp * (z2 - t) - wb * (z1 - z2)) * a * z2 * (1.0 - z2) * d2[2];
                (l, g0 + g1, g2)
            })
            .collect();
        let loss = per.iter().map(|x| x.0).sum::<f64>();
        let Some(grad) = grad else {
            return Ok(loss);
        };
        let side = 2 * self.c + 1;
        let mut gband = vec![Complex64::default(); side * side];
        for (si, fields) in [(0usize, &f_fields), (1, &d_fields)] {
            let g: Vec<f64> = per
                .iter()
                .map(|x| if si == 0 { x.1 } else { x.2 })
                .collect();
            let gb = self.adjoint_set(&self.sets[si], fields, &g, cancel)?;
            for (a, b) in gband.iter_mut().zip(&gb) {
                *a += b;
            }
        }
        for (i, z) in gband.iter_mut().enumerate() {
            *z *= self.dfac[i / side] * self.dfac[i % side];
        }
        let gm = real_from_band(&gband, self.c, self.nc);
        grad.par_iter_mut()
            .zip(gm.par_iter())
            .zip(mc.par_iter())
            .zip(self.active.par_iter())
            .for_each(|(((g, &gm), &m), &act)| {
                *g = if act { gm * beta * m * (1.0 - m) } else { 0.0 };
            });
        Ok(loss)
    }

    /// Gradient with respect to the mask band (half `c`) of one set, given `dL/dI` on
    /// the `N × N` grid.
    fn adjoint_set(
        &self,
        set: &SetData,
        fields: &[Vec<Complex64>],
        g: &[f64],
        cancel: &CancelToken,
    ) -> Result<Vec<Complex64>, Cancelled> {
        let m = self.m;
        let half = 2 * self.c;
        let gs = real_band(g, self.nc, half, cancel)?;
        let gc: Vec<f64> = real_from_band(&gs, half, m)
            .into_iter()
            .map(|v| v / (m * m) as f64)
            .collect();
        let c = self.c as isize;
        let side = 2 * self.c + 1;
        let plan = fft::plan(m, Direction::Forward);
        let zero = || vec![Complex64::default(); side * side];
        // Two halves of the kernels in parallel, added in one order whatever the thread
        // count (D238).
        crate::fold::in_halves(
            set.kernels.len().min(fields.len()).min(set.weights.len()),
            zero,
            |mut acc, k| {
                let (ker, field, w) = (&set.kernels[k], &fields[k], set.weights[k]);
                cancel.check()?;
                let mut hk: Vec<Complex64> = field
                    .iter()
                    .zip(&gc)
                    .map(|(f, &gv)| f * (2.0 * w * gv))
                    .collect();
                small_2d(&mut hk, m, &plan);
                let s = set.size;
                let h = (s / 2) as isize;
                for r in 0..s {
                    let v = r as isize - h;
                    for col in 0..s {
                        let u = col as isize - h;
                        acc[(v + c) as usize * side + (u + c) as usize] +=
                            ker[r * s + col].conj() * hk[fft::wrap(v, m) * m + fft::wrap(u, m)];
                    }
                }
                Ok(acc)
            },
            |mut a, b| {
                for (x, y) in a.iter_mut().zip(&b) {
                    *x += y;
                }
                a
            },
        )
    }
}

/// The share of set pixels in each `ds × ds` block of a 0/1 grid (`nc × nc` blocks).
fn block_means(grid: &Grid<u8>, ds: usize, nc: usize) -> Vec<f64> {
    let inv = 1.0 / (ds * ds) as f64;
    (0..nc * nc)
        .into_par_iter()
        .map(|i| {
            let (bx, by) = (i % nc, i / nc);
            let mut s = 0usize;
            for dy in 0..ds {
                for dx in 0..ds {
                    s += usize::from(*grid.at(bx * ds + dx, by * ds + dy) != 0);
                }
            }
            s as f64 * inv
        })
        .collect()
}

/// `1 + extra` on the coarse pixels within `r` (Chebyshev) of a pixel on the other side of
/// the target's edge (block means split at one half), 1 elsewhere.
pub fn edge_weights(target: &[f64], nc: usize, r: isize, extra: f64) -> Vec<f64> {
    let inside = |x: isize, y: isize| {
        let (x, y) = (x.clamp(0, nc as isize - 1), y.clamp(0, nc as isize - 1));
        target[y as usize * nc + x as usize] > 0.5
    };
    (0..nc * nc)
        .into_par_iter()
        .map(|i| {
            let (x, y) = ((i % nc) as isize, (i / nc) as isize);
            let me = inside(x, y);
            let near = (-r..=r).any(|dy| (-r..=r).any(|dx| inside(x + dx, y + dy) != me));
            if near { 1.0 + extra } else { 1.0 }
        })
        .collect()
}

fn check_target(target: &Grid<u8>, k: &KernelSet) -> Result<(), ImagingError> {
    let n = target.width;
    if target.height != n || target.data.len() != n * n {
        return Err(ImagingError::Invalid(format!(
            "target must be square, got {}×{}",
            target.width, target.height
        )));
    }
    if k.size == 0 || k.size.is_multiple_of(2) || n < k.size {
        return Err(ImagingError::Invalid(format!(
            "kernel side {} does not fit a {n}-pixel grid",
            k.size
        )));
    }
    Ok(())
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// `Re Σ_{|u|,|v| <= half} b[v][u] e^{+2πi (u x + v y)/n}` on the `n × n` grid: the
/// transpose of [`real_band`] under the real inner product.
fn real_from_band(b: &[Complex64], half: usize, n: usize) -> Vec<f64> {
    let side = 2 * half + 1;
    // Hermitian part: the real part of the transform equals the transform of it.
    let herm: Vec<Complex64> = (0..side * side)
        .map(|i| (b[i] + b[side * side - 1 - i].conj()) * 0.5)
        .collect();
    let inv = fft::plan(n, Direction::Inverse);
    let cols: Vec<Vec<Complex64>> = (0..side)
        .into_par_iter()
        .map(|j| {
            let mut col = vec![Complex64::default(); n];
            for vi in 0..side {
                let v = vi as isize - half as isize;
                col[fft::wrap(v, n)] += herm[vi * side + j];
            }
            let mut scratch = vec![Complex64::default(); inv.get_inplace_scratch_len()];
            inv.process_with_scratch(&mut col, &mut scratch);
            col
        })
        .collect();
    let mut out = vec![0.0f64; n * n];
    out.par_chunks_mut(2 * n)
        .enumerate()
        .for_each(|(pi, rows)| {
            let y0 = 2 * pi;
            let mut buf = vec![Complex64::default(); n];
            for (j, col) in cols.iter().enumerate() {
                let u = j as isize - half as isize;
                let ga = col[y0];
                let gb = if y0 + 1 < n {
                    col[y0 + 1]
                } else {
                    Complex64::default()
                };
                buf[fft::wrap(u, n)] += ga + Complex64::new(-gb.im, gb.re);
            }
            let mut scratch = vec![Complex64::default(); inv.get_inplace_scratch_len()];
            inv.process_with_scratch(&mut buf, &mut scratch);
            let (a, b) = rows.split_at_mut(n.min(rows.len()));
            for (x, v) in a.iter_mut().enumerate() {
                *v = buf[x].re;
            }
            for (x, v) in b.iter_mut().enumerate() {
                *v = buf[x].im;
            }
        });
    out
}
