//! A spatial index of a library, so that many small clipped flattenings (one per tile of a
//! whole-layout run) each cost what their clip box holds, not what the cells hold.
//!
//! [`LayoutIndex`] owns the library (behind an [`Arc`]) and, for every cell, lazily on first
//! use, an R-tree over its own shapes' boxes (one tree per layer, so a layer filter skips
//! whole trees) and one over its instances' footprints (an array's whole extent; the walk
//! still picks the visible rows and columns itself). [`LayoutIndex::flatten`] and
//! [`LayoutIndex::walk`] give exactly what [`crate::flatten()`] and [`crate::walk`] give —
//! same polygons, same order: index hits are sorted back into stored order before they are
//! visited. [`LayoutIndex::layer_bbox`] gives the box of the flattened polygons of some
//! layers without flattening.
//!
//! Memory: about [`LayoutIndex::memory_bytes`], a few dozen bytes per indexed shape or
//! instance on top of the library; lists shorter than [`MIN_INDEXED_ITEMS`] are scanned
//! instead. Nothing grows with the number of queries: the only other cache, the per-cell
//! boxes and counts for a layer filter, keeps at most [`MAX_CACHED_FILTERS`] filters.

mod extent;

pub mod bench;

pub use extent::LayerExtent;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use rstar::{AABB, RTree, RTreeObject};

use crate::flatten::{
    ClipMode, FlatLayout, FlatShape, FlattenError, FlattenOptions, Summary, extreme_displacements,
    summarize, walk_summarized,
};
use crate::geom::BBox;
use crate::hierarchy::{InstanceFilter, transform_bbox};
use crate::model::{HierarchyError, LayerKey, Library, Shape};
use crate::transform::Affine;

/// Lists (one layer's shapes in a cell, a cell's instances) shorter than this are scanned
/// rather than indexed: a scan of a few dozen boxes costs about what a tree query costs,
/// and small cells, usually the many, then cost no index memory.
pub const MIN_INDEXED_ITEMS: usize = 32;

/// How many layer filters' per-cell summaries (boxes and shape counts, 40 bytes per cell)
/// an index keeps; a tile run uses one or two filters, so this bounds memory, not speed.
pub const MAX_CACHED_FILTERS: usize = 8;

/// A library plus a lazily built spatial index of every cell. `Send + Sync`: build one per
/// parsed library and share it between the threads that flatten tiles.
pub struct LayoutIndex {
    lib: Arc<Library>,
    /// Cell indices, leaves first (the hierarchy was checked once, here).
    order: Vec<usize>,
    cells: Vec<OnceLock<CellIndex>>,
    /// Shortest list (of one layer's shapes, of a cell's instances) given a tree.
    min_items: usize,
    /// Most recently used first.
    summaries: Mutex<Vec<(FilterKey, Arc<Summary>)>>,
}

impl std::fmt::Debug for LayoutIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LayoutIndex")
            .field("library", &self.lib.name)
            .field("cells", &self.cells.len())
            .field("indexed_cells", &self.indexed_cells())
            .field("memory_bytes", &self.memory_bytes())
            .finish()
    }
}

/// What a [`Summary`] depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FilterKey {
    layers: Option<BTreeSet<LayerKey>>,
    include_texts: bool,
}

/// One indexed shape or instance: its box in its cell's coordinates, rounded outward to
/// `f32` (half the memory of `f64` or `i64`; integer envelopes could also overflow in the
/// tree's centre computations for hostile coordinates), and its position in the cell's list.
#[derive(Debug, Clone, Copy)]
struct Entry {
    envelope: Envelope,
    index: u32,
}

type Envelope = AABB<[f32; 2]>;

impl RTreeObject for Entry {
    type Envelope = Envelope;

    fn envelope(&self) -> Self::Envelope {
        self.envelope
    }
}

/// The index of one cell.
#[derive(Debug)]
struct CellIndex {
    /// Per layer holding enough shapes (see [`MIN_INDEXED_ITEMS`]): their boxes (exact boxes of
    /// what flattening makes of them: a path's rounded outline, a text's anchor). Shapes
    /// with no box (empty polygons, degenerate paths) flatten to nothing inside a clip and
    /// are left out.
    shapes: BTreeMap<LayerKey, RTree<Entry>>,
    /// With enough instances: their footprints (all copies), from
    /// the child's box of everything it holds.
    instances: Option<RTree<Entry>>,
    /// Instances whose footprint is not finite (absurd magnifications): always looked at.
    unbounded_instances: Vec<usize>,
    /// Per layer, the box of the polygons the cell's own shapes flatten to (no texts).
    polygon_boxes: BTreeMap<LayerKey, BBox>,
    /// Estimated heap bytes of the above.
    bytes: usize,
}

