//! Where the reference data (ICCAD-2013 kernels and clips) lives, when it is present.
//!
//! The kernel never reads the environment: the caller hands in the data directory its
//! settings hold (`RETICLE_DATA_DIR`, read once by the process's composition root).

use std::path::{Path, PathBuf};

/// `configured` (the `RETICLE_DATA_DIR` setting) when given, else
/// `<workspace root>/../shared/data`, if that directory exists. The data is never part of
/// the project.
#[must_use]
pub fn reference_data_dir(configured: Option<&Path>) -> Option<PathBuf> {
    if let Some(dir) = configured {
        return dir.is_dir().then(|| dir.to_path_buf());
    }
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data");
    p.is_dir().then_some(p)
}

/// The ICCAD-2013 folder (`kernels/`, `layouts/`) under
/// [`reference_data_dir`]`(configured)`.
#[must_use]
pub fn iccad13_dir(configured: Option<&Path>) -> Option<PathBuf> {
    let p = reference_data_dir(configured)?.join("iccad13");
    (p.join("kernels/focus.npy").is_file() && p.join("layouts").is_dir()).then_some(p)
}
