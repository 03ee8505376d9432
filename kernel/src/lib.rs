//! The reticle lithography engine.
//!
//! Pure computation: no stdio, no async, no process control. Every long loop takes a
//! [`CancelToken`] and reports through a [`ProgressFn`] callback so the worker can stop
//! work for real and tell the host how far it got.

pub mod cancel;
pub mod grid;
pub mod imaging;
pub mod kernels;
pub mod rules;

pub use cancel::{CancelToken, Cancelled, Progress, ProgressFn};
pub use grid::Grid;
pub use imaging::{
    BackendInfo, Corner, CornerOutput, ImagingBackend, ImagingError, KeepImages, LithoJob,
    LithoOutput, Resist,
};
pub use kernels::KernelSet;
