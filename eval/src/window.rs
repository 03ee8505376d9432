//! The input of an evaluation: one layout window, its polygons, and the window imaged at
//! the three ICCAD-2013 corners. The worker fills these (it reads and images); everything
//! downstream reads them.

use std::collections::BTreeMap;

use reticle_kernel::model::ModelSpec;
use reticle_kernel::raster::PixelFrame;
use reticle_kernel::{Corner, Grid, LithoOutput, Resist};
use reticle_layout::{BBox, Polygon};

/// The polygons of one layer in a layout window.
#[derive(Debug, Clone)]
pub struct LayoutWindow {
    /// `glp` or `gds/oasis`.
    pub format: &'static str,
    /// SHA-256 of the file bytes (hex).
    pub sha256: String,
    /// nm per database unit.
    pub dbu_nm: f64,
    /// The layer's polygons (dbu), clipped to the window for GDSII/OASIS: the target the
    /// print is measured against, and the mask imaged unless `mask` is given.
    pub polygons: Vec<Polygon>,
    /// The polygons of a mask layer (post-OPC verification, D180), same window: imaged
    /// instead of `polygons` and checked by the deck's mask rules; `None`: the target is
    /// the mask.
    pub mask: Option<Vec<Polygon>>,
    /// The window in dbu.
    pub window: BBox,
    /// Polygons of the context layers (second layers of enclosure rules), by the layer
    /// text as asked, same window.
    pub context: BTreeMap<String, Vec<Polygon>>,
}

impl LayoutWindow {
    /// The polygons imaged and checked by mask rules: the mask layer's when the window has
    /// one, else the target's.
    #[must_use]
    pub fn mask_polygons(&self) -> &[Polygon] {
        self.mask.as_deref().unwrap_or(&self.polygons)
    }
}

/// One window imaged at the three ICCAD-2013 corners, with what produced it.
#[derive(Debug, Clone)]
pub struct ImagedWindow {
    /// The layout window and its polygons.
    pub layout: LayoutWindow,
    /// Pixel grid placement (frame units are dbu).
    pub frame: PixelFrame,
    /// Pixel size in nm.
    pub pixel_nm: f64,
    /// The model used.
    pub model: ModelSpec,
    /// Its period (nm).
    pub period: f64,
    /// Number of focus kernels.
    pub focus_kernels: usize,
    /// Resist used.
    pub resist: Resist,
    /// Corner outputs (nominal, max, min) with aerial images and prints, L2 and PVB.
    pub output: LithoOutput,
    /// The rasterized mask (exact area coverage, `[0, 1]`).
    pub mask: Grid<f32>,
    /// The target: mask pixels at least half covered (0/1).
    pub target: Grid<u8>,
    /// The three corners imaged (nominal, max, min), with their kernels.
    pub corners: Vec<Corner>,
}

/// A mask other than the drawn one, imaged on the same frame (optimize's result): its
/// polygons (for the mask rules) and its corner images (for the printed rules, EPE and PV
/// band, still measured against the drawn target).
#[derive(Debug, Clone, Copy)]
pub struct MaskOverride<'a> {
    /// The mask's polygons (dbu).
    pub polygons: &'a [Polygon],
    /// Its images at the window's corners.
    pub output: &'a LithoOutput,
}
