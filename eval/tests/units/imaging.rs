//! Unit tests of `reticle_eval::imaging`: the pixel-size check.

use reticle_eval::imaging::check_pixel;
use reticle_kernel::model::default_model;
use reticle_protocol::error::ErrorCode;

#[test]
fn the_default_model_refuses_pixels_past_nyquist() {
    let model = default_model(2048.0);
    for ok in [1.0, 4.0, 16.0, 18.8] {
        assert!(check_pixel(&model, ok).is_ok(), "{ok}");
    }
    let e = check_pixel(&model, 32.0).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidInput);
    assert_eq!(
        e.message,
        "pixel_nm 32 is larger than the largest pixel this model allows, 18.8 nm \
         (λ/(4·NA·(1+σ_out)), Nyquist sampling of the intensity)"
    );
    let d = &e.details;
    assert_eq!(d["pixel_nm"], 32.0);
    assert_eq!(d["max_pixel_nm"], 18.810916);
    assert!(
        d["rule"]
            .as_str()
            .unwrap()
            .starts_with("λ/(4·NA·(1+σ_out))")
    );
}
