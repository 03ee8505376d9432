//! Mask-rule legalization (MRC): turns an optimizer's binary mask into polygons that pass
//! the deck's mask rules, checked with the same rules engine as `evaluate`
//! ([`crate::rules::check_rule`] on the merged region).
//!
//! 1. **Projection.** Morphology at the pixel level sized from the rules: an opening
//!    removes what is narrower than the width rule, a closing fills what is narrower
//!    than the space and notch rules, and a second opening cuts the thin necks that the
//!    closing draws across gaps just under its diameter. With the Euclidean metric, two
//!    edges of a rounded end whose directions differ by more than 90° are compared, so
//!    a cap of radius `r` drawn with edges that turn by `α` each is a violation unless
//!    `2r·sin((90° − α)/2) ≥ d`: the disks have radius `0.92·d` (+1 pixel; docs/DECISIONS.md
//!    D100). Manhattan masks are snapped to a grid of `grid_px` pixels first (so every
//!    edge, jog and segment is a multiple of it) and use squares, whose corners the check
//!    ignores (edges meeting at 90° are not compared), of the rule's size rounded up to
//!    whole grid cells.
//! 2. **Small parts.** Islands below the area rule (or below one width square) are
//!    removed, holes below it filled.
//! 3. **Polygons.** Pixel boundaries traced per 4-connected component; curvilinear
//!    loops simplified within one pixel (vertices stay on the pixel grid, so the
//!    polygons are exact in dbu); holes joined by cut lines.
//! 4. **The real check, then repair.** Every mask rule runs on the polygons (with the
//!    drawn context outside the window). Manhattan masks are first repaired locally
//!    ([`LOCAL_ROUNDS`]): at each record the cheapest edit of the grid cells around it
//!    (filled, cleared or set to the drawn target over a box grown towards all sides, one
//!    side or one corner, then square-projected nearby) after which the rules find no new
//!    record on a crop around it. Curvilinear masks are projected again around each
//!    record with a larger element ([`REPAIR_ROUNDS`]). Then whole components are
//!    replaced ([`COMPONENT_ROUNDS`]): an assist feature involved is removed, a main
//!    feature involved takes the square-element projection of itself, and in the last
//!    rounds the drawn target. Whatever remains is returned in
//!    [`LegalMask::violations`]: the caller reports it, it never passes as legal.
//!
//! Only pixels inside the window change.

mod local;
pub mod morph;
// Public for the engine's integration tests (tests/engine/units), not an API.
#[doc(hidden)]
pub mod polygonize;
// Public for the engine's integration tests (tests/engine/units), not an API.
#[doc(hidden)]
pub mod seam;

use reticle_layout::Polygon;

use crate::rules::{AppliesTo, Metric, Region, Rule, RuleKind, Violation, check_rule};
use crate::{CancelToken, Cancelled, Grid};

use local::{paste_or, repair_locally};
pub use polygonize::PixelBox;

/// Radius of the disks for a Euclidean rule of `d`, in units of `d`. Two edges of a
/// rounded end whose directions differ by more than 90° are compared; on an arc of
/// radius `r` drawn with edges that each turn by `α`, the nearest such pair is
/// `2r·sin((90° − α)/2)` apart. With the half-pixel simplification `α` is about 25° at
/// these radii, so `r ≥ 0.92·d`.
const CAP_RADIUS: f64 = 0.92;

/// Curvilinear simplification tolerance (pixels).
const SIMPLIFY_PX: f64 = 1.0;

/// Rounds of repair by a stronger projection after the first check (curvilinear).
pub const REPAIR_ROUNDS: u32 = 2;

/// Rounds of local edits at each record after the first check (Manhattan): a second
/// round found no edit on the ten ICCAD-2013 clips.
pub const LOCAL_ROUNDS: u32 = 1;

/// Candidate edits tried per record by the local repair (a bound: 20 nm rules on the
/// 4 nm grid make at most 138).
const MAX_LOCAL_TRIES: usize = 160;

/// Rounds of repair by whole components after those.
pub const COMPONENT_ROUNDS: u32 = 8;

/// How the mask is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaskStyle {
    /// Smooth polygons of any angle (vertices on the pixel grid, within a pixel of the
    /// legal pixel boundary).
    #[default]
    Curvilinear,
    /// Axis-parallel polygons on a grid of [`LegalizeRequest::grid_px`] pixels: every
    /// segment and jog at least that long (for variable-shaped-beam writers).
    Manhattan,
}