impl LayoutIndex {
    /// An index of `lib`; nothing is built until a query needs it.
    ///
    /// # Errors
    /// [`HierarchyError`] for a dangling reference or a cycle.
    pub fn new(lib: Arc<Library>) -> Result<Self, HierarchyError> {
        Self::with_min_indexed_items(lib, MIN_INDEXED_ITEMS)
    }

    /// [`LayoutIndex::new`] indexing every list of at least `min_items` shapes or
    /// instances (at least 1) instead of [`MIN_INDEXED_ITEMS`]: tests use 1 to run small
    /// layouts through the trees.
    ///
    /// # Errors
    /// [`HierarchyError`] for a dangling reference or a cycle.
    pub fn with_min_indexed_items(
        lib: Arc<Library>,
        min_items: usize,
    ) -> Result<Self, HierarchyError> {
        let order = lib.bottom_up_order()?;
        let cells = (0..lib.cells.len()).map(|_| OnceLock::new()).collect();
        Ok(Self {
            lib,
            order,
            cells,
            min_items: min_items.max(1),
            summaries: Mutex::new(Vec::new()),
        })
    }

    /// The indexed library.
    #[must_use]
    pub fn library(&self) -> &Library {
        &self.lib
    }

    /// The indexed library, shared.
    #[must_use]
    pub const fn library_arc(&self) -> &Arc<Library> {
        &self.lib
    }

    /// Builds the index of every cell now (otherwise each is built on first use).
    pub fn build_all(&self) {
        for ci in 0..self.cells.len() {
            self.cell(ci);
        }
    }

    /// How many cells have their index built.
    #[must_use]
    pub fn indexed_cells(&self) -> usize {
        self.cells.iter().filter(|c| c.get().is_some()).count()
    }

