//! The job table (`src/jobs/`): progress, cancellation, waiters, TTLs, list pages,
//! the cap on unfinished jobs.

use std::sync::Arc;
use std::time::Duration;

use reticle_dispatch::jobs::{
    InvalidCursor, JobOptions, JobStatus, Jobs, MAX_TASK_TTL, MIN_TASK_TTL, wait,
};
use reticle_protocol::{ErrorCode, ToolError};
use serde_json::json;

#[tokio::test]
async fn completes_with_monotonic_progress() {
    let jobs = Jobs::new(Duration::from_secs(60));
    let rx = jobs.submit("t", |sink| async move {
        sink.running();
        for i in 1..=5 {
            sink.report(f64::from(i), Some(5.0), Some(format!("step {i}")));
            sink.report(0.0, Some(5.0), None); // ignored: progress never goes back
            tokio::task::yield_now().await;
        }
        Ok(json!({"answer": 42}))
    });
    let mut seen = Vec::new();
    let done = wait(&jobs, rx, |v| {
        seen.push(v.progress.done);
        async {}
    })
    .await;
    assert_eq!(done.status, JobStatus::Completed);
    assert_eq!(done.result, Some(json!({"answer": 42})));
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
    assert_eq!(
        jobs.poll(&done.job_id).unwrap().status,
        JobStatus::Completed
    );
}

#[tokio::test]
async fn cancel_aborts_and_drops_the_work() {
    struct Dropped(Arc<std::sync::atomic::AtomicBool>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
    let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let jobs = Jobs::new(Duration::from_secs(60));
    let held = Dropped(Arc::clone(&flag));
    let rx = jobs.submit("t", move |_sink| async move {
        let _held = held;
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok(json!({}))
    });
    let id = rx.borrow().job_id.clone();
    tokio::task::yield_now().await;
    let view = jobs.cancel(&id, "test").unwrap();
    assert_eq!(view.status, JobStatus::Cancelled);
    assert_eq!(view.error.unwrap().code, ErrorCode::Cancelled);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        flag.load(std::sync::atomic::Ordering::SeqCst),
        "work not dropped"
    );
    assert_eq!(jobs.poll(&id).unwrap().status, JobStatus::Cancelled);
    assert_eq!(
        jobs.poll("job_nope").unwrap_err().code,
        ErrorCode::JobNotFound
    );
}

#[tokio::test]
async fn dropping_the_waiter_cancels_the_job() {
    let jobs = Jobs::new(Duration::from_secs(60));
    let rx = jobs.submit("t", |_sink| async move {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok(json!({}))
    });
    let id = rx.borrow().job_id.clone();
    let waiter =
        tokio::time::timeout(Duration::from_millis(20), wait(&jobs, rx, |_| async {})).await;
    assert!(waiter.is_err());
    assert_eq!(jobs.poll(&id).unwrap().status, JobStatus::Cancelled);
}

#[tokio::test]
async fn a_waiter_dropped_after_a_handover_leaves_its_job_unfinished() {
    let jobs = Jobs::new(Duration::from_secs(60));
    let rx = jobs.submit("t", |_sink| async move {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok(json!({}))
    });
    let id = rx.borrow().job_id.clone();
    let waiting = wait(&jobs, rx, |_| async {});
    let waiter = tokio::time::timeout(Duration::from_millis(20), waiting);
    jobs.detach_all();
    assert!(waiter.await.is_err());
    let view = jobs.poll(&id).unwrap();
    assert!(!view.status.is_terminal(), "{:?}", view.status);
    assert_eq!(jobs.export()[0].job_id, id);
}

