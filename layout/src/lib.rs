//! Layout model and readers for reticle.
//!
//! Everything that turns untrusted layout bytes (GDSII, OASIS, ICCAD `.glp`) into
//! geometry lives here, so it can run inside a disposable worker and be fuzzed on
//! its own. Coordinates are integer database units (dbu); the library records how
//! large one dbu is. Readers never panic on bad input: they return typed errors with
//! byte offsets, and every allocation a file can ask for is checked against [`Limits`].
//!
//! - [`model`]: [`Library`], [`Cell`], [`Shape`], [`Instance`] — one model for all formats.
//! - [`gds`]: GDSII stream reader ([`read_gds`]) and writer ([`write_gds`]).
//! - [`oasis`]: OASIS reader ([`read_oasis`]) and writer ([`write_oasis`]).
//! - [`read_layout`]: either format, detected from the bytes or named by the caller.
//! - [`flatten`](mod@flatten): hierarchy → polygons per layer ([`flatten()`], [`walk`]),
//!   with clip box, layer filter and limits enforced while walking.
//!   The placement walk itself (`hierarchy`) is shared with the observer's region query.
//! - [`index`]: [`LayoutIndex`], per-cell R-trees over shapes and instance footprints, so a
//!   clipped flattening (one tile of a whole-layout run) costs what the clip box holds;
//!   [`ClipMode::Overlap`] keeps whole polygons; [`LayoutIndex::layer_bbox`] boxes layers
//!   without flattening.
//! - [`bbox`]: hierarchical cell boxes with KLayout's semantics ([`cell_bboxes`]).
//! - [`stats`]: per-layer shape counts of a flattened cell without flattening
//!   ([`flat_shape_counts`]).
//! - [`glp`]: the ICCAD-2013 `.glp` text format.
//! - [`path`], [`clip`], [`transform`]: path outlines, rectangle clipping, placements.
//! - [`writeback`]: a repaired layout written back ([`write_back`]): every input layer
//!   kept, a mask layer with the optimized mask inside a region and the drawn shapes
//!   outside, hierarchy kept outside the region; [`write_layout`] in either format.

pub mod bbox;
pub mod clip;
pub mod flatten;
pub mod gds;
pub mod geom;
pub mod glp;
mod hierarchy;
pub mod index;
pub mod limits;
pub mod model;
pub mod oasis;
pub mod observe;
pub mod path;
pub mod read;
pub mod stats;
pub mod transform;
pub mod writeback;

pub use bbox::cell_bboxes;
pub use flatten::{
    ClipMode, FlatGeometry, FlatLayout, FlatShape, FlatText, FlattenError, FlattenOptions, flatten,
    flatten_with_mode, resolve_cell, walk, walk_with_mode,
};
pub use gds::{GdsError, GdsWriteError, read_gds, write_gds};
pub use geom::{BBox, Point, Polygon};
pub use index::{LayerExtent, LayoutIndex};
pub use limits::Limits;
pub use model::{
    Cell, HierarchyError, Instance, LayerKey, LayerName, Library, Path, PathEnds, Repetition,
    Shape, Text, Transform,
};
pub use oasis::{OasisError, OasisWriteError, read_oasis, write_oasis};
pub use read::{Format, LayoutError, read_layout, sha256_hex};
pub use stats::flat_shape_counts;
pub use transform::{Affine, CoordinateOverflow};
pub use writeback::{
    WriteLayoutError, Writeback, WritebackError, WritebackReport, WritebackRequest,
    default_mask_layer, write_back, write_layout,
};
