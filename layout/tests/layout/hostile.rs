//! Hostile layouts: huge arrays, exponential and deep hierarchies, cycles. Each must fail
//! fast with a typed error instead of exhausting memory or time.

use crate::common;

use std::time::{Duration, Instant};

use common::{place, rect};
use reticle_layout::{
    Cell, FlattenError, FlattenOptions, HierarchyError, LayerKey, Library, Limits, Point,
    Repetition, Shape, flatten, read_gds, write_gds,
};

const FAST: Duration = Duration::from_secs(5);

fn leaf_and_top(rep: Repetition) -> Library {
    let mut lib = Library::new("H", 1e-9);
    let mut leaf = Cell::new("LEAF");
    leaf.push_shape(LayerKey::new(1, 0), Shape::Box(rect(0, 0, 10, 10)));
    lib.cells.push(leaf);
    let mut top = Cell::new("TOP");
    let mut inst = place(0, 0, 0, 0.0, false, 1.0);
    inst.repetition = Some(rep);
    top.instances.push(inst);
    lib.cells.push(top);
    lib
}

fn is_limit(r: Result<reticle_layout::FlatLayout, FlattenError>, what: &str) -> bool {
    matches!(r, Err(FlattenError::LimitExceeded { what: w, .. }) if w == what)
}

#[test]
fn huge_aref_fails_fast() {
    // The largest array GDSII can express, read back from a real stream.
    let lib = leaf_and_top(Repetition::Array {
        cols: 32767,
        rows: 32767,
        col_step: Point::new(20, 0),
        row_step: Point::new(0, 20),
    });
    let lib = read_gds(&write_gds(&lib).expect("w"), &Limits::default()).expect("r");
    let t = Instant::now();
    assert!(is_limit(
        flatten(&lib, 1, &FlattenOptions::default()),
        "shapes"
    ));
    // A clip over the whole array still stands for 32767^2 copies.
    let everything = FlattenOptions {
        clip: Some(rect(-1, -1, 700_000, 700_000)),
        ..FlattenOptions::default()
    };
    assert!(is_limit(flatten(&lib, 1, &everything), "array size"));
    // A small clip visits only the columns and rows that can reach it: 5 x 5 boxes.
    let clipped = FlattenOptions {
        clip: Some(rect(0, 0, 100, 100)),
        ..FlattenOptions::default()
    };
    let flat = flatten(&lib, 1, &clipped).expect("small window of a huge array");
    assert_eq!(flat.polygon_count(), 25);
    assert!(t.elapsed() < FAST, "{:?}", t.elapsed());
}

#[test]
fn million_by_million_array_fails_fast() {
    let lib = leaf_and_top(Repetition::Array {
        cols: 1_000_000,
        rows: 1_000_000,
        col_step: Point::new(20, 0),
        row_step: Point::new(0, 20),
    });
    let t = Instant::now();
    assert!(is_limit(
        flatten(&lib, 1, &FlattenOptions::default()),
        "shapes"
    ));
    let everything = FlattenOptions {
        clip: Some(rect(-1, -1, 30_000_000, 30_000_000)),
        ..FlattenOptions::default()
    };
    assert!(is_limit(flatten(&lib, 1, &everything), "array size"));
    // A window far inside the array: copies (i, j) with 20i < 1_000_100 and 20i + 10 >
    // 1_000_000, i.e. i in 50_000..=50_004, and the same rows: 25 boxes.
    let clipped = FlattenOptions {
        clip: Some(rect(1_000_000, 1_000_000, 1_000_100, 1_000_100)),
        ..FlattenOptions::default()
    };
    let flat = flatten(&lib, 1, &clipped).expect("window");
    assert_eq!(flat.polygon_count(), 25);
    let mut boxes = common::bboxes(&flat.polygons[&LayerKey::new(1, 0)]);
    boxes.dedup();
    assert_eq!(boxes.len(), 25);
    assert_eq!(boxes[0], rect(1_000_000, 1_000_000, 1_000_010, 1_000_010));
    assert!(t.elapsed() < FAST);
}

/// `levels` cells, each placing the one below twice at the same spot: 2^levels boxes.
fn exponential(levels: usize) -> Library {
    let mut lib = Library::new("E", 1e-9);
    let mut leaf = Cell::new("C0");
    leaf.push_shape(LayerKey::new(1, 0), Shape::Box(rect(0, 0, 10, 10)));
    lib.cells.push(leaf);
    for i in 1..=levels {
        let mut c = Cell::new(format!("C{i}"));
        c.instances.push(place(i - 1, 0, 0, 0.0, false, 1.0));
        c.instances.push(place(i - 1, 0, 0, 0.0, false, 1.0));
        lib.cells.push(c);
    }
    lib
}

