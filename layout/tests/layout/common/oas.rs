//! A byte-level OASIS writer for tests: each helper emits exactly the record asked for, so
//! tests can exercise every record form, modal variable and repetition type.
#![allow(dead_code)]

use std::io::Write;

pub fn uint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}

pub fn sint(v: i64) -> Vec<u8> {
    uint((v.unsigned_abs() << 1) | u64::from(v < 0))
}

pub fn string(s: &str) -> Vec<u8> {
    [uint(s.len() as u64), s.as_bytes().to_vec()].concat()
}

/// Magic + START (unit 1000 per micron, table offsets in START, all zero).
pub fn start() -> Vec<u8> {
    let mut v = b"%SEMI-OASIS\r\n".to_vec();
    v.extend(uint(1));
    v.extend(string("1.0"));
    v.extend([0u8, 0xe8, 0x07]); // real type 0, 1000
    v.extend(uint(0));
    v.extend(std::iter::repeat_n(0u8, 12));
    v
}

/// END record padded to 256 bytes, no validation.
pub fn end() -> Vec<u8> {
    [uint(2), uint(252), vec![0; 252], uint(0)].concat()
}

/// Raw-deflates `records` into a CBLOCK.
pub fn cblock(records: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(records).expect("deflate");
    let comp = enc.finish().expect("deflate");
    [
        uint(34),
        uint(0),
        uint(records.len() as u64),
        uint(comp.len() as u64),
        comp,
    ]
    .concat()
}

pub fn cell(name: &str) -> Vec<u8> {
    [uint(14), string(name)].concat()
}

pub fn cell_ref(n: u64) -> Vec<u8> {
    [uint(13), uint(n)].concat()
}

/// RECTANGLE with all fields explicit.
pub fn rect(layer: u64, dt: u64, x: i64, y: i64, w: u64, h: u64) -> Vec<u8> {
    [
        uint(20),
        vec![0x7b],
        uint(layer),
        uint(dt),
        uint(w),
        uint(h),
        sint(x),
        sint(y),
    ]
    .concat()
}

/// PLACEMENT (record 17) by name with Manhattan angle code and flip.
pub fn place(name: &str, x: i64, y: i64, angle_code: u8, flip: bool) -> Vec<u8> {
    let info = 0x80 | 0x20 | 0x10 | (angle_code << 1) | u8::from(flip);
    [uint(17), vec![info], string(name), sint(x), sint(y)].concat()
}

/// PLACEMENT (record 18) by name with magnification and angle as float64 reals.
pub fn place_mag(name: &str, x: i64, y: i64, mag: f64, angle: f64, flip: bool) -> Vec<u8> {
    let info = 0x80 | 0x20 | 0x10 | 0x04 | 0x02 | u8::from(flip);
    let real = |v: f64| [vec![7u8], v.to_le_bytes().to_vec()].concat();
    [
        uint(18),
        vec![info],
        string(name),
        real(mag),
        real(angle),
        sint(x),
        sint(y),
    ]
    .concat()
}

/// Octangular g-delta (form 1): direction 0 E, 1 N, 2 W, 3 S, 4 NE, 5 NW, 6 SW, 7 SE.
pub fn g1(dir: u64, m: u64) -> Vec<u8> {
    uint((m << 4) | (dir << 1))
}

/// General g-delta (form 2).
pub fn g2(x: i64, y: i64) -> Vec<u8> {
    [
        uint((x.unsigned_abs() << 2) | (u64::from(x < 0) << 1) | 1),
        sint(y),
    ]
    .concat()
}

