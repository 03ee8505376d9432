//! GDSII write → read round trips and reader error cases.

use crate::common;

use common::{rect, sample_library};
use reticle_layout::gds::record::rt;
use reticle_layout::{
    Cell, GdsError, HierarchyError, Library, Limits, Point, Repetition, Shape, read_gds, write_gds,
};

#[test]
fn round_trip_preserves_the_library() {
    let lib = sample_library();
    let bytes = write_gds(&lib).expect("writable");
    let back = read_gds(&bytes, &Limits::default()).expect("readable");
    assert_eq!(back.name, "SAMPLE");
    assert!((back.dbu_in_meters - 1e-9).abs() < 1e-24);
    assert!((back.dbu_in_user_units - 1e-3).abs() < 1e-18);
    assert_eq!(back.cells, lib.cells);
    // Writing again gives the same bytes (stable timestamps, stable order).
    assert_eq!(write_gds(&back).expect("writable"), bytes);
    let tops: Vec<&str> = back
        .top_cells()
        .iter()
        .map(|&i| back.cells[i].name.as_str())
        .collect();
    assert_eq!(tops, ["TOP"]);
}

#[test]
fn unwritable_values_are_errors() {
    let mut lib = sample_library();
    let top = lib.cell_index("TOP").expect("top");
    let mut arr = common::place(0, 0, 0, 0.0, false, 1.0);
    arr.repetition = Some(Repetition::Array {
        cols: 0,
        rows: 3,
        col_step: Point::new(1, 0),
        row_step: Point::new(0, 1),
    });
    lib.cells[top].instances = vec![arr];
    assert!(matches!(
        write_gds(&lib),
        Err(reticle_layout::GdsWriteError::ArrayTooLarge { cols: 0, .. })
    ));
    let mut lib = sample_library();
    lib.cells[0].push_shape(
        reticle_layout::LayerKey::new(70_000, 0),
        Shape::Box(rect(0, 0, 1, 1)),
    );
    assert!(matches!(
        write_gds(&lib),
        Err(reticle_layout::GdsWriteError::LayerRange { layer: 70_000, .. })
    ));
    let mut lib = sample_library();
    lib.cells[0].push_shape(
        reticle_layout::LayerKey::new(1, 0),
        Shape::Box(rect(0, 0, 1 << 40, 1)),
    );
    assert!(matches!(
        write_gds(&lib),
        Err(reticle_layout::GdsWriteError::CoordinateRange { .. })
    ));
}

#[test]
fn explicit_repetition_is_written_as_srefs() {
    let mut lib = sample_library();
    let top = lib.cell_index("TOP").expect("top");
    let mut inst = common::place(0, 7, 9, 0.0, false, 1.0);
    inst.repetition = Some(Repetition::Explicit(vec![
        Point::new(0, 0),
        Point::new(3, 4),
    ]));
    lib.cells[top].instances = vec![inst];
    let back = read_gds(&write_gds(&lib).expect("w"), &Limits::default()).expect("r");
    let offs: Vec<Point> = back.cells[top]
        .instances
        .iter()
        .map(|i| i.transform.offset)
        .collect();
    assert_eq!(offs, [Point::new(7, 9), Point::new(10, 13)]);
}

/// A minimal stream: HEADER, BGNLIB, LIBNAME, UNITS, then `body`, then ENDLIB.
fn stream(body: &[u8]) -> Vec<u8> {
    let mut lib = Library::new("X", 1e-9);
    lib.cells.clear();
    let mut v = write_gds(&lib).expect("w");
    v.truncate(v.len() - 4); // drop ENDLIB
    v.extend_from_slice(body);
    v.extend_from_slice(&[0, 4, rt::ENDLIB, 0]);
    v
}

fn rec(t: u8, d: u8, data: &[u8]) -> Vec<u8> {
    let mut v = ((data.len() + 4) as u16).to_be_bytes().to_vec();
    v.push(t);
    v.push(d);
    v.extend_from_slice(data);
    v
}

fn strname(name: &str) -> Vec<u8> {
    let mut s = name.as_bytes().to_vec();
    if s.len() % 2 == 1 {
        s.push(0);
    }
    [rec(rt::BGNSTR, 2, &[0; 24]), rec(rt::STRNAME, 6, &s)].concat()
}

fn sref(name: &str) -> Vec<u8> {
    let mut s = name.as_bytes().to_vec();
    if s.len() % 2 == 1 {
        s.push(0);
    }
    [
        rec(rt::SREF, 0, &[]),
        rec(rt::SNAME, 6, &s),
        rec(rt::XY, 3, &[0; 8]),
        rec(rt::ENDEL, 0, &[]),
    ]
    .concat()
}

fn endstr() -> Vec<u8> {
    rec(rt::ENDSTR, 0, &[])
}

#[test]
fn cycles_are_rejected() {
    let body = [
        strname("A"),
        sref("B"),
        endstr(),
        strname("B"),
        sref("A"),
        endstr(),
    ]
    .concat();
    let err = read_gds(&stream(&body), &Limits::default()).expect_err("cycle");
    assert!(
        matches!(err, GdsError::Hierarchy(HierarchyError::Recursive { .. })),
        "{err}"
    );
}

