//! `measure_geometry` (seed 003's eight modes) and `analyze_waveguide`, over shapes resolved
//! from ids (see [`super::region::resolve_ids`]). Geometry is in the query cell's
//! coordinates; values come back in microns (rounded to 6 decimals) and dbu (rounded to an
//! integer; square dbu for `overlap`).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::error::ObserveError;
use super::geometry::{
    P, dist, intersection_area, point_polygon_distance, polygon_distance, polyline_distance,
};
use super::region::{PlacedGeometry, PlacedShape};
use super::units::{DbuBox, MicronBox, MicronPoint, ObservedLayer, dbu_to_um, round_um};
use crate::model::{Library, PathEnds, Shape};

/// `measure_geometry` modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MeasureMode {
    /// Width of a path (a box: its short side). 1 target.
    PathWidth,
    /// Centre-line length of a path (a box: its long side). 1 target.
    SegmentLength,
    /// Smallest distance between two centre lines (paths: spines; boxes and polygons: the
    /// long mid-line of their box). 2 targets.
    CenterlineDistance,
    /// Smallest edge-to-edge distance between two filled shapes (0 when they touch or
    /// overlap). 2 targets.
    EdgeGap,
    /// Bend radius of a path from its vertices. 1 target.
    BendRadiusEstimate,
    /// Area of the intersection of two filled shapes. 2 targets.
    Overlap,
    /// Distance from a text anchor to another text anchor or shape. 2 targets.
    LabelDistance,
    /// Smallest distance between the ports of two targets (path ends, text anchors, box
    /// centres). 2 targets.
    PortSpacing,
}

impl MeasureMode {
    /// How many targets the mode takes (seed 003).
    #[must_use]
    pub const fn required_targets(self) -> usize {
        match self {
            Self::PathWidth | Self::SegmentLength | Self::BendRadiusEstimate => 1,
            _ => 2,
        }
    }
}

/// `measure_geometry` payload (the host adds `session_id`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeasurePayload {
    /// The mode.
    pub mode: MeasureMode,
    /// The targets, as given.
    pub target_ids: Vec<String>,
    /// The value in µm (µm² for `overlap`); null when the quantity does not exist (the bend
    /// radius of a straight path).
    pub value_um: Option<f64>,
    /// The value in dbu (dbu² for `overlap`), rounded to an integer.
    pub value_dbu: Option<i64>,
    /// `method` and mode-specific facts.
    pub details: Value,
}

fn invalid(s: &PlacedShape, reason: &str) -> ObserveError {
    ObserveError::InvalidTarget {
        id: s.id.clone(),
        reason: reason.to_owned(),
    }
}

/// The filled outline of a shape (`None` for texts and empty paths).
fn ring(s: &PlacedShape) -> Option<Vec<P>> {
    match &s.geometry {
        PlacedGeometry::Polygon(p) => {
            Some(p.points.iter().map(|q| (q.x as f64, q.y as f64)).collect())
        }
        _ => None,
    }
}

fn filled(s: &PlacedShape) -> Result<Vec<P>, ObserveError> {
    ring(s).ok_or_else(|| {
        invalid(
            s,
            "needs a shape with an area (not a text or an empty path)",
        )
    })
}

/// A path's spine; a box's or polygon's long mid-line; a text's anchor.
fn centerline(s: &PlacedShape) -> Result<Vec<P>, ObserveError> {
    if let Some(sp) = s.spine() {
        return Ok(sp);
    }
    if let PlacedGeometry::Text(p) = s.geometry {
        return Err(invalid(
            s,
            &format!("a text (at {},{}) has no centre line", p.x, p.y),
        ));
    }
    let b = s.bbox().ok_or_else(|| invalid(s, "empty shape"))?;
    let (l, bo, r, t) = (b.left as f64, b.bottom as f64, b.right as f64, b.top as f64);
    Ok(if b.width() >= b.height() {
        let y = (bo + t) / 2.0;
        vec![(l, y), (r, y)]
    } else {
        let x = (l + r) / 2.0;
        vec![(x, bo), (x, t)]
    })
}

