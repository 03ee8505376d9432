//! The real 45 nm routed GDS from the reference data loads and flattens.

use crate::common;

use reticle_layout::{FlattenOptions, LayerKey, Limits, flatten, read_gds, resolve_cell};

#[test]
fn gcd_45nm_loads_and_flattens() {
    let path = common::data_dir().join("gds/gcd_45nm.gds");
    let Ok(bytes) = std::fs::read(&path) else {
        eprintln!("SKIP: {} not found (set RETICLE_DATA_DIR)", path.display());
        return;
    };
    let lib = read_gds(&bytes, &Limits::default()).expect("real GDS reads");
    let top = resolve_cell(&lib, None).expect("a top cell");
    let flat = flatten(&lib, top, &FlattenOptions::default()).expect("flattens");
    let metal1 = flat.polygons.get(&LayerKey::new(11, 0)).map_or(0, Vec::len);
    println!(
        "gcd_45nm: {} cells, top {:?}, dbu {} um, {} polygons, {} on metal1 (11/0)",
        lib.cells.len(),
        lib.cells[top].name,
        lib.dbu_um(),
        flat.polygon_count(),
        metal1
    );
    assert!(metal1 > 0, "metal1 has shapes");
    // Every polygon is a proper, non-degenerate shape; metal1 is Manhattan routing.
    for p in &flat.polygons[&LayerKey::new(11, 0)] {
        assert!(p.points.len() >= 4 && p.signed_area2() != 0);
        let n = p.points.len();
        for i in 0..n {
            let (a, b) = (p.points[i], p.points[(i + 1) % n]);
            assert!(a.x == b.x || a.y == b.y, "non-Manhattan edge {a:?}->{b:?}");
        }
    }
    // A clip of the lower-left quarter keeps a strict subset of the area.
    let bb = reticle_layout::cell_bboxes(&lib, None).expect("bbox")[top].expect("non-empty");
    let quarter = reticle_layout::BBox {
        left: bb.left,
        bottom: bb.bottom,
        right: bb.left + bb.width() / 2,
        top: bb.bottom + bb.height() / 2,
    };
    let area = |f: &reticle_layout::FlatLayout| -> i128 {
        f.polygons
            .get(&LayerKey::new(11, 0))
            .map_or(0, |v| v.iter().map(|p| p.signed_area2().abs()).sum())
    };
    let clipped = flatten(
        &lib,
        top,
        &FlattenOptions {
            clip: Some(quarter),
            ..FlattenOptions::default()
        },
    )
    .expect("clip");
    assert!(area(&clipped) > 0 && area(&clipped) < area(&flat));
}
