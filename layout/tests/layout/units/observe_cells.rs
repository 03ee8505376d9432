//! Unit tests of `reticle_layout::observe::cells`: top cell, cell list, describe; the sample library other units use.

use reticle_layout::geom::Polygon;
use reticle_layout::geom::{BBox, Point};
use reticle_layout::model::{Cell, Path, PathEnds, Text, Transform};
use reticle_layout::model::{Instance, LayerKey, Library, Repetition, Shape};
use reticle_layout::observe::cells::*;
use reticle_layout::observe::units::{DbuBox, MicronBox, MicronPoint};

fn place(cell: usize, x: i64, y: i64, rot: f64) -> Instance {
    Instance {
        cell,
        transform: Transform {
            offset: Point::new(x, y),
            rotation_deg: rot,
            mirror_x: false,
            magnification: 1.0,
        },
        repetition: None,
    }
}

/// LEAF: box 1/0 (0,0)-(1000,500), text 10/0 "P" at (100,100), path 2/0 along x.
/// TOP: LEAF at (0,0); LEAF rotated 90° at (5000,0); 2x3 array of LEAF at (0,10000)
/// steps (2000,0),(0,1000); own box 1/0 (-500,-500)-(0,0). Z_EXTRA: unplaced, box 3/0.
/// dbu 1 nm (0.001 µm).
pub(crate) fn sample() -> Library {
    let mut lib = Library::new("T", 1e-9);
    let mut leaf = Cell::new("LEAF");
    leaf.push_shape(
        LayerKey::new(1, 0),
        Shape::Box(BBox::from_corners(Point::new(0, 0), Point::new(1000, 500))),
    );
    leaf.push_shape(
        LayerKey::new(10, 0),
        Shape::Text(Text {
            string: "P".into(),
            position: Point::new(100, 100),
        }),
    );
    leaf.push_shape(
        LayerKey::new(2, 0),
        Shape::Path(Path {
            spine: vec![Point::new(0, 250), Point::new(1000, 250)],
            width: 100,
            ends: PathEnds::Flush,
        }),
    );
    lib.cells.push(leaf);
    let mut top = Cell::new("TOP");
    top.instances.push(place(0, 0, 0, 0.0));
    top.instances.push(place(0, 5000, 0, 90.0));
    let mut arr = place(0, 0, 10_000, 0.0);
    arr.repetition = Some(Repetition::Array {
        cols: 2,
        rows: 3,
        col_step: Point::new(2000, 0),
        row_step: Point::new(0, 1000),
    });
    top.instances.push(arr);
    top.push_shape(
        LayerKey::new(1, 0),
        Shape::Polygon(Polygon::rect(BBox::from_corners(
            Point::new(-500, -500),
            Point::new(0, 0),
        ))),
    );
    lib.cells.push(top);
    let mut extra = Cell::new("Z_EXTRA");
    extra.push_shape(
        LayerKey::new(3, 0),
        Shape::Box(BBox::from_corners(Point::new(0, 0), Point::new(10, 10))),
    );
    lib.cells.push(extra);
    lib
}

#[test]
fn top_cell_rule() {
    let lib = sample();
    let sel = select_top_cell(&lib, None).expect("top");
    assert_eq!(sel.selected_top_cell, "TOP");
    assert_eq!(sel.top_cells, ["TOP", "Z_EXTRA"]);
    let sel = select_top_cell(&lib, Some("Z_EXTRA")).expect("named");
    assert_eq!(sel.index, 2);
    let e = select_top_cell(&lib, Some("NOPE")).expect_err("missing");
    assert_eq!(e.code(), "TOP_CELL_NOT_FOUND");
    let empty = Library::new("E", 1e-9);
    assert_eq!(
        select_top_cell(&empty, None).expect_err("empty").code(),
        "TOP_CELL_NOT_FOUND"
    );
    let s = layout_summary(&lib, None).expect("summary");
    // TOP box: own (-500,-500); LEAF r90 at 5000 spans x 4500..5000, y 0..1000;
    // array reaches (2000+1000, 10000+2000+500).
    assert_eq!(
        s.bbox_dbu,
        Some(DbuBox {
            left: -500,
            bottom: -500,
            right: 5000,
            top: 12_500
        })
    );
    assert_eq!(s.layer_count, 4);
    assert_eq!(s.dbu, 0.001);
    let v = serde_json::to_value(&s).expect("json");
    assert_eq!(v["bbox_um"]["top"], 12.5);
    assert_eq!(v["bbox_um"]["left"], -0.5);
}

