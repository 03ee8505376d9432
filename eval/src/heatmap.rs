//! A picture of a whole-layout report for a person: the region's drawn polygons in grey,
//! each report tile with violation groups tinted red (the more groups, the stronger), and a
//! dot at every canonical record. The region is scaled to fit [`MAX_SIDE`] pixels, drawn
//! tile by tile from a [`LayoutSource`], so the picture costs the same memory for any
//! region. Deterministic: equal reports give equal pixels.

use std::collections::BTreeMap;

use reticle_layout::{BBox, Polygon};
use reticle_protocol::{ErrorCode, ToolError};
use tiny_skia::{FillRule, Paint, PathBuilder, Pixmap, Transform};

use crate::tile::LayoutSource;
use crate::tiles::{TileGrid, TileRange};

/// Longest side of the picture (pixels).
pub const MAX_SIDE: u32 = 1024;

/// What the picture's colours mean, for the report.
pub const LEGEND: [(&str, &str); 4] = [
    ("background", "#101018: outside every polygon"),
    ("grey", "#8c8c96: drawn polygons of the evaluated layer"),
    (
        "red tint",
        "a report tile with violation groups; stronger with more groups (log scale)",
    ),
    ("yellow dot", "a canonical violation record (one per group)"),
];

/// The picture as straight (not premultiplied) RGBA rows, top row first.
#[derive(Debug, Clone)]
pub struct Picture {
    /// Width (pixels).
    pub width: u32,
    /// Height (pixels).
    pub height: u32,
    /// RGBA bytes.
    pub rgba: Vec<u8>,
    /// nm per picture pixel.
    pub nm_per_pixel: f64,
}

struct Map {
    left: f64,
    top: f64,
    scale: f64,
}

impl Map {
    fn px(&self, x: f64, y: f64) -> (f32, f32) {
        (
            ((x - self.left) * self.scale) as f32,
            ((self.top - y) * self.scale) as f32,
        )
    }

    fn add(&self, pb: &mut PathBuilder, poly: &Polygon) {
        let mut pts = poly.points.iter().map(|p| self.px(p.x as f64, p.y as f64));
        let Some(first) = pts.next() else { return };
        pb.move_to(first.0, first.1);
        for p in pts {
            pb.line_to(p.0, p.1);
        }
        pb.close();
    }

    fn rect(&self, pb: &mut PathBuilder, b: &BBox) {
        self.add(pb, &Polygon::rect(*b));
    }
}

fn failed(why: &str) -> ToolError {
    ToolError::new(ErrorCode::RenderFailed, format!("heat map: {why}"))
}

/// Draws the picture of `region` (dbu) from the locations (nm) of a merged report's
/// canonical records, the polygons read tile core by tile core from `source`, and report
/// tiles of `tile_dbu`.
///
/// # Errors
/// `RENDER_FAILED` when the image cannot be allocated; the source's errors.
pub fn draw(
    region: BBox,
    grid: &TileGrid,
    range: &TileRange,
    tile_dbu: i64,
    canonical_nm: &[(f64, f64)],
    source: &mut dyn LayoutSource,
) -> Result<Picture, ToolError> {
    let (w_dbu, h_dbu) = (region.width().max(1) as f64, region.height().max(1) as f64);
    let scale = f64::from(MAX_SIDE) / w_dbu.max(h_dbu);
    let width = ((w_dbu * scale).round() as u32).clamp(1, MAX_SIDE);
    let height = ((h_dbu * scale).round() as u32).clamp(1, MAX_SIDE);
    let map = Map {
        left: region.left as f64,
        top: region.top as f64,
        scale,
    };
    let mut pixmap = Pixmap::new(width, height).ok_or_else(|| failed("cannot allocate"))?;
    pixmap.fill(tiny_skia::Color::from_rgba8(16, 16, 24, 255));
    let fill = |pixmap: &mut Pixmap, pb: PathBuilder, rgba: [u8; 4]| {
        if let Some(path) = pb.finish() {
            let mut paint = Paint::default();
            paint.set_color_rgba8(rgba[0], rgba[1], rgba[2], rgba[3]);
            paint.anti_alias = false;
            pixmap.fill_path(
                &path,
                &paint,
                FillRule::Winding,
                Transform::identity(),
                None,
            );
        }
    };
    for tile in range.iter() {
        let Some(core) = crate::tiles::intersection(&grid.core(tile), &region) else {
            continue;
        };
        let polygons = source.polygons(core, false)?;
        let mut pb = PathBuilder::new();
        for p in &polygons.target {
            map.add(&mut pb, p);
        }
        fill(&mut pixmap, pb, [140, 140, 150, 255]);
    }
    // Groups per report tile, by the canonical record's location.
    let canonical: Vec<(f64, f64)> = canonical_nm
        .iter()
        .map(|(x, y)| (x / grid.dbu_nm, y / grid.dbu_nm))
        .collect();
    let mut per_tile: BTreeMap<(i64, i64), u32> = BTreeMap::new();
    for (x, y) in &canonical {
        let t = tile_dbu.max(1) as f64;
        *per_tile
            .entry(((x / t).floor() as i64, (y / t).floor() as i64))
            .or_default() += 1;
    }
    let most = per_tile.values().copied().max().unwrap_or(1).max(1);
    for ((ix, iy), n) in &per_tile {
        let b = BBox {
            left: ix * tile_dbu,
            bottom: iy * tile_dbu,
            right: (ix + 1) * tile_dbu,
            top: (iy + 1) * tile_dbu,
        };
        let strength = (f64::from(*n) + 1.0).ln() / (f64::from(most) + 1.0).ln();
        let alpha = (60.0 + 140.0 * strength).round() as u8;
        let mut pb = PathBuilder::new();
        map.rect(&mut pb, &b);
        fill(&mut pixmap, pb, [230, 40, 40, alpha]);
    }
    let mut pb = PathBuilder::new();
    for (x, y) in &canonical {
        let (px, py) = map.px(*x, *y);
        if let Some(r) = tiny_skia::Rect::from_xywh(px - 1.5, py - 1.5, 3.0, 3.0) {
            pb.push_rect(r);
        }
    }
    fill(&mut pixmap, pb, [255, 220, 40, 255]);
    Ok(Picture {
        width,
        height,
        rgba: pixmap.take_demultiplied(),
        nm_per_pixel: grid.dbu_nm / scale,
    })
}
