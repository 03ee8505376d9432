//! Model specifications: where a job's kernels come from.
//!
//! `{"kind": "hopkins", ...}` builds kernels from optics ([`crate::socs`]);
//! `{"kind": "kernels", "dir": ...}` loads `.npy` files in the ICCAD-2013 convention.
//! Either way the result is a focus set and, when defined, a defocus set.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::KernelSet;
use crate::npy::{self, NpyError};
use crate::optics::Optics;
use crate::socs::{self, SocsError, SocsParams};

/// Largest kernel file read (bytes).
const MAX_FILE: u64 = 256 << 20;

/// A lithography model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ModelSpec {
    /// Kernels computed from optics.
    Hopkins(HopkinsSpec),
    /// Kernels read from `.npy` files.
    Kernels(KernelFilesSpec),
}

/// Optics-based model: one SOCS decomposition per focus condition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HopkinsSpec {
    /// Optics and source.
    #[serde(flatten)]
    pub optics: Optics,
    /// Field period the kernels are sampled for (nm).
    pub period_nm: f64,
    /// Defocus of the focus set (nm), usually 0.
    #[serde(default)]
    pub focus_nm: f64,
    /// Defocus of the defocus corner (nm); no defocus set when absent.
    #[serde(default)]
    pub defocus_nm: Option<f64>,
    /// Kernel side (odd); default from the optics.
    #[serde(default)]
    pub kernel_size: Option<usize>,
    /// Keep at most this many kernels.
    #[serde(default = "default_max")]
    pub max_kernels: usize,
    /// Keep the fewest kernels capturing this fraction of the TCC trace.
    #[serde(default = "default_energy")]
    pub energy: f64,
}

fn default_max() -> usize {
    24
}

fn default_energy() -> f64 {
    0.999
}

/// Kernels from files: `<dir>/<name>.npy` (complex `[k, y, x]`) and `<dir>/<name>_scales.npy`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelFilesSpec {
    /// Folder holding the files.
    pub dir: PathBuf,
    /// Base name of the focus set.
    #[serde(default = "focus_name")]
    pub focus: String,
    /// Base name of the defocus set; `null` for none.
    #[serde(default = "defocus_name")]
    pub defocus: Option<String>,
    /// Field period of the kernels (nm); ICCAD-2013: 2048.
    #[serde(default = "iccad_period")]
    pub period_nm: f64,
    /// Use only the first this many kernels.
    #[serde(default)]
    pub max_kernels: Option<usize>,
}

fn focus_name() -> String {
    "focus".into()
}

fn defocus_name() -> Option<String> {
    Some("defocus".into())
}

fn iccad_period() -> f64 {
    2048.0
}

/// The kernel sets of a model.
#[derive(Debug, Clone)]
pub struct ModelKernels {
    /// Nominal focus.
    pub focus: Arc<KernelSet>,
    /// Defocus corner, when the model defines one.
    pub defocus: Option<Arc<KernelSet>>,
}

/// Why a model could not be turned into kernels.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// A kernel file could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A kernel file is malformed.
    #[error("{path}: {source}")]
    Npy {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        source: NpyError,
    },
    /// Files that disagree with each other or with the convention.
    #[error("invalid kernel files: {0}")]
    Invalid(String),
    /// Optics-based kernels failed.
    #[error(transparent)]
    Socs(#[from] SocsError),
}

impl ModelSpec {
    /// Loads or computes the model's kernels.
    pub fn kernels(&self) -> Result<ModelKernels, ModelError> {
        match self {
            Self::Kernels(k) => {
                let load = |name: &str| load_set(&k.dir, name, k.period_nm, k.max_kernels);
                Ok(ModelKernels {
                    focus: Arc::new(load(&k.focus)?),
                    defocus: k.defocus.as_deref().map(load).transpose()?.map(Arc::new),
                })
            }
            Self::Hopkins(h) => {
                let params = |defocus_nm: f64| SocsParams {
                    optics: h.optics.clone(),
                    defocus_nm,
                    period_nm: h.period_nm,
                    kernel_size: h.kernel_size,
                    max_kernels: h.max_kernels,
                    energy: h.energy,
                };
                Ok(ModelKernels {
                    focus: socs::kernels(&params(h.focus_nm))?.set,
                    defocus: h
                        .defocus_nm
                        .map(|d| socs::kernels(&params(d)).map(|k| k.set))
                        .transpose()?,
                })
            }
        }
    }
}

