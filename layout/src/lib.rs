//! Layout model and readers for reticle.
//!
//! Everything that turns untrusted layout bytes (GDSII, OASIS, ICCAD `.glp`) into
//! geometry lives here, so it can run inside a disposable worker and be fuzzed on
//! its own. Coordinates are integer database units (dbu); the library records how
//! many microns one dbu is.

pub mod geom;
pub mod glp;

pub use geom::{BBox, Point, Polygon};