/// A file with every record type, every point-list type, all twelve repetition forms,
/// both placements, modal reuse, relative coordinates, forward name references, a CBLOCK
/// and properties / extension records to skip. Cells: LEAF (refnum 0), TOP (refnum 1).
pub fn every_record_file() -> Vec<u8> {
    let mut leaf = Vec::new();
    let mut push = |v: Vec<u8>| leaf.extend(v);
    push(cell_ref(0));
    push(rect(1, 0, 0, 0, 100, 50));
    // PROPERTY by name with a real, an unsigned, a string and a propstring reference.
    push(
        [
            uint(28),
            vec![0x40 | 0x04],
            string("P"),
            uint(0),
            uint(3),
            uint(8),
            uint(9),
            uint(10),
            string("s"),
            uint(13),
            uint(3),
        ]
        .concat(),
    );
    push(uint(29)); // repeat last property
    // Square (S, W) reusing layer/datatype, then W/H reuse, then relative X.
    push(
        [
            uint(20),
            vec![0x80 | 0x40 | 0x10 | 0x08],
            uint(30),
            sint(200),
            sint(0),
        ]
        .concat(),
    );
    push([uint(20), vec![0x10 | 0x08], sint(300), sint(0)].concat());
    push(uint(16));
    push([uint(20), vec![0x10], sint(100)].concat());
    push(uint(15));
    // POLYGONs on 2/0, all point-list types.
    let poly = |pl: Vec<u8>, x: i64| {
        [
            uint(21),
            vec![0x20 | 0x10 | 0x08 | 0x03],
            uint(2),
            uint(0),
            pl,
            sint(x),
            sint(1000),
        ]
        .concat()
    };
    push(poly(
        [uint(0), uint(4), sint(20), sint(10), sint(-10), sint(10)].concat(),
        0,
    ));
    push(poly([uint(1), uint(2), sint(10), sint(20)].concat(), 100));
    push(poly(
        [
            uint(2),
            uint(3),
            uint(10 << 2),
            uint((10 << 2) | 1),
            uint((10 << 2) | 2),
        ]
        .concat(),
        200,
    ));
    push(poly(
        [uint(3), uint(2), uint(10 << 3), uint((10 << 3) | 5)].concat(),
        300,
    ));
    push(poly(
        [uint(4), uint(2), g1(0, 10), g2(-10, 10)].concat(),
        400,
    ));
    push(poly(
        [uint(5), uint(2), g2(10, 0), g2(-10, 10)].concat(),
        500,
    ));
    push([uint(21), vec![0x10], sint(600)].concat()); // modal point list, layer, y
    // PATHs on 3/0: explicit extensions, then half-width start / flush end reusing the rest.
    push(
        [
            uint(22),
            vec![0x80 | 0x40 | 0x20 | 0x10 | 0x08 | 0x03],
            uint(3),
            uint(0),
            uint(5),
            uint(15),
            sint(2),
            sint(3),
            uint(0),
            uint(2),
            sint(100),
            sint(50),
            sint(0),
            sint(2000),
        ]
        .concat(),
    );
    push([uint(22), vec![0x80 | 0x08], uint((2 << 2) | 1), sint(2500)].concat());
    // TRAPEZOIDs on 4/0.
    push(
        [
            uint(23),
            vec![0x40 | 0x20 | 0x10 | 0x08 | 0x03],
            uint(4),
            uint(0),
            uint(20),
            uint(8),
            sint(3),
            sint(-4),
            sint(0),
            sint(3000),
        ]
        .concat(),
    );
    push(
        [
            uint(24),
            vec![0x80 | 0x40 | 0x20 | 0x10],
            uint(8),
            uint(20),
            sint(3),
            sint(100),
        ]
        .concat(),
    );
    push(
        [
            uint(25),
            vec![0x40 | 0x20 | 0x10],
            uint(20),
            uint(8),
            sint(-4),
            sint(200),
        ]
        .concat(),
    );
    // CTRAPEZOIDs on 5/type.
    for t in 0..=25u64 {
        let (w, h): (Option<u64>, Option<u64>) = match t {
            0..=7 | 24 => (Some(20), Some(8)),
            8..=15 => (Some(7), Some(30)),
            20 | 21 => (None, Some(8)),
            _ => (Some(20), None),
        };
        let mut info = 0x80 | 0x10 | 0x08 | 0x03;
        let mut body = [uint(5), uint(t), uint(t)].concat();
        if let Some(w) = w {
            info |= 0x40;
            body.extend(uint(w));
        }
        if let Some(h) = h {
            info |= 0x20;
            body.extend(uint(h));
        }
        body.extend(sint(100 * t as i64));
        body.extend(sint(4000));
        push([uint(26), vec![info], body].concat());
    }
    // CIRCLE on 6/0.
    push(
        [
            uint(27),
            vec![0x20 | 0x10 | 0x08 | 0x03],
            uint(6),
            uint(0),
            uint(50),
            sint(0),
            sint(5000),
        ]
        .concat(),
    );
    // TEXTs on 10/1: forward TEXTSTRING reference 7, then a literal string.
    push(
        [
            uint(19),
            vec![0x40 | 0x20 | 0x10 | 0x08 | 0x02 | 0x01],
            uint(7),
            uint(10),
            uint(1),
            sint(5),
            sint(5),
        ]
        .concat(),
    );
    push([uint(19), vec![0x40 | 0x10], string("WORLD"), sint(15)].concat());
    // XGEOMETRY / XELEMENT: skipped.
    push(
        [
            uint(33),
            vec![0x10 | 0x08 | 0x03],
            uint(0),
            uint(7),
            uint(0),
            string("x"),
            sint(0),
            sint(0),
        ]
        .concat(),
    );
    push([uint(32), uint(1), string("xe")].concat());
    // Repetitions of a 10x10 box on 8/type, at (0, 6000 + 1000 * type).
    let reps: Vec<Vec<u8>> = vec![
        vec![], // type 0 is last
        [uint(1), uint(0), uint(1), uint(1000), uint(500)].concat(),
        [uint(2), uint(1), uint(50)].concat(),
        [uint(3), uint(0), uint(60)].concat(),
        [uint(4), uint(1), uint(10), uint(20)].concat(),
        [uint(5), uint(0), uint(5), uint(4)].concat(),
        [uint(6), uint(1), uint(7), uint(8)].concat(),
        [uint(7), uint(0), uint(3), uint(5)].concat(),
        [uint(8), uint(0), uint(0), g2(100, 10), g2(-10, 100)].concat(),
        [uint(9), uint(1), g1(4, 30)].concat(),
        [uint(10), uint(1), g2(5, 0), g2(0, 7)].concat(),
        [uint(11), uint(0), uint(4), g2(3, -2)].concat(),
        uint(0),
    ];
    for (t, r) in reps.iter().enumerate().skip(1) {
        push(
            [
                uint(20),
                vec![0x40 | 0x20 | 0x10 | 0x08 | 0x04 | 0x03],
                uint(8),
                uint(t as u64),
                uint(10),
                uint(10),
                sint(0),
                sint(6000 + 1000 * t as i64),
                r.clone(),
            ]
            .concat(),
        );
    }

    let mut top = cell_ref(1);
    top.extend(
        [
            uint(17),
            vec![0x80 | 0x40 | 0x20 | 0x10 | (1 << 1)],
            uint(0),
            sint(100_000),
            sint(0),
        ]
        .concat(),
    );
    top.extend([uint(17), vec![0x20 | 0x10 | 0x01], sint(0), sint(100_000)].concat());
    top.extend(place_mag("LEAF", -100_000, 0, 2.0, 30.0, false));
    top.extend(
        [
            uint(17),
            vec![0x80 | 0x40 | 0x20 | 0x10 | 0x08],
            uint(0),
            sint(200_000),
            sint(200_000),
            uint(8),
            uint(0),
            uint(0),
            g2(30_000, 0),
            g2(0, 30_000),
        ]
        .concat(),
    );
    top.extend(
        [
            uint(17),
            vec![0x20 | 0x10 | 0x08 | (2 << 1)],
            sint(-200_000),
            sint(200_000),
            uint(10),
            uint(0),
            g2(-40_000, 5_000),
        ]
        .concat(),
    );

    let names = [
        [uint(3), string("LEAF")].concat(),
        [uint(3), string("TOP")].concat(),
        [uint(6), string("HELLO"), uint(7)].concat(),
        [uint(7), string("P")].concat(),
        [uint(10), string("s"), uint(3)].concat(),
        [uint(30), uint(1), string("xn")].concat(),
        [uint(11), string("M1"), uint(3), uint(1), uint(0)].concat(),
    ]
    .concat();
    [start(), leaf, cblock(&top), names, end()].concat()
}
