//! The imaging backend this worker runs on, chosen once at start.
//!
//! `RETICLE_BACKEND=auto|gpu|cpu` (default `auto`). Until the engine's GPU path is
//! wired into the worker, every choice resolves to the CPU description; the engine
//! integration replaces [`Backend::select`] with real adapter discovery and makes
//! [`Backend::device_bytes`] read the GPU backend's buffer accounting.

use reticle_protocol::wire::BackendDescription;

/// Environment variable selecting the backend.
pub const BACKEND_ENV: &str = "RETICLE_BACKEND";

/// What the user asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendChoice {
    /// A real GPU adapter when one exists, else the CPU.
    Auto,
    /// The wgpu path on whatever adapter exists.
    Gpu,
    /// The CPU reference path.
    Cpu,
}

impl BackendChoice {
    /// Parses `RETICLE_BACKEND`; `None` for an unknown value.
    #[must_use]
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Some(Self::Auto),
            "gpu" => Some(Self::Gpu),
            "cpu" => Some(Self::Cpu),
            _ => None,
        }
    }
}

/// The backend a worker runs jobs on.
#[derive(Debug, Clone)]
pub struct Backend {
    description: BackendDescription,
}

impl Backend {
    /// Chooses the backend from `RETICLE_BACKEND`; an unknown value falls back to `auto`
    /// with a warning, because a worker that refuses to start only produces restarts.
    #[must_use]
    pub fn select() -> Self {
        let raw = std::env::var(BACKEND_ENV).unwrap_or_default();
        let choice = BackendChoice::parse(&raw).unwrap_or_else(|| {
            tracing::warn!(value = %raw, "unknown {BACKEND_ENV}; using auto");
            BackendChoice::Auto
        });
        if choice == BackendChoice::Gpu {
            tracing::warn!("the GPU path is not wired into the worker yet; using the CPU path");
        }
        Self::cpu()
    }

    /// The CPU reference path.
    #[must_use]
    pub fn cpu() -> Self {
        let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        Self {
            description: BackendDescription {
                kind: "cpu".to_owned(),
                adapter: format!("cpu ({threads} threads)"),
            },
        }
    }

    /// Kind and adapter, as announced in the hello.
    #[must_use]
    pub fn description(&self) -> &BackendDescription {
        &self.description
    }

    /// Bytes this backend holds in device buffers now (0 on the CPU path).
    #[must_use]
    pub fn device_bytes(&self) -> u64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_values_and_rejects_others() {
        assert_eq!(BackendChoice::parse("auto"), Some(BackendChoice::Auto));
        assert_eq!(BackendChoice::parse(""), Some(BackendChoice::Auto));
        assert_eq!(BackendChoice::parse(" GPU "), Some(BackendChoice::Gpu));
        assert_eq!(BackendChoice::parse("cpu"), Some(BackendChoice::Cpu));
        assert_eq!(BackendChoice::parse("cuda"), None);
    }

    #[test]
    fn cpu_backend_describes_itself_and_holds_no_device_memory() {
        let b = Backend::cpu();
        assert_eq!(b.description().kind, "cpu");
        assert!(b.description().adapter.starts_with("cpu ("));
        assert_eq!(b.device_bytes(), 0);
    }
}
