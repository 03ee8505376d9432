//! The reexec handover (D32): stop reading, snapshot the session (negotiated state,
//! jobs with their recipes, requests in flight), stop everything without answering; and
//! in the next image, restore the session, re-run the unfinished jobs under their ids,
//! and answer the requests the previous image left pending.

use std::sync::Arc;
use std::time::{Duration, Instant};

use libmcp::{ProbeResolution, ReplayContract, RequestDisposition};
use reticle_protocol::ToolError;
use reticle_protocol::sync::lock;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::requests::{InFlight, InFlightRequest, ledger_key_of};
use super::server::{RunEnd, Server, StopReason, log_join};
use crate::reexec::{PendingRequest, ServerSnapshot, SessionSnapshot, TaskWatch};
use reticle_dispatch::ProbeOutcome;
use reticle_dispatch::jobs::{JobOptions, JobRecord, JobStatus, RestoredJob};
use reticle_tools::WaitedJob;
use reticle_transport::era::{self, LogLevel, RequestMeta, request_meta};
use reticle_transport::frame::Frame;
use reticle_transport::jsonrpc;

/// Longest wait, at a reexec, for requests that are not waiting on a job to finish.
const REEXEC_DRAIN: Duration = Duration::from_secs(5);

impl Server {
    /// The reexec handover: stop reading stdin (keeping what was read), let requests
    /// that do not wait on a job finish (up to [`REEXEC_DRAIN`]), snapshot the session,
    /// then stop every request task, job and worker without answering or marking
    /// anything: the next image answers the pending requests and re-runs the jobs.
    pub(super) async fn hand_over(
        &self,
        mut frames: mpsc::Receiver<Frame>,
        pump: Option<reticle_transport::stdin::StdinPump>,
        mut tasks: JoinSet<()>,
    ) -> RunEnd {
        use reticle_transport::stdin::{PumpEnd, PumpState};
        let pump_state = match pump {
            Some(pump) => match tokio::task::spawn_blocking(move || pump.stop()).await {
                Ok(PumpEnd::Stopped(state)) => state,
                Ok(PumpEnd::Eof) | Err(_) => PumpState::default(),
            },
            None => PumpState::default(),
        };
        // The pump has stopped: what is in the channel is everything read and framed.
        let mut carried = Vec::new();
        while let Ok(frame) = frames.try_recv() {
            carried.push(frame);
        }
        let deadline = Instant::now() + REEXEC_DRAIN;
        loop {
            while let Some(joined) = tasks.try_join_next() {
                log_join(joined);
            }
            let busy = lock(&self.in_flight)
                .values()
                .filter(|r| r.request.waited_job.get().is_none())
                .count();
            if busy == 0 || Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Taking the entries out is what hands the requests over: a task that finishes
        // from now on finds its entry gone and does not answer (the next image does),
        // and an aborted request leaves its telemetry record open for the next image.
        self.shared.state.begin_handover();
        let entries: Vec<InFlight> = lock(&self.in_flight).drain().map(|(_, r)| r).collect();
        // Detach the jobs before aborting their waiters: an aborted wait drops on another
        // thread whenever the runtime gets to it, and a drop before the detach would
        // cancel the job the next image is to re-attach the call to.
        self.shared.jobs.detach_all();
        for entry in &entries {
            entry.abort.abort();
        }
        let snapshot = self.snapshot(&entries);
        tasks.shutdown().await;
        self.shared.workers.shutdown().await;
        tracing::info!(
            carried_frames = carried.len(),
            unread_bytes = pump_state.unread.len(),
            pending = snapshot.pending.len(),
            jobs = snapshot.jobs.len(),
            "session handed over for reexec"
        );
        RunEnd {
            reason: StopReason::Reexec,
            snapshot: Some(snapshot),
            input: Some((carried, pump_state)),
            reexec_bin: None,
        }
    }

    /// The session as the next process image needs it, with `pending` as the requests to
    /// answer.
    fn snapshot(&self, pending: &[InFlight]) -> ServerSnapshot {
        let session = {
            let s = lock(&self.session);
            SessionSnapshot {
                version: s.version.map(str::to_owned),
                initialized: s.initialized,
                log_level: s.log_level.map(|l| l.as_str().to_owned()),
                client_roots: s.client_roots,
                requests_sent: s.requests_sent,
            }
        };
        let pending = pending
            .iter()
            .map(|entry| {
                let r = &entry.request;
                let (id, method, params) = (r.id.clone(), r.method.clone(), r.params.clone());
                match r.waited_job.get() {
                    Some(job_id) => PendingRequest::AwaitJob {
                        id,
                        job_id: job_id.clone(),
                        params,
                    },
                    None if self.contract_of(&method, &params) == ReplayContract::Convergent => {
                        PendingRequest::Redispatch { id, method, params }
                    }
                    None => PendingRequest::Fail { id, method, params },
                }
            })
            .collect();
        let mut task_watches: Vec<TaskWatch> = lock(&self.task_watches)
            .iter()
            .map(|(job_id, progress_token)| TaskWatch {
                job_id: job_id.clone(),
                progress_token: progress_token.clone(),
            })
            .collect();
        task_watches.sort_by(|a, b| a.job_id.cmp(&b.job_id));
        ServerSnapshot {
            session,
            jobs: self.shared.jobs.export(),
            job_stats: self.shared.jobs.stats(),
            pending,
            task_watches,
        }
    }

    /// Continues a session from a reexec snapshot: the negotiated session, the finished
    /// jobs; unfinished jobs are re-run (Convergent tools; others fail with an
    /// ambiguous-outcome error, like a worker death would).
    pub async fn restore(&self, snapshot: &ServerSnapshot) {
        {
            let mut s = lock(&self.session);
            s.version = snapshot.session.version.as_deref().and_then(|v| {
                era::LEGACY_VERSIONS
                    .iter()
                    .find(|known| **known == v)
                    .copied()
            });
            s.initialized = snapshot.session.initialized;
            s.log_level = snapshot
                .session
                .log_level
                .as_deref()
                .and_then(LogLevel::parse);
            s.client_roots = snapshot.session.client_roots;
            s.requests_sent = snapshot.session.requests_sent;
        }
        self.shared.jobs.restore_stats(&snapshot.job_stats);
        for record in &snapshot.jobs {
            if record.status.is_terminal() {
                self.shared.jobs.import_finished(record.clone());
            } else {
                self.rerun_job(record).await;
            }
        }
        // The client still expects status notifications for the tasks it was following;
        // each was unfinished ("working") when the old image last told it.
        for watch in &snapshot.task_watches {
            self.follow_task(&watch.job_id, watch.progress_token.clone(), "working");
        }
    }

    /// Re-creates an unfinished job from its recipe under its old id.
    async fn rerun_job(&self, record: &JobRecord) {
        let restore = RestoredJob {
            job_id: record.job_id.clone(),
            attempts: record.attempts,
            created_unix_ms: record.created_unix_ms,
            age_ms: record.age_ms,
        };
        let recipe = record.recipe.as_ref();
        let tool = recipe
            .and_then(|r| r["tool"].as_str())
            .and_then(|name| self.tools.get(name));
        let arguments = recipe.and_then(|r| r["arguments"].as_object()).cloned();
        let (Some(tool), Some(arguments)) = (tool, arguments) else {
            self.fail_restored_job(
                record,
                restore,
                "the job's recipe did not survive the reexec",
            );
            return;
        };
        if tool.replay() != ReplayContract::Convergent {
            self.fail_restored_job(
                record,
                restore,
                "the job may have taken effect before the reexec and its tool is not replayable",
            );
            return;
        }
        let journal = self
            .journal
            .open(&format!("tools/call:{}", tool.name()), tool.replay());
        let ctx = self
            .shared
            .context(Arc::new(RequestMeta::default()), journal)
            .restoring(restore.clone());
        let outcome = self.tools.call(tool, ctx, arguments).await;
        if let Some(error) = outcome.error
            && self.shared.jobs.poll(&record.job_id).is_err()
        {
            // The tool refused before starting the job (a file that vanished, say):
            // keep the id answering, with that error.
            self.keep_failed(record, restore, error);
        }
    }

    fn fail_restored_job(&self, record: &JobRecord, restore: RestoredJob, why: &str) {
        let error = ToolError::new(
            reticle_protocol::ErrorCode::WorkerFault,
            format!(
                "job {} was interrupted by a host reexec: {why}",
                record.job_id
            ),
        )
        .with_fault(libmcp::FaultClass::AmbiguousOutcome, None)
        .recoverable(false)
        .with_hint("check whether the job's effect happened before calling again");
        self.keep_failed(record, restore, error);
    }

    /// Keeps a restored job's id answering, failed with `error`.
    fn keep_failed(&self, record: &JobRecord, restore: RestoredJob, error: ToolError) {
        let options = JobOptions {
            restore: Some(restore),
            presentation: record.presentation.clone(),
            ..JobOptions::default()
        };
        self.shared
            .jobs
            .submit_with(&record.tool, options, |_| async move { Err(error) });
    }

    /// Answers a request a previous image left pending.
    pub(super) async fn resume_request(&self, request: PendingRequest, tasks: &mut JoinSet<()>) {
        match request {
            PendingRequest::Redispatch { id, method, params } => {
                tracing::info!(request_id = %id, method, "re-dispatching a request after reexec");
                self.spawn_request_as(id, method, params, tasks, true).await;
            }
            PendingRequest::Fail { id, method, params } => {
                // A ProbeRequired call with a probe: ask the world before answering.
                match self.probe_pending(&id, &method, &params) {
                    Some(Probed::Replay) => {
                        tracing::info!(request_id = %id, method, "probe: safe to replay after reexec");
                        self.spawn_request_as(id, method, params, tasks, true).await;
                        return;
                    }
                    Some(Probed::Answered(response)) => {
                        self.shared.out.send(&response).await;
                        return;
                    }
                    None => {}
                }
                let message = format!(
                    "{method} was interrupted by a host reexec and is not replayable; its outcome is unknown"
                );
                self.shared
                    .state
                    .resume(&ledger_key_of(&method, &params), &id)
                    .error("ambiguous_outcome");
                let response = if method == "tools/call" {
                    let error = ToolError::new(reticle_protocol::ErrorCode::WorkerFault, message)
                        .with_fault(libmcp::FaultClass::AmbiguousOutcome, None)
                        .recoverable(false)
                        .with_hint("check whether the call took effect before calling again");
                    let mut result = reticle_tools::error_result(&error);
                    if request_meta(&params).is_ok_and(|m| m.is_modern()) {
                        result["resultType"] = json!("complete");
                    }
                    jsonrpc::result(&id, result)
                } else {
                    jsonrpc::error(&id, jsonrpc::INTERNAL_ERROR, &message, None)
                };
                self.shared.out.send(&response).await;
            }
            PendingRequest::AwaitJob { id, job_id, params } => {
                // The same shape as the original call's entry: a second reexec hands it
                // over again.
                let request = InFlightRequest {
                    id: id.clone(),
                    method: "tools/call".to_owned(),
                    params: params.clone(),
                    waited_job: WaitedJob::of(job_id.clone()),
                };
                let server = self.clone();
                self.register(tasks, request, async move {
                    server.await_job(&id, &job_id, &params).await
                });
            }
        }
    }

    /// Runs the probe of a ProbeRequired tool call the previous image left in flight
    /// (seed 004): libmcp's decision table, fed the probe's evidence, says whether the
    /// call completes from the probe (its effect happened: the probe's answer is the
    /// call's) or runs again. `None` when the request has no probe (or the table says
    /// neither): the caller answers that its outcome is unknown.
    fn probe_pending(
        &self,
        id: &Value,
        method: &str,
        params: &Map<String, Value>,
    ) -> Option<Probed> {
        if method != "tools/call" {
            return None;
        }
        let tool = self.tools.get(params.get("name")?.as_str()?)?;
        let probe = tool.probe()?;
        let arguments = params
            .get("arguments")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let key = ledger_key_of(method, params);
        // The call was in flight in the previous image: dispatched, outcome unknown.
        let journal = self.journal.open(&key, tool.replay());
        journal.worker_lost();
        journal.probed();
        let outcome = probe(&self.shared, &arguments);
        let resolution = match &outcome {
            ProbeOutcome::AlreadyCompleted(_) => ProbeResolution::AlreadyCompleted,
            ProbeOutcome::SafeToReplay => ProbeResolution::SafeToReplay,
        };
        let decision = journal.disposition(Some(resolution), reticle_dispatch::MAX_ATTEMPTS);
        self.shared.state.events.record(
            "request.probe",
            json!({"id": id, "method": key, "evidence": format!("{resolution:?}"),
                   "decision": format!("{decision:?}")}),
        );
        match (outcome, decision) {
            (ProbeOutcome::AlreadyCompleted(payload), RequestDisposition::CompleteFromProbe) => {
                journal.completed_from_probe();
                let record = self.shared.state.resume(&key, id);
                let answer =
                    reticle_tools::probe_answer(tool, &arguments, payload, &self.shared.scope);
                match &answer.error {
                    Some(error) => record.error(&error.code.to_string()),
                    None => record.success(),
                }
                let mut result = answer.result;
                if request_meta(params).is_ok_and(|m| m.is_modern()) {
                    result["resultType"] = json!("complete");
                }
                Some(Probed::Answered(jsonrpc::result(id, result)))
            }
            (ProbeOutcome::SafeToReplay, RequestDisposition::Replay) => {
                journal.replaying();
                Some(Probed::Replay)
            }
            _ => None,
        }
    }

    /// Waits for a restored job on behalf of the call that started it, with its
    /// progress notifications, and returns that call's response.
    async fn await_job(&self, id: &Value, job_id: &str, params: &Map<String, Value>) -> Value {
        let meta = request_meta(params).unwrap_or_default();
        let record = self
            .shared
            .state
            .resume(&ledger_key_of("tools/call", params), id);
        let Ok(rx) = self.shared.jobs.subscribe(job_id) else {
            record.error("JOB_NOT_FOUND");
            let error = ToolError::new(
                reticle_protocol::ErrorCode::JobNotFound,
                format!("job {job_id} did not survive the reexec"),
            );
            return jsonrpc::result(id, reticle_tools::error_result(&error));
        };
        let view = reticle_tools::wait_reporting_progress(
            &self.shared.jobs,
            rx,
            &self.shared.out,
            meta.progress_token.clone(),
        )
        .await;
        let mut result = self.tools.deferred_result(&view, &self.shared.scope);
        if view.status == JobStatus::Completed {
            record.success();
        } else {
            record.error(view.error.as_ref().map_or("?", |e| e.code.as_str()));
        }
        if meta.is_modern() {
            result["resultType"] = json!("complete");
        }
        jsonrpc::result(id, result)
    }
}

/// What the probe of a pending request decided.
enum Probed {
    /// Run the request again.
    Replay,
    /// The request completed; this is its response.
    Answered(Value),
}