#[test]
fn undefined_and_duplicate_cells_are_rejected() {
    let body = [strname("A"), sref("NOPE"), endstr()].concat();
    let err = read_gds(&stream(&body), &Limits::default()).expect_err("undefined");
    assert!(
        matches!(&err, GdsError::UndefinedCell { name, offset } if name == "NOPE" && *offset > 0)
    );
    let body = [strname("A"), endstr(), strname("A"), endstr()].concat();
    let err = read_gds(&stream(&body), &Limits::default()).expect_err("dup");
    assert!(matches!(err, GdsError::DuplicateCell { .. }));
}

#[test]
fn malformed_records_have_typed_errors_with_offsets() {
    // XY payload of 12 bytes: not a whole number of points.
    let body = [
        strname("A"),
        rec(rt::BOUNDARY, 0, &[]),
        rec(rt::LAYER, 2, &[0, 1]),
        rec(rt::DATATYPE, 2, &[0, 0]),
        rec(rt::XY, 3, &[0; 12]),
        rec(rt::ENDEL, 0, &[]),
        endstr(),
    ]
    .concat();
    let s = stream(&body);
    let xy_at = s.len() - 4 - 4 - 4 - 16;
    assert_eq!(
        read_gds(&s, &Limits::default()),
        Err(GdsError::BadPayload {
            offset: xy_at,
            record: "XY",
            len: 12
        })
    );
    // WIDTH inside a BOUNDARY is not in the grammar.
    let body = [
        strname("A"),
        rec(rt::BOUNDARY, 0, &[]),
        rec(rt::WIDTH, 3, &[0; 4]),
    ]
    .concat();
    assert!(matches!(
        read_gds(&stream(&body), &Limits::default()),
        Err(GdsError::UnexpectedRecord {
            record: "WIDTH",
            context: "BOUNDARY",
            ..
        })
    ));
    // Unknown record type 0x70.
    let body = [strname("A"), rec(0x70, 0, &[])].concat();
    assert!(matches!(
        read_gds(&stream(&body), &Limits::default()),
        Err(GdsError::UnknownRecord {
            record_type: 0x70,
            ..
        })
    ));
    // AREF with COLROW 0 x 5.
    let body = [
        strname("B"),
        endstr(),
        strname("A"),
        rec(rt::AREF, 0, &[]),
        rec(rt::SNAME, 6, b"B\0"),
        rec(rt::COLROW, 2, &[0, 0, 0, 5]),
        rec(rt::XY, 3, &[0; 24]),
        rec(rt::ENDEL, 0, &[]),
        endstr(),
    ]
    .concat();
    assert!(matches!(
        read_gds(&stream(&body), &Limits::default()),
        Err(GdsError::InvalidValue { what: "COLROW", .. })
    ));
    // Wrong data type for LAYER.
    let body = [
        strname("A"),
        rec(rt::BOUNDARY, 0, &[]),
        rec(rt::LAYER, 3, &[0; 4]),
    ]
    .concat();
    assert!(matches!(
        read_gds(&stream(&body), &Limits::default()),
        Err(GdsError::BadDataType {
            record: "LAYER",
            expected: 2,
            found: 3,
            ..
        })
    ));
    // Not a GDS file at all.
    assert!(matches!(
        read_gds(b"%SEMI-OASIS\r\n", &Limits::default()),
        Err(GdsError::BadRecordLength { offset: 0, .. } | GdsError::UnexpectedRecord { .. })
    ));
    assert_eq!(
        read_gds(&[], &Limits::default()),
        Err(GdsError::MissingEndLib { offset: 0 })
    );
}

#[test]
fn truncation_and_giant_record_lengths_fail_fast() {
    let bytes = write_gds(&sample_library()).expect("w");
    for cut in [
        1,
        3,
        4,
        5,
        bytes.len() / 2,
        bytes.len() - 1,
        bytes.len() - 4,
    ] {
        let err = read_gds(&bytes[..cut], &Limits::default()).expect_err("truncated");
        assert!(
            matches!(
                err,
                GdsError::Truncated { .. } | GdsError::MissingEndLib { .. }
            ),
            "cut {cut}: {err}"
        );
    }
    // A record claiming 65534 bytes in a short file.
    let mut giant = stream(&[]);
    let at = giant.len() - 4;
    giant.truncate(at);
    giant.extend_from_slice(&[0xFF, 0xFE, rt::BGNSTR, 2, 0, 0]);
    assert_eq!(
        read_gds(&giant, &Limits::default()),
        Err(GdsError::Truncated { offset: at })
    );
    let limits = Limits {
        max_input_bytes: 100,
        ..Limits::default()
    };
    assert!(matches!(
        read_gds(&bytes, &limits),
        Err(GdsError::InputTooLarge { limit: 100, .. })
    ));
}

#[test]
fn trailing_padding_after_endlib_is_ignored_and_degenerate_shapes_kept() {
    let mut lib = Library::new("P", 1e-9);
    let mut c = Cell::new("C");
    c.push_shape(
        reticle_layout::LayerKey::new(0, 0),
        Shape::Box(rect(0, 0, 0, 0)),
    );
    lib.cells.push(c);
    let mut bytes = write_gds(&lib).expect("w");
    bytes.extend_from_slice(&[0; 2048]);
    let back = read_gds(&bytes, &Limits::default()).expect("r");
    assert_eq!(back.cells, lib.cells);
}

#[test]
fn stored_shape_limit_is_enforced_while_reading() {
    let bytes = write_gds(&sample_library()).expect("w");
    let limits = Limits {
        max_stored_shapes: 3,
        ..Limits::default()
    };
    assert_eq!(
        read_gds(&bytes, &limits),
        Err(GdsError::LimitExceeded {
            what: "stored shapes",
            limit: 3
        })
    );
}
