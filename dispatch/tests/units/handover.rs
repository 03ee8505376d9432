//! The handover flag (`src/handover.rs`).

use reticle_dispatch::handover::Handover;

#[test]
fn clones_share_the_flag() {
    let flag = Handover::new();
    let seen_by_jobs = flag.clone();
    assert!(!seen_by_jobs.started());
    flag.begin();
    assert!(seen_by_jobs.started());
}
