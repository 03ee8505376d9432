//! Unit tests of `reticle_layout::oasis::writer`: encodings that read back.

use reticle_layout::oasis::cursor::Cursor;
use reticle_layout::oasis::writer::*;

#[test]
fn integers_reals_and_gdeltas_read_back() {
    for v in [0u64, 1, 127, 128, 16383, 16384, u64::MAX] {
        let mut b = Vec::new();
        push_uint(&mut b, v);
        assert_eq!(Cursor::new(&b, false).uint(), Ok(v));
    }
    for v in [
        0i64,
        1,
        -1,
        63,
        -64,
        i64::from(i32::MIN),
        i64::MAX,
        -i64::MAX,
    ] {
        let mut b = Vec::new();
        push_sint(&mut b, v);
        assert_eq!(Cursor::new(&b, false).sint(), Ok(v));
    }
    for v in [0.0, 1.0, 1000.0, -3.0, 0.5, 1.5, 37.5, -0.0, 1e-3, 1e300] {
        let mut b = Vec::new();
        push_real(&mut b, v);
        let r = Cursor::new(&b, false).real().expect("real");
        assert_eq!(r.to_bits(), v.to_bits(), "{v}");
    }
    for d in [
        (0, 0),
        (5, 0),
        (-5, 0),
        (0, 7),
        (0, -7),
        (3, 3),
        (-3, 3),
        (-3, -3),
        (3, -3),
        (3, 4),
        (-3, 4),
        (i64::from(i32::MIN) * 2, i64::from(i32::MAX) * 2),
    ] {
        let mut b = Vec::new();
        push_gdelta(&mut b, d);
        assert_eq!(Cursor::new(&b, false).gdelta(), Ok(d), "{d:?}");
    }
}

#[test]
fn end_record_is_256_bytes() {
    let mut w = OasisWriter {
        out: Vec::new(),
        cell: String::new(),
    };
    w.end();
    assert_eq!(w.out.len(), END_RECORD_BYTES);
    assert_eq!(w.out[0], 2);
    assert_eq!(*w.out.last().expect("byte"), 0);
}
