//! Seed 003 ("KLayout Observer contract") queries over a parsed [`Library`](crate::Library).
//!
//! Pure computation: no sessions, no files. The host owns sessions and artifacts and adds
//! `session_id` (and artifact paths) to the payloads built here. Every payload type
//! serializes to the field names, units and orderings seed 003 fixes: microns rounded to
//! 6 decimals next to integer dbu, layers sorted by (layer, datatype), cells by name,
//! shapes by (layer, kind, bbox), truncation metadata always present.
//!
//! - [`cells`]: top-cell rule, `list_cells`, `describe_cell`, the `open_layout` summary.
//! - [`layers`]: the `list_layers` query.
//! - [`region`]: `query_region`, content-derived shape ids and [`region::ShapeLocator`]s
//!   that resolve an id back to its shape.
//! - [`measure`]: `measure_geometry` (eight modes) and `analyze_waveguide`.
//! - [`render`]: `set_view` and `render_view` (PNG bytes, byte-stable).
//! - [`error`]: [`ObserveError`] with seed 003's exact codes.

pub mod boxes;
pub mod cells;
pub mod error;
pub mod geometry;
pub mod layers;
pub mod measure;
pub mod region;
pub mod render;
pub mod units;

pub use error::ObserveError;
pub use units::{DbuBox, DbuPoint, MicronBox, MicronPoint, ObservedLayer};