/// The mask rules that shape the projection, in nm (from the deck's `applies_to: mask`
/// rules on the optimized layer).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct MrcLimits {
    /// Largest width rule (nm).
    pub width_nm: f64,
    /// Largest space rule (nm).
    pub space_nm: f64,
    /// Largest notch rule (nm).
    pub notch_nm: f64,
    /// Largest area rule (nm²).
    pub area_nm2: f64,
    /// Whether a width rule uses the Euclidean metric (rounded ends must be wider).
    pub width_euclidean: bool,
    /// Whether a space or notch rule uses the Euclidean metric.
    pub space_euclidean: bool,
}

impl MrcLimits {
    /// The limits of `rules` (only `applies_to: mask` width, space, notch and area
    /// rules count; enclosure is checked but does not shape the projection).
    #[must_use]
    pub fn of(rules: &[Rule]) -> Self {
        let mut l = Self::default();
        for r in rules.iter().filter(|r| r.applies_to == AppliesTo::Mask) {
            let euclid = r.metric == Metric::Euclidean;
            match r.kind {
                RuleKind::Width => {
                    l.width_nm = l.width_nm.max(r.value);
                    l.width_euclidean |= euclid;
                }
                RuleKind::Space => {
                    l.space_nm = l.space_nm.max(r.value);
                    l.space_euclidean |= euclid;
                }
                RuleKind::Notch => {
                    l.notch_nm = l.notch_nm.max(r.value);
                    l.space_euclidean |= euclid;
                }
                RuleKind::Area => l.area_nm2 = l.area_nm2.max(r.value),
                _ => {}
            }
        }
        l
    }

    /// Whether there is anything to legalize.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.width_nm <= 0.0 && self.space_nm <= 0.0 && self.notch_nm <= 0.0 && self.area_nm2 <= 0.0
    }
}

/// What to legalize.
#[derive(Debug, Clone, Copy)]
pub struct LegalizeRequest<'a> {
    /// The optimizer's binary mask on the whole frame.
    pub proposal: &'a Grid<u8>,
    /// The drawn target on the same frame (the fallback where repair fails, and the
    /// mask outside the window unless `outside` says otherwise).
    pub target: &'a Grid<u8>,
    /// The mask outside the window when it is not the drawn target (a tiled optimize's
    /// frozen context: finished neighbours' masks, D170): what the projection and the
    /// local repair see beyond the window's edge, so that a seam is legalized against
    /// the mask actually there (D174). `None`: the target. `context` must be the same
    /// mask as polygons.
    pub outside: Option<&'a Grid<u8>>,
    /// The pixels that may change.
    pub window: PixelBox,
    /// The drawn polygons outside the window (dbu), exactly as drawn.
    pub context: &'a [Polygon],
    /// Left and bottom edge of pixel `(0, 0)` (dbu) and the pixel side (dbu).
    pub origin_dbu: (f64, f64),
    /// Pixel side in dbu.
    pub pixel_dbu: f64,
    /// Size of one dbu (nm).
    pub dbu_nm: f64,
    /// The mask rules of the optimized layer (`applies_to: mask`); others are ignored.
    pub rules: &'a [Rule],
    /// Mask style.
    pub style: MaskStyle,
    /// Manhattan grid (pixels): the shortest segment and jog.
    pub grid_px: usize,
}

/// A legalized mask.
#[derive(Debug, Clone)]
pub struct LegalMask {
    /// The mask as pixels (the drawn target outside the window).
    pub pixels: Grid<u8>,
    /// The window's polygons (dbu), one per component, holes joined by cut lines.
    pub polygons: Vec<Polygon>,
    /// Mask-rule violations left on `polygons ∪ context` (empty: legal).
    pub violations: Vec<Violation>,
    /// Repair rounds that ran.
    pub repair_rounds: u32,
    /// Holes that could not be joined to their hull (written as they are; 0 in practice).
    pub unjoined_holes: usize,
}

impl LegalizeRequest<'_> {
    /// The mask outside the window: `outside`, else the target.
    fn outside(&self) -> &Grid<u8> {
        self.outside.unwrap_or(self.target)
    }

    fn px(&self, nm: f64) -> f64 {
        nm / (self.pixel_dbu * self.dbu_nm)
    }

    fn mask_rules(&self) -> Vec<&Rule> {
        self.rules
            .iter()
            .filter(|r| {
                r.applies_to == AppliesTo::Mask
                    && !matches!(r.kind, RuleKind::Epe | RuleKind::Pvband)
            })
            .collect()
    }
}

