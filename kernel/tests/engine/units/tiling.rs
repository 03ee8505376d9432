//! Unit tests of the tiling rule: halo, core and plan (`reticle_kernel::tiling`).

use reticle_kernel::model::{ModelError, ModelSpec, default_model};
use reticle_kernel::tiling::*;

#[test]
fn the_rule_for_the_default_model() {
    let model = default_model(2048.0);
    let lambda_na = 193.0 / 1.35;
    assert!((model.resolution_nm().unwrap() - lambda_na).abs() < 1e-12);
    for (pixel, halo, core) in [
        (1.0, 429.0, 1190.0),
        (2.0, 430.0, 1188.0),
        (4.0, 432.0, 1184.0),
        (8.0, 432.0, 1184.0),
        (16.0, 432.0, 1184.0),
    ] {
        let h = tile_halo_nm(&model, pixel).unwrap();
        assert_eq!(
            (h, tile_core_nm(&model, pixel).unwrap()),
            (halo, core),
            "{pixel}"
        );
        // A whole number of pixels, the first at or past 3 λ/NA.
        assert_eq!(h % pixel, 0.0);
        assert!(h >= HALO_RESOLUTIONS * lambda_na && h - pixel < HALO_RESOLUTIONS * lambda_na);
    }
    assert_eq!(
        tile_plan(&model, 4.0).unwrap(),
        TilePlan {
            window: 512,
            halo: 108
        }
    );
    assert_eq!(tile_plan(&model, 4.0).unwrap().core(), 296);
}

#[test]
fn the_rule_for_kernel_files_and_its_errors() {
    use reticle_kernel::model::KernelFilesSpec;
    let dir = tempfile::tempdir().unwrap();
    let k = super::npy::build("<c8", &[2, 35, 35], &vec![0u8; 2 * 35 * 35 * 8]);
    std::fs::write(dir.path().join("focus.npy"), k).unwrap();
    let files = ModelSpec::Kernels(KernelFilesSpec {
        dir: dir.path().to_owned(),
        focus: "focus".into(),
        defocus: None,
        period_nm: 2048.0,
        max_kernels: None,
    });
    // λ/NA <= 2/f_c = 4P/(K − 1) = 240.9 nm; 3× = 722.8 → 724 nm at 4 nm pixels.
    assert!((files.resolution_nm().unwrap() - 4.0 * 2048.0 / 34.0).abs() < 1e-12);
    assert_eq!(tile_halo_nm(&files, 4.0).unwrap(), 724.0);
    assert_eq!(tile_core_nm(&files, 4.0).unwrap(), 600.0);
    // A halo that leaves no core, a pixel that does not divide the period, bad pixels.
    let ModelSpec::Hopkins(mut dry) = default_model(1024.0) else {
        unreachable!()
    };
    dry.optics.na = 0.5;
    let dry = ModelSpec::Hopkins(dry);
    assert!(matches!(
        tile_core_nm(&dry, 4.0),
        Err(ModelError::Invalid(_))
    ));
    let model = default_model(2048.0);
    assert!(matches!(
        tile_plan(&model, 3.0),
        Err(ModelError::Invalid(_))
    ));
    for bad in [0.0, -4.0, f64::NAN, f64::INFINITY] {
        assert!(tile_halo_nm(&model, bad).is_err(), "{bad}");
    }
}
