//! An on-disk store of SOCS kernels, shared by every process that points at the same
//! directory (all workers of a host, and later hosts).
//!
//! Building a Hopkins kernel set takes seconds (an SVD of a source × frequency matrix);
//! a worker replaced after a crash or a kill would pay that again on its first job.
//! Entries are keyed by [`crate::socs::SocsParams::key`] (a hash of every parameter),
//! written to a temporary file and renamed into place (readers never see half a file),
//! and sealed with a SHA-256 of their bytes. A file that fails any check (magic, sizes,
//! checksum, key) is ignored and rebuilt: the store only ever saves recomputation.
//!
//! Layout: `RSOCS001`, header length (u64 LE), header JSON, kernels (`count·size²`
//! complex f32 LE, re then im), scales (`count` f32 LE), SHA-256 of everything before.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use num_complex::Complex32;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::KernelSet;
use crate::socs::SocsKernels;

const MAGIC: &[u8; 8] = b"RSOCS001";
/// Largest file read back (a 24-kernel set of side 255 is about 12 MiB).
const MAX_FILE_BYTES: u64 = 256 << 20;

static DIR: RwLock<Option<PathBuf>> = RwLock::new(None);

/// Sets (or with `None`, turns off) the directory [`crate::socs::kernels`] reads and
/// writes. The directory is created (mode 0700) on the first store.
pub fn set_dir(dir: Option<PathBuf>) {
    *DIR.write()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = dir;
}

/// The directory in use, if any.
#[must_use]
pub fn dir() -> Option<PathBuf> {
    DIR.read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

#[derive(Serialize, Deserialize)]
struct Header {
    key: String,
    size: usize,
    count: usize,
    period_nm: f64,
    hash: String,
    spectrum: Vec<f64>,
    captured: f64,
    source_points: usize,
}

// Public for the engine's integration tests (tests/engine/units), not an API.
#[doc(hidden)]
pub fn path_of(dir: &Path, key: &str) -> PathBuf {
    dir.join(format!("socs-{key}.bin"))
}

/// The entry for `key` in `dir`, if a valid one exists.
#[must_use]
pub fn load(dir: &Path, key: &str) -> Option<SocsKernels> {
    let path = path_of(dir, key);
    if std::fs::metadata(&path).ok()?.len() > MAX_FILE_BYTES {
        return None;
    }
    decode(&std::fs::read(&path).ok()?, key)
}

// Public for the engine's integration tests (tests/engine/units), not an API.
#[doc(hidden)]
pub fn decode(bytes: &[u8], key: &str) -> Option<SocsKernels> {
    let (body, digest) = bytes.split_at_checked(bytes.len().checked_sub(32)?)?;
    if Sha256::digest(body).as_slice() != digest {
        return None;
    }
    let rest = body.strip_prefix(MAGIC.as_slice())?;
    let (len, rest) = rest.split_at_checked(8)?;
    let len = usize::try_from(u64::from_le_bytes(len.try_into().ok()?)).ok()?;
    let (header, rest) = rest.split_at_checked(len)?;
    let header: Header = serde_json::from_slice(header).ok()?;
    if header.key != key || header.size.is_multiple_of(2) {
        return None;
    }
    let samples = header
        .count
        .checked_mul(header.size)?
        .checked_mul(header.size)?;
    if rest.len()
        != samples
            .checked_mul(8)?
            .checked_add(header.count.checked_mul(4)?)?
    {
        return None;
    }
    let floats: Vec<f32> = rest
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let (kernel_floats, scales) = floats.split_at(samples * 2);
    let kernels = kernel_floats
        .chunks_exact(2)
        .map(|c| Complex32::new(c[0], c[1]))
        .collect();
    Some(SocsKernels {
        set: Arc::new(KernelSet {
            size: header.size,
            kernels,
            scales: scales.to_vec(),
            period_nm: header.period_nm,
            hash: header.hash,
        }),
        spectrum: header.spectrum,
        captured: header.captured,
        source_points: header.source_points,
    })
}

fn encode(kernels: &SocsKernels, key: &str) -> Vec<u8> {
    let set = &kernels.set;
    let header = serde_json::to_vec(&Header {
        key: key.to_owned(),
        size: set.size,
        count: set.count(),
        period_nm: set.period_nm,
        hash: set.hash.clone(),
        spectrum: kernels.spectrum.clone(),
        captured: kernels.captured,
        source_points: kernels.source_points,
    })
    .unwrap_or_default();
    let mut bytes =
        Vec::with_capacity(16 + header.len() + set.kernels.len() * 8 + set.count() * 4 + 32);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&(header.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&header);
    for c in &set.kernels {
        bytes.extend_from_slice(&c.re.to_le_bytes());
        bytes.extend_from_slice(&c.im.to_le_bytes());
    }
    for s in &set.scales {
        bytes.extend_from_slice(&s.to_le_bytes());
    }
    let digest = Sha256::digest(&bytes);
    bytes.extend_from_slice(&digest);
    bytes
}

/// Stores `kernels` under `key` in `dir` (atomically: temporary file, then rename).
///
/// # Errors
/// When the directory cannot be created or the file cannot be written.
pub fn store(dir: &Path, key: &str, kernels: &SocsKernels) -> std::io::Result<()> {
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let tmp = dir.join(format!(
        ".socs-{key}.{}.{}.tmp",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(&encode(kernels, key))?;
        file.sync_all()?;
        std::fs::rename(&tmp, path_of(dir, key))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