/// Copies `from` into `into` inside `bx` (clamped to `window`).
fn paste(into: &mut Grid<u8>, from: &Grid<u8>, bx: PixelBox, window: PixelBox) {
    let (x0, y0) = (bx.0.max(window.0), bx.1.max(window.1));
    let (x1, y1) = (bx.2.min(window.2), bx.3.min(window.3));
    for y in y0..y1.max(y0) {
        for x in x0..x1.max(x0) {
            *into.at_mut(x, y) = *from.at(x, y);
        }
    }
}

/// `a` inside the window, `b` outside.
fn inside_window(a: &Grid<u8>, b: &Grid<u8>, w: PixelBox) -> Grid<u8> {
    let mut out = b.clone();
    paste(&mut out, a, (0, 0, a.width, a.height), w);
    out
}

/// Block majority on a grid of `g` pixels anchored at the window's corner.
fn snap_to_grid(mask: &Grid<u8>, window: PixelBox, g: usize) -> Grid<u8> {
    if g <= 1 {
        return mask.clone();
    }
    let mut out = mask.clone();
    let (x0, y0, x1, y1) = window;
    let mut by = y0;
    while by < y1 {
        let ey = (by + g).min(y1);
        let mut bx = x0;
        while bx < x1 {
            let ex = (bx + g).min(x1);
            let mut set = 0usize;
            for y in by..ey {
                for x in bx..ex {
                    set += usize::from(*mask.at(x, y) != 0);
                }
            }
            let v = u8::from(2 * set >= (ex - bx) * (ey - by));
            for y in by..ey {
                for x in bx..ex {
                    *out.at_mut(x, y) = v;
                }
            }
            bx = ex;
        }
        by = ey;
    }
    out
}

/// Radius of the opening (width) and closing (space) disks, pixels.
fn radii(req: &LegalizeRequest<'_>, limits: &MrcLimits, extra: f64) -> (f64, f64) {
    let r = |d_nm: f64, euclid: bool| {
        if d_nm <= 0.0 {
            return 0.0;
        }
        let d = req.px(d_nm);
        (if euclid { CAP_RADIUS * d } else { d / 2.0 }) + 1.0 + extra
    };
    (
        r(limits.width_nm, limits.width_euclidean),
        r(limits.space_nm.max(limits.notch_nm), limits.space_euclidean),
    )
}

/// Opening then closing sized by the rules (plus `extra` pixels), Manhattan on squares.
fn project(req: &LegalizeRequest<'_>, mask: &Grid<u8>, limits: &MrcLimits, extra: f64) -> Grid<u8> {
    match req.style {
        MaskStyle::Curvilinear => {
            let (rw, rs) = radii(req, limits, extra);
            let mut m = mask.clone();
            if rw > 0.0 {
                m = morph::open_disk(&m, rw);
            }
            if rs > 0.0 {
                m = morph::close_disk(&m, rs);
            }
            // The closing bridges gaps just under its diameter with thin necks; a second
            // opening cuts those (the gap they spanned is wide enough) and keeps the
            // thick bridges over narrow gaps.
            if rw > 0.0 && rs > 0.0 {
                m = morph::open_disk(&m, rw);
            }
            m
        }
        MaskStyle::Manhattan => {
            // Squares of the rule's size, rounded up to whole grid cells (D112).
            let g = req.grid_px.max(1);
            let cells = |d_nm: f64| -> usize {
                if d_nm <= 0.0 {
                    0
                } else {
                    (req.px(d_nm) / g as f64 - 1e-9).ceil() as usize + extra as usize
                }
            };
            let mut m = snap_to_grid(mask, req.window, g);
            let (cw, cs) = (
                cells(limits.width_nm),
                cells(limits.space_nm.max(limits.notch_nm)),
            );
            if cw > 0 {
                m = morph::open_square(&m, cw * g);
            }
            if cs > 0 {
                m = morph::close_square(&m, cs * g);
            }
            if cw > 0 && cs > 0 {
                m = morph::open_square(&m, cw * g);
            }
            snap_to_grid(&m, req.window, g)
        }
    }
}

