//! Flattening against hand-computed coordinates.

use crate::common;

use std::collections::BTreeSet;

use common::{areas2, bboxes, place, rect};
use reticle_layout::{
    Cell, FlatGeometry, FlattenError, FlattenOptions, LayerKey, Library, Path, PathEnds, Point,
    Polygon, Repetition, Shape, Text, flatten, read_gds, resolve_cell, walk, write_gds,
};

const L1: LayerKey = LayerKey::new(1, 0);

/// LEAF: box (0,0)-(10,5) on 1/0. MID: LEAF mirrored at (50,0). TOP: LEAF rotated,
/// mirrored, magnified, arrayed, and MID rotated.
fn manhattan_library() -> Library {
    let mut lib = Library::new("M", 1e-9);
    let mut leaf = Cell::new("LEAF");
    leaf.push_shape(L1, Shape::Box(rect(0, 0, 10, 5)));
    leaf.push_shape(
        LayerKey::new(10, 0),
        Shape::Text(Text {
            string: "T".into(),
            position: Point::new(1, 2),
        }),
    );
    lib.cells.push(leaf);
    let mut mid = Cell::new("MID");
    mid.instances.push(place(0, 50, 0, 0.0, true, 1.0));
    lib.cells.push(mid);
    let mut top = Cell::new("TOP");
    top.instances.push(place(0, 100, 0, 90.0, false, 1.0));
    top.instances.push(place(0, 0, 100, 0.0, true, 1.0));
    top.instances.push(place(0, 0, 0, 180.0, false, 2.0));
    top.instances.push(place(1, 1000, 0, 90.0, false, 1.0));
    let mut arr = place(0, 1000, 1000, 0.0, false, 1.0);
    arr.repetition = Some(Repetition::Array {
        cols: 3,
        rows: 2,
        col_step: Point::new(200, 0),
        row_step: Point::new(0, 300),
    });
    top.instances.push(arr);
    lib.cells.push(top);
    lib
}

#[test]
fn manhattan_transforms_are_exact() {
    let lib = manhattan_library();
    let top = resolve_cell(&lib, None).expect("top");
    assert_eq!(lib.cells[top].name, "TOP");
    let flat = flatten(&lib, top, &FlattenOptions::default()).expect("flat");
    let mut expect = vec![
        rect(95, 0, 100, 10),     // rot 90 at (100,0): (x,y) -> (100-y, x)
        rect(0, 95, 10, 100),     // mirror at (0,100): (x,y) -> (x, 100-y)
        rect(-20, -10, 0, 0),     // rot 180, mag 2: (x,y) -> (-2x,-2y)
        rect(1000, 50, 1005, 60), // MID: (x,y) -> (x+50,-y); TOP rot 90 -> (1000+y, x+50)
    ];
    for j in 0..2 {
        for i in 0..3 {
            expect.push(rect(
                1000 + 200 * i,
                1000 + 300 * j,
                1010 + 200 * i,
                1005 + 300 * j,
            ));
        }
    }
    expect.sort_unstable();
    assert_eq!(bboxes(&flat.polygons[&L1]), expect);
    // Every output polygon is a rectangle of the right area (mag 2 quadruples it).
    let mut a = vec![100i128; 9];
    a.push(400);
    assert_eq!(areas2(&flat.polygons[&L1]), a);
    assert!(flat.texts.is_empty(), "texts only on request");
}

#[test]
fn arbitrary_angles_and_magnification_round_to_nearest() {
    let mut lib = Library::new("A", 1e-9);
    let mut leaf = Cell::new("LEAF");
    leaf.push_shape(L1, Shape::Polygon(Polygon::rect(rect(0, 0, 10, 5))));
    lib.cells.push(leaf);
    let mut top = Cell::new("TOP");
    top.instances.push(place(0, 0, 0, 45.0, false, 1.0));
    lib.cells.push(top);
    let flat = flatten(&lib, 1, &FlattenOptions::default()).expect("flat");
    // (10,0) -> (7.07,7.07); (10,5) -> (3.54,10.61); (0,5) -> (-3.54,3.54)
    let pts = &flat.polygons[&L1][0].points;
    assert_eq!(
        pts,
        &[
            Point::new(0, 0),
            Point::new(7, 7),
            Point::new(4, 11),
            Point::new(-4, 4)
        ]
    );
    lib.cells[1].instances = vec![place(0, 3, 0, 30.0, true, 2.0)];
    let flat = flatten(&lib, 1, &FlattenOptions::default()).expect("flat");
    // mirror (x,-y), mag 2, rot 30: (10,0) -> (17.32,10) + (3,0); (0,5) -> (0,-10) -> (5,-8.66)
    let pts = &flat.polygons[&L1][0].points;
    assert_eq!(pts[1], Point::new(20, 10));
    assert_eq!(pts[3], Point::new(8, -9));
}

#[test]
fn clip_prunes_and_cuts() {
    let lib = manhattan_library();
    let opts = FlattenOptions {
        clip: Some(rect(1005, 990, 1205, 1002)),
        ..FlattenOptions::default()
    };
    let flat = flatten(&lib, 2, &opts).expect("flat");
    // Array copies (0,0) and (1,0) are cut to 5x2; everything else is outside.
    assert_eq!(
        bboxes(&flat.polygons[&L1]),
        [rect(1005, 1000, 1010, 1002), rect(1200, 1000, 1205, 1002)]
    );
    let empty = FlattenOptions {
        clip: Some(rect(-10_000, -10_000, -9_000, -9_000)),
        ..FlattenOptions::default()
    };
    assert_eq!(flatten(&lib, 2, &empty).expect("flat").polygon_count(), 0);
}

