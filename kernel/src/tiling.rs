//! Canvases larger than one FFT window: tiles with halos, stitched in the canvas frame.
//!
//! Each tile images a `window × window` patch of the canvas (zeros outside the canvas)
//! and keeps only its core, the window minus `halo` pixels on every side. The halo
//! must cover the optical ambit (a few λ/NA) for the core to match an untiled image;
//! the wrap-around of the tile's periodic FFT lands in the halo, which is discarded.

use crate::imaging::{ImagingBackend, ImagingError};
use crate::{CancelToken, Grid, KernelSet, Progress, ProgressFn};

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
