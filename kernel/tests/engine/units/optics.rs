//! Unit tests of illumination sources and the pupil (`reticle_kernel::optics`).

use reticle_kernel::optics::{Optics, Source};

#[test]
fn shapes_contain_what_they_say() {
    let dip = Source::Dipole {
        sigma_in: 0.5,
        sigma_out: 0.9,
        opening_deg: 40.0,
        rotation_deg: 0.0,
    };
    assert!(dip.contains(0.7, 0.0) && dip.contains(-0.7, 0.0));
    assert!(!dip.contains(0.0, 0.7) && !dip.contains(0.3, 0.0));
    let quasar = Source::Quadrupole {
        sigma_in: 0.5,
        sigma_out: 0.9,
        opening_deg: 30.0,
        rotation_deg: 45.0,
    };
    assert!(quasar.contains(0.5, 0.5) && quasar.contains(-0.5, -0.5) && !quasar.contains(0.7, 0.0));
    let ann = Source::Annular {
        sigma_in: 0.6,
        sigma_out: 0.9,
    };
    assert!(ann.contains(0.0, 0.8) && !ann.contains(0.0, 0.5));
    for s in [&dip, &quasar, &ann] {
        s.validate().unwrap();
        let pts = s.sample(0.05);
        assert!(pts.len() > 10);
        // Mirror-symmetric sampling.
        for &(x, y) in &pts {
            assert!(
                pts.iter()
                    .any(|&(a, b)| (a + x).abs() < 1e-12 && (b - y).abs() < 1e-12)
            );
        }
    }
    assert!(Source::Circular { sigma: 1.5 }.validate().is_err());
    assert!(
        Source::Annular {
            sigma_in: 0.8,
            sigma_out: 0.7
        }
        .validate()
        .is_err()
    );
}

#[test]
fn pupil_cutoff_and_defocus_phase() {
    let o = Optics {
        wavelength_nm: 193.0,
        na: 1.35,
        immersion_index: 1.44,
        source: Source::Circular { sigma: 0.5 },
        source_step: 0.05,
    };
    o.validate().unwrap();
    assert_eq!(o.pupil(0.0, 0.0, 50.0).re, 1.0);
    assert_eq!(o.pupil(o.cutoff() * 1.01, 0.0, 0.0).norm(), 0.0);
    let p = o.pupil(o.cutoff() * 0.9, 0.0, 50.0);
    assert!((p.norm() - 1.0).abs() < 1e-12 && p.im.abs() > 0.1);
    let bad = Optics { na: 1.5, ..o };
    assert!(bad.validate().is_err());
}
