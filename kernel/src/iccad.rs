//! The ICCAD-2013 mask-optimization benchmark conventions.
//!
//! Clips are `.glp` files in nm placed on a 2048 × 2048 grid of 1 nm pixels with a
//! 512 nm offset (the window `[-512, 1536)²` in clip coordinates), as OpenILT does.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use reticle_layout::{BBox, Point, Polygon, glp};

use crate::model::{KernelFilesSpec, ModelError, ModelSpec};
use crate::raster::{self, PixelFrame, RasterError};
use crate::{Corner, Grid, KeepImages, KernelSet, LithoJob, Resist};

/// Grid side (pixels, 1 nm each).
pub const GRID: usize = 2048;

/// Offset of the clip origin in the grid (nm).
pub const OFFSET_NM: i64 = 512;

/// The simulation window in clip coordinates.
#[must_use]
pub fn window() -> BBox {
    BBox::from_corners(
        Point::new(-OFFSET_NM, -OFFSET_NM),
        Point::new(GRID as i64 - OFFSET_NM, GRID as i64 - OFFSET_NM),
    )
}

/// One clip ready to simulate with mask = target.
#[derive(Debug, Clone)]
pub struct Clip {
    /// File stem (`M1_test1`).
    pub name: String,
    /// Target polygons (clip coordinates, nm).
    pub polygons: Vec<Polygon>,
    /// Exact-coverage raster (0/1 at 1 nm for these integer layouts).
    pub mask: Grid<f32>,
    /// Target pattern: pixels at least half covered.
    pub target: Grid<u8>,
    /// Where the grid sits.
    pub frame: PixelFrame,
}

/// Why a clip could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum ClipError {
    /// Reading the file failed.
    #[error("reading {0}: {1}")]
    Io(PathBuf, std::io::Error),
    /// The `.glp` text is malformed.
    #[error(transparent)]
    Glp(#[from] glp::GlpError),
    /// Rasterization failed.
    #[error(transparent)]
    Raster(#[from] RasterError),
}

impl Clip {
    /// The clip's ICCAD-2013 job at `corners`: its mask, its target (for L2), the
    /// contest's resist, no images kept.
    #[must_use]
    pub fn job<'a>(&'a self, corners: &'a [Corner]) -> LithoJob<'a> {
        LithoJob {
            mask: &self.mask,
            target: Some(&self.target),
            corners,
            resist: Resist::ICCAD2013,
            keep: KeepImages::default(),
        }
    }
}

/// Loads and rasterizes one `.glp` clip.
pub fn load_clip(path: &Path) -> Result<Clip, ClipError> {
    let bytes = std::fs::read(path).map_err(|e| ClipError::Io(path.to_owned(), e))?;
    let layout = glp::parse(&bytes)?;
    let polygons = layout.polygons(None);
    let (mask, frame) = raster::rasterize(&polygons, window(), 1.0)?;
    let target = Grid {
        width: mask.width,
        height: mask.height,
        data: mask.data.iter().map(|&v| u8::from(v >= 0.5)).collect(),
    };
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(Clip {
        name,
        polygons,
        mask,
        target,
        frame,
    })
}

/// The ten clip paths `layouts/M1_test{1..10}.glp` under an `iccad13` folder.
#[must_use]
pub fn clip_paths(iccad_dir: &Path) -> Vec<PathBuf> {
    (1..=10)
        .map(|i| iccad_dir.join(format!("layouts/M1_test{i}.glp")))
        .collect()
}

/// Focus kernels, defocus kernels and the three contest corners built on them.
pub type IccadCorners = (Arc<KernelSet>, Arc<KernelSet>, Vec<Corner>);

/// Focus and defocus kernels from `<iccad_dir>/kernels`, and the three contest corners.
pub fn corners(iccad_dir: &Path) -> Result<IccadCorners, ModelError> {
    let spec = ModelSpec::Kernels(KernelFilesSpec {
        dir: iccad_dir.join("kernels"),
        focus: "focus".into(),
        defocus: Some("defocus".into()),
        period_nm: GRID as f64,
        max_kernels: None,
    });
    let k = spec.kernels()?;
    let defocus = k
        .defocus
        .ok_or_else(|| ModelError::Invalid("no defocus set".into()))?;
    let corners = crate::resist::iccad_corners(&k.focus, &defocus);
    Ok((k.focus, defocus, corners))
}