    /// Estimated bytes held by the index (not counting the library): built cell indices
    /// plus cached per-filter summaries. Grows as cells are built, never with queries.
    #[must_use]
    pub fn memory_bytes(&self) -> usize {
        let cells: usize = self
            .cells
            .iter()
            .filter_map(OnceLock::get)
            .map(|c| c.bytes + size_of::<CellIndex>())
            .sum();
        let summaries: usize = self
            .summaries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(k, s)| {
                s.heap_bytes()
                    + size_of::<(FilterKey, Arc<Summary>)>()
                    + k.layers.as_ref().map_or(0, |l| l.len() * 16)
            })
            .sum();
        size_of::<Self>()
            + self.order.capacity() * size_of::<usize>()
            + self.cells.capacity() * size_of::<OnceLock<CellIndex>>()
            + cells
            + summaries
    }

    /// [`crate::flatten_with_mode`] through the index: the same polygons in the same order.
    ///
    /// # Errors
    /// [`FlattenError`], with the limits of `opts`. Shapes and placements the index rules
    /// out are never looked at, so they can neither count against a limit nor fail (for
    /// example a placement far outside the clip whose coordinates overflow).
    pub fn flatten(
        &self,
        cell: usize,
        opts: &FlattenOptions,
        mode: ClipMode,
    ) -> Result<FlatLayout, FlattenError> {
        let mut out = FlatLayout::default();
        self.walk(cell, opts, mode, &mut |s| out.push(s))?;
        Ok(out)
    }

    /// [`crate::walk_with_mode`] through the index: the same shapes in the same order.
    ///
    /// # Errors
    /// As [`LayoutIndex::flatten`].
    pub fn walk(
        &self,
        cell: usize,
        opts: &FlattenOptions,
        mode: ClipMode,
        visit: &mut dyn FnMut(FlatShape<'_>),
    ) -> Result<(), FlattenError> {
        if cell >= self.lib.cells.len() {
            return Err(FlattenError::NoSuchCell(format!("#{cell}")));
        }
        let summary = self.summary(opts.layers.as_ref(), opts.include_texts);
        walk_summarized(&self.lib, Some(self), &summary, cell, opts, mode, visit)
    }

    /// The per-cell boxes and counts for a layer filter, from the cache or computed (a pass
    /// over the whole library) and cached.
    fn summary(&self, layers: Option<&BTreeSet<LayerKey>>, include_texts: bool) -> Arc<Summary> {
        let lookup = |cache: &mut Vec<(FilterKey, Arc<Summary>)>| {
            let at = cache.iter().position(|(k, _)| {
                k.include_texts == include_texts && k.layers.as_ref() == layers
            })?;
            let hit = cache.remove(at);
            let summary = Arc::clone(&hit.1);
            cache.insert(0, hit);
            Some(summary)
        };
        let lock = || {
            self.summaries
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
        };
        if let Some(s) = lookup(&mut lock()) {
            return s;
        }
        // Computed without the lock; two threads may both compute a new filter once.
        let opts = FlattenOptions {
            layers: layers.cloned(),
            include_texts,
            ..FlattenOptions::default()
        };
        let summary = Arc::new(summarize(&self.lib, &self.order, &opts));
        let mut cache = lock();
        if let Some(s) = lookup(&mut cache) {
            return s;
        }
        cache.insert(
            0,
            (
                FilterKey {
                    layers: opts.layers,
                    include_texts,
                },
                Arc::clone(&summary),
            ),
        );
        cache.truncate(MAX_CACHED_FILTERS);
        summary
    }

    /// The index of cell `ci`, built on first use.
    fn cell(&self, ci: usize) -> &CellIndex {
        self.cells[ci].get_or_init(|| self.build_cell(ci))
    }

    fn build_cell(&self, ci: usize) -> CellIndex {
        let cell = &self.lib.cells[ci];
        let mut bytes = 0;
        let mut shapes = BTreeMap::new();
        let mut polygon_boxes = BTreeMap::new();
        for (key, list) in &cell.shapes {
            let indexed = list.len() >= self.min_items && u32::try_from(list.len()).is_ok();
            let mut entries = Vec::with_capacity(if indexed { list.len() } else { 0 });
            let mut polygons: Option<BBox> = None;
            for (index, shape) in list.iter().enumerate() {
                let Some(b) = shape.bbox() else { continue };
                if !matches!(shape, Shape::Text(_)) {
                    polygons = Some(polygons.map_or(b, |p| p.union(&b)));
                }
                if indexed {
                    entries.push(Entry {
                        envelope: envelope_of(&b),
                        index: index as u32,
                    });
                }
            }
            if let Some(p) = polygons {
                polygon_boxes.insert(*key, p);
                bytes += btree_entry_bytes::<LayerKey, BBox>();
            }
            if indexed {
                let tree = RTree::bulk_load(entries);
                bytes += tree_bytes(&tree) + btree_entry_bytes::<LayerKey, RTree<Entry>>();
                shapes.insert(*key, tree);
            }
        }
        let mut instances = None;
        let mut unbounded_instances = Vec::new();
        if cell.instances.len() >= self.min_items && u32::try_from(cell.instances.len()).is_ok() {
            let everything = self.summary(None, true);
            let mut entries = Vec::with_capacity(cell.instances.len());
            for (index, inst) in cell.instances.iter().enumerate() {
                // An empty child places nothing; the walk skips it too.
                let Some(child) = everything.bboxes[inst.cell] else {
                    continue;
                };
                let placed = transform_bbox(&inst.transform.to_affine(), child);
                let mut footprint: Option<[f64; 4]> = None;
                for (dx, dy) in extreme_displacements(inst.repetition.as_ref()) {
                    let b = [
                        placed[0] + dx,
                        placed[1] + dy,
                        placed[2] + dx,
                        placed[3] + dy,
                    ];
                    footprint = Some(footprint.map_or(b, |f| {
                        [
                            f[0].min(b[0]),
                            f[1].min(b[1]),
                            f[2].max(b[2]),
                            f[3].max(b[3]),
                        ]
                    }));
                }
                match footprint.and_then(outward) {
                    Some(envelope) => entries.push(Entry {
                        envelope,
                        index: index as u32,
                    }),
                    // No copies: nothing to visit.
                    None if footprint.is_none() => {}
                    None => unbounded_instances.push(index),
                }
            }
            let tree = RTree::bulk_load(entries);
            bytes += tree_bytes(&tree) + unbounded_instances.capacity() * size_of::<usize>();
            instances = Some(tree);
        }
        CellIndex {
            shapes,
            instances,
            unbounded_instances,
            polygon_boxes,
            bytes,
        }
    }

    /// Ascending indices of the shapes of layer `key` in cell `ci` whose box may meet
    /// `clip` (root coordinates) when the cell is placed by `m`; `None` when the layer is
    /// not indexed (or the placement cannot be inverted) and every shape must be looked at.
    pub(crate) fn shape_candidates(
        &self,
        ci: usize,
        key: &LayerKey,
        m: &Affine,
        clip: &BBox,
    ) -> Option<Vec<usize>> {
        let tree = self.cell(ci).shapes.get(key)?;
        let query = query_envelope(m, clip)?;
        let mut hits: Vec<usize> = tree
            .locate_in_envelope_intersecting(query)
            .map(|e| e.index as usize)
            .collect();
        hits.sort_unstable();
        Some(hits)
    }
}

