//! The evaluation and repair domain logic of reticle: what `evaluate` and `optimize`
//! compute from an imaged layout window. No I/O to stdio or files, no async, no process
//! control, no path confinement: the worker's ops read files (confined to the job's
//! roots), image on the worker's backend, report progress and map errors; everything in
//! between is here, testable without a worker.
//!
//! One evaluation, in order:
//! 1. [`deck`]: the rule deck (shipped or parsed from text), the layer evaluated and the
//!    second layers its enclosure rules read;
//! 2. [`window`]: the input, one layout window and its three corner images
//!    ([`ImagedWindow`]);
//! 3. [`found`]: finding the violations of that window ([`found::find`]): mask rules on
//!    the drawn polygons, printed rules on the [`printed`] contours, EPE and PV band at
//!    the [`gauges`]' checkpoints. A [`Found`] violation has a rule, a location and a
//!    marker, and no tile, group or id yet;
//! 4. [`records`]: a list of found violations (of one window today; of many windows
//!    merged, for whole-layout tiling) becomes report records ([`records::build`]):
//!    report tiles, single-linkage groups, `violation_group_id`s, canonical and shadow
//!    records, [`reticle_protocol::ViolationId`]s;
//! 5. [`report`]: the `evaluate` payload ([`report::report`]): counts, `by_rule`, pass
//!    rates, truncation or degradation to aggregate.
//!
//! Reading and imaging a window come before step 2: [`source`] reads one window of a
//! layout's bytes, [`region_source`] a region box by box, and [`imaging`] images a window
//! at the three corners on the backend the caller hands it.
//!
//! [`optimize`] holds the repair loop's logic around the ILT: which records a
//! `violation_id` targets (`scope: group | record_only`), the window plus halo, the
//! optimized mask as pixels and polygons, and the before/after comparison.

pub mod deck;
pub mod error;
pub mod found;
pub mod gauges;
pub mod heatmap;
pub mod imaging;
pub mod merge;
pub mod optimize;
pub mod payload;
pub mod printed;
pub mod records;
pub mod region_source;
pub mod report;
pub mod source;
pub mod stitch;
pub mod tile;
pub mod tiles;
pub mod window;

pub use error::EvalError;
pub use found::Found;
pub use window::{ImagedWindow, LayoutWindow, MaskOverride};

/// Rounds to 3 decimals (nm values): enough for sub-pixel EPE, stable in JSON.
#[must_use]
pub fn r3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}
