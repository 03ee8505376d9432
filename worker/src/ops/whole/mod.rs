//! Whole-layout work (docs/DECISIONS.md D57): a region cut into tiles that any executor
//! can run, each a self-contained unit of work, for `evaluate` ([`evaluate`]) and
//! `simulate` ([`simulate`]).
//!
//! Each has three ops the host's fan-out runs in order: `<tool>.plan` (opens the layout,
//! picks the region — the caller's box, else the whole layer, a `.glp` clip's ICCAD
//! window —, the model, the grid and the tiles, and warms the kernel cache; its `plan`
//! travels with every later op), `<tool>.tile` (one tile, written to the tiles folder of
//! the job's artifact directory as `.tiles/tile_<ix>_<iy>.json`, D190; the answer is a
//! small summary) and `<tool>.merge` (reads the tile files in order and builds the
//! result). `evaluate.page` ([`pages`]) pages through a merged report's records.
//!
//! What they share (planning, imaging a tile, the tile files) is [`crate::tiled`]; the
//! records file and its pages are [`crate::records_file`].

pub mod evaluate;
pub mod pages;
pub mod simulate;
