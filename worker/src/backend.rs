//! The imaging backend this worker runs on, chosen once at start.
//!
//! `RETICLE_BACKEND=auto|gpu|cpu` (default `auto`, parsed by the engine's
//! [`BackendPref`]): `auto` opens a hardware GPU adapter and falls back to the CPU path,
//! `gpu` forces wgpu on any adapter (lavapipe included), `cpu` never opens a device. The
//! choice is made before the hello so the host's health view names the backend that
//! really runs the jobs, and its device-buffer bytes come from that backend.

use reticle_kernel::ImagingBackend;
use reticle_kernel::gpu::{BackendPref, select_backend};
use reticle_protocol::error::{ErrorCode, ToolError};
use reticle_protocol::wire::BackendDescription;

/// The backend a worker runs jobs on.
pub struct Backend {
    /// The engine, or why none could be opened (`RETICLE_BACKEND=gpu` with no adapter).
    engine: Result<Box<dyn ImagingBackend>, String>,
    description: BackendDescription,
}

impl Backend {
    /// Opens the backend `pref` asks for (`RETICLE_BACKEND`, read by
    /// [`crate::settings::Settings`]). A forced GPU with no adapter leaves the worker up
    /// with jobs failing as `BACKEND_ERROR`: a worker that refuses to start only produces
    /// restarts.
    #[must_use]
    pub fn select(pref: BackendPref) -> Self {
        let engine = select_backend(pref)
            .map(|selected| {
                tracing::info!(?selected, "engine backend selected");
                selected.into_backend()
            })
            .map_err(|e| e.to_string());
        Self::from_engine(engine)
    }

    /// A backend around an engine already chosen, or the reason there is none (every job
    /// then fails with a backend error).
    pub fn from_engine(engine: Result<Box<dyn ImagingBackend>, String>) -> Self {
        let description = match &engine {
            Ok(engine) => {
                let info = engine.info();
                BackendDescription {
                    kind: info.kind,
                    adapter: info.adapter,
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "no imaging backend; engine jobs will fail");
                BackendDescription {
                    kind: "none".to_owned(),
                    adapter: e.clone(),
                }
            }
        };
        Self {
            engine,
            description,
        }
    }

    /// The engine jobs run on; `BACKEND_ERROR` when none could be opened.
    pub fn engine(&self) -> Result<&dyn ImagingBackend, ToolError> {
        self.engine.as_deref().map_err(|e| {
            ToolError::new(ErrorCode::BackendError, format!("no imaging backend: {e}"))
        })
    }

    /// Kind and adapter, as announced in the hello.
    #[must_use]
    pub fn description(&self) -> &BackendDescription {
        &self.description
    }

    /// Bytes the backend holds in device buffers now (0 on the CPU path).
    #[must_use]
    pub fn device_bytes(&self) -> u64 {
        self.engine.as_ref().map_or(0, |e| e.info().device_bytes)
    }
}
