//! The values OASIS cannot hold are typed errors; the END record is the last 256 bytes.

use super::*;

#[test]
fn values_oasis_cannot_hold_are_typed_errors() {
    let one = |cell: Cell| {
        let mut lib = Library::new("L", 1e-9);
        lib.cells.push(cell);
        write_oasis(&lib)
    };
    for bad in ["", "has space", "tab\t", "new\nline", "caf\u{e9}", "\u{7f}"] {
        assert!(
            matches!(
                one(Cell::new(bad)),
                Err(OasisWriteError::BadString {
                    kind: "n-string",
                    ..
                })
            ),
            "{bad:?}"
        );
    }
    for bad in ["new\nline", "\u{0}", "\u{3bc}m"] {
        let mut c = Cell::new("C");
        c.push_shape(
            LayerKey::new(1, 0),
            Shape::Text(Text {
                string: bad.into(),
                position: Point::new(0, 0),
            }),
        );
        assert!(
            matches!(
                one(c),
                Err(OasisWriteError::BadString {
                    kind: "a-string",
                    ..
                })
            ),
            "{bad:?}"
        );
    }
    let mut lib = sample_with_layer_names();
    lib.layer_names[0].name = "M 1".into();
    assert!(matches!(
        write_oasis(&lib),
        Err(OasisWriteError::BadString { .. })
    ));

    let big = i64::from(i32::MAX) + 1;
    let (lo, hi) = (-i64::from(i32::MAX), i64::from(i32::MAX));
    for shape in [
        Shape::Box(common::rect(0, 0, big, 1)),
        Shape::Polygon(Polygon::new(vec![
            Point::new(0, 0),
            Point::new(1, 0),
            Point::new(0, -big - 1),
        ])),
        Shape::Path(Path {
            spine: vec![Point::new(big, 0), Point::new(0, 0)],
            width: 2,
            ends: PathEnds::Flush,
        }),
        Shape::Path(Path {
            spine: vec![Point::new(big, 0), Point::new(0, 0)],
            width: 2,
            ends: PathEnds::Round,
        }),
        Shape::Text(Text {
            string: "T".into(),
            position: Point::new(0, i64::MIN),
        }),
        // KLayout cannot read -2^31 in OASIS (it can in GDSII).
        Shape::Text(Text {
            string: "T".into(),
            position: Point::new(i64::from(i32::MIN), 0),
        }),
    ] {
        let mut c = Cell::new("C");
        c.push_shape(LayerKey::new(1, 0), shape.clone());
        assert!(
            matches!(one(c), Err(OasisWriteError::CoordinateRange { .. })),
            "{shape:?}"
        );
    }
    for shape in [
        Shape::Box(common::rect(lo, 0, hi, 1)),
        Shape::Polygon(Polygon::new(vec![
            Point::new(0, lo),
            Point::new(1, hi),
            Point::new(2, 0),
        ])),
    ] {
        let mut c = Cell::new("C");
        c.push_shape(LayerKey::new(1, 0), shape.clone());
        assert!(
            matches!(one(c), Err(OasisWriteError::DisplacementRange { .. })),
            "{shape:?}"
        );
    }
    let mut c = Cell::new("C");
    c.push_shape(
        LayerKey::new(1, 0),
        Shape::Box(BBox {
            left: 5,
            bottom: 0,
            right: 0,
            top: 5,
        }),
    );
    assert!(matches!(one(c), Err(OasisWriteError::InvertedBox { .. })));

    let two = |inst: Instance| {
        let mut lib = Library::new("L", 1e-9);
        lib.cells.push(Cell::new("A"));
        let mut b = Cell::new("B");
        b.instances.push(inst);
        lib.cells.push(b);
        write_oasis(&lib)
    };
    for (mag, rot) in [
        (0.0, 0.0),
        (-1.0, 0.0),
        (f64::NAN, 0.0),
        (1.0, f64::INFINITY),
    ] {
        assert!(matches!(
            two(common::place(0, 0, 0, rot, false, mag)),
            Err(OasisWriteError::Transform { .. })
        ));
    }
    let mut arr = common::place(0, 0, 0, 0.0, false, 1.0);
    arr.repetition = Some(Repetition::Array {
        cols: 0,
        rows: 3,
        col_step: Point::new(1, 0),
        row_step: Point::new(0, 1),
    });
    assert!(matches!(
        two(arr.clone()),
        Err(OasisWriteError::EmptyRepetition { .. })
    ));
    arr.repetition = Some(Repetition::Explicit(vec![]));
    assert!(matches!(
        two(arr.clone()),
        Err(OasisWriteError::EmptyRepetition { .. })
    ));
    arr.repetition = Some(Repetition::Explicit(vec![
        Point::new(0, 0),
        Point::new(big, 0),
    ]));
    assert!(matches!(
        two(arr.clone()),
        Err(OasisWriteError::CoordinateRange { .. })
    ));
    arr.repetition = Some(Repetition::Explicit(vec![
        Point::new(lo, 0),
        Point::new(hi, 0),
    ]));
    assert!(matches!(
        two(arr.clone()),
        Err(OasisWriteError::DisplacementRange { .. })
    ));
    arr.repetition = None;
    arr.cell = 7;
    assert!(matches!(
        two(arr),
        Err(OasisWriteError::Hierarchy(
            HierarchyError::BadCellIndex { .. }
        ))
    ));

    let mut lib = Library::new("L", 1e-9);
    lib.cells.push(Cell::new("A"));
    lib.cells.push(Cell::new("A"));
    assert_eq!(
        write_oasis(&lib),
        Err(OasisWriteError::DuplicateCell("A".into()))
    );
    for dbu in [0.0, -1e-9, f64::NAN, f64::INFINITY] {
        lib = Library::new("L", dbu);
        assert!(
            matches!(write_oasis(&lib), Err(OasisWriteError::Unit(_))),
            "{dbu}"
        );
    }
    // A non-decimal grid is written as a double and reads back to the same dbu.
    lib = Library::new("L", 0.25e-9);
    lib.cells.push(Cell::new("A"));
    let back = read_oasis(&write_oasis(&lib).expect("write"), &Limits::default()).expect("read");
    assert_eq!(back.dbu_um(), lib.dbu_um());
    lib = Library::new("L", 3e-9);
    let back = read_oasis(&write_oasis(&lib).expect("write"), &Limits::default()).expect("read");
    assert_eq!(back.dbu_um(), lib.dbu_um());
}

#[test]
fn end_record_is_the_last_256_bytes() {
    let bytes = write_oasis(&common::sample_library()).expect("write");
    let end = &bytes[bytes.len() - 256..];
    assert_eq!(end[0], 2, "END record id");
    assert!(
        end[1..13].iter().all(|&b| b == 0),
        "table offsets: no tables"
    );
    assert_eq!(*end.last().expect("byte"), 0, "validation scheme 0");
}
