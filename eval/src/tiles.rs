//! Whole-layout evaluation: how a region is cut into tiles, and which tile owns a
//! violation (docs/DECISIONS.md D57).
//!
//! A tile is a square **core** of the global tile grid, anchored at the layout origin, so
//! the cores of all tiles partition the plane. A tile is imaged in a **window** of exactly
//! the model's period (the SOCS kernels are sampled on it): the core plus a **halo** on
//! every side, filled with the layout's real geometry; only the core's pixels are kept.
//! Every side is a whole number of pixels, and window origins are whole pixels from the
//! layout origin, so the kept cores of all tiles form one pixel grid.
//!
//! Each violation is reported by exactly one tile, its **owner**: the tile whose core holds
//! the violation's location, clamped into the range of tiles that cover the region (a
//! violation that touches the region but whose centre lies outside it belongs to the
//! nearest covering tile). Owning is a pure function of the location, so two tiles that
//! both see a violation never both report it.

use reticle_layout::BBox;
use serde::{Deserialize, Serialize};

use crate::error::invalid;
use reticle_protocol::ToolError;
use serde_json::json;

/// One tile: column `ix`, row `iy` of the grid (core `[ix·c, (ix+1)·c) × [iy·c, (iy+1)·c)`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
pub struct TileIndex {
    /// Column.
    pub ix: i64,
    /// Row.
    pub iy: i64,
}

impl TileIndex {
    /// The tile's name in reports and file names, `T_<ix>_<iy>` (the report-tile
    /// convention of seed 000 §2).
    #[must_use]
    pub fn id(&self) -> String {
        format!("T_{}_{}", self.ix, self.iy)
    }
}

/// The tiles covering a region: columns `ix0..=ix1`, rows `iy0..=iy1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TileRange {
    /// First column.
    pub ix0: i64,
    /// First row.
    pub iy0: i64,
    /// Last column (inclusive).
    pub ix1: i64,
    /// Last row (inclusive).
    pub iy1: i64,
}

impl TileRange {
    /// Number of tiles.
    #[must_use]
    pub fn count(&self) -> u64 {
        let w = (self.ix1 - self.ix0 + 1).max(0) as u64;
        let h = (self.iy1 - self.iy0 + 1).max(0) as u64;
        w.saturating_mul(h)
    }

    /// Whether `t` is one of the tiles.
    #[must_use]
    pub fn contains(&self, t: TileIndex) -> bool {
        (self.ix0..=self.ix1).contains(&t.ix) && (self.iy0..=self.iy1).contains(&t.iy)
    }

    /// The `n`-th tile in row-major order (bottom row first, left to right), the order
    /// tiles are dispatched, written and merged in.
    #[must_use]
    pub fn nth(&self, n: u64) -> Option<TileIndex> {
        let w = (self.ix1 - self.ix0 + 1).max(0) as u64;
        (n < self.count()).then(|| TileIndex {
            ix: self.ix0 + (n % w) as i64,
            iy: self.iy0 + (n / w) as i64,
        })
    }

    /// Every tile, row-major.
    pub fn iter(&self) -> impl Iterator<Item = TileIndex> + '_ {
        (0..self.count()).filter_map(|n| self.nth(n))
    }
}

/// How a region is cut into tiles.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TileGrid {
    /// nm per dbu of the layout.
    pub dbu_nm: f64,
    /// Pixel side (dbu).
    pub pixel_dbu: f64,
    /// Core side (dbu): a whole number of pixels.
    pub core_dbu: i64,
    /// Halo on each side of the core (dbu): a whole number of pixels; the window side
    /// `core + 2·halo` is the model period.
    pub halo_dbu: i64,
}

impl TileGrid {
    /// The grid for a model of period `period_nm` imaged at `pixel_nm` with a halo of
    /// `halo_nm` (rounded up to whole pixels), on a layout of `dbu_nm`.
    ///
    /// # Errors
    /// `INVALID_INPUT` when the period is not a whole number of pixels and dbu, or the
    /// halo leaves no core.
    pub fn new(
        period_nm: f64,
        halo_nm: f64,
        pixel_nm: f64,
        dbu_nm: f64,
    ) -> Result<Self, ToolError> {
        let finite = [period_nm, halo_nm, pixel_nm, dbu_nm]
            .iter()
            .all(|v| v.is_finite() && *v > 0.0);
        if !finite {
            return Err(invalid(
                "period, halo, pixel and dbu must be positive",
                json!({"period_nm": period_nm, "halo_nm": halo_nm, "pixel_nm": pixel_nm, "dbu_nm": dbu_nm}),
            ));
        }
        let whole = |v: f64| (v - v.round()).abs() <= 1e-6 * v.abs().max(1.0);
        let period_px = period_nm / pixel_nm;
        let period_dbu = period_nm / dbu_nm;
        let pixel_dbu = pixel_nm / dbu_nm;
        if !whole(period_px) || !whole(period_dbu) {
            return Err(invalid(
                format!(
                    "the model period ({period_nm} nm) must be a whole number of pixels ({pixel_nm} nm) and of database units ({dbu_nm} nm)"
                ),
                json!({"period_nm": period_nm, "pixel_nm": pixel_nm, "dbu_nm": dbu_nm}),
            ));
        }
        let period_px = period_px.round() as i64;
        let halo_px = (halo_nm / pixel_nm - 1e-9).ceil().max(0.0) as i64;
        let core_px = period_px - 2 * halo_px;
        if core_px < 1 {
            return Err(invalid(
                format!("a halo of {halo_nm} nm leaves no core in a window of {period_nm} nm"),
                json!({"period_nm": period_nm, "halo_nm": halo_nm}),
            ));
        }
        let to_dbu = |px: i64| px as f64 * pixel_dbu;
        if !whole(to_dbu(core_px)) || !whole(to_dbu(halo_px)) {
            return Err(invalid(
                format!(
                    "the pixel ({pixel_nm} nm) must be a whole number of database units ({dbu_nm} nm) for tiling"
                ),
                json!({"pixel_nm": pixel_nm, "dbu_nm": dbu_nm}),
            ));
        }
        Ok(Self {
            dbu_nm,
            pixel_dbu,
            core_dbu: to_dbu(core_px).round() as i64,
            halo_dbu: to_dbu(halo_px).round() as i64,
        })
    }

