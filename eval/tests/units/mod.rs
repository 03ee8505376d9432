//! The crate's unit tests, one module per source module (`optimize_region`:
//! `src/optimize/region.rs`).
//!
//! They lived in `#[cfg(test)]` modules of `src/`; here the library is compiled once, not a
//! second time as a test harness (D251). The internals they need are public items, the
//! `#[doc(hidden)]` ones public for these tests only.

mod deck;
mod gauges;
mod imaging;
mod merge;
mod optimize_compare;
mod optimize_mask;
mod optimize_region;
mod optimize_target;
mod printed;
mod records;
mod report;
mod source;
mod stitch;
mod tile;
mod tiles;
