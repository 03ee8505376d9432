//! The optimized mask: the drawn polygons outside the optimization window, the ILT's
//! binary pixels inside. As pixels (to image it again and to picture it) and as polygons
//! (for the mask rules and the GDSII artifact).

use reticle_kernel::Grid;
use reticle_kernel::raster::PixelFrame;
use reticle_kernel::rules::Region;
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

/// A `width × height` grid with 1 on the pixels of `px`, 0 elsewhere (the ILT's window).
#[must_use]
pub fn window_grid(width: usize, height: usize, px: PixelWindow) -> Grid<u8> {
    let mut window = Grid::filled(width, height, 0u8);
    for y in px.1..px.3 {
        for x in px.0..px.2 {
            *window.at_mut(x, y) = 1;
        }
    }
    window
}

/// Axis-aligned rectangles (dbu) covering the set pixels of `mask` inside the pixel window:
/// row runs, merged upwards while identical.
pub(crate) fn pixel_rectangles(
    mask: &Grid<u8>,
    frame: &PixelFrame,
    (x0, y0, x1, y1): PixelWindow,
) -> Vec<Polygon> {
    let xd = |x: usize| (frame.left_nm + x as f64 * frame.pixel_nm).round() as i64;
    let yd = |y: usize| (frame.bottom_nm + y as f64 * frame.pixel_nm).round() as i64;
    let runs_of = |y: usize| {
        let mut runs = Vec::new();
        let mut x = x0;
        while x < x1 {
            if *mask.at(x, y) != 0 {
                let start = x;
                while x < x1 && *mask.at(x, y) != 0 {
                    x += 1;
                }
                runs.push((start, x));
            } else {
                x += 1;
            }
        }
        runs
    };
    // Open rectangles: run → first row.
    let mut open: std::collections::BTreeMap<(usize, usize), usize> = Default::default();
    let mut out = Vec::new();
    let close = |(a, b): (usize, usize), from: usize, to: usize, out: &mut Vec<Polygon>| {
        out.push(Polygon::new(vec![
            Point::new(xd(a), yd(from)),
            Point::new(xd(b), yd(from)),
            Point::new(xd(b), yd(to)),
            Point::new(xd(a), yd(to)),
        ]));
    };
    for y in y0..y1 {
        let runs = runs_of(y);
        let ended: Vec<((usize, usize), usize)> = open
            .iter()
            .filter(|(run, _)| !runs.contains(run))
            .map(|(run, from)| (*run, *from))
            .collect();
        for (run, from) in ended {
            open.remove(&run);
            close(run, from, y, &mut out);
        }
        for run in runs {
            open.entry(run).or_insert(y);
        }
    }
    for (run, from) in open {
        close(run, from, y1, &mut out);
    }
    out
}

/// `window` minus the box `hole`, as up to four boxes (left, right, bottom, top strips).
pub(crate) fn boxes_around(window: BBox, hole: BBox) -> Vec<BBox> {
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
    /// Drawn fragments outside the window and pixel rectangles inside: their union is the
    /// mask (what the mask rules check).
    pub pieces: Vec<Polygon>,
    /// What GDSII gets: the merged hulls when no merged polygon has a hole, else the
    /// pieces (GDSII polygons cannot hold holes without cut lines).
    pub written: Vec<Polygon>,
    /// `merged_polygons`, `holes`, `written_as`, `gds_polygons`, `gds_vertices`.
    pub summary: Value,
}

