//! `set_view` and `render_view`: the layout inside a box drawn to a PNG with tiny-skia,
//! byte-stable for identical input (fixed palette, fixed encoder settings, no timestamps,
//! no text rendering).
//!
//! The view keeps the box's aspect ratio: the box is scaled uniformly to fit the image and
//! centred. Each layer is filled with one colour (its position in the layout's sorted layer
//! list picks it from a fixed palette); polygons are oriented counter-clockwise and filled
//! with the non-zero rule, so overlaps within a layer are drawn once. Texts are not drawn.

use std::collections::BTreeMap;

use blake2::digest::{Update, VariableOutput};
use serde::{Deserialize, Serialize};
use tiny_skia::{FillRule, Paint, PathBuilder, Pixmap, Stroke, Transform};

use super::error::ObserveError;
use super::region::{PlacedGeometry, PlacedShape, ShapeLocator, resolve_ids};
use super::units::{MicronBox, ObservedLayer, layer_filter};
use crate::flatten::{FlattenOptions, flatten};
use crate::geom::{BBox, Polygon};
use crate::limits::Limits;
use crate::model::Library;

/// Largest accepted image side (pixels).
pub const MAX_IMAGE_SIDE: u32 = 4096;
/// Most polygons one render may draw.
pub const MAX_RENDER_SHAPES: u64 = 2_000_000;

/// `style`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RenderStyle {
    /// White background, translucent layer colours.
    #[default]
    Light,
    /// Black background, translucent layer colours.
    Dark,
    /// Black background, shapes opaque white without anti-aliasing (a binary mask).
    Mask,
}

/// The `view` object of `set_view`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct View {
    /// Cell shown.
    pub cell: String,
    /// Box shown (µm, on the grid).
    pub box_um: MicronBox,
    /// Layers shown (empty: all), sorted, with names.
    pub layers: Vec<ObservedLayer>,
}

/// `set_view`: validates a view and returns it normalized.
///
/// # Errors
/// `TOP_CELL_NOT_FOUND`, `INVALID_BOX`, `INVALID_LAYER`.
pub fn set_view(
    lib: &Library,
    cell: &str,
    box_um: &MicronBox,
    layers: Option<&[ObservedLayer]>,
) -> Result<View, ObserveError> {
    super::cells::cell_by_name(lib, cell)?;
    let b = box_um.to_dbu(lib.dbu_um())?;
    let keys = layer_filter(lib, layers)?;
    Ok(View {
        cell: cell.to_owned(),
        box_um: MicronBox::from_dbu(&b, lib.dbu_um()),
        layers: keys
            .into_iter()
            .flatten()
            .map(|k| ObservedLayer::named(lib, k))
            .collect(),
    })
}

/// One `annotations` entry of `render_view`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Annotation {
    /// `shape_outline` (outlines `target_ids`) or `box` (outlines `box`).
    pub kind: String,
    /// Shapes to outline.
    #[serde(default)]
    pub target_ids: Vec<String>,
    /// `#rrggbb` or `#rrggbbaa` (default `#ff3b30`).
    #[serde(default)]
    pub color: Option<String>,
    /// Box to outline (µm), for `kind = "box"`.
    #[serde(default, rename = "box")]
    pub box_um: Option<MicronBox>,
}

/// An annotation ready to draw.
#[derive(Debug, Clone, PartialEq)]
pub enum AnnotationSpec {
    /// Outline these shapes.
    Outline {
        /// The shapes.
        shapes: Vec<PlacedShape>,
        /// RGBA.
        color: [u8; 4],
    },
    /// Outline this box (dbu).
    Box {
        /// The box.
        bbox: BBox,
        /// RGBA.
        color: [u8; 4],
    },
}

/// Parses `#rrggbb` / `#rrggbbaa`.
///
/// # Errors
/// [`ObserveError::InvalidInput`].
pub fn parse_color(s: &str) -> Result<[u8; 4], ObserveError> {
    let bad = || ObserveError::InvalidInput {
        reason: format!("color {s:?} is not #rrggbb or #rrggbbaa"),
    };
    let hex = s.strip_prefix('#').ok_or_else(bad)?;
    if !(hex.len() == 6 || hex.len() == 8) || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad());
    }
    let byte = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).map_err(|_| bad());
    Ok([
        byte(0)?,
        byte(2)?,
        byte(4)?,
        if hex.len() == 8 { byte(6)? } else { 255 },
    ])
}

