//! The written-back library through GDSII and OASIS and back: the same cells, and per layer
//! the same flattened geometry; values a format cannot hold are typed errors.

use std::collections::BTreeSet;

use super::invariants::arrayed;
use super::{GCD_M1, check, gcd, keyholed_ring, limits, request, synthetic_mask};
use crate::common::{areas2, bboxes, rect};
use reticle_layout::{
    FlattenOptions, Format, LayerKey, Library, Polygon, WriteLayoutError, WritebackRequest,
    default_mask_layer, flatten, read_layout, write_back, write_layout,
};

/// Reads back what `write_layout` wrote and compares cells and flattened layers.
fn same_after(lib: &Library, top: usize, format: Format) -> Library {
    let bytes = write_layout(lib, format).expect("writable");
    assert_eq!(Format::sniff(&bytes), Some(format));
    let back = read_layout(&bytes, Some(format), &limits()).expect("readable");
    let names = |l: &Library| l.cells.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&back), names(lib), "{format:?}");
    let top_name = &lib.cells[top].name;
    let back_top = back.cell_index(top_name).expect("top");
    let layers: BTreeSet<LayerKey> = lib.layers().into_iter().collect();
    let opts = FlattenOptions::default();
    let a = flatten(lib, top, &opts).expect("flatten");
    let b = flatten(&back, back_top, &opts).expect("flatten");
    for key in &layers {
        let (pa, pb) = (
            a.polygons.get(key).cloned().unwrap_or_default(),
            b.polygons.get(key).cloned().unwrap_or_default(),
        );
        assert_eq!(areas2(&pa), areas2(&pb), "{format:?} {key:?}");
        assert_eq!(bboxes(&pa), bboxes(&pb), "{format:?} {key:?}");
    }
    back
}

#[test]
fn hand_made_hierarchy_round_trips_in_both_formats() {
    let lib = arrayed();
    let mask = vec![
        Polygon::rect(rect(240, 260, 420, 300)),
        keyholed_ring(1300, 300, 200, 80),
    ];
    let req = request(2, rect(250, 250, 1600, 720), &mask);
    let wb = write_back(&lib, &req, &limits()).expect("write back");
    for format in [Format::Gds, Format::Oasis] {
        let back = same_after(&wb.library, 2, format);
        // What was read back keeps every promise against the input read back the same way
        // (OASIS writes an odd-width path as its outline, D131).
        let input = read_layout(
            &write_layout(&lib, format).expect("writable"),
            Some(format),
            &limits(),
        )
        .expect("readable");
        check(
            &input,
            &back,
            &req,
            LayerKey::new(1, 0),
            rect(-300, -300, 3300, 1300),
            9,
            true,
        );
    }
}

#[test]
fn gcd_round_trips_in_both_formats() {
    let Some((_, lib)) = gcd() else { return };
    let top = lib.top_cells()[0];
    let mask_layer = default_mask_layer(&lib, GCD_M1).expect("free");
    assert_eq!(mask_layer, LayerKey::new(11, 1));
    // 4 µm × 3 µm at 0.1 nm per dbu.
    let region = rect(100_000, 100_000, 140_000, 130_000);
    let mask = synthetic_mask(&lib, top, GCD_M1, region, 50);
    assert!(mask.len() > 10, "{} mask polygons", mask.len());
    let req = WritebackRequest {
        top,
        target: GCD_M1,
        mask_layer,
        region,
        mask: &mask,
    };
    let wb = write_back(&lib, &req, &limits()).expect("write back");
    assert_eq!(wb.report.touched_cells, ["TOP"]);
    assert!(wb.report.variant_cells.is_empty(), "gcd is flat");
    for format in [Format::Gds, Format::Oasis] {
        let back = same_after(&wb.library, top, format);
        let inside = check(
            &lib,
            &back,
            &req,
            GCD_M1,
            rect(90_000, 90_000, 150_000, 140_000),
            197,
            true,
        );
        assert!(inside > 1000, "{inside}");
    }
}

#[test]
fn values_a_format_cannot_hold_are_errors() {
    let lib = arrayed();
    let far = vec![Polygon::rect(rect(1 << 40, 0, (1 << 40) + 10, 10))];
    let req = request(2, rect(0, -10, 1 << 41, 20), &far);
    let wb = write_back(&lib, &req, &limits()).expect("write back");
    assert!(matches!(
        write_layout(&wb.library, Format::Gds),
        Err(WriteLayoutError::Gds(_))
    ));
    assert!(matches!(
        write_layout(&wb.library, Format::Oasis),
        Err(WriteLayoutError::Oasis(_))
    ));
}