/// Removes islands and fills holes smaller than `min_px` pixels that lie inside the
/// window (not touching its border).
fn drop_small(mask: &mut Grid<u8>, window: PixelBox, min_px: usize) {
    for fill in [false, true] {
        let probe = Grid {
            width: mask.width,
            height: mask.height,
            data: mask
                .data
                .iter()
                .map(|&v| u8::from((v != 0) != fill))
                .collect(),
        };
        let (labels, sizes) = morph::components(&probe);
        let mut touches = vec![false; sizes.len()];
        let (x0, y0, x1, y1) = window;
        for y in 0..mask.height {
            for x in 0..mask.width {
                let inside = x > x0 && y > y0 && x + 1 < x1 && y + 1 < y1;
                if !inside {
                    touches[labels[y * mask.width + x] as usize] = true;
                }
            }
        }
        for (i, v) in mask.data.iter_mut().enumerate() {
            let l = labels[i] as usize;
            if l != 0 && !touches[l] && sizes[l] < min_px {
                *v = u8::from(fill);
            }
        }
    }
}

/// Traces, simplifies and keyholes the window's pixels into polygons (dbu).
fn polygons_of(req: &LegalizeRequest<'_>, mask: &Grid<u8>) -> (Vec<Polygon>, usize) {
    let (labels, _) = morph::components(mask);
    let loops = polygonize::trace(mask, req.window, &labels);
    let (x0, y0, x1, y1) = req.window;
    let on_border = |p: (i64, i64)| {
        p.0 == x0 as i64 || p.0 == x1 as i64 || p.1 == y0 as i64 || p.1 == y1 as i64
    };
    let mut out = Vec::new();
    let mut unjoined = 0;
    for (hull, holes) in polygonize::group(loops) {
        let simplify = |l: Vec<(i64, i64)>| match req.style {
            MaskStyle::Curvilinear => polygonize::simplify(&l, SIMPLIFY_PX, on_border),
            MaskStyle::Manhattan => l,
        };
        let hull = simplify(hull);
        let holes: Vec<_> = holes.into_iter().map(simplify).collect();
        let (poly, failed) = polygonize::keyhole(hull, holes);
        let (ox, oy) = req.origin_dbu;
        out.push(polygonize::to_dbu(&poly, ox, oy, req.pixel_dbu));
        for h in failed {
            unjoined += 1;
            out.push(polygonize::to_dbu(&h, ox, oy, req.pixel_dbu));
        }
    }
    // Edges that continue a context edge across the window's side meet it exactly (D178).
    let (ox, oy) = req.origin_dbu;
    let at = |o: f64, v: usize| (o + v as f64 * req.pixel_dbu).round() as i64;
    let b = (at(ox, x0), at(oy, y0), at(ox, x1), at(oy, y1));
    seam::snap_to_context(&mut out, req.context, b, req.pixel_dbu);
    (out, unjoined)
}

/// The union of some polygons as whole polygons ([`whole_polygons`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WholePolygons {
    /// One polygon per merged polygon, holes joined to the hull by cut lines, then the
    /// holes that could not be joined.
    pub polygons: Vec<Polygon>,
    /// Merged polygons of the union.
    pub merged: usize,
    /// Holes in the union.
    pub holes: usize,
    /// Holes that could not be joined (written as separate polygons, which overstates
    /// the mask; 0 in practice).
    pub unjoined: usize,
}

/// The union of `polygons` as whole polygons: one per merged polygon, its holes joined to
/// its hull by cut lines (the GDSII convention; a reader that merges restores the holes).
#[must_use]
pub fn whole_polygons(polygons: &[Polygon]) -> WholePolygons {
    let region = Region::from_polygons(polygons);
    let as_pairs = |pts: &[reticle_layout::Point]| -> Vec<(i64, i64)> {
        pts.iter().map(|p| (p.x, p.y)).collect()
    };
    let to_poly = |pts: &[(i64, i64)]| {
        Polygon::new(
            pts.iter()
                .map(|&(x, y)| reticle_layout::Point::new(x, y))
                .collect(),
        )
    };
    let mut whole = WholePolygons {
        polygons: Vec::new(),
        merged: region.polygons().len(),
        holes: 0,
        unjoined: 0,
    };
    for m in region.polygons() {
        whole.holes += m.holes.len();
        let (joined, failed) = polygonize::keyhole(
            as_pairs(&m.hull),
            m.holes.iter().map(|h| as_pairs(h)).collect(),
        );
        whole.polygons.push(to_poly(&joined));
        whole.unjoined += failed.len();
        whole.polygons.extend(failed.iter().map(|h| to_poly(h)));
    }
    whole
}