/// Resolves request annotations (ids through the session's locators).
///
/// # Errors
/// `INVALID_TARGET` for unknown ids, `INVALID_BOX`, `INVALID_INPUT` for an unknown kind or
/// a malformed colour.
pub fn resolve_annotations(
    lib: &Library,
    annotations: &[Annotation],
    locators: &BTreeMap<String, ShapeLocator>,
) -> Result<Vec<AnnotationSpec>, ObserveError> {
    annotations
        .iter()
        .map(|a| {
            let color = parse_color(a.color.as_deref().unwrap_or("#ff3b30"))?;
            match a.kind.as_str() {
                "shape_outline" => Ok(AnnotationSpec::Outline {
                    shapes: resolve_ids(lib, &a.target_ids, locators)?,
                    color,
                }),
                "box" => {
                    let b = a.box_um.ok_or_else(|| ObserveError::InvalidBox {
                        reason: "a box annotation needs `box`".into(),
                    })?;
                    Ok(AnnotationSpec::Box {
                        bbox: b.to_dbu(lib.dbu_um())?,
                        color,
                    })
                }
                other => Err(ObserveError::InvalidInput {
                    reason: format!("unknown annotation kind {other:?} (shape_outline, box)"),
                }),
            }
        })
        .collect()
}

/// What to render.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderSpec {
    /// Cell.
    pub cell: String,
    /// Box (µm).
    pub box_um: MicronBox,
    /// Layer filter (absent or empty: all).
    pub layers: Option<Vec<ObservedLayer>>,
    /// Image width (pixels).
    pub width: u32,
    /// Image height (pixels).
    pub height: u32,
    /// Style.
    pub style: RenderStyle,
    /// Most shapes the view may flatten to (the host's `RETICLE_MAX_SHAPES`);
    /// [`MAX_RENDER_SHAPES`] caps it.
    pub max_shapes: u64,
}

/// A rendered image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// PNG bytes (RGBA8).
    pub png: Vec<u8>,
    /// `rnd_` + 16 hex digits of BLAKE2b over the PNG: equal images, equal ids.
    pub render_id: String,
    /// Width (pixels).
    pub width: u32,
    /// Height (pixels).
    pub height: u32,
}

/// A fixed palette (colour-blind friendly first, then more).
const PALETTE: [[u8; 3]; 12] = [
    [0x00, 0x72, 0xb2],
    [0xd5, 0x5e, 0x00],
    [0x00, 0x9e, 0x73],
    [0xcc, 0x79, 0xa7],
    [0xe6, 0x9f, 0x00],
    [0x56, 0xb4, 0xe9],
    [0xf0, 0xe4, 0x42],
    [0x88, 0x22, 0x55],
    [0x44, 0xaa, 0x99],
    [0x99, 0x99, 0x33],
    [0x33, 0x22, 0x88],
    [0x66, 0x66, 0x66],
];

/// Maps dbu to pixels: uniform scale, box centred.
struct ViewMap {
    scale: f64,
    left: f64,
    top: f64,
    ox: f64,
    oy: f64,
}

impl ViewMap {
    fn new(b: &BBox, w: u32, h: u32) -> Self {
        let (bw, bh) = (b.width() as f64, b.height() as f64);
        let scale = (f64::from(w) / bw).min(f64::from(h) / bh);
        Self {
            scale,
            left: b.left as f64,
            top: b.top as f64,
            ox: (f64::from(w) - bw * scale) / 2.0,
            oy: (f64::from(h) - bh * scale) / 2.0,
        }
    }

    fn px(&self, x: f64, y: f64) -> (f32, f32) {
        (
            (self.ox + (x - self.left) * self.scale) as f32,
            (self.oy + (self.top - y) * self.scale) as f32,
        )
    }

    fn add_polygon(&self, pb: &mut PathBuilder, poly: &Polygon, ccw: bool) {
        let mut pts: Vec<(f32, f32)> = poly
            .points
            .iter()
            .map(|p| self.px(p.x as f64, p.y as f64))
            .collect();
        if ccw && poly.signed_area2() < 0 {
            pts.reverse();
        }
        let Some(first) = pts.first() else { return };
        pb.move_to(first.0, first.1);
        for p in &pts[1..] {
            pb.line_to(p.0, p.1);
        }
        pb.close();
    }
}

fn render_failed(reason: &str) -> ObserveError {
    ObserveError::RenderFailed {
        reason: reason.to_owned(),
    }
}