/// Path ends, text anchors, or the centre of a box or polygon.
fn ports(s: &PlacedShape) -> Result<Vec<P>, ObserveError> {
    if let Some(sp) = s.spine() {
        let (Some(a), Some(b)) = (sp.first(), sp.last()) else {
            return Err(invalid(s, "path without vertices"));
        };
        return Ok(if a == b { vec![*a] } else { vec![*a, *b] });
    }
    if let PlacedGeometry::Text(p) = s.geometry {
        return Ok(vec![(p.x as f64, p.y as f64)]);
    }
    let b = s.bbox().ok_or_else(|| invalid(s, "empty shape"))?;
    Ok(vec![(
        (b.left as f64 + b.right as f64) / 2.0,
        (b.bottom as f64 + b.top as f64) / 2.0,
    )])
}

fn polyline_length(sp: &[P]) -> f64 {
    sp.windows(2).map(|w| dist(w[0], w[1])).sum()
}

/// Median circumradius of consecutive non-collinear vertex triples of a spine, and how many
/// triples it used; `None` for a straight spine. Exact for vertices on a circular arc.
#[must_use]
pub fn bend_radius(spine: &[P]) -> Option<(f64, usize)> {
    let mut radii: Vec<f64> = spine
        .windows(3)
        .filter_map(|w| {
            let (a, b, c) = (dist(w[0], w[1]), dist(w[1], w[2]), dist(w[0], w[2]));
            let cross =
                (w[1].0 - w[0].0) * (w[2].1 - w[0].1) - (w[1].1 - w[0].1) * (w[2].0 - w[0].0);
            let area2 = cross.abs();
            // Collinear (relative to the triangle's size): no bend here.
            (area2 > 1e-9 * a.max(b).max(c).powi(2)).then(|| a * b * c / (2.0 * area2))
        })
        .collect();
    if radii.is_empty() {
        return None;
    }
    radii.sort_by(f64::total_cmp);
    let n = radii.len();
    let median = if n % 2 == 1 {
        radii[n / 2]
    } else {
        (radii[n / 2 - 1] + radii[n / 2]) / 2.0
    };
    Some((median, n))
}

