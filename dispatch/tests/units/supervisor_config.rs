//! The supervisor's configuration (`src/supervisor/config.rs`): backoff, validation,
//! threads per worker.

use std::time::Duration;

use reticle_dispatch::supervisor::{MAX_WORKERS, SupervisorConfig, SupervisorError};

#[test]
fn backoff_doubles_and_is_capped() {
    let c = SupervisorConfig::default();
    assert_eq!(c.backoff(0), Duration::ZERO);
    assert_eq!(c.backoff(1), Duration::from_millis(100));
    assert_eq!(c.backoff(2), Duration::from_millis(200));
    assert_eq!(c.backoff(4), Duration::from_millis(800));
    assert_eq!(c.backoff(10), Duration::from_secs(5));
    assert_eq!(c.backoff(u32::MAX), Duration::from_secs(5));
}

#[test]
fn validation_rejects_empty_pools_and_bad_heartbeats() {
    let mut c = SupervisorConfig::default();
    assert!(c.validate().is_ok());
    c.workers = 0;
    assert!(matches!(c.validate(), Err(SupervisorError::Config(_))));
    c.workers = MAX_WORKERS + 1;
    assert!(c.validate().is_err());
    c.workers = 1;
    c.heartbeat_timeout = c.heartbeat_interval;
    assert!(c.validate().is_err());
}

#[test]
fn each_worker_computes_on_its_share_of_the_cores() {
    let share = |workers, cores| {
        SupervisorConfig {
            workers,
            cores,
            ..SupervisorConfig::default()
        }
        .threads_per_worker()
    };
    assert_eq!(share(1, 2), 2);
    assert_eq!(share(2, 2), 1);
    assert_eq!(share(2, 16), 8);
    assert_eq!(
        share(3, 16),
        5,
        "the rest of the division stays idle, not shared"
    );
    assert_eq!(share(4, 2), 1, "more workers than cores: one thread each");
}
