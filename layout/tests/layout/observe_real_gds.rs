//! The observer queries on the real 45 nm routed GDS from the reference data: cells and
//! layers sorted, counts consistent with the flattener, and `query_region` on a small box
//! equal to an independent brute-force walk of the whole layout. Skips (with `SKIP:`) when
//! the data is absent.

use crate::common;

use std::collections::BTreeMap;

use reticle_layout::observe::MicronBox;
use reticle_layout::observe::cells::{list_cells, select_top_cell};
use reticle_layout::observe::layers::list_layers;
use reticle_layout::observe::region::{
    HARD_MAX_ITEMS, HierarchyMode, QueryBudget, RegionRequest, query_region,
};
use reticle_layout::observe::render::{RenderSpec, RenderStyle, render_view};
use reticle_layout::{
    BBox, FlatGeometry, FlattenOptions, LayerKey, Limits, flat_shape_counts, read_gds, walk,
};

#[test]
fn gcd_45nm_observer_queries() {
    let path = common::data_dir().join("gds/gcd_45nm.gds");
    let Ok(bytes) = std::fs::read(&path) else {
        eprintln!("SKIP: {} not found (set RETICLE_DATA_DIR)", path.display());
        return;
    };
    let lib = read_gds(&bytes, &Limits::default()).expect("reads");
    let sel = select_top_cell(&lib, None).expect("top");
    let top = sel.index;

    let cells = list_cells(&lib, top, None).expect("cells");
    assert_eq!(cells.len(), lib.cells.len());
    assert!(
        cells.windows(2).all(|w| w[0].name < w[1].name),
        "sorted by name"
    );
    let entry = cells
        .iter()
        .find(|c| c.name == sel.selected_top_cell)
        .expect("top listed");
    assert!(entry.is_top && entry.bbox_um.is_some());

    let layers = list_layers(&lib, top).expect("layers");
    assert!(
        layers
            .windows(2)
            .all(|w| (w[0].layer, w[0].datatype) < (w[1].layer, w[1].datatype))
    );
    let counts = flat_shape_counts(&lib, top).expect("counts");
    for l in &layers {
        let key = LayerKey::new(l.layer, l.datatype);
        assert_eq!(l.shape_count, counts.get(&key).copied().unwrap_or(0));
    }

    // A 4 µm square at a quarter of the top cell's box.
    let bb = entry.bbox_dbu.expect("box");
    let (cx, cy) = (
        bb.left + (bb.right - bb.left) / 4,
        bb.bottom + (bb.top - bb.bottom) / 4,
    );
    let half = (2.0 / lib.dbu_um()).round() as i64;
    let q = BBox {
        left: cx - half,
        bottom: cy - half,
        right: cx + half,
        top: cy + half,
    };
    let dbu = lib.dbu_um();
    let box_um = MicronBox {
        left: q.left as f64 * dbu,
        bottom: q.bottom as f64 * dbu,
        right: q.right as f64 * dbu,
        top: q.top as f64 * dbu,
    };
    let req = RegionRequest {
        box_um,
        cell: None,
        layers: None,
        hierarchy_mode: HierarchyMode::Recursive,
        max_shapes: Some(HARD_MAX_ITEMS),
        max_instances: Some(HARD_MAX_ITEMS),
        max_texts: Some(HARD_MAX_ITEMS),
    };
    let out = query_region(&lib, &req, &QueryBudget::default()).expect("query");
    let p = &out.payload;
    assert_eq!(p.cell, sel.selected_top_cell);
    assert_eq!(p.box_dbu.left, q.left);

    // Brute force: walk everything (no clip) and box each placed shape.
    let meets =
        |b: &BBox| b.left <= q.right && q.left <= b.right && b.bottom <= q.top && q.bottom <= b.top;
    let mut want: BTreeMap<(LayerKey, bool), u64> = BTreeMap::new();
    let opts = FlattenOptions {
        include_texts: true,
        ..FlattenOptions::default()
    };
    walk(&lib, top, &opts, &mut |s| {
        let (b, text) = match &s.geometry {
            FlatGeometry::Polygon(poly) => (poly.bbox(), false),
            FlatGeometry::Text(pt) => (Some(BBox::from_corners(*pt, *pt)), true),
        };
        if b.is_some_and(|b| meets(&b)) {
            *want.entry((s.key, text)).or_default() += 1;
        }
    })
    .expect("walk");
    let mut got: BTreeMap<(LayerKey, bool), u64> = BTreeMap::new();
    for s in &p.shapes {
        *got.entry((LayerKey::new(s.layer.layer, s.layer.datatype), false))
            .or_default() += 1;
        let b = s.bbox_dbu;
        assert!(meets(&BBox {
            left: b.left,
            bottom: b.bottom,
            right: b.right,
            top: b.top
        }));
    }
    for t in &p.texts {
        *got.entry((LayerKey::new(t.layer.layer, t.layer.datatype), true))
            .or_default() += 1;
    }
    assert_eq!(got, want, "query_region equals a brute-force walk");
    assert_eq!(p.truncation.shapes_dropped, 0);
    assert!(p.summary.shape_count > 0, "the box holds routing");
    let keys: Vec<_> = p
        .shapes
        .iter()
        .map(|s| {
            let b = s.bbox_dbu;
            (
                s.layer.layer,
                s.layer.datatype,
                s.kind,
                b.left,
                b.bottom,
                b.right,
                b.top,
            )
        })
        .collect();
    assert!(keys.windows(2).all(|w| w[0] <= w[1]), "sorted shapes");
    println!(
        "gcd_45nm: top {}, {} cells, {} layers; 4 µm box: {} shapes, {} instances, {} texts",
        p.cell,
        cells.len(),
        layers.len(),
        p.summary.shape_count,
        p.summary.instance_count,
        p.summary.text_count
    );

    // A small limit truncates with metadata; ids agree across modes.
    let small = RegionRequest {
        max_shapes: Some(5),
        ..req.clone()
    };
    let t = query_region(&lib, &small, &QueryBudget::default()).expect("small");
    assert_eq!(t.payload.shapes.len() as u64, 5.min(p.summary.shape_count));
    assert_eq!(
        t.payload.truncation.shapes_dropped,
        p.summary.shape_count - t.payload.shapes.len() as u64
    );
    assert_eq!(t.payload.shapes[..], p.shapes[..t.payload.shapes.len()]);
    let flat = RegionRequest {
        hierarchy_mode: HierarchyMode::Flattened,
        ..req.clone()
    };
    let f = query_region(&lib, &flat, &QueryBudget::default()).expect("flat");
    let ids = |v: &[reticle_layout::observe::region::ShapeEntry]| {
        v.iter().map(|s| s.id.clone()).collect::<Vec<_>>()
    };
    assert_eq!(ids(&f.payload.shapes), ids(&p.shapes));

    // Render the box: shapes present, byte-stable.
    let spec = RenderSpec {
        cell: p.cell.clone(),
        box_um,
        layers: None,
        width: 200,
        height: 200,
        style: RenderStyle::Mask,
        max_shapes: reticle_layout::observe::render::MAX_RENDER_SHAPES,
    };
    let a = render_view(&lib, &spec, &[]).expect("render");
    let b = render_view(&lib, &spec, &[]).expect("render");
    assert_eq!(a.png, b.png);
    assert!(a.png.len() > 100);
}
