//! Where the reference data (ICCAD-2013 kernels and clips) lives, when it is present.

use std::path::PathBuf;

/// `$RETICLE_DATA_DIR` when set, else `<workspace root>/../shared/data`, if that
/// directory exists. The data is never part of the project.
#[must_use]
pub fn reference_data_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("RETICLE_DATA_DIR") {
        let p = PathBuf::from(dir);
        return p.is_dir().then_some(p);
    }
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data");
    p.is_dir().then_some(p)
}

/// The ICCAD-2013 folder (`kernels/`, `layouts/`) under [`reference_data_dir`].
#[must_use]
pub fn iccad13_dir() -> Option<PathBuf> {
    let p = reference_data_dir()?.join("iccad13");
    (p.join("kernels/focus.npy").is_file() && p.join("layouts").is_dir()).then_some(p)
}
