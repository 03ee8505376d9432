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
