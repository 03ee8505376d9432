//! The crate's unit tests, one module per source module (`oasis_cursor`:
//! `src/oasis/cursor.rs`).
//!
//! They lived in `#[cfg(test)]` modules of `src/`; here the library is compiled once, not a
//! second time as a test harness (D251). The internals they need are public items, the
//! `#[doc(hidden)]` ones public for these tests only.

mod clip;
mod gds_record;
mod geom;
mod glp;
mod model;
mod oasis_cursor;
mod oasis_geometry;
mod oasis_writer;
mod observe_cells;
mod observe_error;
mod observe_geometry;
mod observe_layers;
mod observe_measure;
mod observe_region;
mod observe_render;
mod observe_units;
mod path;
mod read;
mod stats;
mod transform;
mod writeback_emit;
mod writeback_split;
