//! Unit tests of `reticle_layout::gds::record`: real8 and the record lexer.

use reticle_layout::GdsError;
use reticle_layout::gds::record::*;

#[test]
fn real8_known_encodings() {
    // 1.0 = 0x41 10 00.., 1e-3 and 1e-9 are the usual UNITS values.
    assert_eq!(real8_encode(1.0), Some([0x41, 0x10, 0, 0, 0, 0, 0, 0]));
    assert_eq!(real8_decode([0x41, 0x10, 0, 0, 0, 0, 0, 0]), 1.0);
    assert_eq!(real8_decode([0xC1, 0x10, 0, 0, 0, 0, 0, 0]), -1.0);
    let mm = [0x3E, 0x41, 0x89, 0x37, 0x4B, 0xC6, 0xA7, 0xEF];
    assert!((real8_decode(mm) - 1e-3).abs() < 1e-18);
    // Encoding the f64 nearest 1e-3 differs from the decimal 0.001 only in the last bit
    // pattern (f64 has 53 bits, GDS 56), and decodes back to exactly the same f64.
    let enc = real8_encode(1e-3).expect("finite");
    assert_eq!(enc[..7], mm[..7]);
    assert_eq!(real8_decode(enc), 1e-3);
    for v in [1e-9, 90.0, 0.5, 2.5, -17.25, 1e-12, 123_456.789] {
        let back = real8_decode(real8_encode(v).expect("finite"));
        assert!((back - v).abs() <= v.abs() * 1e-15, "{v} -> {back}");
    }
    assert_eq!(real8_encode(f64::NAN), None);
    assert_eq!(real8_encode(1e100), None);
}

#[test]
fn lexer_rejects_bad_lengths() {
    let mut pos = 0;
    assert!(matches!(
        next_record(&[0, 2, 0, 0], &mut pos),
        Err(GdsError::BadRecordLength {
            offset: 0,
            length: 2
        })
    ));
    let mut pos = 0;
    assert!(matches!(
        next_record(&[0, 8, 0, 2, 1], &mut pos),
        Err(GdsError::Truncated { offset: 0 })
    ));
    let mut pos = 0;
    assert!(matches!(
        next_record(&[0, 6, 0], &mut pos),
        Err(GdsError::Truncated { .. })
    ));
    let mut pos = 0;
    let r = next_record(&[0, 6, 0, 2, 2, 88], &mut pos)
        .expect("ok")
        .expect("some");
    assert_eq!((r.rtype, r.i16_one().ok(), pos), (0, Some(600), 6));
}
