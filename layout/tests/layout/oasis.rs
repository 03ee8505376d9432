//! OASIS reader: every record form against hand-computed geometry, and error cases.

use crate::common;

use common::oas::{self, cblock, cell, end, place, rect, sint, start, string, uint};
use common::rect as bbox;
use reticle_layout::{
    FlattenOptions, HierarchyError, LayerKey, Library, Limits, OasisError, PathEnds, Point,
    Polygon, Repetition, Shape, flatten, read_oasis,
};

fn read(bytes: &[u8]) -> Result<Library, OasisError> {
    read_oasis(bytes, &Limits::default())
}

fn shapes<'a>(lib: &'a Library, cell: &str, l: u32, d: u32) -> &'a [Shape] {
    let c = lib.cell_index(cell).expect("cell");
    lib.cells[c]
        .shapes
        .get(&LayerKey::new(l, d))
        .map_or(&[], Vec::as_slice)
}

fn polys(s: &[Shape]) -> Vec<&Polygon> {
    s.iter()
        .map(|s| match s {
            Shape::Polygon(p) => p,
            other => panic!("not a polygon: {other:?}"),
        })
        .collect()
}

fn sorted(p: &Polygon) -> Vec<(i64, i64)> {
    let mut v: Vec<(i64, i64)> = p.points.iter().map(|q| (q.x, q.y)).collect();
    v.sort_unstable();
    v
}

fn pts(v: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut v = v.to_vec();
    v.sort_unstable();
    v
}

