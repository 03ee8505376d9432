//! Unit tests of the backend preference and selection (`reticle_kernel::gpu`, select).

#![cfg(feature = "gpu")]

use reticle_kernel::ImagingError;
use reticle_kernel::gpu::{BackendPref, SelectedBackend, select_backend};

#[test]
fn parses_preferences() {
    assert_eq!("auto".parse::<BackendPref>().ok(), Some(BackendPref::Auto));
    assert_eq!(" GPU ".parse::<BackendPref>().ok(), Some(BackendPref::Gpu));
    assert_eq!("cpu".parse::<BackendPref>().ok(), Some(BackendPref::Cpu));
    assert_eq!("".parse::<BackendPref>().ok(), Some(BackendPref::Auto));
    assert!(matches!(
        "cuda".parse::<BackendPref>(),
        Err(ImagingError::Invalid(_))
    ));
}

#[test]
fn cpu_preference_never_opens_a_device() {
    let selected = select_backend(BackendPref::Cpu);
    assert!(matches!(selected, Ok(SelectedBackend::Cpu { .. })));
    let backend = selected.map(SelectedBackend::into_backend);
    assert_eq!(backend.map(|b| b.info().kind).ok().as_deref(), Some("cpu"));
}
