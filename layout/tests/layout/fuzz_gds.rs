//! Property tests: the GDSII reader (and the flattener on whatever it accepts) never panics
//! on random bytes, random record streams, or valid files with mutations and truncations.

use crate::common;

use proptest::prelude::*;
use reticle_layout::gds::record::rt;
use reticle_layout::{FlattenOptions, Limits, read_gds, write_gds};

fn small_limits() -> Limits {
    Limits {
        max_shapes: 20_000,
        max_points: 200_000,
        max_depth: 32,
        max_array: 10_000,
        max_placements: 20_000,
        max_stored_shapes: 20_000,
        ..Limits::default()
    }
}

/// Reads, and if that works flattens every top cell (with and without a clip): any error
/// is fine, a panic fails the property.
fn exercise(bytes: &[u8]) {
    let limits = small_limits();
    if let Ok(lib) = read_gds(bytes, &limits) {
        for top in lib.top_cells() {
            let mut opts = FlattenOptions {
                include_texts: true,
                limits,
                ..FlattenOptions::default()
            };
            let _ = reticle_layout::flatten(&lib, top, &opts);
            opts.clip = Some(common::rect(-100, -100, 150, 80));
            let _ = reticle_layout::flatten(&lib, top, &opts);
            let _ = reticle_layout::cell_bboxes(&lib, None);
        }
    }
}

fn sample_bytes() -> Vec<u8> {
    write_gds(&common::sample_library()).expect("writable")
}

fn record() -> impl Strategy<Value = Vec<u8>> {
    let types = prop::sample::select(vec![
        rt::BGNSTR,
        rt::STRNAME,
        rt::ENDSTR,
        rt::BOUNDARY,
        rt::PATH,
        rt::SREF,
        rt::AREF,
        rt::TEXT,
        rt::LAYER,
        rt::DATATYPE,
        rt::WIDTH,
        rt::XY,
        rt::ENDEL,
        rt::SNAME,
        rt::COLROW,
        rt::TEXTTYPE,
        rt::STRING,
        rt::STRANS,
        rt::MAG,
        rt::ANGLE,
        rt::PATHTYPE,
        rt::BOX,
        rt::BOXTYPE,
        rt::BGNEXTN,
        rt::ENDEXTN,
        rt::NODE,
        rt::PROPATTR,
        rt::PROPVALUE,
    ]);
    (types, 0u8..7, prop::collection::vec(any::<u8>(), 0..40)).prop_map(|(t, d, mut data)| {
        if data.len() % 2 == 1 {
            data.pop();
        }
        let mut v = ((data.len() + 4) as u16).to_be_bytes().to_vec();
        v.push(t);
        v.push(d);
        v.extend_from_slice(&data);
        v
    })
}

proptest! {
    // PROPTEST_CASES raises the count for a long local run; CI uses the default 512.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512),
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        exercise(&bytes);
    }

    #[test]
    fn random_record_streams_never_panic(records in prop::collection::vec(record(), 0..60)) {
        let base = sample_bytes();
        // Keep the library header (up to the first BGNSTR), then random records, then ENDLIB.
        let mut bytes = base[..first_bgnstr(&base)].to_vec();
        for r in &records {
            bytes.extend_from_slice(r);
        }
        bytes.extend_from_slice(&[0, 4, rt::ENDLIB, 0]);
        exercise(&bytes);
    }

    #[test]
    fn mutated_valid_files_never_panic(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..12),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut bytes = sample_bytes();
        for (at, b) in &edits {
            let i = at.index(bytes.len());
            bytes[i] = *b;
        }
        if truncate {
            bytes.truncate(cut.index(bytes.len()));
        }
        exercise(&bytes);
    }
}

/// Offset of the first BGNSTR record.
fn first_bgnstr(bytes: &[u8]) -> usize {
    let mut pos = 0;
    loop {
        let at = pos;
        let rec = reticle_layout::gds::record::next_record(bytes, &mut pos)
            .expect("valid")
            .expect("has BGNSTR");
        if rec.rtype == rt::BGNSTR {
            return at;
        }
    }
}

#[test]
fn sample_header_ends_at_first_structure() {
    let b = sample_bytes();
    // HEADER (6) + BGNLIB (28) + LIBNAME "SAMPLE" (10) + UNITS (20).
    assert_eq!(first_bgnstr(&b), 64);
}