/// The index narrows the instances a clipped walk looks at to those whose footprint meets
/// the clip mapped into the cell's coordinates.
impl InstanceFilter for LayoutIndex {
    fn candidates(&self, cell: usize, m: &Affine, clip: &BBox) -> Option<Vec<usize>> {
        let index = self.cell(cell);
        let tree = index.instances.as_ref()?;
        let query = query_envelope(m, clip)?;
        let mut hits: Vec<usize> = tree
            .locate_in_envelope_intersecting(query)
            .map(|e| e.index as usize)
            .collect();
        hits.extend_from_slice(&index.unbounded_instances);
        hits.sort_unstable();
        Some(hits)
    }
}

/// The clip box (root coordinates) mapped into the coordinates of a cell placed by `m`,
/// grown first so that nothing the walk would keep is missed: flattened vertices are
/// rounded to the grid (up to half a dbu) and the inverse map is computed in floating
/// point, so the slack is two dbu plus a relative part for far-off coordinates. `None` when
/// `m` cannot be inverted or the result is not finite.
fn query_envelope(m: &Affine, clip: &BBox) -> Option<Envelope> {
    let inv = m.inverse()?;
    let far = [clip.left, clip.bottom, clip.right, clip.top]
        .iter()
        .map(|v| (*v as f64).abs())
        .fold(m.dx.abs().max(m.dy.abs()), f64::max);
    let slack = 2.0 + far * 1e-9;
    let b = transform_bbox(
        &inv,
        [
            clip.left as f64 - slack,
            clip.bottom as f64 - slack,
            clip.right as f64 + slack,
            clip.top as f64 + slack,
        ],
    );
    if !b.iter().all(|v| v.is_finite()) {
        return None;
    }
    // Past the `f32` range, the query reaches the end of it: every entry is inside.
    let clamp = |v: f64| v.clamp(f64::from(f32::MIN), f64::from(f32::MAX));
    outward(b.map(clamp))
}

/// A shape's box as an envelope that surely contains it.
fn envelope_of(b: &BBox) -> Envelope {
    // An i64 beyond 2^53 may round either way on its way to f64: step outward once more.
    let (l, bt, r, t) = (b.left as f64, b.bottom as f64, b.right as f64, b.top as f64);
    let down = |f: f64, v: i64| {
        if f as i128 > i128::from(v) {
            f.next_down()
        } else {
            f
        }
    };
    let up = |f: f64, v: i64| {
        if (f as i128) < i128::from(v) {
            f.next_up()
        } else {
            f
        }
    };
    let exact = [
        down(l, b.left),
        down(bt, b.bottom),
        up(r, b.right),
        up(t, b.top),
    ];
    // Within ±2^63, far inside the f32 range: always finite.
    outward(exact).unwrap_or_else(|| AABB::from_corners([f32::MIN; 2], [f32::MAX; 2]))
}

/// The `f32` envelope containing the real box `[l, b, r, t]`; `None` when it does not fit
/// in finite `f32`s.
fn outward(b: [f64; 4]) -> Option<Envelope> {
    let down = |v: f64| {
        let f = v as f32;
        if f64::from(f) > v { f.next_down() } else { f }
    };
    let up = |v: f64| {
        let f = v as f32;
        if f64::from(f) < v { f.next_up() } else { f }
    };
    let e = [down(b[0]), down(b[1]), up(b[2]), up(b[3])];
    e.iter()
        .all(|v| v.is_finite())
        .then(|| AABB::from_corners([e[0], e[1]], [e[2], e[3]]))
}

/// Estimated heap bytes of a bulk-loaded tree: every node and the child lists holding them.
fn tree_bytes(tree: &RTree<Entry>) -> usize {
    let mut bytes = size_of::<rstar::ParentNode<Entry>>();
    let mut stack = vec![tree.root()];
    while let Some(parent) = stack.pop() {
        bytes += size_of_val(parent.children());
        for child in parent.children() {
            if let rstar::RTreeNode::Parent(p) = child {
                stack.push(p);
            }
        }
    }
    bytes
}

/// Rough bytes of one `BTreeMap` entry (key, value and a share of its node).
const fn btree_entry_bytes<K, V>() -> usize {
    (size_of::<K>() + size_of::<V>()) * 3 / 2
}