/// The largest pixel a model allows, and the rule it comes from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PixelLimit {
    /// Largest pixel side (nm) that samples the model's intensity without aliasing.
    pub max_pixel_nm: f64,
    /// The formula and its reason, for messages, e.g.
    /// `λ/(4·NA·(1+σ_out)), Nyquist sampling of the intensity`.
    pub rule: String,
}

impl ModelSpec {
    /// The model's field period (nm): the side of the window its kernels image.
    #[must_use]
    pub fn period_nm(&self) -> f64 {
        match self {
            Self::Hopkins(h) => h.period_nm,
            Self::Kernels(k) => k.period_nm,
        }
    }

    /// The largest pixel that samples this model's intensity without aliasing.
    ///
    /// Hopkins models: from the optics, `λ / (4·NA·(1 + σ_max))`
    /// ([`Optics::max_pixel_nm`] has the derivation). Kernel files: from the kernel
    /// support, `P / (2·(K − 1))` for `K × K` kernels at period `P`
    /// ([`KernelSet::max_pixel_nm`]); the focus and defocus sets are imaged on the
    /// same grid, so the wider of the two decides. Only the `.npy` headers are read.
    pub fn pixel_limit(&self) -> Result<PixelLimit, ModelError> {
        match self {
            Self::Hopkins(h) => Ok(PixelLimit {
                max_pixel_nm: h.optics.max_pixel_nm(),
                rule: h.optics.max_pixel_rule().to_owned(),
            }),
            Self::Kernels(k) => {
                let mut side = kernel_side(&k.dir, &k.focus)?;
                if let Some(defocus) = &k.defocus {
                    side = side.max(kernel_side(&k.dir, defocus)?);
                }
                Ok(PixelLimit {
                    max_pixel_nm: crate::kernels::max_pixel_for_side(side, k.period_nm),
                    rule: format!(
                        "P/(2·(K−1)) for {side}×{side} kernels at period P = {} nm, Nyquist sampling of the intensity",
                        k.period_nm
                    ),
                })
            }
        }
    }

    /// The model's resolution length (nm), the unit of the tiling halo
    /// ([`crate::tiling::tile_halo_nm`]): `λ/NA` for a Hopkins model. Kernel files carry
    /// only their band, `f_c = (K − 1)/(2P)` cycles/nm `= NA·(1 + σ_max)/λ`; since
    /// `σ_max <= 1`, `λ/NA <= 2/f_c = 4P/(K − 1)`, and that bound is used (ICCAD-2013:
    /// 241 nm).
    pub fn resolution_nm(&self) -> Result<f64, ModelError> {
        match self {
            Self::Hopkins(h) => Ok(h.optics.wavelength_nm / h.optics.na),
            Self::Kernels(k) => {
                let mut side = kernel_side(&k.dir, &k.focus)?;
                if let Some(defocus) = &k.defocus {
                    side = side.max(kernel_side(&k.dir, defocus)?);
                }
                Ok(4.0 * k.period_nm / (side.max(2) - 1) as f64)
            }
        }
    }

    /// [`Self::pixel_limit`]'s pixel (nm).
    pub fn max_pixel_nm(&self) -> Result<f64, ModelError> {
        Ok(self.pixel_limit()?.max_pixel_nm)
    }
}

/// The default model of `simulate` and `evaluate` at field period `period_nm`: 193 nm
/// water immersion (n 1.44), NA 1.35, annular σ 0.6–0.9 sampled every 0.05, the focus
/// set at best focus and a defocus set at 60 nm, at most 24 kernels capturing 99.9 % of
/// the TCC trace. The worker's `default_model` (`worker/src/ops/simulate.rs`) is the same
/// model (a test there checks it).
#[must_use]
pub fn default_model(period_nm: f64) -> ModelSpec {
    ModelSpec::Hopkins(HopkinsSpec {
        optics: Optics {
            wavelength_nm: 193.0,
            na: 1.35,
            immersion_index: 1.44,
            source: crate::optics::Source::Annular {
                sigma_in: 0.6,
                sigma_out: 0.9,
            },
            source_step: 0.05,
        },
        period_nm,
        focus_nm: 0.0,
        defocus_nm: Some(60.0),
        kernel_size: None,
        max_kernels: 24,
        energy: 0.999,
    })
}

