//! The one depth-first walk over the placements below a cell, shared by
//! [`crate::flatten`] (polygons per layer) and the observer's region query
//! ([`crate::observe::region`]).
//!
//! The walk owns what both need to agree on: the order (a cell's instances in order, each
//! repetition's visible copies in index order, depth first), the placement transform, and
//! pruning by a clip box (whole array rows and columns outside it are never visited, a
//! placement whose box misses it is not entered). What happens at a placement — limits,
//! provenance, emitting shapes — is the caller's, through a [`PlacementVisitor`]. The stack
//! is explicit, so no hierarchy depth can overflow the thread's stack.

use crate::geom::BBox;
use crate::model::{Instance, Library, Repetition};
use crate::transform::Affine;

/// One placement the walk enters: copy `copy` of instance `instance` of cell `parent`,
/// which places cell `cell` with `transform` (its coordinates → the root's).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Placement {
    /// The placing cell.
    pub(crate) parent: usize,
    /// Index of the instance in `parent`.
    pub(crate) instance: usize,
    /// Copy index in the instance's repetition (0 for a single placement).
    pub(crate) copy: u64,
    /// The placed cell.
    pub(crate) cell: usize,
    /// Map from the placed cell's coordinates to the root's.
    pub(crate) transform: Affine,
}

/// What a walk does at each step; every hook may stop the walk with an error.
pub(crate) trait PlacementVisitor {
    /// Why the walk stopped.
    type Error;

    /// Before the copies of an instance are visited: `depth` is the nesting of the placed
    /// cell below the root (1 for the root's own instances), `copies` how many copies the
    /// walk will look at (those an axis-aligned array shows inside the clip, else all).
    fn instance(&mut self, depth: u32, copies: u64) -> Result<(), Self::Error>;

    /// Each copy looked at, before the clip may prune it (counts placements).
    fn placement(&mut self) -> Result<(), Self::Error>;

    /// A placement whose box meets the clip: its cell's own content is the visitor's
    /// business here; the walk descends into its instances next.
    fn enter(&mut self, placement: &Placement) -> Result<(), Self::Error>;

    /// The walk leaves the placement entered last (never called for the root).
    fn leave(&mut self);
}

/// Narrows down which instances of a cell a clipped walk looks at (the layout index does
/// this with an R-tree over the instances' footprints).
pub(crate) trait InstanceFilter {
    /// Ascending indices of the instances of `cell` that may place something meeting `clip`
    /// (root coordinates) when `cell` is placed by `m`; `None` when every instance must be
    /// looked at. Must never leave out an instance the unfiltered walk would enter.
    fn candidates(&self, cell: usize, m: &Affine, clip: &BBox) -> Option<Vec<usize>>;
}

/// Walks the placements below `root` (the root's own content is the caller's), skipping
/// instances of cells whose `bboxes` entry is `None` (nothing kept below) and, with a
/// clip, placements whose transformed box misses it by more than one dbu (slack for the
/// rounding of non-Manhattan vertices). With a clip and a `filter`, only the instances the
/// filter names are looked at; the order of what is visited does not change.
pub(crate) fn walk_placements<V: PlacementVisitor>(
    lib: &Library,
    root: usize,
    bboxes: &[Option<[f64; 4]>],
    clip: Option<&BBox>,
    filter: Option<&dyn InstanceFilter>,
    visitor: &mut V,
) -> Result<(), V::Error> {
    struct WalkFrame {
        cell: usize,
        m: Affine,
        /// Position of the next instance to expand: in `only` when set, else in the
        /// cell's instance list.
        next: usize,
        /// The instances the filter left (ascending), when there is one.
        only: Option<Vec<usize>>,
        /// Copies of the current instance still to visit, once started.
        copies: Option<CopyRange>,
    }
    impl WalkFrame {
        fn new(
            cell: usize,
            m: Affine,
            clip: Option<&BBox>,
            f: Option<&dyn InstanceFilter>,
        ) -> Self {
            let only = match (clip, f) {
                (Some(c), Some(f)) => f.candidates(cell, &m, c),
                _ => None,
            };
            Self {
                cell,
                m,
                next: 0,
                only,
                copies: None,
            }
        }

        /// Index (in the cell) of the instance at position `next`.
        fn instance(&self) -> Option<usize> {
            match &self.only {
                Some(only) => only.get(self.next).copied(),
                None => Some(self.next),
            }
        }
    }
    let mut stack = vec![WalkFrame::new(root, Affine::IDENTITY, clip, filter)];
    loop {
        let depth = stack.len() as u32;
        let Some(frame) = stack.last_mut() else {
            return Ok(());
        };
        let at = frame.instance();
        let Some((index, inst)) =
            at.and_then(|i| lib.cells[frame.cell].instances.get(i).map(|inst| (i, inst)))
        else {
            stack.pop();
            if !stack.is_empty() {
                visitor.leave();
            }
            continue;
        };
        let Some(child_bb) = bboxes[inst.cell] else {
            frame.next += 1;
            continue;
        };
        if frame.copies.is_none() {
            let range = CopyRange::visible(inst, &frame.m, child_bb, clip);
            visitor.instance(depth, range.len())?;
            frame.copies = Some(range);
        }
        let Some(k) = frame.copies.as_mut().and_then(CopyRange::next) else {
            frame.next += 1;
            frame.copies = None;
            continue;
        };
        visitor.placement()?;
        let m = child_transform(&frame.m, inst, k);
        if let Some(c) = clip {
            let b = transform_bbox(&m, child_bb);
            if b[0] > c.right as f64 + 1.0
                || b[2] < c.left as f64 - 1.0
                || b[1] > c.top as f64 + 1.0
                || b[3] < c.bottom as f64 - 1.0
            {
                continue;
            }
        }
        let placement = Placement {
            parent: frame.cell,
            instance: index,
            copy: k,
            cell: inst.cell,
            transform: m,
        };
        visitor.enter(&placement)?;
        stack.push(WalkFrame::new(inst.cell, m, clip, filter));
    }
}