/// `measure_geometry` over resolved targets.
///
/// # Errors
/// [`ObserveError::InvalidTarget`] for a wrong number of targets or a target of the wrong
/// kind for the mode.
pub fn measure_geometry(
    lib: &Library,
    mode: MeasureMode,
    targets: &[PlacedShape],
) -> Result<MeasurePayload, ObserveError> {
    let need = mode.required_targets();
    if targets.len() != need {
        return Err(ObserveError::InvalidTarget {
            id: targets
                .iter()
                .map(|t| t.id.as_str())
                .collect::<Vec<_>>()
                .join(","),
            reason: format!("mode needs exactly {need} target(s), got {}", targets.len()),
        });
    }
    let dbu = lib.dbu_um();
    let (value, details): (Option<f64>, Value) = match mode {
        MeasureMode::PathWidth => {
            let s = &targets[0];
            if let Some(w) = s.path_width() {
                (
                    Some(w),
                    json!({ "method": "path_width_times_magnification" }),
                )
            } else if matches!(s.shape, Shape::Box(_)) {
                let b = s.bbox().ok_or_else(|| invalid(s, "empty box"))?;
                (
                    Some(b.width().min(b.height()) as f64),
                    json!({ "method": "box_short_side" }),
                )
            } else {
                return Err(invalid(s, "path_width needs a path or a box"));
            }
        }
        MeasureMode::SegmentLength => {
            let s = &targets[0];
            if let Some(sp) = s.spine() {
                let segs: Vec<f64> = sp
                    .windows(2)
                    .map(|w| dist(w[0], w[1]))
                    .filter(|l| *l > 0.0)
                    .collect();
                let shown: Vec<f64> = segs.iter().take(100).map(|l| dbu_to_um(*l, dbu)).collect();
                (
                    Some(polyline_length(&sp)),
                    json!({
                        "method": "path_centerline_length",
                        "segment_count": segs.len(),
                        "segment_lengths_um": shown,
                    }),
                )
            } else if matches!(s.shape, Shape::Box(_)) {
                let b = s.bbox().ok_or_else(|| invalid(s, "empty box"))?;
                (
                    Some(b.width().max(b.height()) as f64),
                    json!({ "method": "box_long_side" }),
                )
            } else {
                return Err(invalid(s, "segment_length needs a path or a box"));
            }
        }
        MeasureMode::CenterlineDistance => {
            let (a, b) = (centerline(&targets[0])?, centerline(&targets[1])?);
            (
                Some(polyline_distance(&a, &b)),
                json!({ "method": "min_distance_between_centerlines" }),
            )
        }
        MeasureMode::EdgeGap => {
            let (a, b) = (filled(&targets[0])?, filled(&targets[1])?);
            let d = polygon_distance(&a, &b);
            (
                Some(d),
                json!({ "method": "polygon_edge_to_edge_distance", "touching_or_overlapping": d == 0.0 }),
            )
        }
        MeasureMode::BendRadiusEstimate => {
            let s = &targets[0];
            let sp = s
                .spine()
                .ok_or_else(|| invalid(s, "bend_radius_estimate needs a path"))?;
            match bend_radius(&sp) {
                Some((r, n)) => (
                    Some(r),
                    json!({ "method": "median_circumradius_of_consecutive_vertices", "samples": n }),
                ),
                None => (
                    None,
                    json!({ "method": "median_circumradius_of_consecutive_vertices", "samples": 0, "reason": "straight path: no bend" }),
                ),
            }
        }
        MeasureMode::Overlap => {
            let (a, b) = (filled(&targets[0])?, filled(&targets[1])?);
            let area = intersection_area(&a, &b);
            let um2 = round_um(area * dbu * dbu);
            return Ok(MeasurePayload {
                mode,
                target_ids: targets.iter().map(|t| t.id.clone()).collect(),
                value_um: Some(um2),
                value_dbu: Some(area.round() as i64),
                details: json!({ "method": "polygon_intersection_area", "units": "um2 / dbu2" }),
            });
        }
        MeasureMode::LabelDistance => {
            let (s, t) = (&targets[0], &targets[1]);
            let anchor = |x: &PlacedShape| match x.geometry {
                PlacedGeometry::Text(p) => Some((p.x as f64, p.y as f64)),
                _ => None,
            };
            let d = match (anchor(s), anchor(t)) {
                (Some(p), Some(q)) => dist(p, q),
                (Some(p), None) => point_polygon_distance(p, &filled(t)?),
                (None, Some(q)) => point_polygon_distance(q, &filled(s)?),
                (None, None) => return Err(invalid(s, "label_distance needs at least one text")),
            };
            (
                Some(d),
                json!({ "method": "text_anchor_to_anchor_or_shape" }),
            )
        }
        MeasureMode::PortSpacing => {
            let (pa, pb) = (ports(&targets[0])?, ports(&targets[1])?);
            let mut best: Option<(f64, P, P)> = None;
            for a in &pa {
                for b in &pb {
                    let d = dist(*a, *b);
                    if best.is_none_or(|(bd, _, _)| d < bd) {
                        best = Some((d, *a, *b));
                    }
                }
            }
            let (d, a, b) = best.ok_or_else(|| invalid(&targets[0], "no ports"))?;
            (
                Some(d),
                json!({
                    "method": "min_distance_between_ports",
                    "ports_um": [MicronPoint::from_dbu(a.0, a.1, dbu), MicronPoint::from_dbu(b.0, b.1, dbu)],
                }),
            )
        }
    };
    Ok(MeasurePayload {
        mode,
        target_ids: targets.iter().map(|t| t.id.clone()).collect(),
        value_um: value.map(|v| dbu_to_um(v, dbu)),
        value_dbu: value.map(|v| v.round() as i64),
        details,
    })
}

