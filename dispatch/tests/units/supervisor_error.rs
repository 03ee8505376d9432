//! Supervisor errors as tool errors (`src/supervisor/error.rs`).

use libmcp::FaultClass;
use reticle_dispatch::supervisor::{CancelKind, DeathCause, SupervisorError};
use reticle_protocol::ErrorCode;

#[test]
fn worker_death_maps_to_a_recoverable_process_fault() {
    let e = SupervisorError::WorkerDied {
        job_id: "job_1".into(),
        pid: 7,
        generation: 2,
        cause: DeathCause::Exited {
            code: None,
            signal: Some(6),
        },
    };
    assert!(e.to_string().contains("killed by signal 6"));
    let t = e.to_tool_error();
    assert_eq!(t.code, ErrorCode::WorkerFault);
    assert_eq!(t.fault_class, Some(FaultClass::Process));
    assert!(t.recoverable);
    assert_eq!(t.details["cause"]["kind"], "exited");
}

#[test]
fn cancellation_maps_to_cancelled() {
    let e = SupervisorError::Cancelled {
        job_id: "job_2".into(),
        how: CancelKind::Killed,
    };
    assert_eq!(e.to_tool_error().code, ErrorCode::Cancelled);
}
