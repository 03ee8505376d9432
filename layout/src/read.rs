//! One entry point for all binary formats: detect, read, hash.

use sha2::{Digest, Sha256};

use crate::gds::{GdsError, read_gds};
use crate::limits::Limits;
use crate::model::Library;
use crate::oasis::{MAGIC, OasisError, read_oasis};

/// A binary layout format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Format {
    /// GDSII stream.
    Gds,
    /// OASIS (SEMI P39).
    Oasis,
}

impl Format {
    /// Parses a format name as seed 003 spells them: `gds`, `gdsii`, `oas`, `oasis`
    /// (case-insensitive).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        match name.to_ascii_lowercase().as_str() {
            "gds" | "gdsii" | "gds2" => Some(Self::Gds),
            "oas" | "oasis" => Some(Self::Oasis),
            _ => None,
        }
    }

    /// The format a file name's extension names (`.gds`, `.gdsii`, `.oas`, `.oasis`).
    #[must_use]
    pub fn from_path(path: &std::path::Path) -> Option<Self> {
        Self::from_name(path.extension()?.to_str()?)
    }

    /// The format the bytes look like: the OASIS magic, or a GDSII HEADER record.
    #[must_use]
    pub fn sniff(bytes: &[u8]) -> Option<Self> {
        if bytes.starts_with(MAGIC) {
            Some(Self::Oasis)
        } else if bytes.starts_with(&[0x00, 0x06, 0x00, 0x02]) {
            Some(Self::Gds)
        } else {
            None
        }
    }

    /// Canonical short name (`gds` or `oasis`).
    #[must_use]
    pub const fn name(&self) -> &'static str {
        match self {
            Self::Gds => "gds",
            Self::Oasis => "oasis",
        }
    }
}

/// Why a layout could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LayoutError {
    /// Neither GDSII nor OASIS.
    #[error("unrecognized layout format")]
    UnknownFormat,
    /// GDSII reader error.
    #[error("GDSII: {0}")]
    Gds(#[from] GdsError),
    /// OASIS reader error.
    #[error("OASIS: {0}")]
    Oasis(#[from] OasisError),
}

impl LayoutError {
    /// The reader limit that stopped the read (`what`, its value), if that is why it
    /// failed: the file may be fine, only bigger than this reader was allowed to take.
    #[must_use]
    pub fn limit_exceeded(&self) -> Option<(&'static str, u64)> {
        match self {
            Self::Gds(GdsError::LimitExceeded { what, limit })
            | Self::Oasis(OasisError::LimitExceeded { what, limit }) => Some((what, *limit)),
            _ => None,
        }
    }
}

/// Reads a layout in the given format, or in the format the bytes look like.
///
/// # Errors
/// [`LayoutError`].
pub fn read_layout(
    bytes: &[u8],
    format: Option<Format>,
    limits: &Limits,
) -> Result<Library, LayoutError> {
    match format.or_else(|| Format::sniff(bytes)) {
        Some(Format::Gds) => Ok(read_gds(bytes, limits)?),
        Some(Format::Oasis) => Ok(read_oasis(bytes, limits)?),
        None => Err(LayoutError::UnknownFormat),
    }
}

/// Lower-case hex SHA-256 of the bytes (the layout cache key and `source.sha256`).
#[must_use]
pub fn sha256_hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    Sha256::digest(bytes)
        .iter()
        .fold(String::with_capacity(64), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}