/// The optimized mask of `imaged` with the ILT result `ilt_mask` in the pixel window `px`.
#[must_use]
pub fn mask_polygons(imaged: &ImagedWindow, ilt_mask: &Grid<u8>, px: PixelWindow) -> MaskPolygons {
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
    pieces.extend(pixel_rectangles(ilt_mask, frame, px));
    let region = Region::from_polygons(&pieces);
    let merged = region.polygons();
    let holes: usize = merged.iter().map(|p| p.holes.len()).sum();
    let written: Vec<Polygon> = if holes == 0 {
        merged
            .iter()
            .map(|p| Polygon::new(p.hull.clone()))
            .collect()
    } else {
        pieces.clone()
    };
    let vertices: usize = written.iter().map(|p| p.points.len()).sum();
    let summary = json!({
        "merged_polygons": merged.len(),
        "holes": holes,
        "written_as": if holes == 0 { "merged_hulls" } else { "pieces" },
        "gds_polygons": written.len(),
        "gds_vertices": vertices,
    });
    MaskPolygons {
        pieces,
        written,
        summary,
    }
}

/// `base` with the pixels of `px` taken from `ilt` (converted by `value`).
fn composed<T: Clone>(
    base: &Grid<T>,
    ilt: &Grid<u8>,
    px: PixelWindow,
    value: impl Fn(u8) -> T,
) -> Grid<T> {
    let mut out = base.clone();
    for y in px.1..px.3 {
        for x in px.0..px.2 {
            *out.at_mut(x, y) = value(*ilt.at(x, y));
        }
    }
    out
}

/// The f32 mask imaged after optimization: the drawn coverage outside the pixel window,
/// the ILT pixels inside.
#[must_use]
pub fn composed_mask(imaged: &ImagedWindow, ilt: &Grid<u8>, px: PixelWindow) -> Grid<f32> {
    composed(&imaged.mask, ilt, px, f32::from)
}

/// The after-mask as a binary picture (for the PNG and the changed-pixel count): the
/// target outside the pixel window, the ILT pixels inside.
#[must_use]
pub fn composed_binary(imaged: &ImagedWindow, ilt: &Grid<u8>, px: PixelWindow) -> Grid<u8> {
    composed(&imaged.target, ilt, px, |v| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rectangles_cover_exactly_the_set_pixels() {
        let frame = PixelFrame {
            left_nm: 100.0,
            bottom_nm: 0.0,
            pixel_nm: 2.0,
            width: 4,
            height: 3,
        };
        // Row 0: .XX.  Row 1: .XX.  Row 2: X...
        let mask = Grid {
            width: 4,
            height: 3,
            data: vec![0, 1, 1, 0, 0, 1, 1, 0, 1, 0, 0, 0],
        };
        let rects = pixel_rectangles(&mask, &frame, (0, 0, 4, 3));
        let area: i128 = rects.iter().map(|p| p.signed_area2().abs() / 2).sum();
        assert_eq!(area, 5 * 4, "5 pixels of 2×2 dbu");
        assert_eq!(rects.len(), 2);
        assert!(
            rects
                .iter()
                .any(|r| r.bbox()
                    == Some(BBox::from_corners(Point::new(102, 0), Point::new(106, 4))))
        );
    }

    #[test]
    fn the_box_minus_a_hole_is_four_strips() {
        let w = BBox::from_corners(Point::new(0, 0), Point::new(10, 10));
        let h = BBox::from_corners(Point::new(2, 3), Point::new(5, 7));
        let strips = boxes_around(w, h);
        let area: i64 = strips.iter().map(|b| b.width() * b.height()).sum();
        assert_eq!(area, 100 - 12);
        assert_eq!(boxes_around(w, w).len(), 0);
    }

    #[test]
    fn the_pixel_window_covers_partly_inside_pixels_and_stays_on_the_grid() {
        let frame = PixelFrame {
            left_nm: 0.0,
            bottom_nm: 0.0,
            pixel_nm: 4.0,
            width: 10,
            height: 10,
        };
        assert_eq!(
            pixel_window(&frame, 1.0, [5.0, 0.0, 13.0, 8.0]),
            (1, 0, 4, 2)
        );
        assert_eq!(
            pixel_window(&frame, 1.0, [-50.0, -50.0, 500.0, 500.0]),
            (0, 0, 10, 10)
        );
        let grid = window_grid(10, 10, (1, 0, 4, 2));
        assert_eq!(grid.data.iter().filter(|&&v| v == 1).count(), 6);
    }
}