#[tokio::test]
async fn finished_jobs_expire_after_the_ttl() {
    let jobs = Jobs::new(Duration::from_millis(30));
    let rx = jobs.submit("t", |_sink| async {
        Err(ToolError::new(ErrorCode::InvalidInput, "bad"))
    });
    let done = wait(&jobs, rx, |_| async {}).await;
    assert_eq!(done.status, JobStatus::Failed);
    tokio::time::sleep(Duration::from_millis(60)).await;
    assert_eq!(
        jobs.poll(&done.job_id).unwrap_err().code,
        ErrorCode::JobNotFound
    );
}
#[tokio::test]
async fn list_pages_are_ordered_and_cursors_validated() {
    let jobs = Jobs::new(Duration::from_secs(60));
    let mut ids = Vec::new();
    for _ in 0..5 {
        let rx = jobs.submit("t", |_sink| async { Ok(json!({})) });
        ids.push(rx.borrow().job_id.clone());
        // Distinct submission instants keep the expected order unambiguous.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let mut seen = Vec::new();
    let mut cursor = None;
    let mut pages = 0;
    loop {
        let (page, next) = jobs.list_page(cursor.as_deref(), 2).unwrap();
        pages += 1;
        seen.extend(page.into_iter().map(|v| v.job_id));
        match next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, ids);
    assert_eq!(jobs.list_page(Some("nope"), 2).unwrap_err(), InvalidCursor);
    assert_eq!(jobs.list_page(Some("12.x"), 2).unwrap_err(), InvalidCursor);
}

#[tokio::test]
async fn a_requested_ttl_counts_from_submission_and_is_clamped() {
    let jobs = Jobs::new(Duration::from_secs(3600));
    let options = JobOptions {
        ttl: Some(Duration::from_millis(10)),
        ..JobOptions::default()
    };
    let rx = jobs.submit_with("t", options, |_sink| async { Ok(json!({})) });
    let id = rx.borrow().job_id.clone();
    assert_eq!(jobs.poll(&id).unwrap().retention, MIN_TASK_TTL);
    let options = JobOptions {
        ttl: Some(Duration::from_secs(10 * 24 * 3600)),
        ..JobOptions::default()
    };
    let rx = jobs.submit_with("t", options, |_sink| async { Ok(json!({})) });
    let long = rx.borrow().job_id.clone();
    assert_eq!(jobs.poll(&long).unwrap().retention, MAX_TASK_TTL);
    let done = wait(&jobs, jobs.subscribe(&id).unwrap(), |_| async {}).await;
    assert_eq!(done.status, JobStatus::Completed);
    tokio::time::sleep(MIN_TASK_TTL + Duration::from_millis(50)).await;
    assert_eq!(jobs.poll(&id).unwrap_err().code, ErrorCode::JobNotFound);
    assert!(jobs.poll(&long).is_ok());
}

#[tokio::test]
async fn subscribing_does_not_cancel_on_drop() {
    let jobs = Jobs::new(Duration::from_secs(60));
    let rx = jobs.submit("t", |_sink| async move {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok(json!({}))
    });
    let id = rx.borrow().job_id.clone();
    let sub = jobs.subscribe(&id).unwrap();
    drop(sub);
    drop(rx);
    assert_eq!(jobs.poll(&id).unwrap().status, JobStatus::Queued);
    let view = jobs.cancel(&id, "test").unwrap();
    assert_eq!(view.cancel_reason.as_deref(), Some("test"));
    assert!(view.updated_at >= view.created_at);
}

#[tokio::test]
async fn unfinished_jobs_are_capped_and_a_finished_one_frees_a_place() {
    let jobs = Jobs::with_max_active(Duration::from_secs(60), 2);
    let (release, gate) = tokio::sync::oneshot::channel::<()>();
    let first = jobs
        .try_submit_with("t", JobOptions::default(), |_sink| async move {
            let _ = gate.await;
            Ok(json!({}))
        })
        .unwrap();
    let second = jobs
        .try_submit_with("t", JobOptions::default(), |_sink| async move {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(json!({}))
        })
        .unwrap();
    let refused = jobs
        .try_submit_with("t", JobOptions::default(), |_sink| async { Ok(json!({})) })
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::ToolLimitExceeded);
    assert!(refused.recoverable);
    let details = refused.details.clone();
    assert_eq!(details["max"], 2);
    assert_eq!(details["active"], 2);
    assert_eq!(details["setting"], "RETICLE_MAX_ACTIVE_JOBS");
    // A refused call leaves no entry behind.
    assert_eq!(jobs.stats()["submitted"], 2);
    release.send(()).unwrap();
    let done = wait(&jobs, first, |_| async {}).await;
    assert_eq!(done.status, JobStatus::Completed);
    // The finished job still answers polls but no longer counts against the cap.
    assert!(jobs.poll(&done.job_id).is_ok());
    let third = jobs
        .try_submit_with("t", JobOptions::default(), |_sink| async { Ok(json!({})) })
        .unwrap();
    assert_eq!(
        wait(&jobs, third, |_| async {}).await.status,
        JobStatus::Completed
    );
    let second_id = second.borrow().job_id.clone();
    jobs.cancel(&second_id, "test").unwrap();
}
