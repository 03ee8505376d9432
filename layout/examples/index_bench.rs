//! Prints what the layout index buys on a flat cell: many small clipped flattenings with
//! and without it, in one process.
//!
//! `cargo run --release -p reticle-layout --example index_bench [SHAPES [QUERIES [CLIP_NM]]]`
//! (defaults: 200000 rectangles, 1000 clip boxes of 2000 nm).
#![allow(clippy::print_stdout)]

use reticle_layout::index::bench::flat_cell_speedup;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut next = |default: u64| -> Result<u64, std::num::ParseIntError> {
        args.next().map_or(Ok(default), |a| a.parse())
    };
    let shapes = usize::try_from(next(200_000)?)?;
    let queries = usize::try_from(next(1000)?)?;
    let clip = i64::try_from(next(2000)?)?;
    let r = flat_cell_speedup(shapes, queries, clip)?;
    println!(
        "flat cell of {} rectangles, {} clip boxes of {} nm: {} polygons, results identical: {}",
        r.shapes, r.queries, r.clip_dbu, r.polygons, r.identical
    );
    println!(
        "index build {:.1} ms, {:.1} MiB ({:.0} bytes per shape)",
        r.build.as_secs_f64() * 1e3,
        r.index_bytes as f64 / (1 << 20) as f64,
        r.index_bytes as f64 / r.shapes.max(1) as f64
    );
    println!(
        "unindexed {:.3} s ({:.3} ms per clip), indexed {:.4} s ({:.4} ms per clip): speedup {:.0}x",
        r.unindexed.as_secs_f64(),
        r.unindexed.as_secs_f64() * 1e3 / r.queries.max(1) as f64,
        r.indexed.as_secs_f64(),
        r.indexed.as_secs_f64() * 1e3 / r.queries.max(1) as f64,
        r.speedup()
    );
    if !r.identical {
        return Err("indexed and unindexed results differ".into());
    }
    Ok(())
}
