//! A job's stages (`src/scope.rs`): the progress of a later fan-out counts on (D256).

use std::sync::{Arc, Mutex};

use reticle_dispatch::Scope;

#[test]
fn a_later_stage_counts_on_from_the_highest_progress_and_names_itself() {
    let seen: Arc<Mutex<Vec<(u64, u64, String)>>> = Arc::default();
    let sink = Arc::clone(&seen);
    let scope = Scope::cli("stages", Vec::new(), move |p| {
        sink.lock()
            .unwrap()
            .push((p.done, p.total, p.message.clone()));
    });
    scope.report(0.0, Some(5.0), Some("tile 0/4".into()));
    scope.report(5.0, Some(5.0), Some("merged".into()));
    // Two stages made at once start at the same point; a clone shares the high water.
    let (before, after) = (
        scope.next_stage("evaluation before"),
        scope
            .with_allowed_root("/x".into())
            .next_stage("evaluation after"),
    );
    before.report(2.0, Some(3.0), Some("tile 2/2".into()));
    after.report(1.0, Some(3.0), None);
    // The next stage starts past both, and replaces the stage it is made from.
    let seam = after.next_stage("seam pass round 1");
    seam.report(0.0, Some(3.0), Some("planning".into()));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            (0, 5, "tile 0/4".to_owned()),
            (5, 5, "merged".to_owned()),
            (7, 8, "evaluation before: tile 2/2".to_owned()),
            (6, 8, "evaluation after".to_owned()),
            (7, 10, "seam pass round 1: planning".to_owned()),
        ]
    );
}
