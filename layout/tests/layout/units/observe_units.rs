//! Unit tests of `reticle_layout::observe::units`: µm and dbu, boxes.

use reticle_layout::observe::units::*;

#[test]
fn rounding_and_conversion() {
    assert_eq!(dbu_to_um(1234.0, 0.001), 1.234);
    assert_eq!(dbu_to_um(-1.0, 0.001), -0.001);
    assert_eq!(round_um(0.123_456_7), 0.123_457);
    assert_eq!(round_um(-0.000_000_1).to_bits(), 0.0f64.to_bits());
    let b = MicronBox {
        left: 0.0,
        bottom: -0.25,
        right: 40.0,
        top: 0.25,
    };
    let d = b.to_dbu(0.001).expect("valid");
    assert_eq!((d.left, d.bottom, d.right, d.top), (0, -250, 40_000, 250));
    assert_eq!(MicronBox::from_dbu(&d, 0.001), b);
}

#[test]
fn invalid_boxes() {
    let mk = |l, b, r, t| MicronBox {
        left: l,
        bottom: b,
        right: r,
        top: t,
    };
    for bad in [
        mk(1.0, 0.0, 0.0, 1.0),
        mk(0.0, 0.0, 0.0, 1.0),
        mk(0.0, f64::NAN, 1.0, 1.0),
        mk(0.0, 0.0, f64::INFINITY, 1.0),
        mk(0.0, 0.0, 0.0001, 1.0),
        mk(0.0, 0.0, 1e30, 1.0),
    ] {
        let e = bad.to_dbu(0.001).expect_err("invalid");
        assert_eq!(e.code(), "INVALID_BOX", "{bad:?}");
    }
}