    /// The window side (dbu): the model period.
    #[must_use]
    pub fn window_dbu(&self) -> i64 {
        self.core_dbu + 2 * self.halo_dbu
    }

    /// The core of tile `t` (dbu, half-open in use: `[left, right) × [bottom, top)`).
    #[must_use]
    pub fn core(&self, t: TileIndex) -> BBox {
        let c = self.core_dbu;
        BBox {
            left: t.ix * c,
            bottom: t.iy * c,
            right: (t.ix + 1) * c,
            top: (t.iy + 1) * c,
        }
    }

    /// The imaging window of tile `t`: its core grown by the halo.
    #[must_use]
    pub fn window(&self, t: TileIndex) -> BBox {
        grow(self.core(t), self.halo_dbu)
    }

    /// The tiles whose cores meet `region` (half-open: a region ending on a tile edge does
    /// not take the next tile).
    #[must_use]
    pub fn covering(&self, region: BBox) -> TileRange {
        let c = self.core_dbu;
        let last = |lo: i64, hi: i64| {
            if hi > lo {
                (hi - 1).div_euclid(c)
            } else {
                lo.div_euclid(c)
            }
        };
        TileRange {
            ix0: region.left.div_euclid(c),
            iy0: region.bottom.div_euclid(c),
            ix1: last(region.left, region.right),
            iy1: last(region.bottom, region.top),
        }
    }

    /// The tile that reports a violation located at `at_pm` (picometres): the tile whose
    /// core holds it, clamped into `range` (see the module docs).
    #[must_use]
    pub fn owner(&self, range: &TileRange, at_pm: (i64, i64)) -> TileIndex {
        let core_pm = self.core_dbu as f64 * self.dbu_nm * 1000.0;
        let axis = |v: i64, lo: i64, hi: i64| ((v as f64 / core_pm).floor() as i64).clamp(lo, hi);
        TileIndex {
            ix: axis(at_pm.0, range.ix0, range.ix1),
            iy: axis(at_pm.1, range.iy0, range.iy1),
        }
    }

    /// Whether the pixel whose lower-left corner is at `(x, y)` (dbu) has its centre in
    /// `b` (half-open).
    #[must_use]
    pub fn pixel_centre_in(&self, x: f64, y: f64, b: &BBox) -> bool {
        let (cx, cy) = (x + self.pixel_dbu / 2.0, y + self.pixel_dbu / 2.0);
        cx >= b.left as f64 && cx < b.right as f64 && cy >= b.bottom as f64 && cy < b.top as f64
    }
}

/// Everything about a whole-layout evaluation that its plan decides once and every tile
/// and the merge read: the layout as planned, the region, the grid and the model. The host
/// passes it on unchanged; a tile refuses a layout whose hash differs from the plan's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegionPlan {
    /// SHA-256 of the layout file (hex) when planned.
    pub sha256: String,
    /// `glp` or `gds/oasis`.
    pub format: String,
    /// The region (dbu).
    pub region: BBox,
    /// How the region was chosen: `box` (the caller's) or `layer_bbox` (the whole layer).
    pub region_source: String,
    /// The box of the evaluated and context layers (dbu); `None` when they are empty.
    pub extent: Option<BBox>,
    /// The grid.
    pub grid: TileGrid,
    /// The tiles covering the region.
    pub range: TileRange,
    /// The model period (nm).
    pub period_nm: f64,
    /// Pixel size (nm).
    pub pixel_nm: f64,
    /// `hopkins` or `kernels`.
    pub model_kind: String,
    /// Focus kernels of the model.
    pub focus_kernels: usize,
}

/// `b` grown by `d` on every side.
#[must_use]
pub fn grow(b: BBox, d: i64) -> BBox {
    BBox {
        left: b.left.saturating_sub(d),
        bottom: b.bottom.saturating_sub(d),
        right: b.right.saturating_add(d),
        top: b.top.saturating_add(d),
    }
}

/// The common part of two boxes, `None` when they do not meet (touching counts).
#[must_use]
pub fn intersection(a: &BBox, b: &BBox) -> Option<BBox> {
    let out = BBox {
        left: a.left.max(b.left),
        bottom: a.bottom.max(b.bottom),
        right: a.right.min(b.right),
        top: a.top.min(b.top),
    };
    (out.left <= out.right && out.bottom <= out.top).then_some(out)
}

/// Whether two closed boxes meet (touching counts).
#[must_use]
pub fn touches(a: &BBox, b: &BBox) -> bool {
    intersection(a, b).is_some()
}
