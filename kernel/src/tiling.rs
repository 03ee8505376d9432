//! Canvases larger than one FFT window: tiles with halos, stitched in the canvas frame.
//!
//! Each tile images a `window × window` patch of the canvas (zeros outside the canvas)
//! and keeps only its core, the window minus `halo` pixels on every side. The halo
//! must cover the optical ambit (a few λ/NA) for the core to match an untiled image;
//! the wrap-around of the tile's periodic FFT lands in the halo, which is discarded.

use crate::imaging::{ImagingBackend, ImagingError};
use crate::model::{ModelError, ModelSpec};
use crate::{CancelToken, Grid, KernelSet, Progress, ProgressFn};

/// The tiling rule's halo, in units of the model's resolution length `λ/NA`
/// ([`ModelSpec::resolution_nm`]); chosen from `reticle bench tiling` (DECISIONS D56).
pub const HALO_RESOLUTIONS: f64 = 3.0;

/// The largest intensity error (fraction of the open frame) the halo rule is chosen to
/// keep in the tile cores of a dense layout.
pub const HALO_ERROR_TARGET: f64 = 1e-2;

/// Halo (nm) for tiles of the model's period imaged at `pixel_nm`:
/// [`HALO_RESOLUTIONS`] × `λ/NA` ([`ModelSpec::resolution_nm`]), rounded up to whole
/// pixels. The default model (193 nm, NA 1.35, λ/NA = 143 nm): 432 nm at 4, 8 and 16 nm
/// pixels, 430 at 2 nm, 429 at 1 nm.
///
/// The target it meets: the largest intensity error in the tile cores at most 1 % of
/// the open frame on a dense layout (measured 6.9e-3 at 4 nm pixels, about 0.8 nm of
/// edge shift at the median edge slope; `reticle bench tiling`, PERFORMANCE.md). A halo
/// of 2 λ/NA misses it (1.3e-2 at 256 nm); more halo buys little (the error falls about
/// as `h^-1.5`, the hard-edged pupil's tail, D19) at a fast-growing cost (the work per
/// unit of layout area is `(P / core)²`: 3.0× at this halo, 16× at 768 nm).
pub fn tile_halo_nm(model: &ModelSpec, pixel_nm: f64) -> Result<f64, ModelError> {
    if !(pixel_nm.is_finite() && pixel_nm > 0.0) {
        return Err(ModelError::Invalid(format!(
            "pixel {pixel_nm} nm must be finite and > 0"
        )));
    }
    let halo = HALO_RESOLUTIONS * model.resolution_nm()?;
    if !halo.is_finite() {
        return Err(ModelError::Invalid(format!(
            "the model's resolution length gives no finite halo ({halo} nm)"
        )));
    }
    Ok((halo / pixel_nm - 1e-9).ceil() * pixel_nm)
}

/// Core side (nm) kept per tile: the model's period minus [`tile_halo_nm`] on each side;
/// an error when the halo leaves no core.
pub fn tile_core_nm(model: &ModelSpec, pixel_nm: f64) -> Result<f64, ModelError> {
    let halo = tile_halo_nm(model, pixel_nm)?;
    let core = model.period_nm() - 2.0 * halo;
    if core < pixel_nm {
        return Err(ModelError::Invalid(format!(
            "a halo of {halo} nm leaves no core in a window of {} nm",
            model.period_nm()
        )));
    }
    Ok(core)
}

/// The [`TilePlan`] of the rule for `model` at `pixel_nm` (window = period / pixel).
pub fn tile_plan(model: &ModelSpec, pixel_nm: f64) -> Result<TilePlan, ModelError> {
    let core = tile_core_nm(model, pixel_nm)?;
    let halo = tile_halo_nm(model, pixel_nm)?;
    let window = model.period_nm() / pixel_nm;
    if (window - window.round()).abs() > 1e-6 {
        return Err(ModelError::Invalid(format!(
            "pixel {pixel_nm} nm does not divide the period {} nm",
            model.period_nm()
        )));
    }
    debug_assert!(core > 0.0);
    Ok(TilePlan {
        window: window.round() as usize,
        halo: (halo / pixel_nm).round() as usize,
    })
}

/// How a canvas is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TilePlan {
    /// Tile window side (pixels); must equal the kernels' period / pixel size.
    pub window: usize,
    /// Pixels discarded on each side of a tile.
    pub halo: usize,
}

impl TilePlan {
    /// Core side (pixels kept per tile).
    #[must_use]
    pub fn core(&self) -> usize {
        self.window.saturating_sub(2 * self.halo)
    }

    /// Core origins along one axis of length `len`.
    fn origins(&self, len: usize) -> Vec<usize> {
        (0..len.div_ceil(self.core()))
            .map(|i| i * self.core())
            .collect()
    }

    /// Number of tiles for a `width × height` canvas.
    #[must_use]
    pub fn tiles(&self, width: usize, height: usize) -> usize {
        if self.core() == 0 {
            return 0;
        }
        width.div_ceil(self.core()) * height.div_ceil(self.core())
    }
}

/// Aerial image of a whole canvas, tile by tile; cancellation is checked per tile.
pub fn aerial_tiled(
    backend: &dyn ImagingBackend,
    canvas: &Grid<f32>,
    kernels: &KernelSet,
    dose: f32,
    plan: TilePlan,
    cancel: &CancelToken,
    progress: ProgressFn<'_>,
) -> Result<Grid<f32>, ImagingError> {
    let core = plan.core();
    if core == 0 {
        return Err(ImagingError::Invalid(format!(
            "halo {} leaves no core in a window of {}",
            plan.halo, plan.window
        )));
    }
    let (w, h) = (canvas.width, canvas.height);
    let mut out = Grid::filled(w, h, 0.0f32);
    let total = plan.tiles(w, h) as u64;
    let mut done = 0;
    let mut tile = Grid::filled(plan.window, plan.window, 0.0f32);
    for &cy in &plan.origins(h) {
        for &cx in &plan.origins(w) {
            cancel.check()?;
            // Window origin in the canvas (may be negative).
            let (ox, oy) = (cx as i64 - plan.halo as i64, cy as i64 - plan.halo as i64);
            for ty in 0..plan.window {
                let y = oy + ty as i64;
                let row = &mut tile.data[ty * plan.window..(ty + 1) * plan.window];
                row.fill(0.0);
                if y < 0 || y >= h as i64 {
                    continue;
                }
                let x0 = ox.max(0);
                let x1 = (ox + plan.window as i64).min(w as i64);
                if x0 < x1 {
                    let src =
                        &canvas.data[y as usize * w + x0 as usize..y as usize * w + x1 as usize];
                    row[(x0 - ox) as usize..(x1 - ox) as usize].copy_from_slice(src);
                }
            }
            let img = backend.aerial(&tile, kernels, dose, cancel)?;
            for y in cy..(cy + core).min(h) {
                let ty = y - cy + plan.halo;
                let xe = (cx + core).min(w);
                out.data[y * w + cx..y * w + xe].copy_from_slice(
                    &img.data
                        [ty * plan.window + plan.halo..ty * plan.window + plan.halo + (xe - cx)],
                );
            }
            done += 1;
            progress(Progress {
                done,
                total,
                stage: "tile",
            });
        }
    }
    Ok(out)
}
