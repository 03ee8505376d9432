//! The optimized mask: the drawn polygons outside the optimization window, the legal
//! polygons of the ILT inside (`reticle_kernel::ilt::optimize_legal`), as the pieces the
//! mask rules check and as the whole polygons GDSII gets.

use reticle_kernel::mrc::whole_polygons;
use reticle_kernel::raster::PixelFrame;
use reticle_layout::clip::clip_polygon;
use reticle_layout::{BBox, Point, Polygon};
use serde_json::{Value, json};

use crate::window::ImagedWindow;

/// Pixels `[x0, x1) × [y0, y1)` of a frame, as `(x0, y0, x1, y1)`.
pub type PixelWindow = (usize, usize, usize, usize);

/// The pixels of `frame` (dbu units) lying inside the nm box `b`, clamped to the grid.
/// Pixels partly inside count (the window covers the marker).
#[must_use]
pub fn pixel_window(frame: &PixelFrame, dbu_nm: f64, b: [f64; 4]) -> PixelWindow {
    let p = frame.pixel_nm;
    let to_px = |nm: f64, origin: f64| (nm / dbu_nm - origin) / p;
    let clamp = |v: f64, n: usize| v.clamp(0.0, n as f64) as usize;
    let x0 = clamp(to_px(b[0], frame.left_nm).floor(), frame.width);
    let x1 = clamp(to_px(b[2], frame.left_nm).ceil(), frame.width);
    let y0 = clamp(to_px(b[1], frame.bottom_nm).floor(), frame.height);
    let y1 = clamp(to_px(b[3], frame.bottom_nm).ceil(), frame.height);
    (x0, y0, x1.max(x0), y1.max(y0))
}

/// `window` minus the box `hole`, as up to four boxes (left, right, bottom, top strips).
pub fn boxes_around(window: BBox, hole: BBox) -> Vec<BBox> {
    let mut out = Vec::new();
    let mut push = |l: i64, b: i64, r: i64, t: i64| {
        if r > l && t > b {
            out.push(BBox::from_corners(Point::new(l, b), Point::new(r, t)));
        }
    };
    push(window.left, window.bottom, hole.left, window.top);
    push(hole.right, window.bottom, window.right, window.top);
    push(hole.left, window.bottom, hole.right, hole.bottom);
    push(hole.left, hole.top, hole.right, window.top);
    out
}

/// The optimized mask as polygons (dbu).
#[derive(Debug, Clone)]
pub struct MaskPolygons {
    /// Drawn fragments outside the window and the legal polygons inside: their union is
    /// the mask (what the mask rules check).
    pub pieces: Vec<Polygon>,
    /// What GDSII gets: the union as whole polygons, holes joined to their hull by cut
    /// lines.
    pub written: Vec<Polygon>,
    /// `merged_polygons`, `holes`, `written_as`, `gds_polygons`, `gds_vertices`.
    pub summary: Value,
}

/// The drawn polygons of `imaged` outside the pixel window `px`, clipped to the clip
/// (exactly as drawn, not their raster).
#[must_use]
pub fn context_pieces(imaged: &ImagedWindow, px: PixelWindow) -> Vec<Polygon> {
    let frame = &imaged.frame;
    let xd = |x: usize| (frame.left_nm + x as f64 * frame.pixel_nm).round() as i64;
    let yd = |y: usize| (frame.bottom_nm + y as f64 * frame.pixel_nm).round() as i64;
    let hole = BBox::from_corners(
        Point::new(xd(px.0), yd(px.1)),
        Point::new(xd(px.2), yd(px.3)),
    );
    let clip = imaged.layout.window;
    let mut pieces: Vec<Polygon> = Vec::new();
    for b in boxes_around(clip, hole) {
        pieces.extend(
            imaged
                .layout
                .polygons
                .iter()
                .filter_map(|p| clip_polygon(p, &b)),
        );
    }
    pieces
}

/// The optimized mask: the drawn `context` outside the window and the legal polygons
/// `inside` it.
#[must_use]
pub fn mask_polygons(context: Vec<Polygon>, inside: &[Polygon]) -> MaskPolygons {
    let mut pieces = context;
    pieces.extend_from_slice(inside);
    let whole = whole_polygons(&pieces);
    // A hole that could not be joined cannot be written as a polygon of its own (it
    // would add its area): then the pieces are written, as before cut lines existed.
    let joined = whole.unjoined == 0;
    let written = if joined {
        whole.polygons
    } else {
        pieces.clone()
    };
    let vertices: usize = written.iter().map(|p| p.points.len()).sum();
    let summary = json!({
        "merged_polygons": whole.merged,
        "holes": whole.holes,
        "written_as": if joined { "whole_polygons" } else { "pieces" },
        "gds_polygons": written.len(),
        "gds_vertices": vertices,
    });
    MaskPolygons {
        pieces,
        written,
        summary,
    }
}