#[test]
fn list_cells_sorted_with_counts() {
    let lib = sample();
    let cells = list_cells(&lib, 1, None).expect("cells");
    let names: Vec<&str> = cells.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["LEAF", "TOP", "Z_EXTRA"]);
    assert!(!cells[0].is_top && cells[1].is_top && cells[2].is_top);
    assert_eq!(cells[1].child_instance_count, 3);
    assert_eq!(cells[1].shape_count, 1);
    assert_eq!(cells[0].shape_count, 3);
    assert_eq!(cells[0].depth, Some(1));
    assert_eq!(cells[2].depth, None);
    assert_eq!(
        cells[0].bbox_um,
        Some(MicronBox {
            left: 0.0,
            bottom: 0.0,
            right: 1.0,
            top: 0.5
        })
    );
    let shallow = list_cells(&lib, 1, Some(0)).expect("cells");
    assert_eq!(shallow.len(), 1);
    assert_eq!(shallow[0].name, "TOP");
    assert_eq!(list_cells(&lib, 1, Some(1)).expect("cells").len(), 2);
}

#[test]
fn describe_top() {
    let lib = sample();
    let d = describe_cell(&lib, "TOP", None).expect("describe");
    assert_eq!(d.depth_used, 1);
    assert_eq!(d.instances.len(), 3);
    let names: Vec<&str> = d.instances.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["LEAF#0", "LEAF#1", "LEAF#2"]);
    // Rotated copy: (0,0)-(1000,500) rotated 90° → x -500..0, y 0..1000, then +5000.
    assert_eq!(
        d.instances[1].bbox_dbu,
        Some(DbuBox {
            left: 4500,
            bottom: 0,
            right: 5000,
            top: 1000
        })
    );
    assert_eq!(d.instances[1].transform.rotation_deg, 90.0);
    assert_eq!(
        d.instances[2].bbox_dbu,
        Some(DbuBox {
            left: 0,
            bottom: 10_000,
            right: 3000,
            top: 12_500
        })
    );
    let v = serde_json::to_value(&d.instances[2]).expect("json");
    assert_eq!(v["array"]["kind"], "regular");
    assert_eq!(v["array"]["columns"], 2);
    assert_eq!(v["array"]["row_step_um"]["y"], 1.0);
    assert!(d.instances[0].array.is_none());
    assert!(d.labels.is_empty());
    let counts: Vec<(u32, u64, u64)> = d
        .shape_counts_by_layer
        .iter()
        .map(|c| (c.layer, c.shape_count, c.flat_shape_count))
        .collect();
    // LEAF is placed 1 + 1 + 6 = 8 times.
    assert_eq!(counts, [(1, 1, 9), (2, 0, 8), (10, 0, 8)]);
    let leaf = describe_cell(&lib, "LEAF", Some(99)).expect("leaf");
    assert_eq!(leaf.depth_used, MAX_DESCRIBE_DEPTH);
    assert_eq!(leaf.labels.len(), 1);
    assert_eq!(leaf.labels[0].text, "P");
    assert_eq!(leaf.labels[0].position_um, MicronPoint { x: 0.1, y: 0.1 });
    assert_eq!(
        describe_cell(&lib, "NOPE", None)
            .expect_err("missing")
            .code(),
        "TOP_CELL_NOT_FOUND"
    );
    // Depth 2 lists LEAF's (none) as well; a two-level chain lists both levels once.
    let mut chain = sample();
    let mut wrap = reticle_layout::model::Cell::new("WRAP");
    wrap.instances.push(place(1, 0, 0, 0.0));
    wrap.instances.push(place(1, 100_000, 0, 0.0));
    chain.cells.push(wrap);
    let d2 = describe_cell(&chain, "WRAP", Some(2)).expect("depth 2");
    let got: Vec<(u32, &str, &str)> = d2
        .instances
        .iter()
        .map(|i| (i.level, i.parent_cell.as_str(), i.name.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (1, "WRAP", "TOP#0"),
            (1, "WRAP", "TOP#1"),
            (2, "TOP", "LEAF#0"),
            (2, "TOP", "LEAF#1"),
            (2, "TOP", "LEAF#2"),
        ]
    );
    assert_eq!(d2.depth_used, 2);
    let v = serde_json::to_value(&d).expect("json");
    for f in [
        "cell",
        "bbox_um",
        "bbox_dbu",
        "instances",
        "labels",
        "shape_counts_by_layer",
        "depth_used",
    ] {
        assert!(v.get(f).is_some(), "missing {f}");
    }
    for f in ["name", "child_cell", "array", "transform", "bbox_um"] {
        assert!(v["instances"][0].get(f).is_some(), "instance missing {f}");
    }
}