/// `render_view`: draws the view and annotations and encodes a PNG.
///
/// # Errors
/// `TOP_CELL_NOT_FOUND`, `INVALID_BOX`, `INVALID_LAYER`, `TOOL_LIMIT_EXCEEDED` (image size
/// outside 1..=[`MAX_IMAGE_SIDE`]), `QUERY_TOO_LARGE` (more than [`MAX_RENDER_SHAPES`]
/// polygons in view), `RENDER_FAILED`.
pub fn render_view(
    lib: &Library,
    spec: &RenderSpec,
    annotations: &[AnnotationSpec],
) -> Result<Rendered, ObserveError> {
    for (what, v) in [
        ("image_size.width", spec.width),
        ("image_size.height", spec.height),
    ] {
        if v == 0 || v > MAX_IMAGE_SIDE {
            return Err(ObserveError::ToolLimitExceeded {
                what,
                requested: u64::from(v),
                max: u64::from(MAX_IMAGE_SIDE),
            });
        }
    }
    let root = super::cells::cell_by_name(lib, &spec.cell)?;
    let view = spec.box_um.to_dbu(lib.dbu_um())?;
    let layers = layer_filter(lib, spec.layers.as_deref())?;
    let map = ViewMap::new(&view, spec.width, spec.height);
    // Clip a pixel beyond the view so edges at the border are not drawn as shape edges.
    let margin = (1.0 / map.scale).ceil() as i64 + 1;
    let clip = BBox {
        left: view.left.saturating_sub(margin),
        bottom: view.bottom.saturating_sub(margin),
        right: view.right.saturating_add(margin),
        top: view.top.saturating_add(margin),
    };
    let flat = flatten(
        lib,
        root,
        &FlattenOptions {
            clip: Some(clip),
            layers,
            include_texts: false,
            limits: Limits {
                max_shapes: spec.max_shapes.min(MAX_RENDER_SHAPES),
                ..Limits::default()
            },
        },
    )?;

    let mut pixmap = Pixmap::new(spec.width, spec.height)
        .ok_or_else(|| render_failed("cannot allocate the image"))?;
    let (bg, alpha) = match spec.style {
        RenderStyle::Light => ([255, 255, 255], 150),
        RenderStyle::Dark => ([0, 0, 0], 170),
        RenderStyle::Mask => ([0, 0, 0], 255),
    };
    pixmap.fill(tiny_skia::Color::from_rgba8(bg[0], bg[1], bg[2], 255));
    let all_layers = lib.layers();
    for (key, polys) in &flat.polygons {
        let mut pb = PathBuilder::new();
        for p in polys {
            map.add_polygon(&mut pb, p, true);
        }
        let Some(path) = pb.finish() else { continue };
        let mut paint = Paint::default();
        if spec.style == RenderStyle::Mask {
            paint.set_color_rgba8(255, 255, 255, 255);
            paint.anti_alias = false;
        } else {
            let i = all_layers.iter().position(|k| k == key).unwrap_or(0);
            let c = PALETTE[i % PALETTE.len()];
            paint.set_color_rgba8(c[0], c[1], c[2], alpha);
            paint.anti_alias = true;
        }
        pixmap.fill_path(
            &path,
            &paint,
            FillRule::Winding,
            Transform::identity(),
            None,
        );
    }

    for a in annotations {
        let (mut pb, color) = (PathBuilder::new(), a.color());
        match a {
            AnnotationSpec::Outline { shapes, .. } => {
                for s in shapes {
                    match &s.geometry {
                        PlacedGeometry::Polygon(p) => map.add_polygon(&mut pb, p, false),
                        PlacedGeometry::Text(p) => {
                            let (x, y) = map.px(p.x as f64, p.y as f64);
                            pb.move_to(x - 4.0, y);
                            pb.line_to(x + 4.0, y);
                            pb.move_to(x, y - 4.0);
                            pb.line_to(x, y + 4.0);
                        }
                        PlacedGeometry::EmptyPath => {}
                    }
                }
            }
            AnnotationSpec::Box { bbox, .. } => {
                map.add_polygon(&mut pb, &Polygon::rect(*bbox), false)
            }
        }
        let Some(path) = pb.finish() else { continue };
        let mut paint = Paint::default();
        paint.set_color_rgba8(color[0], color[1], color[2], color[3]);
        paint.anti_alias = true;
        let stroke = Stroke {
            width: 2.0,
            ..Stroke::default()
        };
        pixmap.stroke_path(&path, &paint, &stroke, Transform::identity(), None);
    }

    let (width, height) = (spec.width, spec.height);
    let png = encode_png(width, height, &pixmap.take_demultiplied())?;
    let render_id = content_id("rnd_", &png);
    Ok(Rendered {
        png,
        render_id,
        width,
        height,
    })
}

impl AnnotationSpec {
    const fn color(&self) -> [u8; 4] {
        match self {
            Self::Outline { color, .. } | Self::Box { color, .. } => *color,
        }
    }
}

/// PNG with fixed settings: RGBA8, balanced deflate, adaptive filtering, no ancillary
/// chunks (no time, no text), so equal pixels give equal bytes.
fn encode_png(width: u32, height: u32, rgba: &[u8]) -> Result<Vec<u8>, ObserveError> {
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, width, height);
    enc.set_color(png::ColorType::Rgba);
    enc.set_depth(png::BitDepth::Eight);
    enc.set_compression(png::Compression::Balanced);
    let mut writer = enc
        .write_header()
        .map_err(|e| render_failed(&format!("png header: {e}")))?;
    writer
        .write_image_data(rgba)
        .map_err(|e| render_failed(&format!("png data: {e}")))?;
    writer
        .finish()
        .map_err(|e| render_failed(&format!("png finish: {e}")))?;
    Ok(out)
}

/// `prefix` + 16 hex digits of BLAKE2b-64 over `bytes`.
#[must_use]
pub fn content_id(prefix: &str, bytes: &[u8]) -> String {
    let mut out = [0u8; 8];
    if let Ok(mut h) = blake2::Blake2bVar::new(8) {
        h.update(bytes);
        let _ = h.finalize_variable(&mut out);
    }
    let mut s = String::from(prefix);
    for b in out {
        s.push_str(&format!("{b:02x}"));
    }
    s
}
