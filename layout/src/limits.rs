//! Resource limits for reading and flattening untrusted layouts.

use serde::{Deserialize, Serialize};

/// Bounds that keep a hostile file from exhausting memory or time. Readers and the
/// flattener check them while they work (not afterwards), and fail with a typed
/// `LimitExceeded { what, limit }` error naming the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Largest accepted input file (bytes).
    pub max_input_bytes: u64,
    /// Most polygons a flattening may produce (texts included).
    pub max_shapes: u64,
    /// Most vertices, summed over all polygons, a flattening may produce.
    pub max_points: u64,
    /// Deepest cell nesting a flattening may descend (top cell is depth 0).
    pub max_depth: u32,
    /// Most copies of one array / repetition a flattening may visit. With a clip box, only
    /// the lattice columns and rows that can reach it count, so a window into a huge array
    /// is cheap while flattening all of it is refused.
    pub max_array: u64,
    /// Most cell placements a flattening may visit (bounds time on empty hierarchies).
    pub max_placements: u64,
    /// Most shapes a reader may store (OASIS repetitions of shapes are expanded).
    pub max_stored_shapes: u64,
    /// Most vertices (and explicit repetition displacements) a reader may store.
    pub max_stored_points: u64,
    /// Most bytes all OASIS CBLOCKs of a file may inflate to, in total.
    pub max_decompressed_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_input_bytes: 2 << 30,
            max_shapes: 5_000_000,
            max_points: 50_000_000,
            max_depth: 256,
            max_array: 100_000_000,
            max_placements: 100_000_000,
            max_stored_shapes: 50_000_000,
            max_stored_points: 200_000_000,
            // 256 MiB: an honest 1 GiB CBLOCK took over 10 s to inflate and scan in a
            // worker (the hostile suite's deflate bomb); clips and regions stay far below.
            max_decompressed_bytes: 256 << 20,
        }
    }
}