/// `analyze_waveguide` payload (the host adds `session_id`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WaveguidePayload {
    /// The target id.
    pub target_id: String,
    /// Always `path`.
    pub kind: &'static str,
    /// Cell holding the path.
    pub cell: String,
    /// Layer.
    pub layer: ObservedLayer,
    /// Box of the outline (µm).
    pub bbox_um: MicronBox,
    /// Same (dbu).
    pub bbox_dbu: DbuBox,
    /// Centre of the box (µm).
    pub center_um: MicronPoint,
    /// Full width after placement (µm).
    pub path_width_um: f64,
    /// Centre-line length (µm).
    pub segment_length_um: f64,
    /// Median vertex circumradius (µm); null for a straight path.
    pub bend_radius_estimate_um: Option<f64>,
    /// `horizontal`, `vertical`, `diagonal` (one non-axis direction), `mixed` or `point`.
    pub orientation: &'static str,
    /// Always true.
    pub is_path: bool,
    /// Every segment horizontal or vertical.
    pub is_axis_aligned: bool,
    /// Caveats (e.g. `round_ends_approximated`, `non_manhattan_placement`).
    pub analysis_warnings: Vec<String>,
}

/// `analyze_waveguide` for one resolved path.
///
/// # Errors
/// [`ObserveError::InvalidTarget`] when the target is not a path (or its outline is empty).
pub fn analyze_waveguide(lib: &Library, s: &PlacedShape) -> Result<WaveguidePayload, ObserveError> {
    let Shape::Path(path) = &s.shape else {
        return Err(invalid(s, "analyze_waveguide needs a path shape"));
    };
    let spine = s.spine().unwrap_or_default();
    let width = s.path_width().unwrap_or(0.0);
    let bb = s
        .bbox()
        .ok_or_else(|| invalid(s, "path with an empty outline"))?;
    let dbu = lib.dbu_um();
    let segs: Vec<(f64, f64)> = spine
        .windows(2)
        .map(|w| (w[1].0 - w[0].0, w[1].1 - w[0].1))
        .filter(|d| d.0 != 0.0 || d.1 != 0.0)
        .collect();
    let eps = 1e-9;
    let horizontal = |d: &(f64, f64)| d.1.abs() <= eps * d.0.abs();
    let vertical = |d: &(f64, f64)| d.0.abs() <= eps * d.1.abs();
    let is_axis_aligned = segs.iter().all(|d| horizontal(d) || vertical(d));
    let orientation = if segs.is_empty() {
        "point"
    } else if segs.iter().all(horizontal) {
        "horizontal"
    } else if segs.iter().all(vertical) {
        "vertical"
    } else if segs.iter().all(|d| {
        let (a, b) = (segs[0], *d);
        (a.0 * b.1 - a.1 * b.0).abs() <= eps * (a.0.hypot(a.1) * b.0.hypot(b.1))
    }) {
        "diagonal"
    } else {
        "mixed"
    };
    let mut warnings = Vec::new();
    if matches!(path.ends, PathEnds::Round) {
        warnings.push("round_ends_approximated".to_owned());
    }
    if !s.transform.is_integral() {
        warnings.push("non_manhattan_placement".to_owned());
    }
    if (s.scale() - 1.0).abs() > 1e-12 {
        warnings.push("magnified_placement".to_owned());
    }
    if segs.len() > 1 && orientation == "mixed" {
        warnings.push("multi_segment_path".to_owned());
    }
    let bend = bend_radius(&spine);
    if bend.is_some_and(|(_, n)| n == 1) {
        warnings.push("single_corner_bend_radius_is_a_circumradius".to_owned());
    }
    Ok(WaveguidePayload {
        target_id: s.id.clone(),
        kind: "path",
        cell: s.cell.clone(),
        layer: ObservedLayer::named(lib, s.key),
        bbox_um: MicronBox::from_dbu(&bb, dbu),
        bbox_dbu: bb.into(),
        center_um: MicronPoint::from_dbu(
            (bb.left as f64 + bb.right as f64) / 2.0,
            (bb.bottom as f64 + bb.top as f64) / 2.0,
            dbu,
        ),
        path_width_um: dbu_to_um(width, dbu),
        segment_length_um: dbu_to_um(polyline_length(&spine), dbu),
        bend_radius_estimate_um: bend.map(|(r, _)| dbu_to_um(r, dbu)),
        orientation,
        is_path: true,
        is_axis_aligned,
        analysis_warnings: warnings,
    })
}
