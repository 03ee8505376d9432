//! Unit tests of the imaging backend a worker holds (`reticle_worker::backend`).

use reticle_protocol::error::ErrorCode;
use reticle_worker::backend::Backend;

#[test]
fn cpu_backend_describes_itself_and_holds_no_device_memory() {
    let b = Backend::from_engine(Ok(Box::new(reticle_kernel::CpuBackend::new())));
    assert_eq!(b.description().kind, "cpu");
    assert!(
        b.description().adapter.starts_with("cpu"),
        "{:?}",
        b.description()
    );
    assert_eq!(b.device_bytes(), 0);
    assert!(b.engine().is_ok());
}

#[test]
fn a_missing_engine_fails_jobs_with_a_backend_error() {
    let b = Backend::from_engine(Err("no adapter".into()));
    assert_eq!(b.description().kind, "none");
    assert_eq!(b.device_bytes(), 0);
    let err = b.engine().err().map(|e| e.code);
    assert_eq!(err, Some(ErrorCode::BackendError));
}
