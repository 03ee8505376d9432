//! A reproducible measurement of what the index buys: one flat cell of many rectangles,
//! many small clip boxes, flattened with and without the index in the same process. The
//! `index_bench` example prints it; a benchmark CLI can call [`flat_cell_speedup`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::LayoutIndex;
use crate::flatten::{ClipMode, FlattenError, FlattenOptions, flatten};
use crate::geom::{BBox, Point};
use crate::model::{Cell, LayerKey, Library, Shape};

/// What [`flat_cell_speedup`] measured.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexSpeedup {
    /// Rectangles in the flat cell.
    pub shapes: usize,
    /// Clip boxes flattened.
    pub queries: usize,
    /// Side of each clip box (dbu; the library's dbu is 1 nm).
    pub clip_dbu: i64,
    /// Building the index of the cell ([`LayoutIndex::new`] and [`LayoutIndex::build_all`]).
    pub build: Duration,
    /// All queries with [`crate::flatten()`].
    pub unindexed: Duration,
    /// All queries with [`LayoutIndex::flatten`].
    pub indexed: Duration,
    /// Polygons produced over all queries (the same both ways, or `identical` is false).
    pub polygons: usize,
    /// Whether every query gave the same result both ways.
    pub identical: bool,
    /// [`LayoutIndex::memory_bytes`] after the run.
    pub index_bytes: usize,
}

impl IndexSpeedup {
    /// Unindexed time over indexed time (query time only, build excluded).
    #[must_use]
    pub fn speedup(&self) -> f64 {
        self.unindexed.as_secs_f64() / self.indexed.as_secs_f64().max(1e-12)
    }
}

/// A deterministic pseudo-random sequence (SplitMix64): the benchmark needs no quality,
/// only the same numbers on every machine.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D4_9BB4_9133_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`; the modulo bias is irrelevant here).
    fn below(&mut self, n: u64) -> i64 {
        (self.next() % n) as i64
    }
}

/// A library with one cell `FLAT` holding `shapes` rectangles on layer 1/0, placed on a
/// square grid of 500 nm pitch with sizes from 50 to 300 nm (1 nm dbu): about the density
/// of a metal layer, so a 2 µm clip box meets some 16 to 25 of them.
#[must_use]
pub fn flat_cell_library(shapes: usize, seed: u64) -> Library {
    const PITCH: i64 = 500;
    let side = (shapes as f64).sqrt().ceil().max(1.0) as usize;
    let mut rng = SplitMix(seed);
    let mut lib = Library::new("FLAT_BENCH", 1e-9);
    let mut cell = Cell::new("FLAT");
    for k in 0..shapes {
        let (i, j) = ((k % side) as i64, (k / side) as i64);
        let (w, h) = (50 + rng.below(251), 50 + rng.below(251));
        let (x, y) = (i * PITCH + rng.below(100), j * PITCH + rng.below(100));
        cell.push_shape(
            LayerKey::new(1, 0),
            Shape::Box(BBox::from_corners(
                Point::new(x, y),
                Point::new(x + w, y + h),
            )),
        );
    }
    lib.cells.push(cell);
    lib
}

/// Flattens `queries` clip boxes of side `clip_dbu`, spread at random over a flat cell of
/// `shapes` rectangles ([`flat_cell_library`]), once with [`crate::flatten()`] and once with
/// [`LayoutIndex::flatten`], and reports both times and whether the results agree.
///
/// # Errors
/// [`FlattenError`] from either flattening (none with the default limits).
pub fn flat_cell_speedup(
    shapes: usize,
    queries: usize,
    clip_dbu: i64,
) -> Result<IndexSpeedup, FlattenError> {
    let lib = Arc::new(flat_cell_library(shapes, 7));
    let extent = ((shapes as f64).sqrt().ceil() as i64).max(1) * 500;
    let mut rng = SplitMix(11);
    let clips: Vec<BBox> = (0..queries)
        .map(|_| {
            let span = u64::try_from((extent - clip_dbu).max(1)).unwrap_or(1);
            let (x, y) = (rng.below(span), rng.below(span));
            BBox::from_corners(Point::new(x, y), Point::new(x + clip_dbu, y + clip_dbu))
        })
        .collect();
    let options = |clip: BBox| FlattenOptions {
        clip: Some(clip),
        ..FlattenOptions::default()
    };

    let started = Instant::now();
    let index = LayoutIndex::new(Arc::clone(&lib))?;
    index.build_all();
    let build = started.elapsed();

    let started = Instant::now();
    let mut reference = Vec::with_capacity(queries);
    for clip in &clips {
        reference.push(flatten(&lib, 0, &options(*clip))?);
    }
    let unindexed = started.elapsed();

    let started = Instant::now();
    let mut indexed_out = Vec::with_capacity(queries);
    for clip in &clips {
        indexed_out.push(index.flatten(0, &options(*clip), ClipMode::Clip)?);
    }
    let indexed = started.elapsed();

    Ok(IndexSpeedup {
        shapes,
        queries,
        clip_dbu,
        build,
        unindexed,
        indexed,
        polygons: reference.iter().map(|f| f.polygon_count()).sum(),
        identical: reference == indexed_out,
        index_bytes: index.memory_bytes(),
    })
}