/// The transform of copy `copy` of `inst` placed in a cell whose own transform is `m`.
pub(crate) fn child_transform(m: &Affine, inst: &Instance, copy: u64) -> Affine {
    let (dx, dy) = inst
        .repetition
        .as_ref()
        .map_or((0, 0), |r| r.displacement(copy));
    let shifted = Affine::translation(dx as f64, dy as f64).then_inner(&inst.transform.to_affine());
    m.then_inner(&shifted)
}

/// The axis-aligned box `[l, b, r, t]` of the box `b` mapped by `m`.
pub(crate) fn transform_bbox(m: &Affine, b: [f64; 4]) -> [f64; 4] {
    let corners = [(b[0], b[1]), (b[2], b[1]), (b[2], b[3]), (b[0], b[3])];
    let mut out = [
        f64::INFINITY,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NEG_INFINITY,
    ];
    for (x, y) in corners {
        let (tx, ty) = m.apply_f64(x, y);
        out = [
            out[0].min(tx),
            out[1].min(ty),
            out[2].max(tx),
            out[3].max(ty),
        ];
    }
    out
}

/// The copies of an instance a walk visits: columns `i0..=i1` × rows `j0..=j1` of a lattice
/// with `cols` columns (copy index `j·cols + i`); a plain instance or explicit list is one
/// row.
struct CopyRange {
    i0: u64,
    i1: u64,
    j1: u64,
    cols: u64,
    i: u64,
    j: u64,
    empty: bool,
}

impl CopyRange {
    fn all(n: u64) -> Self {
        Self {
            i0: 0,
            i1: n.saturating_sub(1),
            j1: 0,
            cols: n.max(1),
            i: 0,
            j: 0,
            empty: n == 0,
        }
    }

    /// With a clip and an axis-aligned lattice, only the columns and rows whose copies can
    /// touch the clip (computed in the parent's coordinates), so a query on a huge array
    /// costs what it shows; otherwise every copy.
    fn visible(inst: &Instance, m: &Affine, child_bb: [f64; 4], clip: Option<&BBox>) -> Self {
        let all = Self::all(inst.placement_count());
        let (
            Some(clip),
            Some(Repetition::Array {
                cols,
                rows,
                col_step,
                row_step,
            }),
        ) = (clip, inst.repetition.as_ref())
        else {
            return all;
        };
        if col_step.y != 0 || row_step.x != 0 {
            return all;
        }
        let Some(inv) = m.inverse() else {
            return all;
        };
        let c = transform_bbox(
            &inv,
            [
                clip.left as f64 - 1.0,
                clip.bottom as f64 - 1.0,
                clip.right as f64 + 1.0,
                clip.top as f64 + 1.0,
            ],
        );
        let b = transform_bbox(&inst.transform.to_affine(), child_bb);
        let Some((i0, i1)) =
            axis_range(u64::from(*cols), col_step.x as f64, b[0], b[2], c[0], c[2])
        else {
            return Self { empty: true, ..all };
        };
        let Some((j0, j1)) =
            axis_range(u64::from(*rows), row_step.y as f64, b[1], b[3], c[1], c[3])
        else {
            return Self { empty: true, ..all };
        };
        Self {
            i0,
            i1,
            j1,
            cols: u64::from(*cols),
            i: i0,
            j: j0,
            empty: false,
        }
    }

    /// Number of copies left to visit (saturating).
    fn len(&self) -> u64 {
        if self.empty {
            0
        } else {
            (self.i1 - self.i0 + 1).saturating_mul(self.j1 - self.j + 1)
        }
    }

    fn next(&mut self) -> Option<u64> {
        if self.empty || self.j > self.j1 {
            return None;
        }
        let k = self.j.saturating_mul(self.cols).saturating_add(self.i);
        if self.i >= self.i1 {
            self.i = self.i0;
            self.j += 1;
        } else {
            self.i += 1;
        }
        Some(k)
    }
}

/// Indices `i < n` for which `[lo + i·s, hi + i·s]` meets `[a, b]`, as an inclusive range.
fn axis_range(n: u64, s: f64, lo: f64, hi: f64, a: f64, b: f64) -> Option<(u64, u64)> {
    if n == 0 || !(lo.is_finite() && hi.is_finite() && a.is_finite() && b.is_finite()) {
        return if n == 0 { None } else { Some((0, n - 1)) };
    }
    let last = (n - 1) as f64;
    let (from, to) = if s == 0.0 {
        if lo <= b && hi >= a {
            (0.0, last)
        } else {
            return None;
        }
    } else if s > 0.0 {
        (((a - hi) / s).ceil(), ((b - lo) / s).floor())
    } else {
        (((b - lo) / s).ceil(), ((a - hi) / s).floor())
    };
    let (from, to) = (from.max(0.0), to.min(last));
    (from <= to).then_some((from as u64, to as u64))
}
