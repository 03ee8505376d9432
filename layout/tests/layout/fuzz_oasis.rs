//! Property tests: the OASIS reader (and the flattener on whatever it accepts) never panics
//! on random bytes after the magic, or on mutated and truncated valid files.

use crate::common;

use proptest::prelude::*;
use reticle_layout::{FlattenOptions, Limits, read_oasis};

fn small_limits() -> Limits {
    Limits {
        max_shapes: 20_000,
        max_points: 200_000,
        max_depth: 32,
        max_array: 10_000,
        max_placements: 20_000,
        max_stored_shapes: 20_000,
        max_stored_points: 200_000,
        max_decompressed_bytes: 1 << 20,
        ..Limits::default()
    }
}

fn exercise(bytes: &[u8]) {
    let limits = small_limits();
    if let Ok(lib) = read_oasis(bytes, &limits) {
        for top in lib.top_cells() {
            let mut opts = FlattenOptions {
                include_texts: true,
                limits,
                ..FlattenOptions::default()
            };
            let _ = reticle_layout::flatten(&lib, top, &opts);
            opts.clip = Some(common::rect(-1000, 0, 5000, 9000));
            let _ = reticle_layout::flatten(&lib, top, &opts);
            let _ = reticle_layout::cell_bboxes(&lib, None);
        }
    }
}

proptest! {
    // PROPTEST_CASES raises the count for a long local run; CI uses the default 512.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512),
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_records_never_panic(body in prop::collection::vec(any::<u8>(), 0..1024)) {
        let bytes = [common::oas::start(), body, common::oas::end()].concat();
        exercise(&bytes);
    }

    #[test]
    fn small_record_ids_never_panic(body in prop::collection::vec(0u8..40, 0..512)) {
        // Bytes below 40 hit real record ids and small field values far more often.
        let bytes = [common::oas::start(), common::oas::cell("A"), body, common::oas::end()].concat();
        exercise(&bytes);
    }

    #[test]
    fn mutated_valid_files_never_panic(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut bytes = common::oas::every_record_file();
        for (at, b) in &edits {
            let i = at.index(bytes.len() - 13) + 13;
            bytes[i] = *b;
        }
        if truncate {
            bytes.truncate(cut.index(bytes.len()));
        }
        exercise(&bytes);
    }
}