#[test]
fn layer_filter_and_texts() {
    let lib = manhattan_library();
    let texts_only = FlattenOptions {
        layers: Some(BTreeSet::from([LayerKey::new(10, 0)])),
        include_texts: true,
        ..FlattenOptions::default()
    };
    let flat = flatten(&lib, 2, &texts_only).expect("flat");
    assert_eq!(flat.polygon_count(), 0);
    assert_eq!(flat.texts.len(), 10);
    let mut pos: Vec<Point> = flat.texts.iter().map(|t| t.position).collect();
    pos.sort_unstable();
    // rot 90 at (100,0): (1,2) -> (98,1); rot 180 mag 2: (-2,-4); mirror at (0,100): (1,98)
    assert!(pos.contains(&Point::new(98, 1)));
    assert!(pos.contains(&Point::new(-2, -4)));
    assert!(pos.contains(&Point::new(1, 98)));
    assert!(
        flat.texts
            .iter()
            .all(|t| t.string == "T" && t.key == LayerKey::new(10, 0))
    );
}

#[test]
fn paths_follow_placements() {
    let mut lib = Library::new("P", 1e-9);
    let mut leaf = Cell::new("W");
    leaf.push_shape(
        L1,
        Shape::Path(Path {
            spine: vec![Point::new(0, 0), Point::new(100, 0)],
            width: 10,
            ends: PathEnds::HalfWidth,
        }),
    );
    lib.cells.push(leaf);
    let mut top = Cell::new("TOP");
    top.instances.push(place(0, 0, 0, 90.0, false, 1.0));
    top.instances.push(place(0, 500, 0, 0.0, false, 3.0));
    lib.cells.push(top);
    let flat = flatten(&lib, 1, &FlattenOptions::default()).expect("flat");
    assert_eq!(
        bboxes(&flat.polygons[&L1]),
        [rect(-5, -5, 5, 105), rect(485, -15, 815, 15)]
    );
}

#[test]
fn walk_reports_source_and_cell_path() {
    let lib = manhattan_library();
    let mut seen = Vec::new();
    walk(&lib, 2, &FlattenOptions::default(), &mut |s| {
        if let FlatGeometry::Polygon(p) = &s.geometry {
            seen.push((s.cell_path.to_vec(), s.source.kind(), p.bbox()));
        }
    })
    .expect("walk");
    assert_eq!(seen.len(), 10);
    assert!(seen.contains(&(vec![2, 1, 0], "box", Some(rect(1000, 50, 1005, 60)))));
    assert!(seen.contains(&(vec![2, 0], "box", Some(rect(95, 0, 100, 10)))));
}

#[test]
fn flatten_survives_gds_round_trip() {
    let lib = manhattan_library();
    let back = read_gds(
        &write_gds(&lib).expect("w"),
        &reticle_layout::Limits::default(),
    )
    .expect("r");
    let a = flatten(&lib, 2, &FlattenOptions::default()).expect("a");
    let b = flatten(&back, 2, &FlattenOptions::default()).expect("b");
    assert_eq!(bboxes(&a.polygons[&L1]), bboxes(&b.polygons[&L1]));
}

#[test]
fn unknown_cell_is_an_error() {
    let lib = manhattan_library();
    assert_eq!(
        resolve_cell(&lib, Some("NOPE")),
        Err(FlattenError::NoSuchCell("NOPE".into()))
    );
    assert!(flatten(&lib, 99, &FlattenOptions::default()).is_err());
}

#[test]
fn array_windows_match_brute_force_under_any_placement() {
    // The walk visits only the lattice columns/rows that can reach the clip; compare with
    // expanding the same array as explicit displacements (which visits every copy).
    for (rot, mirror, mag) in [
        (0.0, false, 1.0),
        (90.0, true, 2.0),
        (33.0, false, 1.5),
        (270.0, true, 0.5),
    ] {
        let mut lib = Library::new("W", 1e-9);
        let mut leaf = Cell::new("LEAF");
        leaf.push_shape(
            L1,
            Shape::Polygon(Polygon::new(vec![
                Point::new(0, 0),
                Point::new(40, 0),
                Point::new(40, 10),
                Point::new(10, 30),
            ])),
        );
        lib.cells.push(leaf);
        let mut arr = place(0, 17, -9, rot, mirror, mag);
        let lattice = Repetition::Array {
            cols: 40,
            rows: 30,
            col_step: Point::new(-55, 0),
            row_step: Point::new(0, 47),
        };
        let explicit: Vec<Point> = (0..30)
            .flat_map(|j| (0..40).map(move |i| Point::new(-55 * i, 47 * j)))
            .collect();
        arr.repetition = Some(lattice);
        let mut mid = Cell::new("MID");
        mid.instances.push(arr.clone());
        lib.cells.push(mid);
        let mut top = Cell::new("TOP");
        top.instances
            .push(place(1, 1000, 200, 90.0 + rot, !mirror, 1.0));
        lib.cells.push(top);
        let mut brute = lib.clone();
        brute.cells[1].instances[0].repetition = Some(Repetition::Explicit(explicit));
        for clip in [
            rect(-300, -900, 400, -500),
            rect(0, 0, 2000, 2000),
            rect(900, 100, 1100, 300),
        ] {
            let opts = FlattenOptions {
                clip: Some(clip),
                ..FlattenOptions::default()
            };
            let fast = flatten(&lib, 2, &opts).expect("fast");
            let slow = flatten(&brute, 2, &opts).expect("slow");
            assert_eq!(
                fast, slow,
                "rot {rot} mirror {mirror} mag {mag} clip {clip:?}"
            );
        }
    }
}
