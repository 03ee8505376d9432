//! Backend selection: `auto`, `gpu` or `cpu` (the worker reads its choice from
//! `RETICLE_BACKEND` and hands it here).

use std::str::FromStr;

use super::{AdapterPolicy, GpuBackend};
use crate::{CpuBackend, ImagingBackend, ImagingError};

/// Which imaging backend the caller wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendPref {
    /// A real GPU adapter (discrete, integrated or virtual) when one exists, else the CPU path.
    #[default]
    Auto,
    /// The wgpu path on whatever adapter exists, CPU implementations (lavapipe) included.
    Gpu,
    /// The CPU path.
    Cpu,
}

impl FromStr for BackendPref {
    type Err = ImagingError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(Self::Auto),
            "gpu" => Ok(Self::Gpu),
            "cpu" => Ok(Self::Cpu),
            other => Err(ImagingError::Invalid(format!(
                "the backend must be auto, gpu or cpu, got {other:?}"
            ))),
        }
    }
}

/// The outcome of [`select_backend`].
#[derive(Debug)]
pub enum SelectedBackend {
    /// The wgpu backend on the adapter it opened.
    Gpu(Box<GpuBackend>),
    /// Use the CPU path ([`CpuBackend`]); `reason` says why (asked for, or no hardware GPU).
    Cpu {
        /// Why the CPU path was chosen.
        reason: String,
    },
}

impl SelectedBackend {
    /// The chosen backend behind the common interface (the CPU path on rayon's global pool).
    #[must_use]
    pub fn into_backend(self) -> Box<dyn ImagingBackend> {
        match self {
            Self::Gpu(gpu) => gpu,
            Self::Cpu { .. } => Box::new(CpuBackend::new()),
        }
    }
}

/// Chooses a backend: `auto` opens a real GPU adapter and falls back to the CPU path,
/// `gpu` forces wgpu on any adapter (an error when there is none), `cpu` is the CPU path.
pub fn select_backend(pref: BackendPref) -> Result<SelectedBackend, ImagingError> {
    match pref {
        BackendPref::Cpu => Ok(SelectedBackend::Cpu {
            reason: "RETICLE_BACKEND=cpu".to_owned(),
        }),
        BackendPref::Gpu => {
            GpuBackend::with_policy(AdapterPolicy::Any).map(|g| SelectedBackend::Gpu(Box::new(g)))
        }
        BackendPref::Auto => match GpuBackend::with_policy(AdapterPolicy::HardwareOnly) {
            Ok(gpu) => Ok(SelectedBackend::Gpu(Box::new(gpu))),
            Err(e) => Ok(SelectedBackend::Cpu {
                reason: format!("auto: {e}"),
            }),
        },
    }
}