/// Runs every mask rule of `req` on `polygons ∪ context`.
///
/// # Panics
/// Never: rules that cannot be checked geometrically are filtered out first.
#[must_use]
pub fn check(req: &LegalizeRequest<'_>, polygons: &[Polygon]) -> Vec<Violation> {
    let mut all: Vec<Polygon> = req.context.to_vec();
    all.extend_from_slice(polygons);
    let region = Region::from_polygons(&all);
    req.mask_rules()
        .into_iter()
        .filter(|r| r.kind != RuleKind::Enclosure)
        .flat_map(|r| check_rule(r, &region, None, req.dbu_nm).unwrap_or_default())
        .collect()
}

/// The pixel box of a violation, grown by `grow` pixels.
fn violation_box(
    req: &LegalizeRequest<'_>,
    v: &Violation,
    grow: f64,
    w: usize,
    h: usize,
) -> PixelBox {
    let (ox, oy) = req.origin_dbu;
    let p = req.pixel_dbu;
    let cl = |v: f64, n: usize| v.clamp(0.0, n as f64) as usize;
    (
        cl(((v.bbox.left as f64 - ox) / p - grow).floor(), w),
        cl(((v.bbox.bottom as f64 - oy) / p - grow).floor(), h),
        cl(((v.bbox.right as f64 - ox) / p + grow).ceil(), w),
        cl(((v.bbox.top as f64 - oy) / p + grow).ceil(), h),
    )
}

/// The polygons and the remaining violations of `mask` as it is (no projection, no
/// repair): for a caller that removed whole components of a legal mask (assist
/// features), which cannot create a violation, and checks anyway.
#[must_use]
pub fn rebuild(req: &LegalizeRequest<'_>, mask: Grid<u8>, repair_rounds: u32) -> LegalMask {
    let (polygons, unjoined_holes) = polygons_of(req, &mask);
    let violations = check(req, &polygons);
    LegalMask {
        pixels: mask,
        polygons,
        violations,
        repair_rounds,
        unjoined_holes,
    }
}

/// Removes the assist components (touching no target pixel) that meet a violation's
/// box, and replaces the main components that do by `substitute` over their box.
fn revert_components<'v>(
    req: &LegalizeRequest<'_>,
    mask: &mut Grid<u8>,
    substitute: &Grid<u8>,
    violations: impl Iterator<Item = &'v Violation>,
    w: usize,
    h: usize,
) {
    let limits = MrcLimits::of(req.rules);
    let reach = req
        .px(limits.width_nm.max(limits.space_nm).max(limits.notch_nm))
        .ceil() as usize;
    let (labels, sizes) = morph::components(mask);
    let mut hit = vec![false; sizes.len()];
    for v in violations {
        let b = violation_box(req, v, 1.0, w, h);
        for y in b.1..b.3 {
            for x in b.0..b.2 {
                hit[labels[y * w + x] as usize] = true;
            }
        }
    }
    hit[0] = false;
    let mut main = vec![false; sizes.len()];
    let mut bbox = vec![(usize::MAX, usize::MAX, 0usize, 0usize); sizes.len()];
    for (i, &l) in labels.iter().enumerate() {
        let l = l as usize;
        if l == 0 || !hit[l] {
            continue;
        }
        main[l] |= req.target.data[i] != 0;
        let (x, y) = (i % w, i / w);
        let b = &mut bbox[l];
        *b = (b.0.min(x), b.1.min(y), b.2.max(x + 1), b.3.max(y + 1));
    }
    let (x0, y0, x1, y1) = req.window;
    let mut inside = vec![false; sizes.len()];
    for (i, &l) in labels.iter().enumerate() {
        let (x, y) = (i % w, i / w);
        if hit[l as usize] && x >= x0 && x < x1 && y >= y0 && y < y1 {
            mask.data[i] = 0;
            inside[l as usize] = true;
        }
    }
    for l in 1..sizes.len() {
        if hit[l] && main[l] {
            let b = bbox[l];
            // A component wholly outside the window (a sliver of the frozen mask at its
            // edge, D174) gets the substitute next to it, inside the window, within a
            // rule's reach: what it was legalized against.
            let b = if inside[l] {
                b
            } else {
                (
                    b.0.saturating_sub(reach),
                    b.1.saturating_sub(reach),
                    (b.2 + reach).min(w),
                    (b.3 + reach).min(h),
                )
            };
            paste_or(mask, substitute, b, req.window);
        }
    }
}

