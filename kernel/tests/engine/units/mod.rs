//! The crate's unit tests, one module per source module (`rules_deck`: `src/rules/deck.rs`).
//!
//! They lived in `#[cfg(test)]` modules of `src/`; here the library is compiled once, not a
//! second time as a test harness (D251). The internals they need are `#[doc(hidden)]`
//! public items.

mod bandlimited;
mod cancel;
mod contour;
mod fft;
mod fold;
mod gpu_select;
mod ilt;
mod metrics;
mod model;
mod mrc;
mod mrc_morph;
mod mrc_polygonize;
mod mrc_seam;
mod npy;
mod optics;
mod raster;
mod resist;
mod rules;
mod rules_deck;
mod rules_region;
mod rules_relation;
mod scratch;
mod socs_store;
mod tiling;
