//! Unit tests of model specs, pixel limits and kernel files (`reticle_kernel::model`).

use reticle_kernel::model::*;

#[test]
fn spec_json_shapes() {
    let k: ModelSpec = serde_json::from_str(r#"{"kind":"kernels","dir":"/x"}"#).unwrap();
    let ModelSpec::Kernels(k) = k else {
        panic!("wrong kind")
    };
    assert_eq!(
        (k.focus.as_str(), k.defocus.as_deref(), k.period_nm),
        ("focus", Some("defocus"), 2048.0)
    );
    let h: ModelSpec = serde_json::from_str(
        r#"{"kind":"hopkins","wavelength_nm":193,"na":1.35,"immersion_index":1.44,
            "source":{"shape":"annular","sigma_in":0.6,"sigma_out":0.9},
            "period_nm":1024,"defocus_nm":40}"#,
    )
    .unwrap();
    assert!(matches!(
        h,
        ModelSpec::Hopkins(HopkinsSpec {
            defocus_nm: Some(40.0),
            ..
        })
    ));
    assert!(
        serde_json::from_str::<ModelSpec>(r#"{"kind":"kernels","dir":"/x","typo":1}"#).is_err()
    );
    assert!(serde_json::from_str::<ModelSpec>(r#"{"kind":"magic"}"#).is_err());
}

fn hopkins(source: reticle_kernel::optics::Source, na: f64) -> ModelSpec {
    let ModelSpec::Hopkins(mut h) = default_model(2048.0) else {
        unreachable!()
    };
    h.optics.source = source;
    h.optics.na = na;
    ModelSpec::Hopkins(h)
}

#[test]
fn max_pixel_from_the_optics_for_every_source_kind() {
    use reticle_kernel::optics::Source;
    // λ / (4·NA·(1 + σ_max)), λ = 193 nm.
    let annular = default_model(2048.0).pixel_limit().unwrap();
    assert!((annular.max_pixel_nm - 193.0 / (4.0 * 1.35 * 1.9)).abs() < 1e-12);
    assert!((annular.max_pixel_nm - 18.8109).abs() < 1e-4);
    assert!(
        annular.rule.starts_with("λ/(4·NA·(1+σ_out))"),
        "{}",
        annular.rule
    );
    let cases = [
        (
            Source::Circular { sigma: 0.5 },
            0.75,
            193.0 / (4.0 * 0.75 * 1.5),
        ),
        (
            Source::Dipole {
                sigma_in: 0.5,
                sigma_out: 0.8,
                opening_deg: 40.0,
                rotation_deg: 0.0,
            },
            1.35,
            193.0 / (4.0 * 1.35 * 1.8),
        ),
        (
            Source::Quadrupole {
                sigma_in: 0.7,
                sigma_out: 0.95,
                opening_deg: 30.0,
                rotation_deg: 45.0,
            },
            1.2,
            193.0 / (4.0 * 1.2 * 1.95),
        ),
    ];
    for (source, na, want) in cases {
        let circular = matches!(source, Source::Circular { .. });
        let limit = hopkins(source, na).pixel_limit().unwrap();
        assert!((limit.max_pixel_nm - want).abs() < 1e-12, "{limit:?}");
        assert_eq!(limit.rule.contains("σ_out"), !circular, "{}", limit.rule);
    }
    // The optics rule is the continuous form of the kernels' support: the SOCS set
    // of the default model holds bins up to c = ⌊P·NA(1+σ)/λ⌋ = 27 (55×55), whose
    // rule P/(2·(K−1)) = 2048/108 is at most one bin looser.
    let set = default_model(2048.0).kernels().unwrap().focus;
    assert_eq!(set.size, 55);
    let from_set = set.max_pixel_nm();
    assert!((from_set - 2048.0 / 108.0).abs() < 1e-12);
    assert!(from_set >= annular.max_pixel_nm && from_set < 2048.0 / 107.0);
}

#[test]
fn max_pixel_from_kernel_files() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, count: usize, side: usize| {
        let k = super::npy::build(
            "<c8",
            &[count, side, side],
            &vec![0u8; count * side * side * 8],
        );
        let s = super::npy::build("<f4", &[count], &vec![0u8; count * 4]);
        std::fs::write(dir.path().join(format!("{name}.npy")), k).unwrap();
        std::fs::write(dir.path().join(format!("{name}_scales.npy")), s).unwrap();
    };
    // ICCAD-2013: 35×35 at P = 2048 → 2048 / 68.
    write("focus", 24, 35);
    write("defocus", 24, 35);
    let spec = |defocus: Option<&str>, period_nm: f64| {
        ModelSpec::Kernels(KernelFilesSpec {
            dir: dir.path().to_owned(),
            focus: "focus".into(),
            defocus: defocus.map(str::to_owned),
            period_nm,
            max_kernels: None,
        })
    };
    let iccad = spec(Some("defocus"), 2048.0).pixel_limit().unwrap();
    assert!((iccad.max_pixel_nm - 2048.0 / 68.0).abs() < 1e-12);
    assert!((iccad.max_pixel_nm - 30.1176).abs() < 1e-4);
    assert!(
        iccad.rule.contains("35×35") && iccad.rule.contains("2048"),
        "{}",
        iccad.rule
    );
    // The loaded set says the same.
    let set = load_set(dir.path(), "focus", 2048.0, None).unwrap();
    assert_eq!(set.max_pixel_nm(), iccad.max_pixel_nm);
    // The wider of focus and defocus decides; the period scales the pixel.
    write("wide", 2, 51);
    assert!((spec(Some("wide"), 2048.0).max_pixel_nm().unwrap() - 2048.0 / 100.0).abs() < 1e-12);
    assert!((spec(None, 1024.0).max_pixel_nm().unwrap() - 1024.0 / 68.0).abs() < 1e-12);
    // A DC-only kernel images a constant: any pixel up to the window.
    write("dc", 1, 1);
    assert_eq!(
        spec(Some("dc"), 2048.0).max_pixel_nm().unwrap(),
        2048.0 / 68.0
    );
    let dc_only = ModelSpec::Kernels(KernelFilesSpec {
        focus: "dc".into(),
        defocus: None,
        ..match spec(None, 2048.0) {
            ModelSpec::Kernels(k) => k,
            ModelSpec::Hopkins(_) => unreachable!(),
        }
    });
    assert_eq!(dc_only.max_pixel_nm().unwrap(), 2048.0);
    // Missing, malformed and non-square files are errors, as when loading.
    assert!(matches!(
        spec(Some("missing"), 2048.0).pixel_limit(),
        Err(ModelError::Io { .. })
    ));
    std::fs::write(dir.path().join("junk.npy"), b"not numpy").unwrap();
    assert!(matches!(
        spec(Some("junk"), 2048.0).pixel_limit(),
        Err(ModelError::Npy { .. })
    ));
    let k = super::npy::build("<c8", &[1, 3, 5], &[0u8; 15 * 8]);
    std::fs::write(dir.path().join("rect.npy"), k).unwrap();
    assert!(matches!(
        spec(Some("rect"), 2048.0).pixel_limit(),
        Err(ModelError::Invalid(_))
    ));
}

#[test]
fn max_pixel_of_the_iccad_kernels() {
    // The real ICCAD-2013 files when the shared data folder beside the workspace is
    // present (the kernel reads no setting; the engine tests honour RETICLE_DATA_DIR).
    let Some(dir) = crate::common::iccad13_dir().map(|d| d.join("kernels")) else {
        eprintln!("SKIP: no ICCAD-2013 kernels in ../shared/data");
        return;
    };
    let spec = ModelSpec::Kernels(KernelFilesSpec {
        dir,
        focus: "focus".into(),
        defocus: Some("defocus".into()),
        period_nm: 2048.0,
        max_kernels: None,
    });
    let limit = spec.pixel_limit().unwrap();
    assert!(
        (limit.max_pixel_nm - 2048.0 / 68.0).abs() < 1e-12,
        "{limit:?}"
    );
}

#[test]
fn load_rejects_mismatched_files() {
    let dir = std::env::temp_dir().join(format!("reticle-model-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let k = super::npy::build("<c8", &[2, 3, 3], &[0u8; 2 * 9 * 8]);
    let s = super::npy::build("<f4", &[3], &[0u8; 12]);
    std::fs::write(dir.join("a.npy"), &k).unwrap();
    std::fs::write(dir.join("a_scales.npy"), &s).unwrap();
    assert!(matches!(
        load_set(&dir, "a", 2048.0, None),
        Err(ModelError::Invalid(_))
    ));
    let s = super::npy::build("<f4", &[2], &[0u8; 8]);
    std::fs::write(dir.join("a_scales.npy"), &s).unwrap();
    let set = load_set(&dir, "a", 2048.0, None).unwrap();
    assert_eq!((set.count(), set.size), (2, 3));
    assert!(matches!(
        load_set(&dir, "missing", 2048.0, None),
        Err(ModelError::Io { .. })
    ));
    assert!(matches!(
        load_set(&dir, "../a", 2048.0, None),
        Err(ModelError::Invalid(_))
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}