/// Whether the record `v` lies within a mask rule's reach of `req.window`: a record the
/// window's pixels can make or fix (a sliver of the frozen mask at the window's edge
/// included, D174). One farther away is the context's alone (a drawn shape cut by the
/// frame's edge) and never the mask's: it is reported, and it must not reject a mask
/// (docs/DECISIONS.md D176).
#[must_use]
pub fn within_reach(req: &LegalizeRequest<'_>, v: &Violation) -> bool {
    let limits = MrcLimits::of(req.rules);
    let reach_px = req
        .px(limits.width_nm.max(limits.space_nm).max(limits.notch_nm))
        .ceil();
    let b = violation_box(req, v, reach_px, req.target.width, req.target.height);
    b.0 < req.window.2 && b.2 > req.window.0 && b.1 < req.window.3 && b.3 > req.window.1
}

/// Legalizes `req.proposal` (see the module docs).
///
/// # Errors
/// [`Cancelled`].
pub fn legalize(req: &LegalizeRequest<'_>, cancel: &CancelToken) -> Result<LegalMask, Cancelled> {
    let limits = MrcLimits::of(req.rules);
    let (w, h) = (req.proposal.width, req.proposal.height);
    let mut mask = inside_window(req.proposal, req.outside(), req.window);
    if req.style == MaskStyle::Manhattan {
        mask = inside_window(
            &snap_to_grid(&mask, req.window, req.grid_px),
            req.outside(),
            req.window,
        );
    }
    let min_island = {
        let wpx = req.px(limits.width_nm).max(1.0);
        let area_px = req.px(req.px(limits.area_nm2));
        (wpx * wpx).max(area_px).ceil() as usize
    };
    if !limits.is_empty() {
        mask = inside_window(
            &project(req, &mask, &limits, 0.0),
            req.outside(),
            req.window,
        );
        drop_small(&mut mask, req.window, min_island);
    }
    cancel.check()?;
    let (mut polygons, mut unjoined) = polygons_of(req, &mask);
    let mut violations = check(req, &polygons);
    let mut rounds = 0;
    let fixable = |v: &Violation, req: &LegalizeRequest<'_>| within_reach(req, v);
    // Local edits for the square (Manhattan) masks, whose records are few; the
    // curvilinear masks' hundreds of records take the stronger projections (D112).
    let (local_rounds, repair_rounds) = match req.style {
        MaskStyle::Manhattan => (LOCAL_ROUNDS, 0),
        MaskStyle::Curvilinear => (0, REPAIR_ROUNDS),
    };
    while violations.iter().any(|v| fixable(v, req))
        && rounds < local_rounds + repair_rounds + COMPONENT_ROUNDS
    {
        cancel.check()?;
        rounds += 1;
        let grow = req
            .px(limits.width_nm.max(limits.space_nm).max(limits.notch_nm))
            .max(2.0);
        if rounds <= local_rounds {
            repair_locally(
                req,
                &mut mask,
                &limits,
                violations.iter().filter(|v| fixable(v, req)),
            );
        } else if rounds <= local_rounds + repair_rounds {
            // A stronger projection around what is wrong.
            let stronger = project(req, &mask, &limits, f64::from(rounds - local_rounds));
            for v in violations.iter().filter(|v| fixable(v, req)) {
                paste(
                    &mut mask,
                    &stronger,
                    violation_box(req, v, grow, w, h),
                    req.window,
                );
            }
            drop_small(&mut mask, req.window, min_island);
        } else {
            // Whole components: an assist feature involved goes, a main feature involved
            // goes back to the drawn target (legal by itself); repeated, this ends with
            // every conflict resolved.
            let substitute = if rounds <= local_rounds + repair_rounds + COMPONENT_ROUNDS / 2 {
                // First a square-element projection of the same mask: Manhattan
                // corners are never compared, so it is legal far more often.
                let square = LegalizeRequest {
                    style: MaskStyle::Manhattan,
                    grid_px: 1,
                    ..*req
                };
                project(&square, &mask, &limits, 0.0)
            } else {
                req.target.clone()
            };
            revert_components(
                req,
                &mut mask,
                &substitute,
                violations.iter().filter(|v| fixable(v, req)),
                w,
                h,
            );
        }
        (polygons, unjoined) = polygons_of(req, &mask);
        violations = check(req, &polygons);
    }
    Ok(LegalMask {
        pixels: mask,
        polygons,
        violations,
        repair_rounds: rounds,
        unjoined_holes: unjoined,
    })
}
