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
    if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
        return Err(ModelError::Invalid(format!("bad kernel set name {name:?}")));
    }
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