#[test]
fn every_record_file_reads_as_hand_computed() {
    let lib = read(&oas::every_record_file()).expect("reads");
    assert!((lib.dbu_um() - 0.001).abs() < 1e-15);
    let names: Vec<&str> = lib.cells.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["LEAF", "TOP"],
        "CELL refnums resolved by forward CELLNAMEs"
    );
    assert_eq!(lib.layer_names.len(), 1);
    assert_eq!(lib.layer_names[0].name, "M1");
    assert_eq!(lib.layer_names[0].layers, (1, 1));

    // Rectangles: explicit, square, modal size, relative x.
    let boxes: Vec<_> = shapes(&lib, "LEAF", 1, 0)
        .iter()
        .map(|s| s.bbox().expect("box"))
        .collect();
    assert_eq!(
        boxes,
        [
            bbox(0, 0, 100, 50),
            bbox(200, 0, 230, 30),
            bbox(300, 0, 330, 30),
            bbox(400, 0, 430, 30)
        ]
    );

    // Polygons, one per point-list type, plus a modal reuse.
    let p = polys(shapes(&lib, "LEAF", 2, 0));
    assert_eq!(p.len(), 7);
    assert_eq!(
        p[0].points.iter().map(|q| (q.x, q.y)).collect::<Vec<_>>(),
        [
            (0, 1000),
            (20, 1000),
            (20, 1010),
            (10, 1010),
            (10, 1020),
            (0, 1020)
        ],
        "type 0 with its implicit closing vertex"
    );
    assert_eq!(
        sorted(p[1]),
        pts(&[(100, 1000), (100, 1010), (120, 1010), (120, 1000)])
    );
    assert_eq!(
        sorted(p[2]),
        pts(&[(200, 1000), (210, 1000), (210, 1010), (200, 1010)])
    );
    assert_eq!(sorted(p[3]), pts(&[(300, 1000), (310, 1000), (300, 1010)]));
    assert_eq!(sorted(p[4]), pts(&[(400, 1000), (410, 1000), (400, 1010)]));
    assert_eq!(
        sorted(p[5]),
        pts(&[(500, 1000), (510, 1000), (510, 1010)]),
        "double deltas"
    );
    assert_eq!(sorted(p[6]), pts(&[(600, 1000), (610, 1000), (610, 1010)]));

    // Paths: explicit extensions, then half-width/flush with everything else modal.
    let paths: Vec<_> = shapes(&lib, "LEAF", 3, 0)
        .iter()
        .map(|s| match s {
            Shape::Path(p) => p.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(paths.len(), 2);
    assert_eq!(paths[0].width, 10);
    assert_eq!(paths[0].ends, PathEnds::Variable { begin: 2, end: 3 });
    assert_eq!(
        paths[0].spine,
        [
            Point::new(0, 2000),
            Point::new(100, 2000),
            Point::new(100, 2050)
        ]
    );
    assert_eq!(paths[1].ends, PathEnds::Variable { begin: 5, end: 0 });
    assert_eq!(paths[1].spine[0], Point::new(0, 2500));

    // Trapezoids.
    let t = polys(shapes(&lib, "LEAF", 4, 0));
    assert_eq!(
        sorted(t[0]),
        pts(&[(0, 3000), (20, 3000), (16, 3008), (3, 3008)])
    );
    assert_eq!(
        sorted(t[1]),
        pts(&[(100, 3003), (108, 3000), (108, 3020), (100, 3020)])
    );
    assert_eq!(
        sorted(t[2]),
        pts(&[(200, 3000), (220, 3000), (216, 3008), (200, 3008)])
    );

    // Compact trapezoids: vertex sets as KLayout reads the same records (w=20, h=8 for
    // 0-7 and 24; w=7, h=30 for 8-15; w=20 for 16-19, 22, 23, 25; h=8 for 20-21).
    let klayout: [&[(i64, i64)]; 26] = [
        &[(0, 0), (0, 8), (12, 8), (20, 0)],
        &[(0, 0), (0, 8), (20, 8), (12, 0)],
        &[(0, 0), (8, 8), (20, 8), (20, 0)],
        &[(8, 0), (0, 8), (20, 8), (20, 0)],
        &[(0, 0), (8, 8), (12, 8), (20, 0)],
        &[(8, 0), (0, 8), (20, 8), (12, 0)],
        &[(0, 0), (8, 8), (20, 8), (12, 0)],
        &[(8, 0), (0, 8), (12, 8), (20, 0)],
        &[(0, 0), (0, 30), (7, 23), (7, 0)],
        &[(0, 0), (0, 23), (7, 30), (7, 0)],
        &[(0, 0), (0, 30), (7, 30), (7, 7)],
        &[(7, 0), (0, 7), (0, 30), (7, 30)],
        &[(0, 0), (0, 30), (7, 23), (7, 7)],
        &[(7, 0), (0, 7), (0, 23), (7, 30)],
        &[(0, 0), (0, 23), (7, 30), (7, 7)],
        &[(7, 0), (0, 7), (0, 30), (7, 23)],
        &[(0, 0), (0, 20), (20, 0)],
        &[(0, 0), (0, 20), (20, 20)],
        &[(0, 0), (20, 20), (20, 0)],
        &[(20, 0), (0, 20), (20, 20)],
        &[(0, 0), (8, 8), (16, 0)],
        &[(8, 0), (0, 8), (16, 8)],
        &[(0, 0), (0, 40), (20, 20)],
        &[(20, 0), (0, 20), (20, 40)],
        &[(0, 0), (0, 8), (20, 8), (20, 0)],
        &[(0, 0), (0, 20), (20, 20), (20, 0)],
    ];
    for (t, want) in klayout.iter().enumerate() {
        let p = polys(shapes(&lib, "LEAF", 5, t as u32));
        let shifted: Vec<(i64, i64)> = want
            .iter()
            .map(|&(x, y)| (x + 100 * t as i64, y + 4000))
            .collect();
        assert_eq!(sorted(p[0]), pts(&shifted), "ctrapezoid type {t}");
    }

    // Circle: the 32-gon inside its bounding square.
    let c = polys(shapes(&lib, "LEAF", 6, 0));
    assert_eq!(c[0].points.len(), 32);
    assert_eq!(c[0].bbox(), Some(bbox(-50, 4950, 50, 5050)));

    // Texts: forward TEXTSTRING reference and a literal; XGEOMETRY stored nothing.
    let texts: Vec<(String, Point)> = shapes(&lib, "LEAF", 10, 1)
        .iter()
        .map(|s| match s {
            Shape::Text(t) => (t.string.clone(), t.position),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        texts,
        [
            ("HELLO".into(), Point::new(5, 5)),
            ("WORLD".into(), Point::new(15, 5))
        ]
    );
    assert!(shapes(&lib, "LEAF", 7, 0).is_empty());

    // Shape repetitions, expanded: offsets of the 10x10 box copies per type.
    let offsets = |t: u32| -> Vec<(i64, i64)> {
        let mut v: Vec<(i64, i64)> = shapes(&lib, "LEAF", 8, t)
            .iter()
            .map(|s| {
                let b = s.bbox().expect("box");
                (b.left, b.bottom - (6000 + 1000 * i64::from(t.min(11))))
            })
            .collect();
        v.sort_unstable();
        v
    };
    assert_eq!(
        offsets(1),
        pts(&[
            (0, 0),
            (1000, 0),
            (0, 500),
            (1000, 500),
            (0, 1000),
            (1000, 1000)
        ])
    );
    assert_eq!(offsets(2), pts(&[(0, 0), (50, 0), (100, 0)]));
    assert_eq!(offsets(3), pts(&[(0, 0), (0, 60)]));
    assert_eq!(offsets(4), pts(&[(0, 0), (10, 0), (30, 0)]));
    assert_eq!(offsets(5), pts(&[(0, 0), (20, 0)]));
    assert_eq!(offsets(6), pts(&[(0, 0), (0, 7), (0, 15)]));
    assert_eq!(offsets(7), pts(&[(0, 0), (0, 15)]));
    assert_eq!(offsets(8), pts(&[(0, 0), (100, 10), (-10, 100), (90, 110)]));
    assert_eq!(offsets(9), pts(&[(0, 0), (30, 30), (60, 60)]));
    assert_eq!(offsets(10), pts(&[(0, 0), (5, 0), (5, 7)]));
    assert_eq!(offsets(11), pts(&[(0, 0), (12, -8)]));
    // Type 0 reuses type 11 (at y = 6000 + 12000).
    let reuse: Vec<_> = shapes(&lib, "LEAF", 8, 12)
        .iter()
        .map(|s| s.bbox().expect("b"))
        .collect();
    assert_eq!(
        reuse,
        [bbox(0, 18000, 10, 18010), bbox(12, 17992, 22, 18002)]
    );

    // Placements from inside the CBLOCK.
    let top = &lib.cells[lib.cell_index("TOP").expect("TOP")];
    let inst: Vec<_> = top
        .instances
        .iter()
        .map(|i| (i.cell, i.transform, i.repetition.clone()))
        .collect();
    assert_eq!(inst.len(), 5);
    assert!(inst.iter().all(|i| i.0 == 0), "all place LEAF");
    assert_eq!(
        (inst[0].1.offset, inst[0].1.rotation_deg),
        (Point::new(100_000, 0), 90.0)
    );
    assert!(inst[1].1.mirror_x && inst[1].1.offset == Point::new(0, 100_000));
    assert_eq!(
        (inst[2].1.magnification, inst[2].1.rotation_deg),
        (2.0, 30.0)
    );
    assert_eq!(
        inst[3].2,
        Some(Repetition::Array {
            cols: 2,
            rows: 2,
            col_step: Point::new(30_000, 0),
            row_step: Point::new(0, 30_000)
        })
    );
    assert_eq!(
        inst[4].2,
        Some(Repetition::Explicit(vec![
            Point::new(0, 0),
            Point::new(-40_000, 5_000)
        ]))
    );
    assert_eq!(inst[4].1.rotation_deg, 180.0);

    // And the whole thing flattens: 9 placements of LEAF's 36 rectangles... per layer 1/0.
    let flat = flatten(&lib, 1, &FlattenOptions::default()).expect("flatten");
    assert_eq!(flat.polygons[&LayerKey::new(1, 0)].len(), 4 * 9);
}

fn file(body: &[u8]) -> Vec<u8> {
    [start(), body.to_vec(), end()].concat()
}

#[test]
fn structural_errors_are_typed() {
    assert_eq!(read(b"%SEMI-OASIS\r"), Err(OasisError::BadMagic));
    assert_eq!(read(b"GDSII"), Err(OasisError::BadMagic));
    let ok = file(&[cell("A"), rect(1, 0, 0, 0, 1, 1)].concat());
    assert!(read(&ok).is_ok());
    // Missing END, truncation at every length.
    let no_end = [start(), cell("A")].concat();
    assert_eq!(read(&no_end), Err(OasisError::MissingEnd));
    for cut in 13..ok.len() - 256 {
        assert!(read(&ok[..cut]).is_err(), "cut at {cut}");
    }
    // Undefined cells and names, duplicates, cycles.
    let undefined = file(&[cell("A"), place("B", 0, 0, 0, false)].concat());
    assert_eq!(
        read(&undefined),
        Err(OasisError::UndefinedCell { name: "B".into() })
    );
    let undefined_ref = file(&oas::cell_ref(5));
    assert_eq!(
        read(&undefined_ref),
        Err(OasisError::UndefinedName {
            table: "CELLNAME",
            refnum: 5
        })
    );
    let dup = file(&[cell("A"), cell("A")].concat());
    assert_eq!(
        read(&dup),
        Err(OasisError::DuplicateCell { name: "A".into() })
    );
    let cycle = file(
        &[
            cell("A"),
            place("B", 0, 0, 0, false),
            cell("B"),
            place("A", 0, 0, 0, false),
        ]
        .concat(),
    );
    assert!(matches!(
        read(&cycle),
        Err(OasisError::Hierarchy(HierarchyError::Recursive { .. }))
    ));
    // Geometry outside a cell, unknown record, modal variable never set.
    let outside = file(&rect(1, 0, 0, 0, 1, 1));
    assert!(matches!(
        read(&outside),
        Err(OasisError::UnexpectedRecord {
            record: "RECTANGLE",
            ..
        })
    ));
    let unknown = file(&uint(99));
    assert!(matches!(
        read(&unknown),
        Err(OasisError::UnknownRecord { id: 99, .. })
    ));
    let no_layer = file(&[cell("A"), uint(20), vec![0x40 | 0x20], uint(1), uint(1)].concat());
    assert!(matches!(
        read(&no_layer),
        Err(OasisError::MissingModal { what: "layer", .. })
    ));
    let no_rep = file(
        &[
            cell("A"),
            uint(20),
            vec![0x7f],
            uint(1),
            uint(0),
            uint(1),
            uint(1),
            sint(0),
            sint(0),
            uint(0),
        ]
        .concat(),
    );
    assert!(matches!(
        read(&no_rep),
        Err(OasisError::MissingModal {
            what: "repetition",
            ..
        })
    ));
    let bad_ctrap = file(
        &[
            cell("A"),
            uint(26),
            vec![0x80 | 0x40 | 0x20 | 0x03],
            uint(1),
            uint(0),
            uint(26),
            uint(1),
            uint(1),
        ]
        .concat(),
    );
    assert!(matches!(
        read(&bad_ctrap),
        Err(OasisError::InvalidValue {
            what: "ctrapezoid-type",
            ..
        })
    ));
}

#[test]
fn cblock_bombs_and_lies_are_rejected() {
    let inner = [cell("A"), rect(1, 0, 0, 0, 5, 5)].concat();
    let good = file(&cblock(&inner));
    assert_eq!(read(&good).expect("ok").cells[0].shape_count(), 1);
    // A deflate bomb: 64 MiB of PAD records in a few KiB, over a 1 MiB budget.
    let bomb = file(&cblock(&vec![0u8; 64 << 20]));
    assert!(bomb.len() < 200_000);
    let limits = Limits {
        max_decompressed_bytes: 1 << 20,
        ..Limits::default()
    };
    assert_eq!(
        read_oasis(&bomb, &limits),
        Err(OasisError::LimitExceeded {
            what: "decompressed bytes",
            limit: 1 << 20
        })
    );
    // A CBLOCK whose declared size is smaller than what it inflates to.
    let mut liar = cblock(&inner);
    liar[2] = 3; // uncomp-byte-count (single byte here) now claims 3 bytes
    assert!(matches!(
        read(&file(&liar)),
        Err(OasisError::Compression { .. })
    ));
    // Garbage that is not deflate data.
    let junk = [uint(34), uint(0), uint(10), uint(4), vec![0xff; 4]].concat();
    assert!(matches!(
        read(&file(&junk)),
        Err(OasisError::Compression { .. })
    ));
    // Nested CBLOCK and END inside CBLOCK are not allowed.
    assert!(matches!(
        read(&file(&cblock(&cblock(&inner)))),
        Err(OasisError::UnexpectedRecord {
            record: "CBLOCK",
            ..
        })
    ));
    assert!(matches!(
        read(&file(&cblock(&uint(2)))),
        Err(OasisError::UnexpectedRecord { record: "END", .. })
    ));
}

#[test]
fn absurd_counts_fail_before_allocating() {
    // A rectangle repeated 2^40 x 2^40 times (type 1): rejected by the stored-shape budget.
    let huge = file(
        &[
            cell("A"),
            rect(1, 0, 0, 0, 1, 1)[..1].to_vec(),
            vec![0x7f],
            uint(1),
            uint(0),
            uint(1),
            uint(1),
            sint(0),
            sint(0),
            uint(1),
            uint(1 << 40),
            uint(1 << 40),
            uint(1),
            uint(1),
        ]
        .concat(),
    );
    assert!(matches!(
        read(&huge),
        Err(OasisError::LimitExceeded {
            what: "stored shapes",
            ..
        })
    ));
    // A placement lattice of 2^20 x 2^20 is stored compactly and the flattener refuses it.
    let lattice = file(
        &[
            cell("L"),
            rect(1, 0, 0, 0, 1, 1),
            cell("T"),
            uint(17),
            vec![0x80 | 0x20 | 0x10 | 0x08],
            string("L"),
            sint(0),
            sint(0),
            uint(1),
            uint(1 << 20),
            uint(1 << 20),
            uint(2),
            uint(2),
        ]
        .concat(),
    );
    let lib = read(&lattice).expect("reads");
    let t = lib.cell_index("T").expect("T");
    assert!(matches!(
        flatten(&lib, t, &FlattenOptions::default()),
        Err(reticle_layout::FlattenError::LimitExceeded { .. })
    ));
    // A point list claiming 2^60 points.
    let points = file(
        &[
            cell("A"),
            uint(21),
            vec![0x20 | 0x03],
            uint(1),
            uint(0),
            uint(4),
            uint(1 << 60),
        ]
        .concat(),
    );
    assert!(matches!(
        read(&points),
        Err(OasisError::LimitExceeded {
            what: "stored points",
            ..
        })
    ));
    // An explicit repetition claiming 2^50 entries in a tiny file.
    let explicit = file(
        &[
            cell("A"),
            rect(1, 0, 0, 0, 1, 1)[..1].to_vec(),
            vec![0x7f],
            uint(1),
            uint(0),
            uint(1),
            uint(1),
            sint(0),
            sint(0),
            uint(10),
            uint(1 << 50),
        ]
        .concat(),
    );
    assert!(read(&explicit).is_err());
    // Modal reuse of a large explicit repetition is charged each time.
    let mut body = vec![cell("A")];
    let n = 5000u64;
    let mut rep = vec![uint(10), uint(n - 2)];
    rep.extend((1..n).map(|_| oas::g2(1, 0)));
    body.push(
        [
            rect(1, 0, 0, 0, 1, 1)[..1].to_vec(),
            vec![0x7f],
            uint(1),
            uint(0),
            uint(1),
            uint(1),
            sint(0),
            sint(0),
            rep.concat(),
        ]
        .concat(),
    );
    for _ in 0..100 {
        body.push([uint(20), vec![0x04], uint(0)].concat());
    }
    let limits = Limits {
        max_stored_points: 100_000,
        ..Limits::default()
    };
    assert!(matches!(
        read_oasis(&file(&body.concat()), &limits),
        Err(OasisError::LimitExceeded {
            what: "stored points",
            ..
        })
    ));
}