#[test]
fn exponential_hierarchy_fails_fast() {
    let lib = exponential(100);
    let lib = read_gds(&write_gds(&lib).expect("w"), &Limits::default()).expect("r");
    let top = lib.top_cells()[0];
    let t = Instant::now();
    assert!(is_limit(
        flatten(&lib, top, &FlattenOptions::default()),
        "shapes"
    ));
    // With a clip the size is not known up front; the walk stops at the limit.
    let clipped = FlattenOptions {
        clip: Some(rect(0, 0, 5, 5)),
        limits: Limits {
            max_shapes: 10_000,
            ..Limits::default()
        },
        ..FlattenOptions::default()
    };
    assert!(is_limit(flatten(&lib, top, &clipped), "shapes"));
    // Far from the clip, whole subtrees are pruned by their bounding boxes.
    let far = FlattenOptions {
        clip: Some(rect(100, 100, 200, 200)),
        ..FlattenOptions::default()
    };
    assert_eq!(flatten(&lib, top, &far).expect("pruned").polygon_count(), 0);
    // Filtered to a layer nobody uses: nothing to walk.
    let other_layer = FlattenOptions {
        layers: Some([LayerKey::new(2, 0)].into()),
        ..FlattenOptions::default()
    };
    assert_eq!(
        flatten(&lib, top, &other_layer)
            .expect("empty")
            .polygon_count(),
        0
    );
    assert!(t.elapsed() < FAST, "{:?}", t.elapsed());
}

#[test]
fn placement_limit_bounds_time_without_output() {
    let lib = exponential(60);
    let opts = FlattenOptions {
        clip: Some(rect(0, 0, 5, 5)),
        limits: Limits {
            max_placements: 5_000,
            ..Limits::default()
        },
        ..FlattenOptions::default()
    };
    assert!(is_limit(flatten(&lib, 60, &opts), "placements"));
}

#[test]
fn deep_hierarchy_hits_depth_limit() {
    let mut lib = Library::new("D", 1e-9);
    let mut leaf = Cell::new("C0");
    leaf.push_shape(LayerKey::new(1, 0), Shape::Box(rect(0, 0, 1, 1)));
    lib.cells.push(leaf);
    for i in 1..=2000 {
        let mut c = Cell::new(format!("C{i}"));
        c.instances.push(place(i - 1, 1, 0, 0.0, false, 1.0));
        lib.cells.push(c);
    }
    let lib = read_gds(&write_gds(&lib).expect("w"), &Limits::default()).expect("r");
    let top = lib.cell_index("C2000").expect("top");
    assert!(is_limit(
        flatten(&lib, top, &FlattenOptions::default()),
        "hierarchy depth"
    ));
    // Within the limit the chain flattens exactly: 200 unit shifts.
    let c200 = lib.cell_index("C200").expect("c200");
    let flat = flatten(&lib, c200, &FlattenOptions::default()).expect("ok");
    assert_eq!(
        flat.polygons[&LayerKey::new(1, 0)][0].bbox(),
        Some(rect(200, 0, 201, 1))
    );
}

#[test]
fn cycles_in_a_hand_built_library_are_errors_not_hangs() {
    let mut lib = exponential(3);
    lib.cells[1].instances.push(place(3, 0, 0, 0.0, false, 1.0));
    assert!(matches!(
        flatten(&lib, 3, &FlattenOptions::default()),
        Err(FlattenError::Hierarchy(HierarchyError::Recursive { .. }))
    ));
}

#[test]
fn coordinates_beyond_range_are_errors() {
    let mut lib = leaf_and_top(Repetition::Array {
        cols: 2,
        rows: 1,
        col_step: Point::new(i64::MAX / 2, 0),
        row_step: Point::new(0, 0),
    });
    lib.cells[1].instances[0].transform.magnification = 1e12;
    assert!(matches!(
        flatten(&lib, 1, &FlattenOptions::default()),
        Err(FlattenError::Coordinate(_))
    ));
}

#[test]
fn very_deep_hierarchy_with_permissive_limit_does_not_overflow_the_stack() {
    // The walk keeps its own stack, so even a 20,000-level chain (with the depth limit
    // raised to allow it) runs in a test thread's small stack.
    let mut lib = Library::new("D", 1e-9);
    let mut leaf = Cell::new("C0");
    leaf.push_shape(LayerKey::new(1, 0), Shape::Box(rect(0, 0, 1, 1)));
    lib.cells.push(leaf);
    let n = 20_000;
    for i in 1..=n {
        let mut c = Cell::new(format!("C{i}"));
        c.instances.push(place(i - 1, 1, 0, 0.0, false, 1.0));
        lib.cells.push(c);
    }
    let opts = FlattenOptions {
        limits: Limits {
            max_depth: 100_000,
            ..Limits::default()
        },
        ..FlattenOptions::default()
    };
    let flat = flatten(&lib, n, &opts).expect("flattens");
    assert_eq!(
        flat.polygons[&LayerKey::new(1, 0)][0].bbox(),
        Some(rect(20_000, 0, 20_001, 1))
    );
    let counts = reticle_layout::flat_shape_counts(&lib, n).expect("counts");
    assert_eq!(counts[&LayerKey::new(1, 0)], 1);
    let boxes = reticle_layout::cell_bboxes(&lib, None).expect("boxes");
    assert_eq!(boxes[n], Some(rect(20_000, 0, 20_001, 1)));
}