/// Side `K` of the `[k, K, K]` kernels in `<dir>/<name>.npy`, from the header alone.
fn kernel_side(dir: &Path, name: &str) -> Result<usize, ModelError> {
    use std::io::Read;
    check_set_name(name)?;
    let path = dir.join(format!("{name}.npy"));
    let io = |source| ModelError::Io {
        path: path.clone(),
        source,
    };
    let mut prefix = Vec::new();
    std::fs::File::open(&path)
        .map_err(io)?
        .take(npy::MAX_PREFIX as u64)
        .read_to_end(&mut prefix)
        .map_err(io)?;
    let header = npy::parse_header(&prefix).map_err(|source| ModelError::Npy {
        path: path.clone(),
        source,
    })?;
    match header.shape[..] {
        [count, rows, cols] if rows == cols && rows % 2 == 1 && count > 0 => Ok(rows),
        _ => Err(ModelError::Invalid(format!(
            "kernels must be odd squares [k, y, x], got {:?}",
            header.shape
        ))),
    }
}

fn check_set_name(name: &str) -> Result<(), ModelError> {
    if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
        return Err(ModelError::Invalid(format!("bad kernel set name {name:?}")));
    }
    Ok(())
}

fn read_capped(path: &Path) -> Result<Vec<u8>, ModelError> {
    use std::io::Read;
    let io = |source| ModelError::Io {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(ModelError::Invalid(format!(
            "{} is larger than {MAX_FILE} bytes",
            path.display()
        )));
    }
    Ok(bytes)
}

/// Loads `<dir>/<name>.npy` and `<dir>/<name>_scales.npy` as one kernel set.
pub fn load_set(
    dir: &Path,
    name: &str,
    period_nm: f64,
    max_kernels: Option<usize>,
) -> Result<KernelSet, ModelError> {
    check_set_name(name)?;
    let kpath = dir.join(format!("{name}.npy"));
    let spath = dir.join(format!("{name}_scales.npy"));
    let kbytes = read_capped(&kpath)?;
    let sbytes = read_capped(&spath)?;
    let npy_err = |path: &Path| {
        let path = path.to_owned();
        move |source| ModelError::Npy { path, source }
    };
    let karr = npy::parse(&kbytes).map_err(npy_err(&kpath))?;
    let sarr = npy::parse(&sbytes).map_err(npy_err(&spath))?;
    let [count, rows, cols] = karr.shape[..] else {
        return Err(ModelError::Invalid(format!(
            "kernel shape {:?} is not [k, y, x]",
            karr.shape
        )));
    };
    if rows != cols || rows % 2 == 0 || count == 0 {
        return Err(ModelError::Invalid(format!(
            "kernels must be odd squares, got {:?}",
            karr.shape
        )));
    }
    if sarr.shape != [count] {
        return Err(ModelError::Invalid(format!(
            "scales shape {:?} does not match {count} kernels",
            sarr.shape
        )));
    }
    let kernels = karr.to_complex32().map_err(npy_err(&kpath))?;
    let scales = sarr.to_f32().map_err(npy_err(&spath))?;
    let set = KernelSet::new(rows, kernels, scales, period_nm)
        .map_err(|e| ModelError::Invalid(e.to_string()))?;
    Ok(match max_kernels {
        Some(k) => set.truncated(k),
        None => set,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn hopkins(source: crate::optics::Source, na: f64) -> ModelSpec {
        let ModelSpec::Hopkins(mut h) = default_model(2048.0) else {
            unreachable!()
        };
        h.optics.source = source;
        h.optics.na = na;
        ModelSpec::Hopkins(h)
    }

    #[test]
    fn max_pixel_from_the_optics_for_every_source_kind() {
        use crate::optics::Source;
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
            let k = crate::npy::tests::build(
                "<c8",
                &[count, side, side],
                &vec![0u8; count * side * side * 8],
            );
            let s = crate::npy::tests::build("<f4", &[count], &vec![0u8; count * 4]);
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
        assert!(
            (spec(Some("wide"), 2048.0).max_pixel_nm().unwrap() - 2048.0 / 100.0).abs() < 1e-12
        );
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
        let k = crate::npy::tests::build("<c8", &[1, 3, 5], &[0u8; 15 * 8]);
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
        let Some(dir) = crate::data::iccad13_dir(None).map(|d| d.join("kernels")) else {
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
        let k = crate::npy::tests::build("<c8", &[2, 3, 3], &[0u8; 2 * 9 * 8]);
        let s = crate::npy::tests::build("<f4", &[3], &[0u8; 12]);
        std::fs::write(dir.join("a.npy"), &k).unwrap();
        std::fs::write(dir.join("a_scales.npy"), &s).unwrap();
        assert!(matches!(
            load_set(&dir, "a", 2048.0, None),
            Err(ModelError::Invalid(_))
        ));
        let s = crate::npy::tests::build("<f4", &[2], &[0u8; 8]);
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
}
