//! The reticle lithography engine.
//!
//! Pure computation: no stdio, no async, no process control. Every long loop takes a
//! [`CancelToken`] and reports through a [`ProgressFn`] callback so the worker can stop
//! work for real and tell the host how far it got.
//!
//! Map of the crate:
//! - optics and kernels: [`optics`] (source, pupil), [`socs`] (TCC → kernels),
//!   [`npy`] + [`model`] (ICCAD-2013 kernel files, model specs), [`kernels`];
//! - imaging: [`cpu`] (the band-limited backend, [`bandlimited`]), [`naive`] (the
//!   full-FFT reference), [`tiling`] (canvases larger than one window);
//! - after imaging: [`resist`], [`metrics`] (L2, PVB, EPE), [`contour`];
//! - mask optimisation: [`ilt`] (pixel ILT with the analytic adjoint), [`mrc`] (mask-rule
//!   legalization of its output);
//! - layout to pixels: [`raster`]; the per-window buffers a worker reuses: [`scratch`];
//!   benchmarks: [`bench`].

pub mod bandlimited;
pub mod bench;
pub mod cancel;
pub mod contour;
pub mod cpu;
pub mod data;
pub mod fft;
// Public for the engine's integration tests (tests/engine/units), not an API.
#[doc(hidden)]
pub mod fold;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod grid;
pub mod iccad;
pub mod ilt;
pub mod imaging;
pub mod kernels;
pub mod metrics;
pub mod model;
pub mod mrc;
pub mod naive;
pub mod npy;
pub mod optics;
pub mod raster;
pub mod resist;
pub mod rules;
pub mod scratch;
pub mod socs;
pub mod socs_store;
pub mod tiling;

pub use cancel::{CancelToken, Cancelled, Progress, ProgressFn};
pub use cpu::CpuBackend;
pub use grid::Grid;
pub use imaging::{
    BackendInfo, BatchJob, Corner, CornerOutput, FramePart, ImagingBackend, ImagingError,
    KeepImages, LithoJob, LithoOutput, Resist,
};
pub use kernels::KernelSet;
pub use model::{ModelKernels, ModelSpec};
