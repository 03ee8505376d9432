//! Unit tests of `reticle_layout::glp`: the ICCAD `.glp` reader.

use reticle_layout::geom::{BBox, Point};
use reticle_layout::glp::*;

const SAMPLE: &str = "BEGIN     /* GL1TOGULP CALLED ON FRI MAY 17 11:33:25 2013 */
EQUIV  1  1000  MICRON  +X,+Y
CNAME Temp_Top
LEVEL M1

CELL Temp_Top PRIME
   RECT N M1  80  492  452  88
   PGON N M1  216  80  304  80  304  140  324  140  324  220  216 220
ENDMSG
";

#[test]
fn parses_rects_and_polygons() {
    let g = parse(SAMPLE.as_bytes()).unwrap();
    assert_eq!(g.cell.as_deref(), Some("Temp_Top"));
    assert_eq!(g.shapes.len(), 2);
    assert_eq!(g.shapes[0].layer, "M1");
    assert_eq!(
        g.shapes[0].polygon.bbox(),
        Some(BBox::from_corners(
            Point::new(80, 492),
            Point::new(532, 580)
        ))
    );
    assert_eq!(g.shapes[0].polygon.signed_area2(), 2 * 452 * 88);
    assert_eq!(g.shapes[1].polygon.points.len(), 6);
    assert_eq!(g.shapes[1].polygon.points[5], Point::new(216, 220));
    assert_eq!(g.polygons(Some("M2")).len(), 0);
    assert_eq!(
        g.bbox(),
        Some(BBox::from_corners(Point::new(80, 80), Point::new(532, 580)))
    );
}

#[test]
fn garbage_is_a_typed_error() {
    type Check = fn(&GlpError) -> bool;
    let cases: &[(&[u8], Check)] = &[
        (b"RECT N M1 1 2 3", |e| {
            matches!(e, GlpError::MissingField { line: 1, .. })
        }),
        (b"RECT N M1 1 2 x 4", |e| {
            matches!(e, GlpError::BadNumber { line: 1, .. })
        }),
        (b"RECT N M1 1 2 -3 4", |e| {
            matches!(e, GlpError::EmptyRect { line: 1 })
        }),
        (b"\nPGON N M1 0 0 1 1 2", |e| {
            matches!(e, GlpError::BadPolygon { line: 2 })
        }),
        (b"PGON N M1 0 0 1 1", |e| {
            matches!(e, GlpError::BadPolygon { .. })
        }),
        (b"RECT", |e| matches!(e, GlpError::MissingField { .. })),
        (b"rect N M1 0 0 1 1", |e| {
            matches!(e, GlpError::UnknownRecord { .. })
        }),
        (b"\xff\xfe", |e| matches!(e, GlpError::NotText(0))),
        (b"RECT N M1 0 0 99999999999999999999 1", |e| {
            matches!(e, GlpError::BadNumber { .. })
        }),
    ];
    for (input, ok) in cases {
        let err = parse(input).unwrap_err();
        assert!(
            ok(&err),
            "{:?} gave {err:?}",
            String::from_utf8_lossy(input)
        );
    }
}

proptest::proptest! {
    #[test]
    fn never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256)) {
        let _ = parse(&bytes);
    }

    #[test]
    fn rect_round_trip(x in -1000i64..1000, y in -1000i64..1000, w in 1i64..500, h in 1i64..500) {
        let g = parse_str(&format!("RECT N M1 {x} {y} {w} {h}\n")).unwrap();
        proptest::prop_assert_eq!(g.shapes[0].polygon.signed_area2(), 2 * i128::from(w * h));
    }
}
