//! Unit tests of the resist model (`reticle_kernel::resist`).

use reticle_kernel::Resist;

#[test]
fn print_matches_sigmoid_half() {
    let r = Resist::ICCAD2013;
    for i in [0.0f32, 0.2, 0.224, 0.226, 0.5, 1.0] {
        assert_eq!(r.prints(i), r.response(i) > 0.5, "{i}");
    }
    assert!((r.response(0.225) - 0.5).abs() < 1e-6);
}
